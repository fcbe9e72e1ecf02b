/* Pad onto the graph (constant, reflect, edge and wrap modes; negative pads
 * crop): one gather per padded axis through an index table made at load
 * (onnx_window.h), a constant pad reading one appended slab of the value. */
#include "formats/onnx/onnx_node.h"
#include "formats/onnx/onnx_op.h"
#include "formats/onnx/onnx_window.h"

#include <stdlib.h>
#include <string.h>

typedef enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP } pad_mode;

static sj_status read_mode(sj_onnx_loader *L, pad_mode *out) {
    static const char *const names[] = {"constant", "reflect", "edge", "wrap"};
    int m;
    SJ_TRY(sj__onnx_attr_choice(L, "mode", names, 4, PAD_CONSTANT, &m));
    *out = (pad_mode)m;
    return SJ_OK;
}

/* Where entry j of an axis padded by b in front reads, in an input of len
 * entries; len itself for the constant. */
static int32_t source_of(pad_mode mode, int64_t j, int64_t b, int64_t len) {
    int64_t s = j - b;
    if (s >= 0 && s < len) return (int32_t)s;
    switch (mode) {
    case PAD_CONSTANT: return (int32_t)len;
    case PAD_EDGE: return (int32_t)(s < 0 ? 0 : len - 1);
    case PAD_WRAP: return (int32_t)(((s % len) + len) % len);
    case PAD_REFLECT:
        if (len == 1) return 0;
        {
            int64_t period = 2 * (len - 1), r = ((s % period) + period) % period;
            return (int32_t)(r < len ? r : period - r);
        }
    }
    return 0;
}

/* The pads per axis, begin[] and end[] over x's rank: from the attribute
 * (opset < 11) or the constant inputs pads and axes. */
static sj_status read_pads(sj_onnx_loader *L, int rank, int64_t *begin, int64_t *end) {
    memset(begin, 0, (size_t)rank * sizeof *begin);
    memset(end, 0, (size_t)rank * sizeof *end);
    const int64_t *pv;
    size_t np;
    int axes[SJ_MAX_RANK], na = rank;
    for (int i = 0; i < rank; i++) axes[i] = i;
    if (L->opset < 11) {
        bool present;
        SJ_TRY(sj__onnx_attr_ints(L, "pads", &pv, &np, &present));
        if (!present) return sj__onnx_node_fail(L, SJ_E_PARSE, "attribute 'pads' is required");
    } else {
        const sj_onnx_tensor *t;
        SJ_TRY(sj__onnx_in_ints(L, 1, "pads", &t));
        pv = t->i;
        np = (size_t)t->numel;
        if (sj__onnx_in_name(L, 3)) {
            const sj_onnx_tensor *at;
            SJ_TRY(sj__onnx_in_ints(L, 3, "axes", &at));
            if (at->numel > rank)
                return sj__onnx_node_fail(L, SJ_E_SHAPE, "axes has %lld entries for rank %d",
                                          (long long)at->numel, rank);
            na = (int)at->numel;
            for (int i = 0; i < na; i++) {
                SJ_TRY(sj__onnx_axis(L, at->i[i], rank, rank, &axes[i]));
                for (int j = 0; j < i; j++)
                    if (axes[j] == axes[i])
                        return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis %d is listed twice", axes[i]);
            }
        }
    }
    if (np != 2 * (size_t)na)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "pads has %zu entries; %d axes need %d", np, na,
                                  2 * na);
    for (int i = 0; i < na; i++) {
        begin[axes[i]] = pv[i];
        end[axes[i]] = pv[na + i];
    }
    return SJ_OK;
}

/* The constant a constant pad writes, as a slab of shape dims (x's with
 * the padded axis 1): a fill when the value is known at load (the
 * attribute, or a constant input 2), else input 2 broadcast. */
static sj_status pad_slab(sj_onnx_loader *L, sj_value x, int rank, const int64_t *dims,
                          sj_value *out) {
    sj_dtype dt = sj__onnx_dtype_of(L, x);
    double value = 0;
    if (L->opset < 11) {
        float f;
        SJ_TRY(sj__onnx_attr_float(L, "value", 0.0f, &f));
        value = f;
    } else if (sj__onnx_in_name(L, 2)) {
        sj_onnx_val *cv;
        SJ_TRY(sj__onnx_in_val(L, 2, &cv));
        if (!cv->has_const) {
            sj_value v, one;
            int64_t ones[SJ_MAX_RANK];
            for (int i = 0; i < rank; i++) ones[i] = 1;
            SJ_TRY(sj__onnx_in_value(L, 2, &v));
            if (sj__onnx_dtype_of(L, v) != dt)
                return sj__onnx_node_fail(L, SJ_E_SHAPE, "constant_value's dtype is not data's");
            SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(L->g, v, rank, ones, &one)));
            return sj__onnx_node_prefix(L, sj_graph_expand(L->g, one, rank, dims, out));
        }
        if (cv->c.numel != 1)
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "constant_value has %lld elements, not one",
                                      (long long)cv->c.numel);
        value = cv->c.f ? (double)cv->c.f[0] : (double)cv->c.i[0];
    }
    return sj__onnx_node_prefix(L, sj_graph_fill(L->g, dt, value, rank, dims, out));
}

static sj_status map_pad(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    pad_mode mode;
    SJ_TRY(read_mode(L, &mode));
    sj_value x, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, x, &s));
    int64_t begin[SJ_MAX_RANK], end[SJ_MAX_RANK];
    SJ_TRY(read_pads(L, s.rank, begin, end));
    sj_value y = x;
    for (int a = 0; a < s.rank; a++) {
        if (!begin[a] && !end[a]) continue;
        int64_t len = s.dims[a];
        if (sj_dim_is_sym(len))
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                      "axis %d is the symbolic dim; only constant axes are padded", a);
        int64_t out_len = len + begin[a] + end[a];
        if (out_len < 1 || out_len > INT32_MAX)
            return sj__onnx_node_fail(L, SJ_E_SHAPE,
                                      "axis %d of %lld padded by %lld and %lld has %lld entries",
                                      a, (long long)len, (long long)begin[a], (long long)end[a],
                                      (long long)out_len);
        int32_t *idx = malloc((size_t)out_len * sizeof *idx);
        if (!idx) return sj__onnx_node_fail(L, SJ_E_NOMEM, "out of memory for a pad's table");
        bool reads_fill = false;
        for (int64_t j = 0; j < out_len; j++) {
            idx[j] = source_of(mode, j, begin[a], len);
            reads_fill = reads_fill || idx[j] == len;
        }
        sj_value fill = SJ_NO_VALUE;
        sj_status st = SJ_OK;
        if (reads_fill) {
            int64_t dims[SJ_MAX_RANK];
            memcpy(dims, s.dims, sizeof dims);
            dims[a] = 1;
            st = pad_slab(L, x, s.rank, dims, &fill);
        }
        if (st == SJ_OK) st = sj__onnx_axis_gather(L, y, a, idx, out_len, 1, fill, &y);
        free(idx);
        SJ_TRY(st);
        s.dims[a] = out_len;
    }
    return sj__onnx_def_or_alias(L, x, y, first);
}

const sj_onnx_op sj__onnx_ops_pad[] = {
    {"Pad", 1, 4, 1, 1, NULL, map_pad, SJ_OP_COUNT_, 0},
};
const size_t sj__onnx_ops_pad_n = sizeof sj__onnx_ops_pad / sizeof sj__onnx_ops_pad[0];
