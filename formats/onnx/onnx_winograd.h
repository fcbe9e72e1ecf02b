/* A 3x3 stride-1 conv as Winograd's minimal filtering F(2x2, 3x3): each
 * 2x2 block of outputs from a 4x4 tile of the input, in 16 multiplies per
 * channel pair instead of 36, so the GEMM that dominates a conv net does
 * 2.25 times less work. Built from ops every backend runs:
 *
 *   V = B^T d B   [N, 16, T, C]: each transformed point a sum of four
 *                 signed taps, one kernel whose terms are table gathers of
 *                 the input (inlined, reading it in place)
 *   M = V U       16 GEMMs [T, C] x [C, M] per image, U = G g G^T made at
 *                 load (packed once by the host backend)
 *   Y = A^T M A   [N, P, M] channels last: each output position a sum of
 *                 nine of its tile's products, where the bias and the
 *                 activations after the conv join the same kernel
 *
 *   if (sj__onnx_winograd_fits(&w, c, m))
 *       SJ_TRY(sj__onnx_winograd_conv(L, x, x_cl, &xs, &w, weight, m, &y));  // [N, P, M]
 *
 * Private to formats/onnx. */
#ifndef SJ_ONNX_WINOGRAD_H
#define SJ_ONNX_WINOGRAD_H

#include "formats/onnx/onnx_window.h"

/* Whether a one-group conv of c input and m output channels over window w
 * runs as F(2x2, 3x3): two spatial axes, a 3x3 kernel, stride and
 * dilation 1, and channels and positions enough that the transforms cost
 * less than the multiplies they save. */
bool sj__onnx_winograd_fits(const sj_onnx_window *w, int64_t c, int64_t m);

/* The conv of x ([N, C, H, W] as xs gives it; held [N, H * W, C] when
 * x_channels_last) with the weight's data `weight` ([M, C, 3, 3], float32)
 * over window w: *out is [N, P, M], P the output positions in order. */
sj_status sj__onnx_winograd_conv(sj_onnx_loader *L, sj_value x, bool x_channels_last,
                                 const sj_shape *xs, const sj_onnx_window *w, const float *weight,
                                 int64_t m, sj_value *out);

#endif
