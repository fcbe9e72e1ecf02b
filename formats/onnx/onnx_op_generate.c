/* Ops that make a tensor from positions: EyeLike (ones on a diagonal of a
 * 2-D shape) and OneHot (a depth-long axis that is `on` at each index and
 * `off` elsewhere), both as a comparison of ranges, selected or cast. */
#include "formats/onnx/onnx_node.h"
#include "formats/onnx/onnx_op.h"

/* Converts cond (bool) to dtype: 1 where true, 0 where false. */
static sj_status bool_to(sj_onnx_loader *L, sj_value cond, sj_dtype dtype, sj_value *out) {
    if (dtype == SJ_BOOL) {
        *out = cond;
        return SJ_OK;
    }
    return sj__onnx_node_prefix(L, sj_graph_cast(L->g, cond, dtype, out));
}

/* EyeLike: y[i][j] = (j == i + k), of x's shape, as `dtype` (x's by default). */
static sj_status map_eyelike(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    int64_t k, dt;
    SJ_TRY(sj__onnx_attr_int(L, "k", 0, &k));
    sj_value x, rows, cols, eq, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    sj_dtype dtype = sj__onnx_dtype_of(L, x);
    if (sj__onnx_node_attr(L, "dtype")) {
        SJ_TRY(sj__onnx_attr_int(L, "dtype", 0, &dt));
        SJ_TRY(sj__onnx_to_dtype(L, dt, "dtype", &dtype));
    }
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, x, &s));
    if (s.rank != 2)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "input has rank %d; EyeLike takes a 2-D tensor",
                                  s.rank);
    SJ_TRY(sj__onnx_axis_positions(L, SJ_I64, (double)k, s.dims[0], 2, &rows)); /* [R, 1]: i + k */
    SJ_TRY(sj__onnx_axis_positions(L, SJ_I64, 0, s.dims[1], 1, &cols));         /* [C]: j */
    SJ_TRY(sj__onnx_binary(L, SJ_OP_EQUAL, cols, rows, &eq));
    SJ_TRY(bool_to(L, eq, dtype, &y));
    return sj__onnx_def_out(L, 0, y, first);
}

/* OneHot-9/11: indices of any number type (floats truncated, as the
 * reference casts them), depth a constant scalar, values [off, on]. An
 * index in [-depth, 0) counts from the end; one outside [-depth, depth)
 * gives a row of `off`. */
static sj_status map_onehot(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    int64_t axis;
    SJ_TRY(sj__onnx_attr_int(L, "axis", -1, &axis));
    sj_onnx_val *dv;
    SJ_TRY(sj__onnx_in_val(L, 1, &dv));
    if (!dv->has_const || dv->c.numel != 1 || dv->c.rank > 1)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                  "depth '%s' must be one number known when the model loads%s",
                                  dv->name, dv->has_const ? "" : " (it is computed at run time)");
    double depth_v = dv->c.f ? (double)dv->c.f[0] : (double)dv->c.i[0];
    if (!(depth_v >= 1) || depth_v > (double)SJ_MAX_ELEMENTS)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "depth is %g; it must be at least 1", depth_v);
    int64_t depth = (int64_t)depth_v;
    sj_value ix, vals, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &ix));
    SJ_TRY(sj__onnx_in_value(L, 2, &vals));
    sj_shape is, vs;
    SJ_TRY(sj__onnx_shape_of(L, ix, &is));
    SJ_TRY(sj__onnx_shape_of(L, vals, &vs));
    if (vs.rank != 1 || vs.dims[0] != 2)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "values must be [2] (off, on); they have rank %d%s",
                                  vs.rank, vs.rank == 1 ? " and another length" : "");
    if (is.rank + 1 > SJ_MAX_RANK)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "indices have rank %d; the result would exceed %d",
                                  is.rank, SJ_MAX_RANK);
    int ax;
    SJ_TRY(sj__onnx_axis(L, axis, is.rank + 1, is.rank + 1, &ax));
    sj_graph *g = L->g;
    sj_value i64 = ix, neg, zero, d, wrapped, col, pos, hit, on, off, y;
    if (sj__onnx_dtype_of(L, ix) != SJ_I64)
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_cast(g, ix, SJ_I64, &i64)));
    SJ_TRY(sj__onnx_fill_scalar(L, SJ_I64, 0, &zero));
    SJ_TRY(sj__onnx_fill_scalar(L, SJ_I64, (double)depth, &d));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_LESS, i64, zero, &neg));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_ADD, i64, d, &wrapped));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_where(g, neg, wrapped, i64, &i64)));
    /* indices with the new axis in, as 1, against positions [depth, 1, ...] */
    int64_t dims[SJ_MAX_RANK];
    for (int i = 0, j = 0; i <= is.rank; i++) dims[i] = i == ax ? 1 : is.dims[j++];
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(g, i64, is.rank + 1, dims, &col)));
    SJ_TRY(sj__onnx_axis_positions(L, SJ_I64, 0, depth, is.rank + 1 - ax, &pos));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_EQUAL, col, pos, &hit));
    sj_slice_axis pick = {1, 0, 1, 1};
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_slice(g, vals, &pick, &on)));
    pick.start = 0;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_slice(g, vals, &pick, &off)));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_where(g, hit, on, off, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

const sj_onnx_op sj__onnx_ops_generate[] = {
    {"EyeLike", 1, 1, 1, 1, NULL, map_eyelike, SJ_OP_COUNT_, 0},
    {"OneHot", 3, 3, 1, 1, NULL, map_onehot, SJ_OP_COUNT_, 0},
};
const size_t sj__onnx_ops_generate_n = sizeof sj__onnx_ops_generate / sizeof sj__onnx_ops_generate[0];
