/* Loss functions onto the graph: NegativeLogLikelihoodLoss and
 * SoftmaxCrossEntropyLoss (its log-softmax, then the same loss), with
 * every reduction, class weights, ignore_index and inputs [N, C, d1, ...].
 * The picked log-probabilities are a GatherElements along the class axis;
 * ignored targets are replaced by class 0 before any lookup (an ignore
 * index may lie outside [0, C)) and their losses and weights set to 0 by a
 * select, so an infinite log-probability there cannot leak in as 0 * inf. */
#include "formats/onnx/onnx_node.h"
#include "formats/onnx/onnx_op.h"

#include <string.h>

typedef enum reduction { RED_NONE, RED_SUM, RED_MEAN } reduction;

typedef struct loss_attrs {
    reduction red;
    bool has_ii;
    int64_t ii;
} loss_attrs;

static sj_status read_attrs(sj_onnx_loader *L, loss_attrs *a) {
    /* in the order of the enum */
    static const char *const names[] = {"none", "sum", "mean"};
    int red;
    SJ_TRY(sj__onnx_attr_choice(L, "reduction", names, 3, RED_MEAN, &red));
    a->red = (reduction)red;
    a->has_ii = sj__onnx_node_attr(L, "ignore_index") != NULL;
    return sj__onnx_attr_int(L, "ignore_index", 0, &a->ii);
}

/* target [N, d1, ...] fits scores [N, C, d1, ...]; weight, if any, is [C]. */
static sj_status check_shapes(sj_onnx_loader *L, sj_value scores, sj_value target, sj_value weight) {
    sj_shape s, t;
    SJ_TRY(sj__onnx_shape_of(L, scores, &s));
    SJ_TRY(sj__onnx_shape_of(L, target, &t));
    char a[96], b[96];
    sj_shape_format(&s, sj_graph_symbol(L->g), a, sizeof a);
    sj_shape_format(&t, sj_graph_symbol(L->g), b, sizeof b);
    if (s.rank < 2)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "scores %s have rank %d; [N, C, ...] is needed", a,
                                  s.rank);
    if (sj_dim_is_sym(s.dims[1]))
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "the class axis of %s is the symbolic dim", a);
    bool fits = t.rank == s.rank - 1 && t.dims[0] == s.dims[0];
    for (int i = 1; fits && i < t.rank; i++) fits = t.dims[i] == s.dims[i + 1];
    if (!fits)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "target %s does not fit scores %s (it must be [N, d1, ...])",
                                  b, a);
    sj_dtype td = sj__onnx_dtype_of(L, target);
    if (td != SJ_I64 && td != SJ_I32)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "target has dtype %s, not int64 or int32",
                                  sj_dtype_name(td));
    if (weight == SJ_NO_VALUE) return SJ_OK;
    sj_shape w;
    SJ_TRY(sj__onnx_shape_of(L, weight, &w));
    if (w.rank != 1 || w.dims[0] != s.dims[1]) {
        sj_shape_format(&w, sj_graph_symbol(L->g), b, sizeof b);
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "weight %s is not [%lld], one per class", b,
                                  (long long)s.dims[1]);
    }
    return SJ_OK;
}

/* The loss of log-probabilities logp [N, C, d...] at target [N, d...],
 * weighted per class by weight (SJ_NO_VALUE: 1), reduced as a asks. */
static sj_status nll(sj_onnx_loader *L, sj_value logp, sj_value target, sj_value weight,
                     const loss_attrs *a, sj_value *out) {
    SJ_TRY(check_shapes(L, logp, target, weight));
    sj_graph *g = L->g;
    sj_shape t;
    SJ_TRY(sj__onnx_shape_of(L, target, &t));
    sj_dtype td = sj__onnx_dtype_of(L, target);
    sj_value ignored = SJ_NO_VALUE, safe = target, zero_f;
    SJ_TRY(sj__onnx_fill_scalar(L, SJ_F32, 0, &zero_f));
    if (a->has_ii) {
        sj_value ii, zero_t;
        SJ_TRY(sj__onnx_fill_scalar(L, td, (double)a->ii, &ii));
        SJ_TRY(sj__onnx_fill_scalar(L, td, 0, &zero_t));
        SJ_TRY(sj__onnx_binary(L, SJ_OP_EQUAL, target, ii, &ignored));
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_where(g, ignored, zero_t, target, &safe)));
    }
    /* the class axis back in at 1: [N, 1, d...] picks one class per position */
    int64_t dims[SJ_MAX_RANK];
    dims[0] = t.dims[0];
    dims[1] = 1;
    for (int i = 1; i < t.rank; i++) dims[i + 1] = t.dims[i];
    sj_value idx, picked, loss, w = SJ_NO_VALUE;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(g, safe, t.rank + 1, dims, &idx)));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_gather_elements(g, logp, idx, 1, &picked)));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(g, picked, t.rank, t.dims, &picked)));
    SJ_TRY(sj__onnx_unary(L, SJ_OP_NEG, picked, &loss));
    if (weight != SJ_NO_VALUE) {
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_gather(g, weight, safe, 0, &w)));
        SJ_TRY(sj__onnx_binary(L, SJ_OP_MUL, loss, w, &loss));
    }
    if (a->has_ii) {
        sj_value one;
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_where(g, ignored, zero_f, loss, &loss)));
        if (w == SJ_NO_VALUE) SJ_TRY(sj__onnx_fill_scalar(L, SJ_F32, 1, &one));
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_where(g, ignored, zero_f, w == SJ_NO_VALUE ? one : w, &w)));
    }
    if (a->red == RED_NONE) {
        *out = loss;
        return SJ_OK;
    }
    sj_value sum;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(g, SJ_OP_REDUCE_SUM, loss, 0, NULL, false, &sum)));
    if (a->red == RED_SUM) {
        *out = sum;
        return SJ_OK;
    }
    /* mean: over the weights of the positions counted (every one when
     * there are neither weights nor an ignore index) */
    if (w == SJ_NO_VALUE)
        return sj__onnx_node_prefix(L, sj_graph_reduce(g, SJ_OP_REDUCE_MEAN, loss, 0, NULL, false, out));
    sj_value wsum;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(g, SJ_OP_REDUCE_SUM, w, 0, NULL, false, &wsum)));
    return sj__onnx_binary(L, SJ_OP_DIV, sum, wsum, out);
}

static sj_status map_nll(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    loss_attrs a;
    SJ_TRY(read_attrs(L, &a));
    sj_value x, t, w, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    SJ_TRY(sj__onnx_in_value(L, 1, &t));
    SJ_TRY(sj__onnx_in_value_opt(L, 2, &w));
    SJ_TRY(nll(L, x, t, w, &a, &y));
    return sj__onnx_def_out(L, 0, y, first);
}

/* SoftmaxCrossEntropyLoss: the loss of log_softmax(scores) over the class
 * axis, which is output 1 (log_prob) when it is named. */
static sj_status map_sce(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    loss_attrs a;
    SJ_TRY(read_attrs(L, &a));
    sj_value x, t, w, lp, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    SJ_TRY(sj__onnx_in_value(L, 1, &t));
    SJ_TRY(sj__onnx_in_value_opt(L, 2, &w));
    SJ_TRY(check_shapes(L, x, t, w));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_softmax(L->g, SJ_OP_LOG_SOFTMAX, x, 1, &lp)));
    sj_value lp_first = first;
    first = sj_graph_num_values(L->g);
    SJ_TRY(nll(L, lp, t, w, &a, &y));
    SJ_TRY(sj__onnx_def_out(L, 0, y, first));
    const Onnx__NodeProto *n = L->node;
    if (n->n_output > 1 && n->output[1] && n->output[1][0])
        SJ_TRY(sj__onnx_def_out(L, 1, lp, lp_first));
    return SJ_OK;
}

const sj_onnx_op sj__onnx_ops_loss[] = {
    {"NegativeLogLikelihoodLoss", 2, 3, 1, 1, NULL, map_nll, SJ_OP_COUNT_, 0},
    /* output 1, log_prob, is optional */
    {"SoftmaxCrossEntropyLoss", 2, 3, 1, 2, NULL, map_sce, SJ_OP_COUNT_, 0},
};
const size_t sj__onnx_ops_loss_n = sizeof sj__onnx_ops_loss / sizeof sj__onnx_ops_loss[0];
