/* Reductions onto the graph: ReduceSum, ReduceMean and ReduceMax as they
 * are, ReduceL1, L2, SumSquare, LogSum, LogSumExp and Min composed over
 * sum and max, and the global pools as kept reductions. */
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

static sj_status map_reduce(sj_onnx_loader *L, const sj_onnx_op *op) {
    int axes[SJ_MAX_RANK], na = 0;
    bool keep = true, noop = false;
    SJ_TRY(reduce_axes(L, axes, &na, &keep, &noop));
    if (noop) return sj__onnx_alias_input(L);
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

/* GlobalAveragePool / GlobalMaxPool: a kept reduction over the spatial axes. */
static sj_status map_global_pool(sj_onnx_loader *L, const sj_onnx_op *op) {
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    sj_shape s;
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
    {"GlobalAveragePool", 1, 1, 1, 1, NULL, map_global_pool, SJ_OP_REDUCE_MEAN, 0},
    {"GlobalMaxPool", 1, 1, 1, 1, NULL, map_global_pool, SJ_OP_REDUCE_MAX, 0},
};
const size_t sj__onnx_ops_reduce_n = sizeof sj__onnx_ops_reduce / sizeof sj__onnx_ops_reduce[0];
