/* Op spellings, shared by the .sjg text format, messages and printing. */
#include "ir/graph_impl.h"

#include <string.h>

static const char *const op_names[SJ_OP_COUNT_] = {
    [SJ_OP_INPUT] = "input",
    [SJ_OP_PARAM] = "param",
    [SJ_OP_NEG] = "neg",
    [SJ_OP_ABS] = "abs",
    [SJ_OP_EXP] = "exp",
    [SJ_OP_LOG] = "log",
    [SJ_OP_SQRT] = "sqrt",
    [SJ_OP_RSQRT] = "rsqrt",
    [SJ_OP_RECIPROCAL] = "reciprocal",
    [SJ_OP_TANH] = "tanh",
    [SJ_OP_SIGMOID] = "sigmoid",
    [SJ_OP_RELU] = "relu",
    [SJ_OP_LEAKY_RELU] = "leaky_relu",
    [SJ_OP_GELU] = "gelu",
    [SJ_OP_SILU] = "silu",
    [SJ_OP_ERF] = "erf",
    [SJ_OP_ADD] = "add",
    [SJ_OP_SUB] = "sub",
    [SJ_OP_MUL] = "mul",
    [SJ_OP_DIV] = "div",
    [SJ_OP_POW] = "pow",
    [SJ_OP_MAX] = "max",
    [SJ_OP_MIN] = "min",
    [SJ_OP_REDUCE_SUM] = "reduce_sum",
    [SJ_OP_REDUCE_MEAN] = "reduce_mean",
    [SJ_OP_REDUCE_MAX] = "reduce_max",
    [SJ_OP_MATMUL] = "matmul",
    [SJ_OP_GEMM] = "gemm",
    [SJ_OP_SOFTMAX] = "softmax",
    [SJ_OP_LOG_SOFTMAX] = "log_softmax",
    [SJ_OP_LAYERNORM] = "layernorm",
    [SJ_OP_TRANSPOSE] = "transpose",
    [SJ_OP_RESHAPE] = "reshape",
    [SJ_OP_CAST] = "cast",
    [SJ_OP_EQUAL] = "equal",
    [SJ_OP_LESS] = "less",
    [SJ_OP_LESS_EQUAL] = "less_equal",
    [SJ_OP_GREATER] = "greater",
    [SJ_OP_GREATER_EQUAL] = "greater_equal",
    [SJ_OP_AND] = "and",
    [SJ_OP_OR] = "or",
    [SJ_OP_XOR] = "xor",
    [SJ_OP_MOD] = "mod",
    [SJ_OP_NOT] = "not",
    [SJ_OP_ISNAN] = "isnan",
    [SJ_OP_ISINF] = "isinf",
    [SJ_OP_WHERE] = "where",
    [SJ_OP_GATHER] = "gather",
    [SJ_OP_RANGE] = "range",
    [SJ_OP_FILL] = "fill",
    [SJ_OP_SIN] = "sin",
    [SJ_OP_COS] = "cos",
    [SJ_OP_TAN] = "tan",
    [SJ_OP_ASIN] = "asin",
    [SJ_OP_ACOS] = "acos",
    [SJ_OP_ATAN] = "atan",
    [SJ_OP_SINH] = "sinh",
    [SJ_OP_COSH] = "cosh",
    [SJ_OP_ASINH] = "asinh",
    [SJ_OP_ACOSH] = "acosh",
    [SJ_OP_ATANH] = "atanh",
    [SJ_OP_FLOOR] = "floor",
    [SJ_OP_CEIL] = "ceil",
    [SJ_OP_ROUND] = "round",
    [SJ_OP_SIGN] = "sign",
    [SJ_OP_SLICE] = "slice",
    [SJ_OP_CONCAT] = "concat",
    [SJ_OP_EXPAND] = "expand",
    [SJ_OP_TRILU] = "trilu",
    [SJ_OP_GATHER_ELEMENTS] = "gather_elements",
    [SJ_OP_GATHER_ND] = "gather_nd",
};

/* "?" rather than NULL so a bad op inside an error message prints safely. */
const char *sj_op_name(sj_op op) {
    if ((int)op < 0 || op >= SJ_OP_COUNT_ || !op_names[op]) return "?";
    return op_names[op];
}

sj_status sj_op_from_name(const char *name, sj_op *out) {
    if (!name || !out) return SJ_E_INVALID_ARG;
    for (int i = 0; i < SJ_OP_COUNT_; i++)
        if (op_names[i] && strcmp(op_names[i], name) == 0) {
            *out = (sj_op)i;
            return SJ_OK;
        }
    return SJ_E_NOT_FOUND;
}

size_t sj_dtype_size(sj_dtype t) {
    switch (t) {
    case SJ_F32: return 4;
    case SJ_I64: return 8;
    case SJ_I32: return 4;
    case SJ_BOOL: return 1;
    default: return 0;
    }
}

const char *sj_dtype_name(sj_dtype t) {
    switch (t) {
    case SJ_F32: return "float32";
    case SJ_I64: return "int64";
    case SJ_I32: return "int32";
    case SJ_BOOL: return "bool";
    default: return "?";
    }
}

sj_status sj_dtype_from_name(const char *name, sj_dtype *out) {
    if (!name || !out) return SJ_E_INVALID_ARG;
    for (int t = 0; t < SJ_DTYPE_COUNT_; t++)
        if (strcmp(sj_dtype_name((sj_dtype)t), name) == 0) {
            *out = (sj_dtype)t;
            return SJ_OK;
        }
    return SJ_E_NOT_FOUND;
}
