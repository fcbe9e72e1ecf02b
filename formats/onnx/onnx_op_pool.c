/* Pooling onto the graph: MaxPool, AveragePool and LRN, each a reduction
 * over a window's taps (onnx_window.h). A max pool's padding reads -inf; an
 * average divides each output by the taps it counts, which differ at the
 * borders (count_include_pad says whether padding counts). */
#include "formats/onnx/onnx_node.h"
#include "formats/onnx/onnx_op.h"
#include "formats/onnx/onnx_window.h"

#include <math.h>
#include <stdlib.h>

/* X as float32 [N, C, D...] with its shape. */
static sj_status pool_input(sj_onnx_loader *L, sj_value *x, sj_shape *xs) {
    SJ_TRY(sj__onnx_in_value(L, 0, x));
    SJ_TRY(sj__onnx_shape_of(L, *x, xs));
    if (sj__onnx_dtype_of(L, *x) != SJ_F32)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "X must be float32");
    return SJ_OK;
}

/* reduce op over the taps of x's window (fill in the padding), as output 0. */
static sj_status pool(sj_onnx_loader *L, sj_value x, const sj_onnx_window *w, sj_op reduce,
                      double fill, sj_value *out) {
    sj_value cols, r;
    int axis = 2;
    SJ_TRY(sj__onnx_window_taps(L, x, w, fill, false, &cols));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(L->g, reduce, cols, 1, &axis, false, &r)));
    *out = r;
    return SJ_OK;
}

static sj_status map_max_pool(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    /* the Indices output (argmax positions) is not computed */
    SJ_TRY(sj__onnx_check_outputs(L, 1));
    sj_value x, r, y, first = sj_graph_num_values(L->g);
    sj_shape xs;
    SJ_TRY(pool_input(L, &x, &xs));
    sj_onnx_window w;
    SJ_TRY(sj__onnx_window_read(L, &xs, NULL, true, &w));
    SJ_TRY(pool(L, x, &w, SJ_OP_REDUCE_MAX, -INFINITY, &r));
    SJ_TRY(sj__onnx_window_unflatten(L, r, &w, &y));
    return sj__onnx_def_out(L, 0, y, first);
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
    sj_value x, sum, y, first = sj_graph_num_values(L->g);
    sj_shape xs;
    SJ_TRY(pool_input(L, &x, &xs));
    sj_onnx_window w;
    SJ_TRY(sj__onnx_window_read(L, &xs, NULL, true, &w));
    SJ_TRY(pool(L, x, &w, SJ_OP_REDUCE_SUM, 0.0, &sum));
    float *count = malloc((size_t)w.positions * sizeof *count);
    if (!count) return sj__onnx_node_fail(L, SJ_E_NOMEM, "out of memory for a pool's counts");
    int64_t opos[SJ_ONNX_WINDOW_MAX] = {0};
    bool uniform = true;
    for (int64_t p = 0; p < w.positions; p++) {
        count[p] = tap_count(&w, opos, include != 0);
        uniform = uniform && count[p] == count[0];
        for (int d = w.n - 1; d >= 0 && ++opos[d] == w.out[d]; d--) opos[d] = 0;
    }
    char name[64];
    sj__onnx_synth_name(L, name, sizeof name);
    int64_t cd[1] = {w.positions};
    sj_value cv, avg;
    sj_status st = sj__onnx_node_prefix(
        L, sj_graph_param(L->g, name, uniform ? 0 : 1, cd, count, &cv));
    free(count);
    SJ_TRY(st);
    SJ_TRY(sj__onnx_binary(L, SJ_OP_DIV, sum, cv, &avg));
    SJ_TRY(sj__onnx_window_unflatten(L, avg, &w, &y));
    return sj__onnx_def_out(L, 0, y, first);
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
    SJ_TRY(pool_input(L, &x, &xs));
    if (xs.rank < 2)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "X has rank %d; LRN needs [N, C, ...]", xs.rank);
    int64_t rest = 1;
    for (int i = 1; i < xs.rank; i++)
        if (xs.dims[i] == SJ_DIM_SYM)
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
    SJ_TRY(pool(L, sq4, &w, SJ_OP_REDUCE_SUM, 0.0, &ss));
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
