/* Pooling onto the graph: MaxPool, AveragePool and LRN, each a reduction
 * over a window's taps (onnx_window.h). A max pool's padding reads -inf; an
 * average divides each output by the taps it counts, which differ at the
 * borders (count_include_pad says whether padding counts). */
#include "formats/onnx/onnx_layout.h"
#include "formats/onnx/onnx_node.h"
#include "formats/onnx/onnx_op.h"
#include "formats/onnx/onnx_window.h"

#include <math.h>
#include <stdlib.h>

/* X as float32 [N, C, D...] with that shape: channels first, or (*cl) the
 * [N, P, C] a conv or pool left channels last (onnx_layout.h) when
 * want_cl; channels first otherwise. */
static sj_status pool_input(sj_onnx_loader *L, bool want_cl, sj_value *x, bool *cl, sj_shape *xs) {
    *cl = want_cl && sj__onnx_in_channels_last(L, 0, x, xs);
    if (!*cl) {
        SJ_TRY(sj__onnx_in_value(L, 0, x));
        SJ_TRY(sj__onnx_shape_of(L, *x, xs));
    }
    if (sj__onnx_dtype_of(L, *x) != SJ_F32)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "X must be float32");
    return SJ_OK;
}

/* reduce op over the taps of x's window (fill in the padding): [N, P, C],
 * channels last. The taps [N, P, K, C] are reduced over K: each tap of a
 * position is a run of C channels, read inside the reduction
 * (compile/lower/window_fuse.h) with the table's index read once for all
 * of them. */
static sj_status pool(sj_onnx_loader *L, sj_value x, bool x_cl, const sj_onnx_window *w,
                      sj_op reduce, double fill, sj_value *out) {
    sj_value cols;
    int axis = 2;
    SJ_TRY(sj__onnx_window_taps(L, x, x_cl, w, fill, true, &cols));
    return sj__onnx_node_prefix(L, sj_graph_reduce(L->g, reduce, cols, 1, &axis, false, out));
}

/* The pooled [N, P, C] as output 0, channels last, of ONNX shape
 * [N, C, out...]. */
static sj_status def_pooled(sj_onnx_loader *L, sj_value r, const sj_shape *xs, const sj_onnx_window *w) {
    sj_shape nchw = *xs;
    for (int d = 0; d < w->n; d++) nchw.dims[2 + d] = w->out[d];
    return sj__onnx_def_channels_last(L, 0, r, &nchw);
}

/* Float positions are exact to 2^24: the largest spatial index Indices
 * computes in float before it becomes int64. */
#define EXACT_FLOAT_INDEX ((int64_t)1 << 24)

/* storage_order 1: the first maximum is still the first in row-major kernel
 * order, only its index is written column-major (the first spatial axis
 * fastest): idx, a row-major spatial index, looked up in a load-time table
 * of the column-major index of each. */
static sj_status to_column_major(sj_onnx_loader *L, const sj_onnx_window *w, int64_t flat,
                                 sj_value *idx) {
    int64_t *cm = malloc((size_t)flat * sizeof *cm);
    if (!cm) return sj__onnx_node_fail(L, SJ_E_NOMEM, "out of memory for a pool's indices");
    for (int64_t r = 0; r < flat; r++) {
        int64_t rest = r, at = 0, step = 1;
        int64_t coord[SJ_ONNX_WINDOW_MAX];
        for (int d = w->n - 1; d >= 0; d--) {
            coord[d] = rest % w->in[d];
            rest /= w->in[d];
        }
        for (int d = 0; d < w->n; d++) {
            at += coord[d] * step;
            step *= w->in[d];
        }
        cm[r] = at;
    }
    sj_value tab;
    sj_status st = sj__onnx_made_param(L, SJ_I64, 1, &flat, cm, &tab);
    free(cm);
    SJ_TRY(st);
    return sj__onnx_node_prefix(L, sj_graph_gather(L->g, tab, *idx, 0, idx));
}

/* MaxPool's Indices: for each output, the flattened index into X (row-major
 * over N, C and the spatial axes) of the first tap holding the maximum.
 * Taps run in row-major kernel order, so the first maximum is the one of
 * smallest spatial index: the minimum, over the taps equal to the max, of
 * a load-time table of their spatial indices (padding taps far past any),
 * then (n * C + c) * L added in int64. */
static sj_status max_indices(sj_onnx_loader *L, sj_value cols, sj_value max, const sj_shape *xs,
                             const sj_onnx_window *w, bool column_major, sj_value *out) {
    int64_t flat = 1;
    for (int d = 0; d < w->n; d++) flat *= w->in[d];
    if (flat >= EXACT_FLOAT_INDEX)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                  "Indices over %lld spatial positions (at most %lld)",
                                  (long long)flat, (long long)EXACT_FLOAT_INDEX - 1);
    float *tab = malloc((size_t)(w->taps * w->positions) * sizeof *tab);
    if (!tab) return sj__onnx_node_fail(L, SJ_E_NOMEM, "out of memory for a pool's indices");
    int64_t kpos[SJ_ONNX_WINDOW_MAX] = {0}, coord[SJ_ONNX_WINDOW_MAX];
    for (int64_t k = 0; k < w->taps; k++) {
        int64_t opos[SJ_ONNX_WINDOW_MAX] = {0};
        for (int64_t p = 0; p < w->positions; p++) {
            int64_t at = EXACT_FLOAT_INDEX;
            if (sj__onnx_forward_tap(w, kpos, opos, coord)) {
                at = 0;
                for (int d = 0; d < w->n; d++) at = at * w->in[d] + coord[d];
            }
            tab[k * w->positions + p] = (float)at;
            for (int d = w->n - 1; d >= 0 && ++opos[d] == w->out[d]; d--) opos[d] = 0;
        }
        for (int d = w->n - 1; d >= 0 && ++kpos[d] == w->kernel[d]; d--) kpos[d] = 0;
    }
    sj_graph *g = L->g;
    int64_t td[2] = {w->taps, w->positions};
    sj_value tv, far, eq, sel, neg, nmin, mn, idx;
    sj_status st = sj__onnx_made_param(L, SJ_F32, 2, td, tab, &tv);
    free(tab);
    SJ_TRY(st);
    int axis = 2;
    SJ_TRY(sj__onnx_scalar_const(L, (float)EXACT_FLOAT_INDEX, &far));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_EQUAL, cols, max, &eq));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_where(g, eq, tv, far, &sel)));
    SJ_TRY(sj__onnx_unary(L, SJ_OP_NEG, sel, &neg));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(g, SJ_OP_REDUCE_MAX, neg, 1, &axis, false, &nmin)));
    SJ_TRY(sj__onnx_unary(L, SJ_OP_NEG, nmin, &mn));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_cast(g, mn, SJ_I64, &idx)));
    if (column_major) SJ_TRY(to_column_major(L, w, flat, &idx));
    /* + (n * C + c) * L */
    int64_t c = xs->dims[1], nd[3] = {xs->dims[0], 1, 1}, cd[2] = {c, 1};
    sj_value rn, rn3, rc, rc2;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_range(g, SJ_I64, 0, (double)(c * flat), xs->dims[0], &rn)));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(g, rn, 3, nd, &rn3)));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_range(g, SJ_I64, 0, (double)flat, c, &rc)));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(g, rc, 2, cd, &rc2)));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_ADD, idx, rn3, &idx));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_ADD, idx, rc2, &idx));
    return sj__onnx_window_unflatten(L, idx, w, out);
}

static sj_status map_max_pool(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    const Onnx__NodeProto *nd = L->node;
    bool want_indices = nd->n_output > 1 && nd->output[1][0];
    int64_t order;
    SJ_TRY(sj__onnx_attr_int(L, "storage_order", 0, &order));
    if (order != 0 && order != 1)
        return sj__onnx_node_fail(L, SJ_E_PARSE, "storage_order is %lld, not 0 (row-major) or 1 (column-major)",
                                  (long long)order);
    sj_value x, cols, m, r, y, first = sj_graph_num_values(L->g);
    sj_shape xs;
    bool x_cl;
    SJ_TRY(pool_input(L, !want_indices, &x, &x_cl, &xs));
    sj_onnx_window w;
    SJ_TRY(sj__onnx_window_read(L, &xs, NULL, true, &w));
    if (!want_indices) {
        SJ_TRY(pool(L, x, x_cl, &w, SJ_OP_REDUCE_MAX, -INFINITY, &r));
        return def_pooled(L, r, &xs, &w);
    }
    /* the indices compare each tap with the maximum: taps channels first,
     * the maximum kept beside them */
    int axis = 2;
    SJ_TRY(sj__onnx_window_taps(L, x, false, &w, -INFINITY, false, &cols));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(L->g, SJ_OP_REDUCE_MAX, cols, 1, &axis, true, &m)));
    int64_t rd[3] = {xs.dims[0], xs.dims[1], w.positions};
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(L->g, m, 3, rd, &r)));
    SJ_TRY(sj__onnx_window_unflatten(L, r, &w, &y));
    SJ_TRY(sj__onnx_def_out(L, 0, y, first));
    sj_value ix;
    first = sj_graph_num_values(L->g);
    SJ_TRY(max_indices(L, cols, m, &xs, &w, order == 1, &ix));
    return sj__onnx_def_out(L, 1, ix, first);
}

/* How many of output position p's taps an average counts: those inside
 * the input, or (count_include_pad) inside the input and its pads, per axis. */
static float tap_count(const sj_onnx_window *w, const int64_t *opos, bool include_pad) {
    double count = 1;
    for (int d = 0; d < w->n; d++) {
        int64_t lo = include_pad ? -w->pad_begin[d] : 0;
        int64_t hi = include_pad ? w->in[d] + w->pad_end[d] : w->in[d];
        int64_t c = 0;
        for (int64_t k = 0; k < w->kernel[d]; k++) {
            int64_t at = opos[d] * w->stride[d] - w->pad_begin[d] + k * w->dilation[d];
            c += at >= lo && at < hi;
        }
        count *= (double)c;
    }
    return (float)count;
}

static sj_status map_average_pool(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    int64_t include;
    SJ_TRY(sj__onnx_attr_int(L, "count_include_pad", 0, &include));
    sj_value x, sum;
    sj_shape xs;
    bool x_cl;
    SJ_TRY(pool_input(L, true, &x, &x_cl, &xs));
    sj_onnx_window w;
    SJ_TRY(sj__onnx_window_read(L, &xs, NULL, true, &w));
    SJ_TRY(pool(L, x, x_cl, &w, SJ_OP_REDUCE_SUM, 0.0, &sum));
    float *count = malloc((size_t)w.positions * sizeof *count);
    if (!count) return sj__onnx_node_fail(L, SJ_E_NOMEM, "out of memory for a pool's counts");
    int64_t opos[SJ_ONNX_WINDOW_MAX] = {0};
    bool uniform = true;
    for (int64_t p = 0; p < w.positions; p++) {
        count[p] = tap_count(&w, opos, include != 0);
        uniform = uniform && count[p] == count[0];
        for (int d = w.n - 1; d >= 0 && ++opos[d] == w.out[d]; d--) opos[d] = 0;
    }
    int64_t cd[2] = {w.positions, 1}; /* a count per position, over [N, P, C] */
    sj_value cv, avg;
    sj_status st = sj__onnx_made_param(L, SJ_F32, uniform ? 0 : 2, cd, count, &cv);
    free(count);
    SJ_TRY(st);
    SJ_TRY(sj__onnx_binary(L, SJ_OP_DIV, sum, cv, &avg));
    return def_pooled(L, avg, &xs, &w);
}

/* LRN: x / (bias + alpha / size * sum of x^2 over the channels c - (size-1)/2
 * to c + size/2 ... rounded as the operator says)^beta, the channel window
 * laid out as taps of a window over [C, rest] with kernel [size, 1]. */
static sj_status map_lrn(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    float alpha, beta, bias;
    int64_t size;
    SJ_TRY(sj__onnx_attr_float(L, "alpha", 1e-4f, &alpha));
    SJ_TRY(sj__onnx_attr_float(L, "beta", 0.75f, &beta));
    SJ_TRY(sj__onnx_attr_float(L, "bias", 1.0f, &bias));
    if (!sj__onnx_node_attr(L, "size"))
        return sj__onnx_node_fail(L, SJ_E_PARSE, "attribute 'size' is required");
    SJ_TRY(sj__onnx_attr_int(L, "size", 1, &size));
    sj_value x, first = sj_graph_num_values(L->g);
    sj_shape xs;
    bool x_cl;
    SJ_TRY(pool_input(L, false, &x, &x_cl, &xs));
    if (xs.rank < 2)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "X has rank %d; LRN needs [N, C, ...]", xs.rank);
    int64_t rest = 1;
    for (int i = 1; i < xs.rank; i++)
        if (sj_dim_is_sym(xs.dims[i]))
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                      "the symbolic dim may be only X's batch axis (axis 0)");
    for (int i = 2; i < xs.rank; i++) rest *= xs.dims[i];
    if (size < 1 || size > ((int64_t)1 << 20))
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "size %lld must be 1 or more", (long long)size);
    sj_onnx_window w = {.n = 2, .in = {xs.dims[1], rest}, .kernel = {size, 1},
                        .stride = {1, 1}, .dilation = {1, 1},
                        .pad_begin = {(size - 1) / 2, 0}, .pad_end = {size - 1 - (size - 1) / 2, 0},
                        .out = {xs.dims[1], rest}};
    SJ_TRY(sj__onnx_window_size(L, &w));
    sj_value sq, sq4, ss, scaled, base, den, y;
    int64_t d4[4] = {xs.dims[0], 1, xs.dims[1], rest};
    SJ_TRY(sj__onnx_binary(L, SJ_OP_MUL, x, x, &sq));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(L->g, sq, 4, d4, &sq4)));
    SJ_TRY(pool(L, sq4, false, &w, SJ_OP_REDUCE_SUM, 0.0, &ss)); /* [N, P, 1] */
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(L->g, ss, xs.rank, xs.dims, &ss)));
    SJ_TRY(sj__onnx_binary_c(L, SJ_OP_MUL, ss, alpha / (float)size, &scaled));
    SJ_TRY(sj__onnx_binary_c(L, SJ_OP_ADD, scaled, bias, &base));
    SJ_TRY(sj__onnx_binary_c(L, SJ_OP_POW, base, beta, &den));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_DIV, x, den, &y));
    return sj__onnx_def_out(L, 0, y, first);
}

const sj_onnx_op sj__onnx_ops_pool[] = {
    {"AveragePool", 1, 1, 1, 1, NULL, map_average_pool, SJ_OP_COUNT_, 0},
    {"LRN", 1, 1, 1, 1, NULL, map_lrn, SJ_OP_COUNT_, 0},
    {"MaxPool", 1, 1, 1, 2, NULL, map_max_pool, SJ_OP_COUNT_, 0},
};
const size_t sj__onnx_ops_pool_n = sizeof sj__onnx_ops_pool / sizeof sj__onnx_ops_pool[0];
