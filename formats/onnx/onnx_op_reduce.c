/* Reductions onto the graph: ReduceSum, ReduceMean and ReduceMax as they
 * are, ReduceL1, L2, SumSquare, LogSum, LogSumExp and Min composed over
 * sum and max, ReduceProd as halving products, and the global pools as
 * kept reductions. */
#include "formats/onnx/onnx_layout.h"
#include "formats/onnx/onnx_node.h"
#include "formats/onnx/onnx_op.h"

#include <string.h>

/* The reduction axes of a Reduce* node (attribute or input); *all_noop is
 * true when there are none and noop_with_empty_axes asks for the identity. */
static sj_status reduce_axes(sj_onnx_loader *L, int *axes, int *n_axes, bool *keepdims,
                             bool *all_noop) {
    int64_t kd, noop;
    SJ_TRY(sj__onnx_attr_int(L, "keepdims", 1, &kd));
    SJ_TRY(sj__onnx_attr_int(L, "noop_with_empty_axes", 0, &noop));
    const int64_t *av = NULL;
    size_t an = 0;
    bool present;
    SJ_TRY(sj__onnx_attr_ints(L, "axes", &av, &an, &present));
    if (sj__onnx_in_name(L, 1)) {
        if (present)
            return sj__onnx_node_fail(L, SJ_E_PARSE, "axes given both as attribute and as input");
        const sj_onnx_tensor *t;
        SJ_TRY(sj__onnx_in_ints(L, 1, "axes", &t));
        av = t->i;
        an = (size_t)t->numel;
    }
    *all_noop = an == 0 && noop;
    *keepdims = kd != 0;
    *n_axes = (int)an;
    return sj__onnx_int_axes(L, av, an, axes);
}

/* Whether axes (n of them, counted from the end when negative) are the
 * spatial axes 2.. of a rank-r [N, C, D...] value, each once. */
static bool spatial_axes(const int *axes, int n, int r) {
    uint32_t seen = 0;
    for (int i = 0; i < n; i++) {
        int a = axes[i] < 0 ? axes[i] + r : axes[i];
        if (a < 2 || a >= r || (seen >> a & 1u)) return false;
        seen |= 1u << a;
    }
    return n == r - 2;
}

/* op over the spatial axes of input 0 when a conv or pool left it channels
 * last (onnx_layout.h): its [N, P, C] reduced over P, and *done. A squeeze-
 * excite block's mean then reads the activation in place. */
static sj_status reduce_spatial_laid(sj_onnx_loader *L, sj_op op, const int *axes, int n, bool keep,
                                     bool *done) {
    sj_value x, y, first = sj_graph_num_values(L->g);
    sj_shape s;
    *done = sj__onnx_in_channels_last(L, 0, &x, &s) && spatial_axes(axes, n, s.rank);
    if (!*done) return SJ_OK;
    int axis = 1;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(L->g, op, x, 1, &axis, true, &y)));
    if (keep) {
        for (int i = 2; i < s.rank; i++) s.dims[i] = 1;
        return sj__onnx_def_channels_last(L, 0, y, &s); /* [N, 1, C] */
    }
    int64_t nc[2] = {s.dims[0], s.dims[1]};
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(L->g, y, 2, nc, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

static sj_status map_reduce(sj_onnx_loader *L, const sj_onnx_op *op) {
    int axes[SJ_MAX_RANK], na = 0;
    bool keep = true, noop = false, done;
    SJ_TRY(reduce_axes(L, axes, &na, &keep, &noop));
    if (noop) return sj__onnx_alias_input(L);
    SJ_TRY(reduce_spatial_laid(L, op->op, axes, na, keep, &done));
    if (done) return SJ_OK;
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(L->g, op->op, x, na, axes, keep, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* ReduceL1, L2, SumSquare, LogSum, LogSumExp and Min over sum and max:
 * min is -max(-x); the others as the reference writes them. */
static sj_status map_reduce_composed(sj_onnx_loader *L, const sj_onnx_op *row) {
    int axes[SJ_MAX_RANK], na = 0;
    bool keep = true, noop = false;
    SJ_TRY(reduce_axes(L, axes, &na, &keep, &noop));
    if (noop) return sj__onnx_alias_input(L);
    const char *op = row->name + strlen("Reduce");
    sj_value x, p, r, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    sj_op pre = SJ_OP_COUNT_, post = SJ_OP_COUNT_, red = SJ_OP_REDUCE_SUM;
    if (!strcmp(op, "L1")) {
        pre = SJ_OP_ABS;
    } else if (!strcmp(op, "L2")) {
        pre = SJ_OP_MUL;
        post = SJ_OP_SQRT;
    } else if (!strcmp(op, "SumSquare")) {
        pre = SJ_OP_MUL;
    } else if (!strcmp(op, "LogSum")) {
        post = SJ_OP_LOG;
    } else if (!strcmp(op, "LogSumExp")) {
        pre = SJ_OP_EXP;
        post = SJ_OP_LOG;
    } else if (!strcmp(op, "Min")) {
        pre = post = SJ_OP_NEG;
        red = SJ_OP_REDUCE_MAX;
    } else {
        return sj__onnx_node_fail(L, SJ_E_INTERNAL, "no reduction mapper for '%s'", op);
    }
    p = x;
    if (pre == SJ_OP_MUL) SJ_TRY(sj__onnx_binary(L, SJ_OP_MUL, x, x, &p));
    else if (pre != SJ_OP_COUNT_) SJ_TRY(sj__onnx_unary(L, pre, x, &p));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(L->g, red, p, na, axes, keep, &r)));
    y = r;
    if (post != SJ_OP_COUNT_) SJ_TRY(sj__onnx_unary(L, post, r, &y));
    return sj__onnx_def_out(L, 0, y, first);
}

/* Longest axis ReduceProd multiplies out: log2 of it in graph steps. */
#define PROD_MAX_LEN 4096

/* ReduceProd as real float32 products (no exp of a log sum, which would
 * lose sign and exactness): each reduced axis is halved, even entries
 * times odd ones, until it has length 1; an odd last entry waits in a
 * concat for the next round. The products are paired in a tree order
 * rather than left to right, within rounding of a sequential product.
 * The symbolic dim cannot be multiplied out this way (its length is only
 * known per request). */
static sj_status map_reduce_prod(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    int axes[SJ_MAX_RANK], na = 0;
    bool keep = true, noop = false;
    SJ_TRY(reduce_axes(L, axes, &na, &keep, &noop));
    if (noop) return sj__onnx_alias_input(L);
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, x, &s));
    if (sj__onnx_dtype_of(L, x) != SJ_F32)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "input has dtype %s; only float32 is supported",
                                  sj_dtype_name(sj__onnx_dtype_of(L, x)));
    bool reduced[SJ_MAX_RANK] = {false};
    if (na == 0)
        for (int i = 0; i < s.rank; i++) reduced[i] = true;
    for (int i = 0; i < na; i++) {
        int a;
        SJ_TRY(sj__onnx_axis(L, axes[i], s.rank, s.rank, &a));
        if (reduced[a]) return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis %d is given twice", a);
        reduced[a] = true;
    }
    y = x;
    int64_t out[SJ_MAX_RANK];
    int out_rank = 0;
    for (int a = 0; a < s.rank; a++) {
        if (!reduced[a]) {
            out[out_rank++] = s.dims[a];
            continue;
        }
        if (keep) out[out_rank++] = 1;
        if (sj_dim_is_sym(s.dims[a]) || s.dims[a] > PROD_MAX_LEN)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                      "axis %d %s; ReduceProd multiplies out constant axes of at "
                                      "most %d",
                                      a, sj_dim_is_sym(s.dims[a]) ? "is the symbolic dim" : "is too long",
                                      PROD_MAX_LEN);
        for (int64_t len = s.dims[a]; len > 1; len = (len + 1) / 2) {
            sj_slice_axis ax[SJ_MAX_RANK];
            sj_shape cur;
            SJ_TRY(sj__onnx_shape_of(L, y, &cur));
            for (int i = 0; i < cur.rank; i++) ax[i] = (sj_slice_axis){0, 0, 1, cur.dims[i]};
            sj_value even, odd, prod;
            ax[a] = (sj_slice_axis){0, 0, 2, len / 2};
            SJ_TRY(sj__onnx_node_prefix(L, sj_graph_slice(L->g, y, ax, &even)));
            ax[a] = (sj_slice_axis){1, 0, 2, len / 2};
            SJ_TRY(sj__onnx_node_prefix(L, sj_graph_slice(L->g, y, ax, &odd)));
            SJ_TRY(sj__onnx_binary(L, SJ_OP_MUL, even, odd, &prod));
            if (len % 2) {
                sj_value rest;
                ax[a] = (sj_slice_axis){len - 1, 0, 1, 1};
                SJ_TRY(sj__onnx_node_prefix(L, sj_graph_slice(L->g, y, ax, &rest)));
                SJ_TRY(sj__onnx_node_prefix(L, sj_graph_concat(L->g, prod, rest, a, &prod)));
            }
            y = prod;
        }
    }
    if (!keep && y != x)
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(L->g, y, out_rank, out, &y)));
    if (!keep && y == x && out_rank != s.rank)
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(L->g, x, out_rank, out, &y)));
    return sj__onnx_def_or_alias(L, x, y, first);
}

/* GlobalAveragePool / GlobalMaxPool: a kept reduction over the spatial axes. */
static sj_status map_global_pool(sj_onnx_loader *L, const sj_onnx_op *op) {
    sj_value x, y, first = sj_graph_num_values(L->g);
    sj_shape s;
    if (sj__onnx_in_channels_last(L, 0, &x, &s)) {
        int axes[SJ_MAX_RANK];
        bool done;
        for (int i = 2; i < s.rank; i++) axes[i - 2] = i;
        SJ_TRY(reduce_spatial_laid(L, op->op, axes, s.rank - 2, true, &done));
        if (done) return SJ_OK;
    }
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    SJ_TRY(sj__onnx_shape_of(L, x, &s));
    if (s.rank < 3)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "input has rank %d; [N, C, spatial...] is needed",
                                  s.rank);
    int axes[SJ_MAX_RANK], na = 0;
    for (int i = 2; i < s.rank; i++) axes[na++] = i;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(L->g, op->op, x, na, axes, true, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

const sj_onnx_op sj__onnx_ops_reduce[] = {
    {"ReduceSum", 1, 2, 1, 1, NULL, map_reduce, SJ_OP_REDUCE_SUM, 0},
    {"ReduceMean", 1, 2, 1, 1, NULL, map_reduce, SJ_OP_REDUCE_MEAN, 0},
    {"ReduceMax", 1, 2, 1, 1, NULL, map_reduce, SJ_OP_REDUCE_MAX, 0},
    {"ReduceL1", 1, 2, 1, 1, NULL, map_reduce_composed, SJ_OP_COUNT_, 0},
    {"ReduceL2", 1, 2, 1, 1, NULL, map_reduce_composed, SJ_OP_COUNT_, 0},
    {"ReduceSumSquare", 1, 2, 1, 1, NULL, map_reduce_composed, SJ_OP_COUNT_, 0},
    {"ReduceLogSum", 1, 2, 1, 1, NULL, map_reduce_composed, SJ_OP_COUNT_, 0},
    {"ReduceLogSumExp", 1, 2, 1, 1, NULL, map_reduce_composed, SJ_OP_COUNT_, 0},
    {"ReduceMin", 1, 2, 1, 1, NULL, map_reduce_composed, SJ_OP_COUNT_, 0},
    {"ReduceProd", 1, 2, 1, 1, NULL, map_reduce_prod, SJ_OP_COUNT_, 0},
    {"GlobalAveragePool", 1, 1, 1, 1, NULL, map_global_pool, SJ_OP_REDUCE_MEAN, 0},
    {"GlobalMaxPool", 1, 1, 1, 1, NULL, map_global_pool, SJ_OP_REDUCE_MAX, 0},
};
const size_t sj__onnx_ops_reduce_n = sizeof sj__onnx_ops_reduce / sizeof sj__onnx_ops_reduce[0];
