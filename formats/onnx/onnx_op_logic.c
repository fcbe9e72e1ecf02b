/* Elementwise ops on values of any dtype (int64, int32 and bool as much as
 * float32): comparisons, And, Or, Xor, Not, IsNaN, IsInf, Where, Cast and
 * CastLike, with their folds for values known at load time. */
#include "formats/onnx/onnx_fold.h"
#include "formats/onnx/onnx_node.h"

#include <string.h>

/* ---- folds ---- */

static sj_status fold_where(sj_onnx_loader *L, const sj_onnx_op *op, sj_onnx_fold *in, int n,
                            sj_onnx_fold *out) {
    (void)op, (void)n;
    int r1, rank;
    int64_t d1[SJ_ONNX_MAX_RANK], dims[SJ_ONNX_MAX_RANK];
    if (!sj__onnx_fold_bcast_shape(&in[1], &in[2], &r1, d1))
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "operand shapes do not broadcast");
    sj_onnx_fold ab = {.rank = r1};
    memcpy(ab.dims, d1, sizeof d1);
    if (!sj__onnx_fold_bcast_shape(&in[0], &ab, &rank, dims))
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "operand shapes do not broadcast");
    SJ_TRY(sj__onnx_fold_alloc(L, out, in[1].dtype, rank, dims));
    for (int64_t i = 0; i < out->numel; i++) {
        sj_onnx_sym c = in[0].e[sj__onnx_fold_bcast_index(&in[0], rank, dims, i)];
        out->e[i] = c.c ? in[1].e[sj__onnx_fold_bcast_index(&in[1], rank, dims, i)]
                        : in[2].e[sj__onnx_fold_bcast_index(&in[2], rank, dims, i)];
    }
    return SJ_OK;
}

static sj_status cast_elems(sj_onnx_loader *L, int32_t to, const sj_onnx_fold *in, sj_onnx_fold *out) {
    SJ_TRY(sj__onnx_fold_alloc(L, out, to, in->rank, in->dims));
    for (int64_t i = 0; i < out->numel; i++) {
        sj_onnx_sym x = in->e[i];
        if (to == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL) {
            int s = sj__onnx_sign_over_n(x);
            if (s == 2) {
                char b[64];
                return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                          "cannot fold the cast of %s to bool: it depends on %s",
                                          sj__onnx_sym_str(L, x, b, 64), sj__onnx_sym_name(L));
            }
            out->e[i] = (sj_onnx_sym){s != 0, 0};
        } else if (to == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 && !x.n) {
            out->e[i] = (sj_onnx_sym){(int32_t)(uint32_t)x.c, 0};
        } else {
            out->e[i] = x;
        }
    }
    return SJ_OK;
}

/* Cast folds to the dtypes a fold carries; others are the graph's. */
static sj_status fold_cast(sj_onnx_loader *L, const sj_onnx_op *op, sj_onnx_fold *in, int n,
                           sj_onnx_fold *out) {
    (void)op, (void)n;
    int64_t to;
    SJ_TRY(sj__onnx_attr_int(L, "to", 0, &to));
    if (to != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 && to != ONNX__TENSOR_PROTO__DATA_TYPE__INT32 &&
        to != ONNX__TENSOR_PROTO__DATA_TYPE__BOOL && to != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return SJ_ONNX_NOT_FOLDED;
    return cast_elems(L, (int32_t)to, &in[0], out);
}

static sj_status fold_cast_like(sj_onnx_loader *L, const sj_onnx_op *op, sj_onnx_fold *in, int n,
                                sj_onnx_fold *out) {
    (void)op, (void)n;
    return cast_elems(L, in[1].dtype, &in[0], out);
}

/* ---- maps ---- */

/* Comparisons and logic, and the float binaries (onnx_op_math.c) after
 * their legacy check: the graph checks the operands' dtypes. */
sj_status sj__onnx_map_binary(sj_onnx_loader *L, const sj_onnx_op *op) {
    sj_value a, b, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &a));
    SJ_TRY(sj__onnx_in_value(L, 1, &b));
    SJ_TRY(sj__onnx_binary(L, op->op, a, b, &y));
    return sj__onnx_def_out(L, 0, y, first);
}

static sj_status map_typed_unary(sj_onnx_loader *L, const sj_onnx_op *op) {
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    SJ_TRY(sj__onnx_unary(L, op->op, x, &y));
    if (op->op == SJ_OP_ISINF) {
        /* detect_negative / detect_positive = 0: and with the other sign */
        int64_t neg_attr, pos_attr;
        SJ_TRY(sj__onnx_attr_int(L, "detect_negative", 1, &neg_attr));
        SJ_TRY(sj__onnx_attr_int(L, "detect_positive", 1, &pos_attr));
        bool neg = neg_attr != 0, pos = pos_attr != 0;
        if (!neg || !pos) {
            sj_value z, side;
            SJ_TRY(sj__onnx_scalar_const(L, 0.0f, &z));
            SJ_TRY(sj__onnx_binary(L, pos ? SJ_OP_GREATER : SJ_OP_LESS, x, z, &side));
            if (!neg && !pos) SJ_TRY(sj__onnx_binary(L, SJ_OP_XOR, y, y, &y));
            else SJ_TRY(sj__onnx_binary(L, SJ_OP_AND, y, side, &y));
        }
    }
    return sj__onnx_def_out(L, 0, y, first);
}

static sj_status map_where(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    sj_value c, a, b, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &c));
    SJ_TRY(sj__onnx_in_value(L, 1, &a));
    SJ_TRY(sj__onnx_in_value(L, 2, &b));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_where(L->g, c, a, b, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* Input 0 as dtype `to`; a cast to its own dtype is the same value. */
static sj_status cast_to(sj_onnx_loader *L, sj_value x, sj_dtype to) {
    sj_value y, first = sj_graph_num_values(L->g);
    if (to == sj__onnx_dtype_of(L, x)) {
        sj_onnx_val *o;
        SJ_TRY(sj__onnx_define(L, L->node->output[0], &o));
        o->v = x;
        return SJ_OK;
    }
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_cast(L->g, x, to, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

static sj_status map_cast(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    sj_value x;
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    if (!sj__onnx_node_attr(L, "to")) return sj__onnx_node_fail(L, SJ_E_PARSE, "needs the attribute 'to'");
    int64_t to_attr;
    sj_dtype to;
    SJ_TRY(sj__onnx_attr_int(L, "to", 0, &to_attr));
    SJ_TRY(sj__onnx_to_dtype(L, to_attr, "cast to", &to));
    return cast_to(L, x, to);
}

static sj_status map_cast_like(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    sj_value x;
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    sj_onnx_val *t;
    SJ_TRY(sj__onnx_in_val(L, 1, &t));
    sj_dtype to;
    if (t->cl != SJ_NO_VALUE) to = sj__onnx_dtype_of(L, t->cl);
    else if (t->v != SJ_NO_VALUE) to = sj__onnx_dtype_of(L, t->v);
    else SJ_TRY(sj__onnx_to_dtype(L, t->c.dtype, "target_type", &to));
    return cast_to(L, x, to);
}

const sj_onnx_op sj__onnx_ops_logic[] = {
    {"Equal", 2, 2, 1, 1, sj__onnx_fold_binary, sj__onnx_map_binary, SJ_OP_EQUAL, 0},
    {"Less", 2, 2, 1, 1, sj__onnx_fold_binary, sj__onnx_map_binary, SJ_OP_LESS, 0},
    {"LessOrEqual", 2, 2, 1, 1, sj__onnx_fold_binary, sj__onnx_map_binary, SJ_OP_LESS_EQUAL, 0},
    {"Greater", 2, 2, 1, 1, sj__onnx_fold_binary, sj__onnx_map_binary, SJ_OP_GREATER, 0},
    {"GreaterOrEqual", 2, 2, 1, 1, sj__onnx_fold_binary, sj__onnx_map_binary, SJ_OP_GREATER_EQUAL, 0},
    {"And", 2, 2, 1, 1, sj__onnx_fold_binary, sj__onnx_map_binary, SJ_OP_AND, 0},
    {"Or", 2, 2, 1, 1, sj__onnx_fold_binary, sj__onnx_map_binary, SJ_OP_OR, 0},
    {"Xor", 2, 2, 1, 1, sj__onnx_fold_binary, sj__onnx_map_binary, SJ_OP_XOR, 0},
    {"Not", 1, 1, 1, 1, sj__onnx_fold_unary, map_typed_unary, SJ_OP_NOT, 0},
    {"IsNaN", 1, 1, 1, 1, NULL, map_typed_unary, SJ_OP_ISNAN, 0},
    {"IsInf", 1, 1, 1, 1, NULL, map_typed_unary, SJ_OP_ISINF, 0},
    {"Where", 3, 3, 1, 1, fold_where, map_where, SJ_OP_WHERE, 0},
    /* a cast of whole floats is exact: it folds without a value in N */
    {"Cast", 1, 1, 1, 1, fold_cast, map_cast, SJ_OP_CAST, SJ_ONNX_FOLD_FLOATS},
    {"CastLike", 2, 2, 1, 1, fold_cast_like, map_cast_like, SJ_OP_CAST, 0},
};
const size_t sj__onnx_ops_logic_n = sizeof sj__onnx_ops_logic / sizeof sj__onnx_ops_logic[0];
