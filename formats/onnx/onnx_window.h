/* Sliding windows over the spatial axes of an [N, C, D1, ...] tensor, what
 * Conv, ConvTranspose, the pools and LRN share: the geometry read from a
 * node's attributes (kernel_shape, strides, dilations, pads, auto_pad,
 * ceil_mode) with every output size checked, and the gather that lays each
 * output position's window out as a row of taps.
 *
 *   sj_onnx_window w;
 *   SJ_TRY(sj__onnx_window_read(L, &xshape, kernel, true, &w));
 *   SJ_TRY(sj__onnx_window_taps(L, x, false, &w, 0.0, false, &cols));  // [N, C, K, P]
 *
 * The taps are one ONNX Gather through an index table made at load time:
 * a tap that falls in padding reads one element appended past the data,
 * holding the fill (0 for a conv, -inf for a max pool). Every backend that
 * runs Gather runs these ops; nothing here needs a kernel of its own.
 * Private to formats/onnx. */
#ifndef SJ_ONNX_WINDOW_H
#define SJ_ONNX_WINDOW_H

#include "formats/onnx/onnx_loader.h"

/* The graph keeps rank <= SJ_MAX_RANK, and a window's taps are laid out as
 * [N, C, K, P]: so at most SJ_MAX_RANK - 2 spatial axes. */
#define SJ_ONNX_WINDOW_MAX (SJ_MAX_RANK - 2)

typedef struct sj_onnx_window {
    int n;                                  /* spatial axes, 1..SJ_ONNX_WINDOW_MAX */
    int64_t in[SJ_ONNX_WINDOW_MAX];         /* input extents */
    int64_t kernel[SJ_ONNX_WINDOW_MAX];
    int64_t stride[SJ_ONNX_WINDOW_MAX];
    int64_t dilation[SJ_ONNX_WINDOW_MAX];
    int64_t pad_begin[SJ_ONNX_WINDOW_MAX];
    int64_t pad_end[SJ_ONNX_WINDOW_MAX];
    int64_t out[SJ_ONNX_WINDOW_MAX];        /* output extents, each >= 1 */
    int64_t taps;                           /* K: product of kernel[] */
    int64_t positions;                      /* P: product of out[] */
} sj_onnx_window;

/* What auto_pad says. */
typedef enum sj_onnx_auto_pad {
    SJ_ONNX_PAD_NOTSET, /* the pads attribute */
    SJ_ONNX_PAD_SAME_UPPER,
    SJ_ONNX_PAD_SAME_LOWER,
    SJ_ONNX_PAD_VALID
} sj_onnx_auto_pad;
sj_status sj__onnx_window_auto_pad(sj_onnx_loader *L, sj_onnx_auto_pad *out);

/* The attributes alone: n and in[] from x, kernel[] (as below), stride[],
 * dilation[] and pad_begin[]/pad_end[] from pads, each checked; out[],
 * taps and positions are left 0. */
sj_status sj__onnx_window_attrs(sj_onnx_loader *L, const sj_shape *x, const int64_t *kernel,
                                sj_onnx_window *w);

/* Reads the window of the node being mapped over x's spatial axes (x has
 * rank >= 3, its spatial extents constant). kernel: the kernel's extents
 * (a conv's weight), or NULL to read the kernel_shape attribute. ceil_mode:
 * whether the node may round its output size up (the pools). Errors name
 * the node and the numbers: a kernel, stride or dilation below 1, pads
 * below 0, an unknown auto_pad, or an output size below 1. */
sj_status sj__onnx_window_read(sj_onnx_loader *L, const sj_shape *x, const int64_t *kernel,
                               bool ceil_mode, sj_onnx_window *w);
/* taps and positions from kernel[] and out[] (set by the caller), with the
 * same checks: an output size below 1, a window too large. */
sj_status sj__onnx_window_size(sj_onnx_loader *L, sj_onnx_window *w);

/* x [N, C, D...] -> [N, C, K, P]: entry (k, p) is the input at output
 * position p's tap k, or fill where that tap lies outside the input.
 * by_position: [N, P, K, C] instead, a conv's taps as the rows of a GEMM
 * (channels last inside a row, so a tap reads a run of C values).
 * x_channels_last: x is [N, L, C] (L the input's positions in order,
 * onnx_layout.h), which only by_position reads. */
sj_status sj__onnx_window_taps(sj_onnx_loader *L, sj_value x, bool x_channels_last,
                               const sj_onnx_window *w, double fill, bool by_position,
                               sj_value *out);

/* Where the tap (k, p) of a window reads: its coordinate along each spatial
 * axis, and whether every one of them lies inside the input. */
typedef bool (*sj_onnx_tap_fn)(const sj_onnx_window *w, const int64_t *kpos, const int64_t *opos,
                               int64_t *coord);
/* Conv's and the pools' rule: tap k of output o reads o * stride - pad + k * dilation. */
bool sj__onnx_forward_tap(const sj_onnx_window *w, const int64_t *kpos, const int64_t *opos,
                          int64_t *coord);
/* The same gather with another tap rule (ConvTranspose's), over in-extents
 * w->in and a [K, P] grid of w->taps x w->positions. */
sj_status sj__onnx_window_gather(sj_onnx_loader *L, sj_value x, bool x_channels_last,
                                 const sj_onnx_window *w, sj_onnx_tap_fn tap, double fill,
                                 bool by_position, sj_value *out);

/* x [N, C, D...] (channels first) -> [N, P, K * C, 1]: entry (p, k * C + c)
 * is channel c of the input at output position p's tap k, or fill where
 * that tap lies outside the input. One gather of single elements through a
 * [P, K * C] table, from x as [N, C * L, 1]: a conv of few input channels
 * (a stem's) multiplies it by its weight [K * C, M] and sums over the taps,
 * the taps read inside the sum (compile/lower/window_fuse.h) where rows of
 * K * C taps were a buffer. */
sj_status sj__onnx_window_flat_taps(sj_onnx_loader *L, sj_value x, const sj_onnx_window *w,
                                    double fill, sj_value *out);

/* A [N, C, P] value as [N, C, out...]. */
sj_status sj__onnx_window_unflatten(sj_onnx_loader *L, sj_value v, const sj_onnx_window *w,
                                    sj_value *out);

/* Along one axis of x (constant extent len): the result's entries
 * (j, t), j < out_len, t < taps, read x at idx[j * taps + t], where an
 * index equal to len reads fill instead (fill: x's shape with that axis 1;
 * SJ_NO_VALUE when no index reads it). taps 1 keeps x's rank (the axis
 * becomes out_len long); more put a taps axis right after it. What Pad and
 * Resize build on. */
sj_status sj__onnx_axis_gather(sj_onnx_loader *L, sj_value x, int axis, const int32_t *idx,
                               int64_t out_len, int64_t taps, sj_value fill, sj_value *out);

#endif
