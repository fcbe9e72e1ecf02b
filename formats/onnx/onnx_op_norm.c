/* Normalisations onto the graph: Softmax and LogSoftmax (with the opset < 13
 * flattening), LayerNormalization and its optional Mean/InvStdDev outputs,
 * and BatchNormalization, InstanceNormalization and
 * MeanVarianceNormalization spelled with reductions. */
#include "formats/onnx/onnx_layout.h"
#include "formats/onnx/onnx_node.h"
#include "formats/onnx/onnx_op.h"

/* softmax / log-softmax over axes [axis, rank) spelled with reductions:
 * exact for any set of trailing axes, symbolic or not. */
static sj_status softmax_decomposed(sj_onnx_loader *L, sj_op op, sj_value x, int axis, int rank,
                                    sj_value *out) {
    int axes[SJ_MAX_RANK], n = 0;
    for (int i = axis; i < rank; i++) axes[n++] = i;
    sj_graph *g = L->g;
    sj_value m, d, ex, s, y;
    SJ_TRY(sj_graph_reduce(g, SJ_OP_REDUCE_MAX, x, n, axes, true, &m));
    SJ_TRY(sj_graph_binary(g, SJ_OP_SUB, x, m, &d));
    SJ_TRY(sj_graph_unary(g, SJ_OP_EXP, d, &ex));
    SJ_TRY(sj_graph_reduce(g, SJ_OP_REDUCE_SUM, ex, n, axes, true, &s));
    if (op == SJ_OP_SOFTMAX) {
        SJ_TRY(sj_graph_binary(g, SJ_OP_DIV, ex, s, &y));
    } else {
        sj_value ls;
        SJ_TRY(sj_graph_unary(g, SJ_OP_LOG, s, &ls));
        SJ_TRY(sj_graph_binary(g, SJ_OP_SUB, d, ls, &y));
    }
    *out = y;
    return SJ_OK;
}

void sj__onnx_legacy_rows(const sj_shape *s, int axis, int *single, bool *sym_inside,
                          int64_t *rows) {
    int n_big = 0, last_big = s->rank - 1;
    *sym_inside = false;
    *rows = 1;
    for (int i = axis; i < s->rank; i++) {
        if (s->dims[i] != 1) {
            n_big++;
            last_big = i;
        }
        if (sj_dim_is_sym(s->dims[i]))
            *sym_inside = true;
        else
            *rows *= s->dims[i];
    }
    *single = n_big <= 1 ? last_big : -1;
}

/* (Log)Softmax before opset 13: over axes [axis, rank) together. */
static sj_status softmax_coerced(sj_onnx_loader *L, sj_op op, sj_value x, const sj_shape *s,
                                 int axis, sj_value *out) {
    int rank = s->rank, single;
    bool sym_inside;
    int64_t rows;
    sj__onnx_legacy_rows(s, axis, &single, &sym_inside, &rows);
    if (single >= 0) return sj_graph_softmax(L->g, op, x, single, out);
    if (sym_inside) return softmax_decomposed(L, op, x, axis, rank, out);
    /* keep the leading axes as they are (the symbolic dim may be among them)
     * and flatten the row into one axis */
    int64_t flat[SJ_MAX_RANK];
    for (int i = 0; i < axis; i++) flat[i] = s->dims[i];
    flat[axis] = rows;
    sj_value r, y;
    SJ_TRY(sj_graph_reshape(L->g, x, axis + 1, flat, &r));
    SJ_TRY(sj_graph_softmax(L->g, op, r, axis, &y));
    return sj_graph_reshape(L->g, y, rank, s->dims, out);
}

static sj_status map_softmax(sj_onnx_loader *L, const sj_onnx_op *op) {
    bool legacy = L->opset < 13;
    int64_t axis;
    SJ_TRY(sj__onnx_attr_int(L, "axis", legacy ? 1 : -1, &axis));
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, x, &s));
    int ax; /* a scalar's softmax takes axis 0 */
    SJ_TRY(sj__onnx_axis(L, axis, s.rank, s.rank ? s.rank : 1, &ax));
    if (legacy && s.rank > 0)
        SJ_TRY(sj__onnx_node_prefix(L, softmax_coerced(L, op->op, x, &s, ax, &y)));
    else
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_softmax(L->g, op->op, x, ax, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

static sj_status map_layernorm(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    int64_t axis;
    float eps;
    SJ_TRY(sj__onnx_attr_int(L, "axis", -1, &axis));
    SJ_TRY(sj__onnx_attr_float(L, "epsilon", 1e-5f, &eps));
    sj_value x, scale, bias, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    SJ_TRY(sj__onnx_in_value(L, 1, &scale));
    SJ_TRY(sj__onnx_in_value_opt(L, 2, &bias));
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, x, &s));
    int ax;
    SJ_TRY(sj__onnx_axis(L, axis, s.rank, s.rank, &ax));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_layernorm(L->g, x, scale, bias, ax, eps, &y)));
    SJ_TRY(sj__onnx_def_out(L, 0, y, first));

    /* optional outputs: Mean and InvStdDev over the normalised axes, kept */
    const Onnx__NodeProto *n = L->node;
    bool want_mean = n->n_output > 1 && n->output[1][0];
    bool want_inv = n->n_output > 2 && n->output[2][0];
    if (!want_mean && !want_inv) return SJ_OK;
    int axes[SJ_MAX_RANK], na = 0;
    for (int i = ax; i < s.rank; i++) axes[na++] = i;
    sj_graph *g = L->g;
    sj_value mean, d, sq, var, ep, ve, inv;
    first = sj_graph_num_values(g);
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(g, SJ_OP_REDUCE_MEAN, x, na, axes, true, &mean)));
    SJ_TRY(sj__onnx_def_out(L, 1, mean, first));
    if (!want_inv) return SJ_OK;
    SJ_TRY(sj__onnx_scalar_const(L, eps, &ep));
    first = sj_graph_num_values(g);
    SJ_TRY(sj__onnx_binary(L, SJ_OP_SUB, x, mean, &d));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_MUL, d, d, &sq));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(g, SJ_OP_REDUCE_MEAN, sq, na, axes, true, &var)));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_ADD, var, ep, &ve));
    SJ_TRY(sj__onnx_unary(L, SJ_OP_RSQRT, ve, &inv));
    return sj__onnx_def_out(L, 2, inv, first);
}

/* A per-channel vector [C] as [C, 1, ...] against x of rank `rank` (channel axis 1). */
static sj_status channel_view(sj_onnx_loader *L, sj_value v, int rank, const char *what,
                              int64_t channels, sj_value *out) {
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, v, &s));
    if (s.rank != 1 || s.dims[0] != channels)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "%s must have shape [%lld]", what,
                                  (long long)channels);
    int64_t dims[SJ_MAX_RANK];
    dims[0] = channels;
    for (int i = 1; i < rank - 1; i++) dims[i] = 1;
    return sj__onnx_node_prefix(L, sj_graph_reshape(L->g, v, rank - 1, dims, out));
}

/* BatchNormalization (inference): (x - mean) / sqrt(var + eps) * scale + B. */
static sj_status map_batchnorm(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    int64_t training;
    SJ_TRY(sj__onnx_attr_int(L, "training_mode", 0, &training));
    if (training)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                  "training_mode=1 (batch statistics) is not supported; only "
                                  "inference");
    float eps;
    SJ_TRY(sj__onnx_attr_float(L, "epsilon", 1e-5f, &eps));
    sj_value x, p[4], y, first = sj_graph_num_values(L->g);
    sj_shape s;
    /* channels last (onnx_layout.h): [N, P, C], the parameters as [C] */
    bool cl = sj__onnx_in_channels_last(L, 0, &x, &s);
    if (!cl) {
        SJ_TRY(sj__onnx_in_value(L, 0, &x));
        SJ_TRY(sj__onnx_shape_of(L, x, &s));
    }
    if (s.rank < 2 || sj_dim_is_sym(s.dims[1]))
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "input must be [N, C, ...] with a fixed C");
    static const char *const names[] = {"scale", "B", "input_mean", "input_var"};
    for (int i = 0; i < 4; i++) {
        sj_value v;
        SJ_TRY(sj__onnx_in_value(L, i + 1, &v));
        SJ_TRY(channel_view(L, v, cl ? 2 : s.rank, names[i], s.dims[1], &p[i]));
    }
    sj_value d, ve;
    SJ_TRY(sj__onnx_binary(L, SJ_OP_SUB, x, p[2], &d));
    SJ_TRY(sj__onnx_binary_c(L, SJ_OP_ADD, p[3], eps, &ve));
    SJ_TRY(sj__onnx_unary(L, SJ_OP_SQRT, ve, &ve));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_DIV, d, ve, &y));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_MUL, y, p[0], &y));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_ADD, y, p[1], &y));
    if (cl) return sj__onnx_def_channels_last(L, 0, y, &s);
    return sj__onnx_def_out(L, 0, y, first);
}

/* InstanceNormalization: per (n, c), normalise over the spatial axes. */
static sj_status map_instancenorm(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    float eps;
    SJ_TRY(sj__onnx_attr_float(L, "epsilon", 1e-5f, &eps));
    sj_value x, sc, b, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, x, &s));
    if (s.rank < 3 || sj_dim_is_sym(s.dims[1]))
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "input must be [N, C, spatial...] with a fixed C");
    SJ_TRY(sj__onnx_in_value(L, 1, &sc));
    SJ_TRY(sj__onnx_in_value(L, 2, &b));
    SJ_TRY(channel_view(L, sc, s.rank, "scale", s.dims[1], &sc));
    SJ_TRY(channel_view(L, b, s.rank, "B", s.dims[1], &b));
    int axes[SJ_MAX_RANK], na = 0;
    for (int i = 2; i < s.rank; i++) axes[na++] = i;
    sj_value mean, d, sq, var;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(L->g, SJ_OP_REDUCE_MEAN, x, na, axes, true, &mean)));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_SUB, x, mean, &d));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_MUL, d, d, &sq));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(L->g, SJ_OP_REDUCE_MEAN, sq, na, axes, true, &var)));
    SJ_TRY(sj__onnx_binary_c(L, SJ_OP_ADD, var, eps, &var));
    SJ_TRY(sj__onnx_unary(L, SJ_OP_SQRT, var, &var));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_DIV, d, var, &y));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_MUL, y, sc, &y));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_ADD, y, b, &y));
    return sj__onnx_def_out(L, 0, y, first);
}

/* MeanVarianceNormalization: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9). */
static sj_status map_mvn(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    const int64_t *av;
    size_t an;
    bool present;
    SJ_TRY(sj__onnx_attr_ints(L, "axes", &av, &an, &present));
    static const int64_t def_axes[] = {0, 2, 3};
    if (!present) {
        av = def_axes;
        an = 3;
    }
    int axes[SJ_MAX_RANK];
    SJ_TRY(sj__onnx_int_axes(L, av, an, axes));
    sj_value x, mean, m2, sq, msq, sd, d, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(L->g, SJ_OP_REDUCE_MEAN, x, (int)an, axes, true, &mean)));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_MUL, mean, mean, &m2));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_MUL, x, x, &sq));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(L->g, SJ_OP_REDUCE_MEAN, sq, (int)an, axes, true, &msq)));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_SUB, msq, m2, &sd));
    SJ_TRY(sj__onnx_unary(L, SJ_OP_SQRT, sd, &sd));
    SJ_TRY(sj__onnx_binary_c(L, SJ_OP_ADD, sd, 1e-9f, &sd));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_SUB, x, mean, &d));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_DIV, d, sd, &y));
    return sj__onnx_def_out(L, 0, y, first);
}

const sj_onnx_op sj__onnx_ops_norm[] = {
    {"Softmax", 1, 1, 1, 1, NULL, map_softmax, SJ_OP_SOFTMAX, 0},
    {"LogSoftmax", 1, 1, 1, 1, NULL, map_softmax, SJ_OP_LOG_SOFTMAX, 0},
    /* outputs Mean and InvStdDev are optional */
    {"LayerNormalization", 2, 3, 1, 3, NULL, map_layernorm, SJ_OP_LAYERNORM, 0},
    {"BatchNormalization", 5, 5, 1, 1, NULL, map_batchnorm, SJ_OP_COUNT_, 0},
    {"InstanceNormalization", 3, 3, 1, 1, NULL, map_instancenorm, SJ_OP_COUNT_, 0},
    {"MeanVarianceNormalization", 1, 1, 1, 1, NULL, map_mvn, SJ_OP_COUNT_, 0},
};
const size_t sj__onnx_ops_norm_n = sizeof sj__onnx_ops_norm / sizeof sj__onnx_ops_norm[0];
