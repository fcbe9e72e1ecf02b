/* Resize (and the older Upsample) onto the graph: nearest, linear and cubic,
 * every coordinate_transformation_mode, nearest_mode, exclude_outside,
 * antialias, axes and keep_aspect_ratio_policy. Resizing is separable, so
 * each resized axis is one gather of its taps through a table made at load
 * (onnx_window.h), weighted by coefficients made at load and summed; where
 * every output reads one tap (nearest) it is the gather alone, exact for
 * any dtype. The coefficients follow the ONNX reference implementation's
 * rules, computed in double and stored as float32. */
#include "formats/onnx/onnx_node.h"
#include "formats/onnx/onnx_op.h"
#include "formats/onnx/onnx_window.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* More taps than this (antialiased downscales by over 32x) are refused. */
#define MAX_TAPS 128

typedef enum { RS_NEAREST, RS_LINEAR, RS_CUBIC } rs_mode;
typedef enum {
    CT_HALF_PIXEL,
    CT_PYTORCH_HALF_PIXEL,
    CT_ALIGN_CORNERS,
    CT_ASYMMETRIC,
    CT_TF_HALF_PIXEL_FOR_NN,
    CT_TF_CROP_AND_RESIZE,
    CT_HALF_PIXEL_SYMMETRIC
} coord_mode;
typedef enum { NM_ROUND_PREFER_FLOOR, NM_ROUND_PREFER_CEIL, NM_FLOOR, NM_CEIL } nearest_mode;
typedef enum { KA_STRETCH, KA_NOT_LARGER, KA_NOT_SMALLER } aspect_policy;

typedef struct resize_attrs {
    rs_mode mode;
    coord_mode coord;
    nearest_mode nearest;
    aspect_policy aspect;
    double cubic_a, extrapolation;
    bool exclude_outside, antialias;
} resize_attrs;

static sj_status read_attrs(sj_onnx_loader *L, bool upsample, resize_attrs *a) {
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const coords[] = {"half_pixel",           "pytorch_half_pixel",
                                         "align_corners",        "asymmetric",
                                         "tf_half_pixel_for_nn", "tf_crop_and_resize",
                                         "half_pixel_symmetric"};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                           "ceil"};
    static const char *const aspects[] = {"stretch", "not_larger", "not_smaller"};
    int v;
    memset(a, 0, sizeof *a);
    /* Upsample and Resize-10 map outputs to inputs as x / scale and take
     * the nearest as its floor (the later modes asymmetric and floor) */
    bool legacy = upsample || L->opset < 11;
    SJ_TRY(sj__onnx_attr_choice(L, "mode", modes, upsample ? 2 : 3, RS_NEAREST, &v));
    a->mode = (rs_mode)v;
    if (legacy) {
        a->coord = CT_ASYMMETRIC;
        a->nearest = NM_FLOOR;
        a->cubic_a = -0.75;
        return SJ_OK;
    }
    SJ_TRY(sj__onnx_attr_choice(L, "coordinate_transformation_mode", coords, 7, CT_HALF_PIXEL, &v));
    a->coord = (coord_mode)v;
    SJ_TRY(sj__onnx_attr_choice(L, "nearest_mode", nearests, 4, NM_ROUND_PREFER_FLOOR, &v));
    a->nearest = (nearest_mode)v;
    SJ_TRY(sj__onnx_attr_choice(L, "keep_aspect_ratio_policy", aspects, 3, KA_STRETCH, &v));
    a->aspect = (aspect_policy)v;
    float f;
    int64_t i;
    SJ_TRY(sj__onnx_attr_float(L, "cubic_coeff_a", -0.75f, &f));
    a->cubic_a = f;
    SJ_TRY(sj__onnx_attr_float(L, "extrapolation_value", 0.0f, &f));
    a->extrapolation = f;
    SJ_TRY(sj__onnx_attr_int(L, "exclude_outside", 0, &i));
    a->exclude_outside = i != 0;
    SJ_TRY(sj__onnx_attr_int(L, "antialias", 0, &i));
    a->antialias = i != 0;
    if (a->antialias && a->mode == RS_NEAREST)
        return sj__onnx_node_fail(L, SJ_E_PARSE, "antialias is not defined for nearest");
    return SJ_OK;
}

/* The taps of one output position: the coefficients of ratio (in (0, 1])
 * at scale; returns how many. */
static int coeffs_of(const resize_attrs *a, double ratio, double scale, double *c) {
    double A = a->cubic_a;
    if (a->mode == RS_NEAREST) {
        bool second;
        if (ratio == floor(ratio)) second = true;
        else if (a->nearest == NM_ROUND_PREFER_FLOOR) second = ratio > 0.5;
        else if (a->nearest == NM_ROUND_PREFER_CEIL) second = ratio >= 0.5;
        else second = a->nearest == NM_CEIL;
        c[0] = !second;
        c[1] = second;
        return 2;
    }
    if (!a->antialias) {
        if (a->mode == RS_LINEAR) {
            c[0] = 1 - ratio;
            c[1] = ratio;
            return 2;
        }
        double r1 = ratio + 1, q = 1 - ratio, q1 = q + 1;
        c[0] = ((A * r1 - 5 * A) * r1 + 8 * A) * r1 - 4 * A;
        c[1] = ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1;
        c[2] = ((A + 2) * q - (A + 3)) * q * q + 1;
        c[3] = ((A * q1 - 5 * A) * q1 + 8 * A) * q1 - 4 * A;
        return 4;
    }
    /* antialiased: the kernel stretched by 1 / scale when downscaling */
    double s = scale < 1 ? scale : 1, sum = 0;
    int n;
    if (a->mode == RS_LINEAR) {
        int64_t start = (int64_t)floor(-1 / s) + 1;
        n = (int)(2 - 2 * start);
        if (n > MAX_TAPS) return -1;
        for (int t = 0; t < n; t++) {
            double x = fabs(((double)(start + t) - ratio) * s);
            c[t] = x < 1 ? 1 - x : 0;
        }
    } else {
        int64_t start = (int64_t)floor(-2 / s) + 1;
        n = (int)(2 - 2 * start);
        if (n > MAX_TAPS) return -1;
        for (int t = 0; t < n; t++) {
            double x = fabs(s * ((double)(start + t) - ratio)), x2 = x * x, x3 = x2 * x;
            c[t] = x <= 1 ? (A + 2) * x3 - (A + 3) * x2 + 1
                   : x < 2 ? A * x3 - 5 * A * x2 + 8 * A * x - 4 * A
                           : 0;
        }
    }
    for (int t = 0; t < n; t++) sum += c[t];
    for (int t = 0; t < n; t++) c[t] /= sum;
    return n;
}

/* Output y's source coordinate; *outside for tf_crop_and_resize past the input. */
static double source_coord(const resize_attrs *a, double y, double scale, int64_t in,
                           int64_t out_int, const double *roi, bool *outside) {
    double out_w = scale * (double)in;
    *outside = false;
    switch (a->coord) {
    case CT_ALIGN_CORNERS: return out_w == 1 ? 0 : y * (double)(in - 1) / (out_w - 1);
    case CT_ASYMMETRIC: return y / scale;
    case CT_TF_HALF_PIXEL_FOR_NN: return (y + 0.5) / scale;
    case CT_PYTORCH_HALF_PIXEL: return out_w == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
    case CT_HALF_PIXEL: return (y + 0.5) / scale - 0.5;
    case CT_HALF_PIXEL_SYMMETRIC: {
        double adjustment = (double)out_int / out_w, center = (double)in / 2;
        return center * (1 - adjustment) + (y + 0.5) / scale - 0.5;
    }
    case CT_TF_CROP_AND_RESIZE: {
        double x = out_w == 1 ? (roi[1] - roi[0]) * (double)(in - 1) / 2
                              : y * (roi[1] - roi[0]) * (double)(in - 1) / (out_w - 1);
        x += roi[0] * (double)(in - 1);
        *outside = x < 0 || x > (double)(in - 1);
        return x;
    }
    }
    return 0;
}

/* One resized axis of x: in -> out entries at scale, roi[2] its region. */
static sj_status resize_axis(sj_onnx_loader *L, const resize_attrs *a, sj_value x, int axis,
                             int rank, const int64_t *dims, int64_t out, double scale,
                             const double *roi, sj_value *res) {
    int64_t in = dims[axis];
    double c[MAX_TAPS];
    int n = coeffs_of(a, 1.0, scale, c);
    if (n < 0)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                  "axis %d: an antialiased downscale by %g needs over %d taps",
                                  axis, 1 / scale, MAX_TAPS);
    int32_t *idx = malloc((size_t)(out * n) * sizeof *idx);
    float *coef = malloc((size_t)(out * n) * sizeof *coef);
    int32_t *one = malloc((size_t)out * sizeof *one);
    if (!idx || !coef || !one) {
        free(idx), free(coef), free(one);
        return sj__onnx_node_fail(L, SJ_E_NOMEM, "out of memory for a resize table");
    }
    bool onehot = true, extrapolates = false;
    int64_t pw = (n + 1) / 2;
    for (int64_t j = 0; j < out; j++) {
        bool outside;
        double xo = source_coord(a, (double)j, scale, in, out, roi, &outside);
        double fl = floor(xo), ratio = xo == fl ? 1.0 : xo - fl;
        coeffs_of(a, ratio, scale, c);
        /* the n nearest entries of the edge-padded input, ties to the left */
        double xp = xo + (double)pw, p = floor(xp), frac = xp - p;
        int64_t off = n % 2 == 0 ? (frac == 0 ? -(n / 2) : -(n / 2) + 1)
                                 : (frac <= 0.5 ? -((n - 1) / 2) : -((n - 1) / 2) + 1);
        int64_t start = (int64_t)p + off - pw;
        if (a->exclude_outside) {
            double sum = 0;
            for (int t = 0; t < n; t++) {
                int64_t at = start + t;
                if (at < 0 || at >= in) c[t] = 0;
                sum += c[t];
            }
            if (sum != 0)
                for (int t = 0; t < n; t++) c[t] /= sum;
        }
        int picked = -1;
        for (int t = 0; t < n; t++) {
            int64_t at = start + t;
            at = at < 0 ? 0 : at >= in ? in - 1 : at;
            idx[j * n + t] = (int32_t)at;
            coef[j * n + t] = (float)c[t];
            if (c[t] == 1 && picked < 0) picked = t;
            else if (c[t] != 0) onehot = false;
        }
        if (picked < 0) onehot = false;
        one[j] = picked >= 0 ? idx[j * n + picked] : 0;
        if (outside) {
            /* the extrapolation value, read once with weight 1 */
            extrapolates = true;
            for (int t = 0; t < n; t++) {
                idx[j * n + t] = (int32_t)in;
                coef[j * n + t] = t == 0;
            }
            one[j] = (int32_t)in;
        }
    }
    sj_status st = SJ_OK;
    sj_value fill = SJ_NO_VALUE, gathered, cv, prod;
    if (extrapolates) {
        int64_t fd[SJ_MAX_RANK];
        memcpy(fd, dims, (size_t)rank * sizeof *fd);
        fd[axis] = 1;
        st = sj__onnx_node_prefix(
            L, sj_graph_fill(L->g, sj__onnx_dtype_of(L, x), a->extrapolation, rank, fd, &fill));
    }
    if (st == SJ_OK && onehot) {
        st = sj__onnx_axis_gather(L, x, axis, one, out, 1, fill, res);
    } else if (st == SJ_OK) {
        st = sj__onnx_axis_gather(L, x, axis, idx, out, n, fill, &gathered);
        int64_t cd[SJ_MAX_RANK + 1] = {out, n};
        int cr = 2;
        for (int i = axis + 1; i < rank; i++) cd[cr++] = 1;
        if (st == SJ_OK) st = sj__onnx_made_param(L, SJ_F32, cr, cd, coef, &cv);
        if (st == SJ_OK) st = sj__onnx_binary(L, SJ_OP_MUL, gathered, cv, &prod);
        int tax = axis + 1;
        if (st == SJ_OK)
            st = sj__onnx_node_prefix(L, sj_graph_reduce(L->g, SJ_OP_REDUCE_SUM, prod, 1, &tax, false, res));
    }
    free(idx), free(coef), free(one);
    return st;
}

/* A constant float input as doubles (scales, roi); *n 0 when absent or empty. */
static sj_status const_floats(sj_onnx_loader *L, int i, const char *what, double *out, int cap,
                              int *n) {
    *n = 0;
    if (!sj__onnx_in_name(L, i)) return SJ_OK;
    sj_onnx_val *v;
    SJ_TRY(sj__onnx_in_val(L, i, &v));
    if (!v->has_const)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                  "%s must be a constant known when the model loads", what);
    if (v->c.numel > cap)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "%s has %lld entries (at most %d)", what,
                                  (long long)v->c.numel, cap);
    for (int64_t k = 0; k < v->c.numel; k++) out[k] = v->c.f ? v->c.f[k] : (double)v->c.i[k];
    *n = (int)v->c.numel;
    return SJ_OK;
}

static sj_status map_resize_common(sj_onnx_loader *L, bool upsample) {
    resize_attrs a;
    SJ_TRY(read_attrs(L, upsample, &a));
    sj_value x, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, x, &s));
    int rank = s.rank;
    if (a.mode != RS_NEAREST && sj__onnx_dtype_of(L, x) != SJ_F32)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "linear and cubic resize X must be float32");
    /* axes (Resize-18): which axes scales, sizes and roi speak of */
    int axes[SJ_MAX_RANK], na = rank;
    for (int i = 0; i < rank; i++) axes[i] = i;
    const int64_t *av;
    size_t an;
    bool have_axes;
    SJ_TRY(sj__onnx_attr_ints(L, "axes", &av, &an, &have_axes));
    if (have_axes) {
        if (an > (size_t)rank)
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "axes has %zu entries for rank %d", an, rank);
        na = (int)an;
        for (int i = 0; i < na; i++) SJ_TRY(sj__onnx_axis(L, av[i], rank, rank, &axes[i]));
    }
    double scales[SJ_MAX_RANK], sizes[SJ_MAX_RANK], roi_in[2 * SJ_MAX_RANK];
    int n_scales = 0, n_sizes = 0, n_roi = 0;
    if (upsample && L->opset < 9) {
        const float *f = NULL;
        const Onnx__AttributeProto *at = sj__onnx_node_attr(L, "scales");
        if (!at) return sj__onnx_node_fail(L, SJ_E_PARSE, "attribute 'scales' is required");
        if (at->n_floats > (size_t)rank)
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "scales has %zu entries for rank %d", at->n_floats, rank);
        f = at->floats;
        n_scales = (int)at->n_floats;
        for (int i = 0; i < n_scales; i++) scales[i] = f[i];
    } else if (upsample || L->opset < 11) {
        SJ_TRY(const_floats(L, 1, "scales", scales, rank, &n_scales));
    } else {
        SJ_TRY(const_floats(L, 1, "roi", roi_in, 2 * rank, &n_roi));
        SJ_TRY(const_floats(L, 2, "scales", scales, rank, &n_scales));
        SJ_TRY(const_floats(L, 3, "sizes", sizes, rank, &n_sizes));
    }
    if ((n_scales > 0) == (n_sizes > 0))
        return sj__onnx_node_fail(L, SJ_E_PARSE, "exactly one of scales and sizes must be given");
    if ((n_scales ? n_scales : n_sizes) != na)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "%s has %d entries; %d axes need %d",
                                  n_scales ? "scales" : "sizes", n_scales ? n_scales : n_sizes, na, na);
    if (n_roi && n_roi != 2 * na)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "roi has %d entries; %d axes need %d", n_roi, na,
                                  2 * na);
    /* per axis of x: scale, output extent and region */
    double scale[SJ_MAX_RANK], roi[SJ_MAX_RANK][2];
    int64_t out[SJ_MAX_RANK];
    for (int d = 0; d < rank; d++) {
        scale[d] = 1, out[d] = s.dims[d], roi[d][0] = 0, roi[d][1] = 1;
    }
    for (int i = 0; i < na; i++) {
        int d = axes[i];
        if (n_roi) roi[d][0] = roi_in[i], roi[d][1] = roi_in[na + i];
        if (sj_dim_is_sym(s.dims[d])) {
            if (n_scales && scales[i] == 1) continue;
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                      "axis %d is the symbolic dim; only constant axes are resized", d);
        }
        if (n_scales) {
            if (!(scales[i] > 0))
                return sj__onnx_node_fail(L, SJ_E_SHAPE, "scales[%d] is %g; scales must be above 0", i, scales[i]);
            scale[d] = scales[i];
            out[d] = (int64_t)(scales[i] * (double)s.dims[d]);
        } else {
            if (!(sizes[i] >= 1))
                return sj__onnx_node_fail(L, SJ_E_SHAPE, "sizes[%d] is %g; sizes must be 1 or more", i, sizes[i]);
            out[d] = (int64_t)sizes[i];
            scale[d] = sizes[i] / (double)s.dims[d];
        }
    }
    if (n_sizes && a.aspect != KA_STRETCH) {
        double k = a.aspect == KA_NOT_LARGER ? INFINITY : 0;
        for (int i = 0; i < na; i++) {
            double sc = scale[axes[i]];
            k = a.aspect == KA_NOT_LARGER ? fmin(k, sc) : fmax(k, sc);
        }
        for (int i = 0; i < na; i++) {
            scale[axes[i]] = k;
            out[axes[i]] = (int64_t)(k * (double)s.dims[axes[i]] + 0.5);
        }
    }
    sj_value y = x;
    for (int d = 0; d < rank; d++) {
        if (sj_dim_is_sym(s.dims[d])) continue;
        if (out[d] < 1 || out[d] > INT32_MAX)
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis %d: output size %lld", d, (long long)out[d]);
        if (fabs(scale[d] - 1) < 1e-9 && out[d] == s.dims[d] && roi[d][0] == 0 && roi[d][1] == 1)
            continue; /* identity along this axis, as the reference skips it */
        SJ_TRY(resize_axis(L, &a, y, d, rank, s.dims, out[d], scale[d], roi[d], &y));
        s.dims[d] = out[d];
    }
    return sj__onnx_def_or_alias(L, x, y, first);
}

static sj_status map_resize(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    return map_resize_common(L, false);
}

static sj_status map_upsample(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    return map_resize_common(L, true);
}

const sj_onnx_op sj__onnx_ops_resize[] = {
    {"Resize", 1, 4, 1, 1, NULL, map_resize, SJ_OP_COUNT_, 0},
    {"Upsample", 1, 2, 1, 1, NULL, map_upsample, SJ_OP_COUNT_, 0},
};
const size_t sj__onnx_ops_resize_n = sizeof sj__onnx_ops_resize / sizeof sj__onnx_ops_resize[0];
