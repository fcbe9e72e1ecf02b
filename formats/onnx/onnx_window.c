/* Window geometry and the tap gather (onnx_window.h). */
#include "formats/onnx/onnx_window.h"
#include "formats/onnx/onnx_node.h"

#include <stdlib.h>
#include <string.h>

/* The index table may not pass this many entries (1 GiB of int32): a
 * window so large is a mistake, and the gather would be the whole model. */
#define MAX_TABLE ((int64_t)1 << 28)

/* An ints attribute of exactly n entries each >= lo, or def when absent. */
static sj_status read_ints(sj_onnx_loader *L, const char *name, int n, int64_t lo, int64_t def,
                           int64_t *out) {
    const int64_t *v;
    size_t len;
    bool present;
    SJ_TRY(sj__onnx_attr_ints(L, name, &v, &len, &present));
    if (!present) {
        for (int i = 0; i < n; i++) out[i] = def;
        return SJ_OK;
    }
    if (len != (size_t)n)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "attribute '%s' has %zu entries, expected %d",
                                  name, len, n);
    for (int i = 0; i < n; i++) {
        if (v[i] < lo || v[i] > ((int64_t)1 << 31))
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "attribute '%s' entry %d is %lld (must be %lld or more)",
                                      name, i, (long long)v[i], (long long)lo);
        out[i] = v[i];
    }
    return SJ_OK;
}

static int64_t span_of(const sj_onnx_window *w, int d) {
    return (w->kernel[d] - 1) * w->dilation[d] + 1;
}

static int64_t div_up(int64_t a, int64_t b) {
    return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

sj_status sj__onnx_window_auto_pad(sj_onnx_loader *L, sj_onnx_auto_pad *out) {
    static const char *const names[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
    int m;
    SJ_TRY(sj__onnx_attr_choice(L, "auto_pad", names, 4, SJ_ONNX_PAD_NOTSET, &m));
    *out = (sj_onnx_auto_pad)m;
    return SJ_OK;
}

sj_status sj__onnx_window_attrs(sj_onnx_loader *L, const sj_shape *x, const int64_t *kernel,
                                sj_onnx_window *w) {
    memset(w, 0, sizeof *w);
    if (x->rank < 3 || x->rank - 2 > SJ_ONNX_WINDOW_MAX)
        return sj__onnx_node_fail(L, SJ_E_SHAPE,
                                  "input has rank %d; a window needs [N, C, D1, ...] with 1 to %d "
                                  "spatial axes",
                                  x->rank, SJ_ONNX_WINDOW_MAX);
    int n = w->n = x->rank - 2;
    for (int d = 0; d < n; d++) {
        if (sj_dim_is_sym(x->dims[2 + d]))
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                      "spatial axis %d of the input is the symbolic dim; windows "
                                      "slide over constant extents only",
                                      2 + d);
        w->in[d] = x->dims[2 + d];
    }
    if (kernel) {
        memcpy(w->kernel, kernel, (size_t)n * sizeof *kernel);
        /* a conv may still say kernel_shape; it must agree with the weight */
        int64_t ks[SJ_ONNX_WINDOW_MAX];
        SJ_TRY(read_ints(L, "kernel_shape", n, 1, 0, ks));
        for (int d = 0; d < n; d++)
            if (ks[d] && ks[d] != kernel[d])
                return sj__onnx_node_fail(L, SJ_E_SHAPE,
                                          "kernel_shape[%d] is %lld but the weight's extent is %lld",
                                          d, (long long)ks[d], (long long)kernel[d]);
    } else {
        if (!sj__onnx_node_attr(L, "kernel_shape"))
            return sj__onnx_node_fail(L, SJ_E_PARSE, "attribute 'kernel_shape' is required");
        SJ_TRY(read_ints(L, "kernel_shape", n, 1, 1, w->kernel));
    }
    SJ_TRY(read_ints(L, "strides", n, 1, 1, w->stride));
    SJ_TRY(read_ints(L, "dilations", n, 1, 1, w->dilation));
    int64_t pads[2 * SJ_ONNX_WINDOW_MAX];
    SJ_TRY(read_ints(L, "pads", 2 * n, 0, 0, pads));
    for (int d = 0; d < n; d++) {
        w->pad_begin[d] = pads[d];
        w->pad_end[d] = pads[n + d];
    }
    return SJ_OK;
}

sj_status sj__onnx_window_size(sj_onnx_loader *L, sj_onnx_window *w) {
    w->taps = w->positions = 1;
    for (int d = 0; d < w->n; d++) {
        if (w->out[d] < 1)
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "spatial axis %d: output size %lld", 2 + d,
                                      (long long)w->out[d]);
        w->taps *= w->kernel[d];
        w->positions *= w->out[d];
        if (w->taps > MAX_TABLE || w->positions > MAX_TABLE)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                      "window of %lld taps over %lld positions is too large",
                                      (long long)w->taps, (long long)w->positions);
    }
    return SJ_OK;
}

sj_status sj__onnx_window_read(sj_onnx_loader *L, const sj_shape *x, const int64_t *kernel,
                               bool ceil_ok, sj_onnx_window *w) {
    SJ_TRY(sj__onnx_window_attrs(L, x, kernel, w));
    int64_t ceil_mode = 0;
    if (ceil_ok) SJ_TRY(sj__onnx_attr_int(L, "ceil_mode", 0, &ceil_mode));
    sj_onnx_auto_pad ap;
    SJ_TRY(sj__onnx_window_auto_pad(L, &ap));
    for (int d = 0; d < w->n; d++) {
        int64_t span = span_of(w, d), s = w->stride[d];
        if (ap == SJ_ONNX_PAD_SAME_UPPER || ap == SJ_ONNX_PAD_SAME_LOWER) {
            w->out[d] = div_up(w->in[d], s);
            int64_t total = (w->out[d] - 1) * s + span - w->in[d];
            if (total < 0) total = 0;
            w->pad_begin[d] = ap == SJ_ONNX_PAD_SAME_UPPER ? total / 2 : total - total / 2;
            w->pad_end[d] = total - w->pad_begin[d];
            continue;
        }
        if (ap == SJ_ONNX_PAD_VALID) w->pad_begin[d] = w->pad_end[d] = 0;
        int64_t room = w->in[d] + w->pad_begin[d] + w->pad_end[d] - span;
        if (room < 0)
            return sj__onnx_node_fail(
                L, SJ_E_SHAPE,
                "spatial axis %d: the window spans %lld but the padded input has %lld; the "
                "output would be empty",
                2 + d, (long long)span, (long long)(w->in[d] + w->pad_begin[d] + w->pad_end[d]));
        w->out[d] = (ceil_mode ? div_up(room, s) : room / s) + 1;
        /* a window rounded up must still start inside the input or its
         * leading padding (PyTorch's and ONNX Runtime's rule) */
        if (ceil_mode && (w->out[d] - 1) * s >= w->in[d] + w->pad_begin[d]) w->out[d]--;
    }
    return sj__onnx_window_size(L, w);
}

bool sj__onnx_forward_tap(const sj_onnx_window *w, const int64_t *kpos, const int64_t *opos,
                          int64_t *coord) {
    bool inside = true;
    for (int d = 0; d < w->n; d++) {
        coord[d] = opos[d] * w->stride[d] - w->pad_begin[d] + kpos[d] * w->dilation[d];
        inside = inside && coord[d] >= 0 && coord[d] < w->in[d];
    }
    return inside;
}

sj_status sj__onnx_window_taps(sj_onnx_loader *L, sj_value x, bool x_channels_last,
                               const sj_onnx_window *w, double fill, bool by_position,
                               sj_value *out) {
    return sj__onnx_window_gather(L, x, x_channels_last, w, sj__onnx_forward_tap, fill, by_position,
                                  out);
}

/* Steps a row-major multi-index over extents ext[0..n). */
static void step_index(int64_t *pos, const int64_t *ext, int n) {
    for (int d = n - 1; d >= 0; d--) {
        if (++pos[d] < ext[d]) return;
        pos[d] = 0;
    }
}

sj_status sj__onnx_window_gather(sj_onnx_loader *L, sj_value x, bool x_channels_last,
                                 const sj_onnx_window *w, sj_onnx_tap_fn tap, double fill,
                                 bool by_position, sj_value *out) {
    if (x_channels_last && !by_position)
        return sj__onnx_node_fail(L, SJ_E_INTERNAL, "a channels-first window read a channels-last input");
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, x, &s));
    int64_t flat = 1;
    for (int d = 0; d < w->n; d++) flat *= w->in[d];
    if (flat >= INT32_MAX || w->taps * w->positions > MAX_TABLE)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                  "window table of %lld x %lld over %lld input elements is too large",
                                  (long long)w->taps, (long long)w->positions, (long long)flat);
    int32_t *idx = malloc((size_t)(w->taps * w->positions) * sizeof *idx);
    if (!idx) return sj__onnx_node_fail(L, SJ_E_NOMEM, "out of memory for a window table");
    bool padded = false, identity = w->taps == 1 && w->positions == flat;
    int64_t kpos[SJ_ONNX_WINDOW_MAX] = {0}, coord[SJ_ONNX_WINDOW_MAX];
    for (int64_t k = 0; k < w->taps; k++, step_index(kpos, w->kernel, w->n)) {
        int64_t opos[SJ_ONNX_WINDOW_MAX] = {0};
        for (int64_t p = 0; p < w->positions; p++, step_index(opos, w->out, w->n)) {
            int64_t at = flat; /* the appended fill */
            if (tap(w, kpos, opos, coord)) {
                at = 0;
                for (int d = 0; d < w->n; d++) at = at * w->in[d] + coord[d];
            }
            padded = padded || at == flat;
            identity = identity && at == p;
            idx[by_position ? p * w->taps + k : k * w->positions + p] = (int32_t)at;
        }
    }
    sj_graph *g = L->g;
    /* taps: x as [N, C, L], gathered on L by a [K, P] table; rows: x as
     * [N, L, C] (channels last, so each tap copies a run of C), gathered by
     * a [P, K] table */
    int ax = by_position ? 1 : 2;
    int64_t dims[4] = {s.dims[0], s.dims[1], flat, 0};
    sj_value xf = x, tab, cols;
    sj_status st = SJ_OK;
    if (x_channels_last) { /* [N, L, C] already */
        dims[1] = flat;
        dims[2] = s.dims[2];
    } else {
        st = sj__onnx_node_prefix(L, sj_graph_reshape(g, x, 3, dims, &xf));
    }
    if (st == SJ_OK && by_position && !x_channels_last) {
        int perm[3] = {0, 2, 1};
        st = sj__onnx_node_prefix(L, sj_graph_transpose(g, xf, perm, &xf));
        dims[1] = flat;
        dims[2] = s.dims[1];
    }
    if (st == SJ_OK && identity) { /* 1x1, stride 1, no padding: the input is its own taps */
        free(idx);
        int64_t d4[4] = {dims[0], by_position ? flat : dims[1], 1, by_position ? dims[2] : flat};
        return sj__onnx_node_prefix(L, sj_graph_reshape(g, xf, 4, d4, out));
    }
    if (st == SJ_OK && padded) {
        sj_value pad;
        dims[ax] = 1;
        st = sj__onnx_node_prefix(L, sj_graph_fill(g, sj__onnx_dtype_of(L, x), fill, 3, dims, &pad));
        if (st == SJ_OK) st = sj__onnx_node_prefix(L, sj_graph_concat(g, xf, pad, ax, &xf));
    }
    if (st == SJ_OK) {
        int64_t td[2] = {by_position ? w->positions : w->taps, by_position ? w->taps : w->positions};
        st = sj__onnx_made_param(L, SJ_I32, 2, td, idx, &tab);
    }
    free(idx);
    if (st == SJ_OK) st = sj__onnx_node_prefix(L, sj_graph_gather(g, xf, tab, ax, &cols));
    if (st == SJ_OK) *out = cols;
    return st;
}

sj_status sj__onnx_window_flat_taps(sj_onnx_loader *L, sj_value x, const sj_onnx_window *w,
                                    double fill, sj_value *out) {
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, x, &s));
    int64_t c = s.dims[1], flat = 1;
    for (int d = 0; d < w->n; d++) flat *= w->in[d];
    int64_t kc = w->taps * c;
    if (c * flat >= INT32_MAX || kc * w->positions > MAX_TABLE)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                  "window table of %lld x %lld over %lld input elements is too large",
                                  (long long)kc, (long long)w->positions, (long long)(c * flat));
    int32_t *idx = malloc((size_t)(kc * w->positions) * sizeof *idx);
    if (!idx) return sj__onnx_node_fail(L, SJ_E_NOMEM, "out of memory for a window table");
    bool padded = false;
    int64_t kpos[SJ_ONNX_WINDOW_MAX] = {0}, coord[SJ_ONNX_WINDOW_MAX];
    for (int64_t k = 0; k < w->taps; k++, step_index(kpos, w->kernel, w->n)) {
        int64_t opos[SJ_ONNX_WINDOW_MAX] = {0};
        for (int64_t p = 0; p < w->positions; p++, step_index(opos, w->out, w->n)) {
            int64_t at = -1;
            if (sj__onnx_forward_tap(w, kpos, opos, coord)) {
                at = 0;
                for (int d = 0; d < w->n; d++) at = at * w->in[d] + coord[d];
            }
            padded = padded || at < 0;
            for (int64_t ci = 0; ci < c; ci++) /* the appended fill is one past c * flat */
                idx[p * kc + k * c + ci] = (int32_t)(at < 0 ? c * flat : ci * flat + at);
        }
    }
    sj_graph *g = L->g;
    int64_t dims[3] = {s.dims[0], c * flat, 1};
    sj_value xf, tab;
    sj_status st = sj__onnx_node_prefix(L, sj_graph_reshape(g, x, 3, dims, &xf));
    if (st == SJ_OK && padded) {
        sj_value pad;
        dims[1] = 1;
        st = sj__onnx_node_prefix(L, sj_graph_fill(g, sj__onnx_dtype_of(L, x), fill, 3, dims, &pad));
        if (st == SJ_OK) st = sj__onnx_node_prefix(L, sj_graph_concat(g, xf, pad, 1, &xf));
    }
    if (st == SJ_OK) st = sj__onnx_made_param(L, SJ_I32, 2, (int64_t[]){w->positions, kc}, idx, &tab);
    free(idx);
    if (st == SJ_OK) st = sj__onnx_node_prefix(L, sj_graph_gather(g, xf, tab, 1, out));
    return st;
}

sj_status sj__onnx_window_unflatten(sj_onnx_loader *L, sj_value v, const sj_onnx_window *w,
                                    sj_value *out) {
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, v, &s));
    int64_t dims[SJ_MAX_RANK] = {s.dims[0], s.dims[1]};
    for (int d = 0; d < w->n; d++) dims[2 + d] = w->out[d];
    return sj__onnx_node_prefix(L, sj_graph_reshape(L->g, v, 2 + w->n, dims, out));
}

sj_status sj__onnx_axis_gather(sj_onnx_loader *L, sj_value x, int axis, const int32_t *idx,
                               int64_t out_len, int64_t taps, sj_value fill, sj_value *out) {
    sj_graph *g = L->g;
    sj_value data = x, tab;
    if (fill != SJ_NO_VALUE) SJ_TRY(sj__onnx_node_prefix(L, sj_graph_concat(g, x, fill, axis, &data)));
    int64_t td[2] = {out_len, taps};
    SJ_TRY(sj__onnx_made_param(L, SJ_I32, taps > 1 ? 2 : 1, td, idx, &tab));
    return sj__onnx_node_prefix(L, sj_graph_gather(g, data, tab, axis, out));
}
