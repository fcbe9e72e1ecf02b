/* Ops that pick the largest element along an axis, spelled with a max
 * reduction, an equality and a position reduction: ArgMax, ArgMin (with
 * keepdims and select_last_index) and Hardmax. Exact: no arithmetic
 * touches the data, only comparisons. */
#include "formats/onnx/onnx_node.h"
#include "formats/onnx/onnx_op.h"

#include <string.h>

/* Positions are float32, the graph's reduction type, which holds every
 * integer up to 2^24 exactly. */
#define POS_EXACT ((int64_t)1 << 24)

/* The position along `axis` of x's first (or, last: its last) largest
 * element, as float32, the axis kept as 1 when keep. */
static sj_status arg_max_pos(sj_onnx_loader *L, sj_value x, int axis, bool last, bool keep,
                             sj_value *out) {
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, x, &s));
    int64_t len = s.dims[axis];
    if (len > POS_EXACT)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                  "axis %d has %lld elements; positions past 2^24 are not exact "
                                  "in float32",
                                  axis, (long long)len);
    sj_value m, eq, pos, none, cand, r;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(L->g, SJ_OP_REDUCE_MAX, x, 1, &axis, true, &m)));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_EQUAL, x, m, &eq));
    /* the first match is the largest negated position: no min reduction
     * needed. A non-match counts as -2^24 - 1 (first) or -1 (last), below
     * every candidate. */
    SJ_TRY(sj__onnx_axis_positions(L, SJ_F32, 0, len, s.rank - axis, &pos));
    if (!last) SJ_TRY(sj__onnx_unary(L, SJ_OP_NEG, pos, &pos));
    SJ_TRY(sj__onnx_fill_scalar(L, SJ_F32, last ? -1.0 : -(double)POS_EXACT - 1, &none));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_where(L->g, eq, pos, none, &cand)));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(L->g, SJ_OP_REDUCE_MAX, cand, 1, &axis, keep, &r)));
    if (!last) SJ_TRY(sj__onnx_unary(L, SJ_OP_NEG, r, &r));
    *out = r;
    return SJ_OK;
}

/* Input 0 as float32, with its shape; SJ_E_UNSUPPORTED for another dtype
 * (integers would go through float32 reductions, exact only below 2^24). */
static sj_status float_input(sj_onnx_loader *L, sj_value *x, sj_shape *s) {
    SJ_TRY(sj__onnx_in_value(L, 0, x));
    sj_dtype t = sj__onnx_dtype_of(L, *x);
    if (t != SJ_F32)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "input has dtype %s; only float32 is supported",
                                  sj_dtype_name(t));
    return sj__onnx_shape_of(L, *x, s);
}

/* ArgMax and ArgMin (the ArgMax of -x: negation keeps ties and order). */
static sj_status map_arg(sj_onnx_loader *L, const sj_onnx_op *op) {
    int64_t axis, keepdims, last;
    SJ_TRY(sj__onnx_attr_int(L, "axis", 0, &axis));
    SJ_TRY(sj__onnx_attr_int(L, "keepdims", 1, &keepdims));
    SJ_TRY(sj__onnx_attr_int(L, "select_last_index", 0, &last));
    sj_value x, r = SJ_NO_VALUE, y, first = sj_graph_num_values(L->g);
    sj_shape s;
    SJ_TRY(float_input(L, &x, &s));
    int ax;
    SJ_TRY(sj__onnx_axis(L, axis, s.rank, s.rank, &ax));
    if (!strcmp(op->name, "ArgMin")) SJ_TRY(sj__onnx_unary(L, SJ_OP_NEG, x, &x));
    SJ_TRY(arg_max_pos(L, x, ax, last != 0, keepdims != 0, &r));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_cast(L->g, r, SJ_I64, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* 1 at the first largest element along axis, 0 elsewhere. */
static sj_status hardmax_axis(sj_onnx_loader *L, sj_value x, const sj_shape *s, int axis,
                              sj_value *out) {
    sj_value r = SJ_NO_VALUE, pos, hit;
    SJ_TRY(arg_max_pos(L, x, axis, false, true, &r));
    SJ_TRY(sj__onnx_axis_positions(L, SJ_F32, 0, s->dims[axis], s->rank - axis, &pos));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_EQUAL, pos, r, &hit));
    return sj__onnx_node_prefix(L, sj_graph_cast(L->g, hit, SJ_F32, out));
}

/* Hardmax-13 works on one axis; before 13 on axes [axis, rank) flattened
 * together (sj__onnx_legacy_rows). */
static sj_status map_hardmax(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    bool legacy = L->opset < 13;
    int64_t axis;
    SJ_TRY(sj__onnx_attr_int(L, "axis", legacy ? 1 : -1, &axis));
    sj_value x, y, first = sj_graph_num_values(L->g);
    sj_shape s;
    SJ_TRY(float_input(L, &x, &s));
    if (s.rank == 0) return sj__onnx_node_fail(L, SJ_E_SHAPE, "input is a scalar; it needs an axis");
    int ax;
    SJ_TRY(sj__onnx_axis(L, axis, s.rank, s.rank, &ax));
    if (!legacy) {
        SJ_TRY(hardmax_axis(L, x, &s, ax, &y));
        return sj__onnx_def_out(L, 0, y, first);
    }
    int single;
    bool sym_inside;
    int64_t rows;
    sj__onnx_legacy_rows(&s, ax, &single, &sym_inside, &rows);
    if (single >= 0) {
        SJ_TRY(hardmax_axis(L, x, &s, single, &y));
        return sj__onnx_def_out(L, 0, y, first);
    }
    if (sym_inside)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                  "opset %d Hardmax flattens axes %d.. into one, which holds the "
                                  "symbolic dim %s",
                                  (int)L->opset, ax, sj_graph_symbol(L->g));
    int64_t flat[SJ_MAX_RANK];
    memcpy(flat, s.dims, sizeof flat);
    flat[ax] = rows;
    sj_shape fs = {ax + 1, {0}};
    memcpy(fs.dims, flat, sizeof fs.dims);
    sj_value f, h;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(L->g, x, ax + 1, flat, &f)));
    SJ_TRY(hardmax_axis(L, f, &fs, ax, &h));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(L->g, h, s.rank, s.dims, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

const sj_onnx_op sj__onnx_ops_select[] = {
    {"ArgMax", 1, 1, 1, 1, NULL, map_arg, SJ_OP_COUNT_, 0},
    {"ArgMin", 1, 1, 1, 1, NULL, map_arg, SJ_OP_COUNT_, 0},
    {"Hardmax", 1, 1, 1, 1, NULL, map_hardmax, SJ_OP_COUNT_, 0},
};
const size_t sj__onnx_ops_select_n = sizeof sj__onnx_ops_select / sizeof sj__onnx_ops_select[0];
