/* CumSum onto the graph, for every dtype and along any axis, the symbolic
 * dim included (position ids as a running sum of the attention mask).
 *
 * It is a Hillis-Steele scan: y += y shifted by 1, 2, 4, ... along the
 * axis, each shift a Gather at positions i - s (clamped, so it never reads
 * outside the axis or into padding) with positions below 0 selected to 0.
 * Integers stay integers (exact, unlike a masked float32 sum); a float
 * sum is added up in a tree order rather than left to right, which can
 * differ from a sequential sum in the last bits. Along a constant axis of
 * length L that is ceil(log2 L) steps; along the symbolic dim, whose
 * extent is only known per request, enough steps for SJ_MAX_EXTENT (the
 * steps past the active extent select nothing and leave y as it is).
 * reverse flips the axis before and after; exclusive shifts the inclusive
 * sum by one more. */
#include "formats/onnx/onnx_node.h"
#include "formats/onnx/onnx_op.h"

/* y shifted by s along axis (len long, constant or symbolic): y[i - s],
 * and 0 where i < s. */
static sj_status shifted(sj_onnx_loader *L, sj_value y, int axis, int rank, int64_t len, int64_t s,
                         sj_value *out) {
    sj_graph *g = L->g;
    sj_value at, from, zero_i, inside, picked, zero;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_range(g, SJ_I64, (double)-s, 1, len, &at)));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_gather(g, y, at, axis, &picked)));
    SJ_TRY(sj__onnx_axis_positions(L, SJ_I64, (double)-s, len, rank - axis, &from));
    SJ_TRY(sj__onnx_fill_scalar(L, SJ_I64, 0, &zero_i));
    SJ_TRY(sj__onnx_binary(L, SJ_OP_GREATER_EQUAL, from, zero_i, &inside));
    SJ_TRY(sj__onnx_fill_scalar(L, sj__onnx_dtype_of(L, y), 0, &zero));
    return sj__onnx_node_prefix(L, sj_graph_where(g, inside, picked, zero, out));
}

/* x with the axis walked backwards. */
static sj_status flipped(sj_onnx_loader *L, sj_value x, const sj_shape *s, int axis, sj_value *out) {
    sj_slice_axis axes[SJ_MAX_RANK];
    for (int i = 0; i < s->rank; i++) axes[i] = (sj_slice_axis){0, 0, 1, s->dims[i]};
    int64_t len = s->dims[axis];
    axes[axis] = len == SJ_DIM_SYM ? (sj_slice_axis){-1, 1, -1, SJ_DIM_SYM}
                                   : (sj_slice_axis){len - 1, 0, -1, len};
    return sj__onnx_node_prefix(L, sj_graph_slice(L->g, x, axes, out));
}

static sj_status map_cumsum(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    int64_t exclusive, reverse;
    SJ_TRY(sj__onnx_attr_int(L, "exclusive", 0, &exclusive));
    SJ_TRY(sj__onnx_attr_int(L, "reverse", 0, &reverse));
    sj_onnx_val *av;
    SJ_TRY(sj__onnx_in_val(L, 1, &av));
    if (!av->has_const || !av->c.i || av->c.numel != 1 || av->c.rank > 1)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                  "axis '%s' must be one integer known when the model loads%s",
                                  av->name, av->has_const ? "" : " (it is computed at run time)");
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, x, &s));
    int ax;
    SJ_TRY(sj__onnx_axis(L, av->c.i[0], s.rank, s.rank, &ax));
    int64_t len = s.dims[ax], reach = len == SJ_DIM_SYM ? SJ_MAX_EXTENT : len;
    if (sj_dim_is_sym(len) && len != SJ_DIM_SYM)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                  "axis %d is %lld*%s; a cumulative sum runs along a constant axis "
                                  "or the symbolic dim itself",
                                  ax, (long long)sj_dim_factor(len), sj_graph_symbol(L->g));
    y = x;
    if (reverse) SJ_TRY(flipped(L, y, &s, ax, &y));
    for (int64_t step = 1; step < reach; step *= 2) {
        sj_value sh;
        SJ_TRY(shifted(L, y, ax, s.rank, len, step, &sh));
        SJ_TRY(sj__onnx_binary(L, SJ_OP_ADD, y, sh, &y));
    }
    if (exclusive) SJ_TRY(shifted(L, y, ax, s.rank, len, 1, &y));
    if (reverse) SJ_TRY(flipped(L, y, &s, ax, &y));
    return sj__onnx_def_or_alias(L, x, y, first);
}

const sj_onnx_op sj__onnx_ops_scan[] = {
    {"CumSum", 2, 2, 1, 1, NULL, map_cumsum, SJ_OP_COUNT_, 0},
};
const size_t sj__onnx_ops_scan_n = sizeof sj__onnx_ops_scan / sizeof sj__onnx_ops_scan[0];
