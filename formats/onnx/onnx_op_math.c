/* Elementwise arithmetic onto the graph: the unary float ops, Add, Sub,
 * Mul, Div, Pow (an integer base or exponent too), Mod, Max, Min, Sum,
 * Mean and Clip. The binary ones fold at load time (onnx_fold.c) when
 * their inputs are known then. */
#include "formats/onnx/onnx_fold.h"
#include "formats/onnx/onnx_node.h"

#include <math.h>

static sj_status map_unary(sj_onnx_loader *L, const sj_onnx_op *op) {
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    if (op->op == SJ_OP_LEAKY_RELU) {
        float alpha;
        SJ_TRY(sj__onnx_attr_float(L, "alpha", 0.01f, &alpha));
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_leaky_relu(L->g, x, alpha, &y)));
    } else {
        SJ_TRY(sj__onnx_unary(L, op->op, x, &y));
    }
    return sj__onnx_def_out(L, 0, y, first);
}

static sj_status map_binary(sj_onnx_loader *L, const sj_onnx_op *op) {
    /* Before opset 7, broadcast=1 with `axis` aligned B at that axis of A
     * instead of at the end. */
    if (L->opset < 7 && sj__onnx_node_attr(L, "axis"))
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                  "legacy broadcasting with an 'axis' attribute (opset %lld) is not "
                                  "supported",
                                  (long long)L->opset);
    return sj__onnx_map_binary(L, op);
}

/* Pow with an integer base or exponent (ONNX lets the two differ): computed
 * in float32 and converted to the base's type. Two floats: a plain binary. */
static sj_status map_pow(sj_onnx_loader *L, const sj_onnx_op *op) {
    sj_value a, b, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &a));
    SJ_TRY(sj__onnx_in_value(L, 1, &b));
    sj_dtype ta = sj__onnx_dtype_of(L, a), tb = sj__onnx_dtype_of(L, b);
    if (ta == SJ_F32 && tb == SJ_F32) return map_binary(L, op);
    if (ta == SJ_BOOL || tb == SJ_BOOL)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "Pow of bool values");
    if (ta != SJ_F32) SJ_TRY(sj__onnx_node_prefix(L, sj_graph_cast(L->g, a, SJ_F32, &a)));
    if (tb != SJ_F32) SJ_TRY(sj__onnx_node_prefix(L, sj_graph_cast(L->g, b, SJ_F32, &b)));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_POW, a, b, &y));
    if (ta != SJ_F32) SJ_TRY(sj__onnx_node_prefix(L, sj_graph_cast(L->g, y, ta, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* Mod on integers (fmod=0: the sign of the divisor) or floats (fmod=1). */
static sj_status map_mod(sj_onnx_loader *L, const sj_onnx_op *op) {
    sj_value a, b, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &a));
    SJ_TRY(sj__onnx_in_value(L, 1, &b));
    bool is_float = sj__onnx_dtype_of(L, a) == SJ_F32;
    int64_t fmod_attr;
    SJ_TRY(sj__onnx_attr_int(L, "fmod", 0, &fmod_attr));
    if (is_float && !fmod_attr) return sj__onnx_node_fail(L, SJ_E_PARSE, "float Mod needs fmod=1");
    if (!is_float && fmod_attr)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                  "integer Mod with fmod=1 (sign of the dividend) is not "
                                  "supported; fmod=0 is");
    SJ_TRY(sj__onnx_binary(L, op->op, a, b, &y));
    return sj__onnx_def_out(L, 0, y, first);
}

/* Max and Min take any number of inputs: fold left. Sum and Mean likewise,
 * Mean dividing by their count; one input is the identity. */
static sj_status map_variadic(sj_onnx_loader *L, const sj_onnx_op *op) {
    int n = (int)L->node->n_input;
    bool sum_mean = op->op == SJ_OP_ADD || op->op == SJ_OP_DIV; /* Max, Min: SJ_OP_MAX, SJ_OP_MIN */
    sj_value acc, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &acc));
    for (int i = 1; i < n; i++) {
        sj_value b;
        SJ_TRY(sj__onnx_in_value(L, i, &b));
        SJ_TRY(sj__onnx_binary(L, sum_mean ? SJ_OP_ADD : op->op, acc, b, &acc));
    }
    if (!sum_mean) return sj__onnx_def_out(L, 0, acc, first);
    if (op->op == SJ_OP_DIV && n > 1) SJ_TRY(sj__onnx_binary_c(L, SJ_OP_DIV, acc, (float)n, &acc));
    if (acc < first) return sj__onnx_alias_input(L); /* one input: Sum and Mean are the identity */
    return sj__onnx_def_out(L, 0, acc, first);
}

/* min(max(x, lo), hi): bounds are attributes before opset 11, optional
 * inputs (scalars, constant or computed) from then on. */
static sj_status map_clip(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    sj_value x, lo = SJ_NO_VALUE, hi = SJ_NO_VALUE, y, first = sj_graph_num_values(L->g);
    if (L->opset < 11) {
        SJ_TRY(sj__onnx_check_inputs(L, 1, 1));
        SJ_TRY(sj__onnx_in_value(L, 0, &x));
        float fl, fh;
        SJ_TRY(sj__onnx_attr_float(L, "min", -INFINITY, &fl));
        SJ_TRY(sj__onnx_attr_float(L, "max", INFINITY, &fh));
        if (sj__onnx_node_attr(L, "min")) SJ_TRY(sj__onnx_scalar_const(L, fl, &lo));
        if (sj__onnx_node_attr(L, "max")) SJ_TRY(sj__onnx_scalar_const(L, fh, &hi));
    } else {
        SJ_TRY(sj__onnx_in_value(L, 0, &x));
        SJ_TRY(sj__onnx_in_value_opt(L, 1, &lo));
        SJ_TRY(sj__onnx_in_value_opt(L, 2, &hi));
        for (int i = 1; i <= 2; i++) {
            sj_value b = i == 1 ? lo : hi;
            sj_shape s;
            if (b == SJ_NO_VALUE) continue;
            SJ_TRY(sj__onnx_shape_of(L, b, &s));
            if (sj_shape_numel(&s, 1) != 1 || sj_shape_sym_count(&s))
                return sj__onnx_node_fail(L, SJ_E_SHAPE, "%s must be a scalar", i == 1 ? "min" : "max");
        }
    }
    y = x;
    if (lo != SJ_NO_VALUE) SJ_TRY(sj__onnx_binary(L, SJ_OP_MAX, y, lo, &y));
    if (hi != SJ_NO_VALUE) SJ_TRY(sj__onnx_binary(L, SJ_OP_MIN, y, hi, &y));
    return sj__onnx_def_or_alias(L, x, y, first);
}


const sj_onnx_op sj__onnx_ops_math[] = {
    {"Add", 2, 2, 1, 1, sj__onnx_fold_binary, map_binary, SJ_OP_ADD, 0},
    {"Sub", 2, 2, 1, 1, sj__onnx_fold_binary, map_binary, SJ_OP_SUB, 0},
    {"Mul", 2, 2, 1, 1, sj__onnx_fold_binary, map_binary, SJ_OP_MUL, 0},
    {"Div", 2, 2, 1, 1, sj__onnx_fold_binary, map_binary, SJ_OP_DIV, 0},
    {"Mod", 2, 2, 1, 1, sj__onnx_fold_binary, map_mod, SJ_OP_MOD, 0},
    {"Pow", 2, 2, 1, 1, NULL, map_pow, SJ_OP_POW, 0},
    /* folded with two inputs only */
    {"Max", 1, SJ_ONNX_ANY, 1, 1, sj__onnx_fold_binary, map_variadic, SJ_OP_MAX, 0},
    {"Min", 1, SJ_ONNX_ANY, 1, 1, sj__onnx_fold_binary, map_variadic, SJ_OP_MIN, 0},
    {"Sum", 1, SJ_ONNX_ANY, 1, 1, NULL, map_variadic, SJ_OP_ADD, 0},
    {"Mean", 1, SJ_ONNX_ANY, 1, 1, NULL, map_variadic, SJ_OP_DIV, 0},
    {"Clip", 1, 3, 1, 1, NULL, map_clip, SJ_OP_COUNT_, 0},
    {"Neg", 1, 1, 1, 1, sj__onnx_fold_unary, map_unary, SJ_OP_NEG, 0},
    {"Abs", 1, 1, 1, 1, NULL, map_unary, SJ_OP_ABS, 0},
    {"Exp", 1, 1, 1, 1, NULL, map_unary, SJ_OP_EXP, 0},
    {"Log", 1, 1, 1, 1, NULL, map_unary, SJ_OP_LOG, 0},
    {"Sqrt", 1, 1, 1, 1, NULL, map_unary, SJ_OP_SQRT, 0},
    {"Reciprocal", 1, 1, 1, 1, NULL, map_unary, SJ_OP_RECIPROCAL, 0},
    {"Tanh", 1, 1, 1, 1, NULL, map_unary, SJ_OP_TANH, 0},
    {"Sigmoid", 1, 1, 1, 1, NULL, map_unary, SJ_OP_SIGMOID, 0},
    {"Relu", 1, 1, 1, 1, NULL, map_unary, SJ_OP_RELU, 0},
    {"LeakyRelu", 1, 1, 1, 1, NULL, map_unary, SJ_OP_LEAKY_RELU, 0},
    {"Erf", 1, 1, 1, 1, NULL, map_unary, SJ_OP_ERF, 0},
    {"Sin", 1, 1, 1, 1, NULL, map_unary, SJ_OP_SIN, 0},
    {"Cos", 1, 1, 1, 1, NULL, map_unary, SJ_OP_COS, 0},
    {"Tan", 1, 1, 1, 1, NULL, map_unary, SJ_OP_TAN, 0},
    {"Asin", 1, 1, 1, 1, NULL, map_unary, SJ_OP_ASIN, 0},
    {"Acos", 1, 1, 1, 1, NULL, map_unary, SJ_OP_ACOS, 0},
    {"Atan", 1, 1, 1, 1, NULL, map_unary, SJ_OP_ATAN, 0},
    {"Sinh", 1, 1, 1, 1, NULL, map_unary, SJ_OP_SINH, 0},
    {"Cosh", 1, 1, 1, 1, NULL, map_unary, SJ_OP_COSH, 0},
    {"Asinh", 1, 1, 1, 1, NULL, map_unary, SJ_OP_ASINH, 0},
    {"Acosh", 1, 1, 1, 1, NULL, map_unary, SJ_OP_ACOSH, 0},
    {"Atanh", 1, 1, 1, 1, NULL, map_unary, SJ_OP_ATANH, 0},
    {"Floor", 1, 1, 1, 1, NULL, map_unary, SJ_OP_FLOOR, 0},
    {"Ceil", 1, 1, 1, 1, NULL, map_unary, SJ_OP_CEIL, 0},
    {"Round", 1, 1, 1, 1, NULL, map_unary, SJ_OP_ROUND, 0},
    {"Sign", 1, 1, 1, 1, NULL, map_unary, SJ_OP_SIGN, 0},
};
const size_t sj__onnx_ops_math_n = sizeof sj__onnx_ops_math / sizeof sj__onnx_ops_math[0];
