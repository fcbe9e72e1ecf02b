/* Activations with attributes, spelled with the graph's elementwise ops:
 * Gelu (erf or tanh form), Elu, Selu, Celu, HardSigmoid, HardSwish,
 * Softplus, Softsign and PRelu; ThresholdedRelu and Shrink as selects. The chains use max/min/exp, which keep NaN. */
#include "formats/onnx/onnx_node.h"
#include "formats/onnx/onnx_op.h"

#include <math.h>
#include <string.h>

/* Gelu-20: approximate="none" is the erf form, "tanh" is
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
static sj_status map_gelu(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    const char *v;
    size_t len;
    bool present, tanh_form = false;
    SJ_TRY(sj__onnx_attr_string(L, "approximate", &v, &len, &present));
    if (present) {
        if (len == 4 && !memcmp(v, "tanh", 4))
            tanh_form = true;
        else if (!(len == 4 && !memcmp(v, "none", 4)))
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                      "approximate='%.*s' is not one of 'none', 'tanh'",
                                      (int)(len > 32 ? 32 : len), v);
    }
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    if (!tanh_form) {
        SJ_TRY(sj__onnx_unary(L, SJ_OP_GELU, x, &y));
        return sj__onnx_def_out(L, 0, y, first);
    }
    sj_value x3, inner, t, h;
    SJ_TRY(sj__onnx_binary(L, SJ_OP_MUL, x, x, &x3));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_MUL, x3, x, &x3));
    SJ_TRY(sj__onnx_binary_c(L, SJ_OP_MUL, x3, 0.044715f, &x3));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_ADD, x, x3, &inner));
    SJ_TRY(sj__onnx_binary_c(L, SJ_OP_MUL, inner, (float)sqrt(2.0 / M_PI), &inner));
    SJ_TRY(sj__onnx_unary(L, SJ_OP_TANH, inner, &t));
    SJ_TRY(sj__onnx_binary_c(L, SJ_OP_ADD, t, 1.0f, &t));
    SJ_TRY(sj__onnx_binary_c(L, SJ_OP_MUL, x, 0.5f, &h));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_MUL, h, t, &y));
    return sj__onnx_def_out(L, 0, y, first);
}

/* The activations of one input and float attributes, by op name. */
static sj_status map_activation(sj_onnx_loader *L, const sj_onnx_op *row) {
    const char *op = row->name;
    sj_value x, y, pos, neg, t, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    float alpha, beta, gamma;
    if (!strcmp(op, "Elu") || !strcmp(op, "Selu")) {
        bool selu = op[0] == 'S';
        SJ_TRY(sj__onnx_attr_float(L, "alpha", selu ? 1.67326319217681884765625f : 1.0f, &alpha));
        SJ_TRY(sj__onnx_attr_float(L, "gamma", 1.05070102214813232421875f, &gamma));
        /* max(x, 0) + alpha (exp(min(x, 0)) - 1) */
        SJ_TRY(sj__onnx_binary_c(L, SJ_OP_MAX, x, 0.0f, &pos));
        SJ_TRY(sj__onnx_binary_c(L, SJ_OP_MIN, x, 0.0f, &neg));
        SJ_TRY(sj__onnx_unary(L, SJ_OP_EXP, neg, &t));
        SJ_TRY(sj__onnx_binary_c(L, SJ_OP_SUB, t, 1.0f, &t));
        SJ_TRY(sj__onnx_binary_c(L, SJ_OP_MUL, t, alpha, &t));
        SJ_TRY(sj__onnx_binary(L, SJ_OP_ADD, pos, t, &y));
        if (selu) SJ_TRY(sj__onnx_binary_c(L, SJ_OP_MUL, y, gamma, &y));
    } else if (!strcmp(op, "Celu")) {
        SJ_TRY(sj__onnx_attr_float(L, "alpha", 1.0f, &alpha));
        /* max(0, x) + min(0, alpha (exp(x / alpha) - 1)) */
        SJ_TRY(sj__onnx_binary_c(L, SJ_OP_MAX, x, 0.0f, &pos));
        SJ_TRY(sj__onnx_binary_c(L, SJ_OP_DIV, x, alpha, &t));
        SJ_TRY(sj__onnx_unary(L, SJ_OP_EXP, t, &t));
        SJ_TRY(sj__onnx_binary_c(L, SJ_OP_SUB, t, 1.0f, &t));
        SJ_TRY(sj__onnx_binary_c(L, SJ_OP_MUL, t, alpha, &t));
        SJ_TRY(sj__onnx_binary_c(L, SJ_OP_MIN, t, 0.0f, &neg));
        SJ_TRY(sj__onnx_binary(L, SJ_OP_ADD, pos, neg, &y));
    } else if (!strcmp(op, "HardSigmoid") || !strcmp(op, "HardSwish")) {
        bool swish = !strcmp(op, "HardSwish");
        SJ_TRY(sj__onnx_attr_float(L, "alpha", swish ? 1.0f / 6.0f : 0.2f, &alpha));
        SJ_TRY(sj__onnx_attr_float(L, "beta", 0.5f, &beta));
        /* max(0, min(1, alpha x + beta)), times x for HardSwish */
        SJ_TRY(sj__onnx_binary_c(L, SJ_OP_MUL, x, alpha, &t));
        SJ_TRY(sj__onnx_binary_c(L, SJ_OP_ADD, t, beta, &t));
        SJ_TRY(sj__onnx_binary_c(L, SJ_OP_MIN, t, 1.0f, &t));
        SJ_TRY(sj__onnx_binary_c(L, SJ_OP_MAX, t, 0.0f, &y));
        if (swish) SJ_TRY(sj__onnx_binary(L, SJ_OP_MUL, x, y, &y));
    } else if (!strcmp(op, "Softplus")) {
        SJ_TRY(sj__onnx_unary(L, SJ_OP_EXP, x, &t));
        SJ_TRY(sj__onnx_binary_c(L, SJ_OP_ADD, t, 1.0f, &t));
        SJ_TRY(sj__onnx_unary(L, SJ_OP_LOG, t, &y));
    } else if (!strcmp(op, "Softsign")) {
        SJ_TRY(sj__onnx_unary(L, SJ_OP_ABS, x, &t));
        SJ_TRY(sj__onnx_binary_c(L, SJ_OP_ADD, t, 1.0f, &t));
        SJ_TRY(sj__onnx_binary(L, SJ_OP_DIV, x, t, &y));
    } else {
        return sj__onnx_node_fail(L, SJ_E_INTERNAL, "no activation mapper for '%s'", op);
    }
    return sj__onnx_def_out(L, 0, y, first);
}

/* PRelu: max(x, 0) + slope * min(x, 0), slope broadcast to x. */
static sj_status map_prelu(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    sj_value x, slope, pos, neg, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    SJ_TRY(sj__onnx_in_value(L, 1, &slope));
    SJ_TRY(sj__onnx_binary_c(L, SJ_OP_MAX, x, 0.0f, &pos));
    SJ_TRY(sj__onnx_binary_c(L, SJ_OP_MIN, x, 0.0f, &neg));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_MUL, slope, neg, &neg));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_ADD, pos, neg, &y));
    sj_shape xs, ys;
    SJ_TRY(sj__onnx_shape_of(L, x, &xs));
    SJ_TRY(sj__onnx_shape_of(L, y, &ys));
    if (xs.rank != ys.rank || memcmp(xs.dims, ys.dims, sizeof(int64_t) * (size_t)xs.rank))
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "slope does not broadcast to the shape of x");
    return sj__onnx_def_out(L, 0, y, first);
}

/* ThresholdedRelu: x where x > alpha, else 0. Shrink: x + bias below
 * -lambd, x - bias above lambd, else 0. Selects, so NaN compares false
 * and gives 0, as the reference's masks do. */
static sj_status map_threshold(sj_onnx_loader *L, const sj_onnx_op *row) {
    sj_value x, zero, above, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    SJ_TRY(sj__onnx_fill_scalar(L, SJ_F32, 0, &zero));
    if (!strcmp(row->name, "ThresholdedRelu")) {
        float alpha;
        SJ_TRY(sj__onnx_attr_float(L, "alpha", 1.0f, &alpha));
        SJ_TRY(sj__onnx_binary_c(L, SJ_OP_GREATER, x, alpha, &above));
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_where(L->g, above, x, zero, &y)));
        return sj__onnx_def_out(L, 0, y, first);
    }
    float lambd, bias;
    SJ_TRY(sj__onnx_attr_float(L, "lambd", 0.5f, &lambd));
    SJ_TRY(sj__onnx_attr_float(L, "bias", 0.0f, &bias));
    sj_value below, lo, hi;
    SJ_TRY(sj__onnx_binary_c(L, SJ_OP_LESS, x, -lambd, &below));
    SJ_TRY(sj__onnx_binary_c(L, SJ_OP_GREATER, x, lambd, &above));
    SJ_TRY(sj__onnx_binary_c(L, SJ_OP_ADD, x, bias, &lo));
    SJ_TRY(sj__onnx_binary_c(L, SJ_OP_SUB, x, bias, &hi));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_where(L->g, above, hi, zero, &y)));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_where(L->g, below, lo, y, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

const sj_onnx_op sj__onnx_ops_activation[] = {
    {"ThresholdedRelu", 1, 1, 1, 1, NULL, map_threshold, SJ_OP_COUNT_, 0},
    {"Shrink", 1, 1, 1, 1, NULL, map_threshold, SJ_OP_COUNT_, 0},
    {"Gelu", 1, 1, 1, 1, NULL, map_gelu, SJ_OP_GELU, 0},
    {"Elu", 1, 1, 1, 1, NULL, map_activation, SJ_OP_COUNT_, 0},
    {"Selu", 1, 1, 1, 1, NULL, map_activation, SJ_OP_COUNT_, 0},
    {"Celu", 1, 1, 1, 1, NULL, map_activation, SJ_OP_COUNT_, 0},
    {"HardSigmoid", 1, 1, 1, 1, NULL, map_activation, SJ_OP_COUNT_, 0},
    {"HardSwish", 1, 1, 1, 1, NULL, map_activation, SJ_OP_COUNT_, 0},
    {"Softplus", 1, 1, 1, 1, NULL, map_activation, SJ_OP_COUNT_, 0},
    {"Softsign", 1, 1, 1, 1, NULL, map_activation, SJ_OP_COUNT_, 0},
    {"PRelu", 2, 2, 1, 1, NULL, map_prelu, SJ_OP_COUNT_, 0},
};
const size_t sj__onnx_ops_activation_n =
    sizeof sj__onnx_ops_activation / sizeof sj__onnx_ops_activation[0];
