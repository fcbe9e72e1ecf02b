/* Convolutions onto the graph: Conv and ConvTranspose over 1 to 4 spatial
 * axes, with strides, dilations, pads (auto_pad too), groups and bias.
 * Each is the window's taps (onnx_window.h: one Gather through a table made
 * at load) contracted with the weight: a matmul per group, or, where each
 * group makes one output channel, a multiply and a sum over the taps, which
 * the host reads inside one kernel (compile/lower/window_fuse.h); a
 * depthwise conv (one input channel per group too) runs channels last, as
 * does the GEMM, and both leave their output channels last. */
#include "formats/onnx/onnx_layout.h"
#include "formats/onnx/onnx_node.h"
#include "formats/onnx/onnx_op.h"
#include "formats/onnx/onnx_window.h"
#include "formats/onnx/onnx_winograd.h"

#include <stdlib.h>
#include <string.h>

/* A conv's channel bookkeeping: C in, M out, in G groups. */
typedef struct conv_groups {
    int64_t c, m, g;
} conv_groups;

/* A conv's input X, [N, C, D...] as ONNX has it (s), held channels first
 * or (cl) channels last as [N, P, C] (onnx_layout.h). */
typedef struct conv_input {
    sj_value x;
    bool cl;
    sj_shape s;
} conv_input;

/* Whether the conv computes channels last (its taps [N, P, K, C]): a
 * depthwise conv and a one-group GEMM; the grouped ones read channels
 * first. */
static bool reads_channels_last(const conv_groups *cg) {
    int64_t mg = cg->m / cg->g;
    return mg == 1 ? cg->c == cg->g : cg->g == 1;
}

static sj_status check_groups(sj_onnx_loader *L, const conv_groups *cg, int64_t w_channels,
                              const char *w_axis) {
    if (cg->g < 1 || cg->c % cg->g || cg->m % cg->g)
        return sj__onnx_node_fail(L, SJ_E_SHAPE,
                                  "group %lld does not divide the %lld input and %lld output "
                                  "channels",
                                  (long long)cg->g, (long long)cg->c, (long long)cg->m);
    if (w_channels != cg->c / cg->g)
        return sj__onnx_node_fail(L, SJ_E_SHAPE,
                                  "the weight's %s is %lld; %lld input channels in %lld groups "
                                  "need %lld",
                                  w_axis, (long long)w_channels, (long long)cg->c, (long long)cg->g,
                                  (long long)(cg->c / cg->g));
    return SJ_OK;
}

/* The weight as the GEMM's [K * C, M] (rows ordered tap-major, as the
 * taps by position lay a row out) from wg's [M, C * K]: transposed at load
 * in tiles when W is known then (a param, which the host backend packs
 * once), else in the graph. */
static sj_status weight_columns(sj_onnx_loader *L, sj_value wg, const float *host, int64_t m,
                                int64_t c, int64_t k, sj_value *out) {
    int64_t ck = c * k;
    if (host) {
        float *t = malloc((size_t)(m * ck) * sizeof *t);
        if (!t) return sj__onnx_node_fail(L, SJ_E_NOMEM, "out of memory for a conv weight");
        enum { TILE = 32 };
        for (int64_t i0 = 0; i0 < m; i0 += TILE)
            for (int64_t j0 = 0; j0 < ck; j0 += TILE)
                for (int64_t i = i0; i < m && i < i0 + TILE; i++)
                    for (int64_t j = j0; j < ck && j < j0 + TILE; j++) /* j = ci * k + ki */
                        t[((j % k) * c + j / k) * m + i] = host[i * ck + j];
        int64_t d[2] = {ck, m};
        sj_status st = sj__onnx_made_param(L, SJ_F32, 2, d, t, out);
        free(t);
        return st;
    }
    int64_t d3[3] = {m, c, k}, d2[2] = {ck, m};
    int perm[3] = {2, 1, 0};
    sj_value w3, wt;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(L->g, wg, 3, d3, &w3)));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_transpose(L->g, w3, perm, &wt)));
    return sj__onnx_node_prefix(L, sj_graph_reshape(L->g, wt, 2, d2, out));
}

/* The depthwise weight wg [C, 1, K] as [K, C] (a tap's weights for every
 * channel in a row): transposed at load when W is known then (host, its
 * [C, K] data), else in the graph. */
static sj_status weight_by_tap(sj_onnx_loader *L, sj_value wg, const float *host, int64_t c,
                               int64_t k, sj_value *out) {
    int64_t d[2] = {k, c};
    if (host) {
        float *t = malloc((size_t)(k * c) * sizeof *t);
        if (!t) return sj__onnx_node_fail(L, SJ_E_NOMEM, "out of memory for a conv weight");
        for (int64_t ci = 0; ci < c; ci++)
            for (int64_t ki = 0; ki < k; ki++) t[ki * c + ci] = host[ci * k + ki];
        sj_status st = sj__onnx_made_param(L, SJ_F32, 2, d, t, out);
        free(t);
        return st;
    }
    int64_t ck[2] = {c, k};
    int perm[2] = {1, 0};
    sj_value w2;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(L->g, wg, 2, ck, &w2)));
    return sj__onnx_node_prefix(L, sj_graph_transpose(L->g, w2, perm, out));
}

/* Whether a one-group conv is few taps to few output channels (at most
 * FEW_TAPS of K * C, FEW_TAPS_OUT of M; a window, not 1x1, whose input is
 * its own taps, read in place by the GEMM) over a channels-first input: a
 * vision model's stem (MobileNetV3's 3x3 over 3 channels to 16: 27 taps).
 * Its GEMM's rows of K * C taps were a buffer 9 times its input (1.35 MB
 * an image at 224 x 224) that a gather wrote and the GEMM read back, for a
 * product of 27 by 16; as a sum over the taps (contract) they are loads
 * inside it. A wider conv keeps the GEMM, which repays its rows there
 * (ResNet-18's 7x7 stem: 147 taps to 64 channels). */
enum { FEW_TAPS = 32, FEW_TAPS_OUT = 32 };
static bool few_taps(const conv_input *in, const sj_onnx_window *w, sj_onnx_tap_fn tap,
                     const conv_groups *cg) {
    return cg->g == 1 && !in->cl && tap == sj__onnx_forward_tap && w->taps > 1 &&
           cg->c * w->taps <= FEW_TAPS && cg->m <= FEW_TAPS_OUT;
}

/* in's window (tap rule `tap`) contracted with the weight wg [G, M/G, C/G * K]
 * (host: its data when known at load, or NULL). One group: the taps by
 * position [N, P, K * C] times the weight [K * C, M], a GEMM over every
 * output position whose weight is a param, left channels last: [N, P, M]
 * and *laid (onnx_layout.h), so the elementwise ops after it are its
 * epilogue and the next conv reads it in place.
 * One output channel per group (depthwise): a multiply and a sum over the
 * group's taps, which fuse with the gather. Otherwise a matmul per group,
 * channels first: [N, M, P]. A one-group 3x3 conv of stride 1 with its
 * weight known runs as Winograd's F(2x2, 3x3) (onnx_winograd.h), channels
 * last too. */
static sj_status contract(sj_onnx_loader *L, const conv_input *in, const sj_onnx_window *w,
                          sj_onnx_tap_fn tap, sj_value wg, const float *host,
                          const conv_groups *cg, sj_value *out, bool *laid) {
    sj_graph *g = L->g;
    sj_value x = in->x;
    int64_t n = in->s.dims[0], cgk = cg->c / cg->g * w->taps, mg = cg->m / cg->g;
    sj_value cols, c4, y;
    *laid = reads_channels_last(cg); /* and in->cl only then: conv_of */
    if (mg == 1 && cg->c == cg->g) {
        /* Depthwise, channels last: the taps [N, P, K, C] times the weight
         * [K, C], summed over the taps into [N, P, C]. Each
         * tap of a position is then one run of C channels (the gather's
         * index read once for all of them, the weight's row contiguous),
         * and the taps are loads inside the sum, never a buffer. */
        int axis = 2;
        sj_value wk, prod;
        SJ_TRY(sj__onnx_window_gather(L, x, in->cl, w, tap, 0.0, true, &cols));
        SJ_TRY(weight_by_tap(L, wg, host, cg->c, w->taps, &wk));
        SJ_TRY(sj__onnx_binary(L, SJ_OP_MUL, cols, wk, &prod));
        return sj__onnx_node_prefix(L, sj_graph_reduce(g, SJ_OP_REDUCE_SUM, prod, 1, &axis, false, out));
    }
    if (mg == 1) {
        /* [N, G, CgK, P] * [G, CgK, 1], summed over the taps */
        int64_t cd[4] = {n, cg->g, cgk, w->positions}, wd[3] = {cg->g, cgk, 1};
        sj_value w3, prod;
        int axis = 2;
        SJ_TRY(sj__onnx_window_gather(L, x, false, w, tap, 0.0, false, &cols));
        /* Depthwise (one input channel per group), the taps are [N, G, K, P]
         * already: no reshape, which would make them a buffer of K times
         * the input instead of loads inside the sum. */
        c4 = cols;
        if (cgk != w->taps)
            SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(g, cols, 4, cd, &c4)));
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(g, wg, 3, wd, &w3)));
        SJ_TRY(sj__onnx_binary(L, SJ_OP_MUL, c4, w3, &prod));
        return sj__onnx_node_prefix(L, sj_graph_reduce(g, SJ_OP_REDUCE_SUM, prod, 1, &axis, false, out));
    }
    if (cg->g == 1 && host && tap == sj__onnx_forward_tap && sj__onnx_winograd_fits(w, cg->c, cg->m))
        return sj__onnx_winograd_conv(L, x, in->cl, &in->s, w, host, cg->m, out);
    if (few_taps(in, w, tap, cg)) {
        /* The taps [N, P, K * C, 1] times the weight [K * C, M], summed
         * over the taps into [N, P, M], channels last: the taps are loads
         * inside the sum, never a buffer, and each tap's single input
         * value is read once for the output channels' vectors. */
        sj_value wc, prod;
        int axis = 2;
        SJ_TRY(sj__onnx_window_flat_taps(L, x, w, 0.0, &cols));
        SJ_TRY(weight_columns(L, wg, host, cg->m, cg->c, w->taps, &wc));
        SJ_TRY(sj__onnx_binary(L, SJ_OP_MUL, cols, wc, &prod));
        return sj__onnx_node_prefix(L, sj_graph_reduce(g, SJ_OP_REDUCE_SUM, prod, 1, &axis, false, out));
    }
    if (cg->g == 1) {
        int64_t rd[3] = {n, w->positions, cgk};
        sj_value rows, wc;
        SJ_TRY(sj__onnx_window_gather(L, x, in->cl, w, tap, 0.0, true, &cols));
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(g, cols, 3, rd, &rows)));
        SJ_TRY(weight_columns(L, wg, host, cg->m, cg->c, w->taps, &wc));
        return sj__onnx_node_prefix(L, sj_graph_matmul(g, rows, wc, out));
    }
    int64_t cd[4] = {n, cg->g, cgk, w->positions}, yd[3] = {n, cg->m, w->positions};
    SJ_TRY(sj__onnx_window_gather(L, x, false, w, tap, 0.0, false, &cols));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(g, cols, 4, cd, &c4)));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_matmul(g, wg, c4, &y)));
    return sj__onnx_node_prefix(L, sj_graph_reshape(g, y, 3, yd, out));
}

/* The weight (input 1) as [G, M/G, C/G * K]: Conv's W [M, C/G, k...] is
 * that already; ConvTranspose's [C, M/G, k...] is [G, C/G, M/G, K] with
 * its middle axes swapped. *host: the rearranged data when W is a float
 * constant known at load (the caller frees it), else NULL. */
static sj_status weight_groups(sj_onnx_loader *L, sj_value wt, bool transposed,
                               const conv_groups *cg, int64_t taps, float **host, sj_value *wg) {
    int64_t cgr = cg->c / cg->g, mg = cg->m / cg->g;
    int64_t w3[3] = {cg->g, mg, cgr * taps};
    *host = NULL;
    sj_onnx_val *v;
    SJ_TRY(sj__onnx_in_val(L, 1, &v));
    /* only the one-group GEMM (weight_columns) and the depthwise conv
     * (weight_by_tap) read the weight's data */
    bool reads = (cg->g == 1 && mg > 1) || (mg == 1 && cgr == 1);
    const float *src = reads && v->has_const ? v->c.f : NULL;
    if (src) {
        size_t numel = (size_t)(cg->g * mg * cgr * taps);
        float *d = malloc(numel * sizeof *d);
        if (!d) return sj__onnx_node_fail(L, SJ_E_NOMEM, "out of memory for a conv weight");
        if (!transposed) {
            memcpy(d, src, numel * sizeof *d);
        } else {
            for (int64_t gi = 0; gi < cg->g; gi++)
                for (int64_t c = 0; c < cgr; c++)
                    for (int64_t m = 0; m < mg; m++)
                        memcpy(d + ((gi * mg + m) * cgr + c) * taps,
                               src + ((gi * cgr + c) * mg + m) * taps, (size_t)taps * sizeof *d);
        }
        *host = d;
    }
    if (!transposed) return sj__onnx_node_prefix(L, sj_graph_reshape(L->g, wt, 3, w3, wg));
    int64_t w4[4] = {cg->g, cgr, mg, taps};
    int perm[4] = {0, 2, 1, 3};
    sj_value a, b;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(L->g, wt, 4, w4, &a)));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_transpose(L->g, a, perm, &b)));
    return sj__onnx_node_prefix(L, sj_graph_reshape(L->g, b, 3, w3, wg));
}

/* Conv or ConvTranspose of in over window w: [N, M, P], or [N, P, M]
 * when *laid (channels last). */
static sj_status conv_of(sj_onnx_loader *L, conv_input *in, sj_value wt, bool transposed,
                         const sj_onnx_window *w, sj_onnx_tap_fn tap, const conv_groups *cg,
                         sj_value *out, bool *laid) {
    if (in->cl && !reads_channels_last(cg)) { /* the grouped convs read X channels first */
        SJ_TRY(sj__onnx_in_value(L, 0, &in->x));
        in->cl = false;
    }
    float *host;
    sj_value wg;
    SJ_TRY(weight_groups(L, wt, transposed, cg, w->taps, &host, &wg));
    sj_status st = contract(L, in, w, tap, wg, host, cg, out, laid);
    free(host);
    return st;
}

/* y + B (input 2, [M] when given), then [N, M, out...] as output 0: y is
 * [N, M, P], or [N, P, M] kept channels last when laid. */
static sj_status finish(sj_onnx_loader *L, sj_value y, bool laid, const conv_groups *cg,
                        const sj_onnx_window *w, sj_value first) {
    sj_value b;
    SJ_TRY(sj__onnx_in_value_opt(L, 2, &b));
    if (b != SJ_NO_VALUE) {
        sj_shape bs;
        SJ_TRY(sj__onnx_shape_of(L, b, &bs));
        if (bs.rank != 1 || bs.dims[0] != cg->m)
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "bias B must have shape [%lld]",
                                      (long long)cg->m);
        int64_t bd[2] = {cg->m, 1};
        sj_value b2 = b; /* [M] broadcasts over [N, P, M] as it is */
        if (!laid) SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(L->g, b, 2, bd, &b2)));
        SJ_TRY(sj__onnx_binary(L, SJ_OP_ADD, y, b2, &y));
    }
    if (laid) {
        sj_shape nchw;
        SJ_TRY(sj__onnx_shape_of(L, y, &nchw));
        nchw.rank = 2 + w->n;
        nchw.dims[1] = cg->m;
        for (int d = 0; d < w->n; d++) nchw.dims[2 + d] = w->out[d];
        return sj__onnx_def_channels_last(L, 0, y, &nchw);
    }
    sj_value out;
    SJ_TRY(sj__onnx_window_unflatten(L, y, w, &out));
    return sj__onnx_def_out(L, 0, out, first);
}

/* Inputs X and W with their shapes, both float32, X [N, C, D...] and W of
 * the same rank. */
static sj_status conv_inputs(sj_onnx_loader *L, conv_input *in, sj_value *wt, sj_shape *ws) {
    sj_shape *xs = &in->s;
    in->cl = sj__onnx_in_channels_last(L, 0, &in->x, xs);
    if (!in->cl) {
        SJ_TRY(sj__onnx_in_value(L, 0, &in->x));
        SJ_TRY(sj__onnx_shape_of(L, in->x, xs));
    }
    SJ_TRY(sj__onnx_in_value(L, 1, wt));
    SJ_TRY(sj__onnx_shape_of(L, *wt, ws));
    if (sj__onnx_dtype_of(L, in->x) != SJ_F32 || sj__onnx_dtype_of(L, *wt) != SJ_F32)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "X and W must be float32");
    if (xs->rank < 3 || ws->rank != xs->rank)
        return sj__onnx_node_fail(L, SJ_E_SHAPE,
                                  "X has rank %d and W rank %d; a conv needs both [N, C, D...] of "
                                  "one rank, at least 3",
                                  xs->rank, ws->rank);
    for (int i = 1; i < xs->rank; i++)
        if (sj_dim_is_sym(xs->dims[i]) || sj_dim_is_sym(ws->dims[i - 1]))
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                      "the symbolic dim may be only X's batch axis (axis 0)");
    return SJ_OK;
}

static sj_status map_conv(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    sj_value wt, first = sj_graph_num_values(L->g);
    conv_input in;
    sj_shape ws;
    SJ_TRY(conv_inputs(L, &in, &wt, &ws));
    const sj_shape xs = in.s;
    conv_groups cg = {.c = xs.dims[1], .m = ws.dims[0]};
    SJ_TRY(sj__onnx_attr_int(L, "group", 1, &cg.g));
    SJ_TRY(check_groups(L, &cg, ws.dims[1], "axis 1"));
    sj_onnx_window w;
    SJ_TRY(sj__onnx_window_read(L, &xs, ws.dims + 2, false, &w));
    sj_value y;
    bool laid;
    SJ_TRY(conv_of(L, &in, wt, false, &w, sj__onnx_forward_tap, &cg, &y, &laid));
    return finish(L, y, laid, &cg, &w, first);
}

/* ConvTranspose: output o takes input i through tap k where
 * o = i * stride - pad + k * dilation, so tap k of output o reads
 * i = (o + pad - k * dilation) / stride when that divides and lies inside. */
static bool transposed_tap(const sj_onnx_window *w, const int64_t *kpos, const int64_t *opos,
                           int64_t *coord) {
    bool inside = true;
    for (int d = 0; d < w->n; d++) {
        int64_t t = opos[d] + w->pad_begin[d] - kpos[d] * w->dilation[d];
        coord[d] = t >= 0 ? t / w->stride[d] : -1;
        inside = inside && t >= 0 && t % w->stride[d] == 0 && coord[d] < w->in[d];
    }
    return inside;
}

/* The transposed window: strides, dilations and kernel as a conv reads
 * them; pads and the output size from pads, output_padding, output_shape
 * and auto_pad as the ONNX operator's text gives them. */
static sj_status transposed_window(sj_onnx_loader *L, const sj_shape *xs, const sj_shape *ws,
                                   sj_onnx_window *w) {
    SJ_TRY(sj__onnx_window_attrs(L, xs, ws->dims + 2, w));
    sj_onnx_auto_pad ap;
    SJ_TRY(sj__onnx_window_auto_pad(L, &ap));
    bool same = ap == SJ_ONNX_PAD_SAME_UPPER || ap == SJ_ONNX_PAD_SAME_LOWER;
    int n = w->n;
    int64_t opad[SJ_ONNX_WINDOW_MAX] = {0}, oshape[SJ_ONNX_WINDOW_MAX] = {0};
    const int64_t *v;
    size_t len;
    bool present, have_shape;
    SJ_TRY(sj__onnx_attr_ints(L, "output_padding", &v, &len, &present));
    if (present) {
        if (len != (size_t)n)
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "output_padding has %zu entries, expected %d",
                                      len, n);
        for (int d = 0; d < n; d++) {
            int64_t lim = w->stride[d] > w->dilation[d] ? w->stride[d] : w->dilation[d];
            if (v[d] < 0 || v[d] >= lim)
                return sj__onnx_node_fail(L, SJ_E_SHAPE,
                                          "output_padding[%d] is %lld; it must be at least 0 and "
                                          "less than the stride or the dilation",
                                          d, (long long)v[d]);
            opad[d] = v[d];
        }
    }
    SJ_TRY(sj__onnx_attr_ints(L, "output_shape", &v, &len, &have_shape));
    if (have_shape) {
        /* spatial extents, or the whole shape [N, M, D...] */
        if (len != (size_t)n && len != (size_t)n + 2)
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "output_shape has %zu entries, expected %d",
                                      len, n);
        for (int d = 0; d < n; d++) oshape[d] = v[len - (size_t)n + (size_t)d];
    }
    for (int d = 0; d < n; d++) {
        int64_t span = (w->kernel[d] - 1) * w->dilation[d] + 1;
        int64_t full = w->stride[d] * (w->in[d] - 1) + opad[d] + span;
        if (ap == SJ_ONNX_PAD_VALID) w->pad_begin[d] = w->pad_end[d] = 0;
        if (same) {
            /* the pads that make the output the size asked for (the input's
             * times the stride by default), the odd one at the end for
             * SAME_UPPER; rounded down as the reference rounds, also when
             * the output asked for is larger than this input makes */
            int64_t want = have_shape ? oshape[d] : w->in[d] * w->stride[d];
            int64_t total = full - want, half = total >= 0 ? total / 2 : -((1 - total) / 2);
            w->pad_begin[d] = ap == SJ_ONNX_PAD_SAME_UPPER ? half : total - half;
            w->pad_end[d] = total - w->pad_begin[d];
        }
        /* an output_shape without SAME keeps the pads: outputs past what
         * the input reaches are the bias alone */
        w->out[d] = have_shape ? oshape[d] : full - w->pad_begin[d] - w->pad_end[d];
    }
    return sj__onnx_window_size(L, w);
}

static sj_status map_conv_transpose(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    sj_value wt, first = sj_graph_num_values(L->g);
    conv_input in;
    sj_shape ws;
    SJ_TRY(conv_inputs(L, &in, &wt, &ws));
    const sj_shape xs = in.s;
    conv_groups cg = {.c = xs.dims[1]};
    SJ_TRY(sj__onnx_attr_int(L, "group", 1, &cg.g));
    if (cg.g < 1)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "group %lld is below 1", (long long)cg.g);
    cg.m = ws.dims[1] * cg.g;
    if (ws.dims[0] != cg.c)
        return sj__onnx_node_fail(L, SJ_E_SHAPE,
                                  "the weight's axis 0 is %lld but X has %lld channels",
                                  (long long)ws.dims[0], (long long)cg.c);
    SJ_TRY(check_groups(L, &cg, cg.c / cg.g, "axis 0 per group"));
    sj_onnx_window w;
    SJ_TRY(transposed_window(L, &xs, &ws, &w));
    sj_value y;
    bool laid;
    SJ_TRY(conv_of(L, &in, wt, true, &w, transposed_tap, &cg, &y, &laid));
    return finish(L, y, laid, &cg, &w, first);
}

const sj_onnx_op sj__onnx_ops_conv[] = {
    {"Conv", 2, 3, 1, 1, NULL, map_conv, SJ_OP_COUNT_, 0},
    {"ConvTranspose", 2, 3, 1, 1, NULL, map_conv_transpose, SJ_OP_COUNT_, 0},
};
const size_t sj__onnx_ops_conv_n = sizeof sj__onnx_ops_conv / sizeof sj__onnx_ops_conv[0];
