/* A 3x3 stride-1 conv as Winograd's minimal filtering F(2x2, 3x3): each
 * 2x2 block of outputs from a 4x4 tile of the input in 16 multiplies per
 * channel pair instead of 36, so the GEMM that dominates a conv net does
 * 2.25 times less work. Built from ops every backend runs:
 *
 *   V = B^T d B   per tile: 16 sums of four signed taps, one kernel whose
 *                 four terms are table gathers of the input (inlined),
 *                 [N, 16, T, C] read as [16, N, T, C]
 *   M = V U       16 GEMMs [T, C] x [C, M], U = G g G^T made at load
 *   Y = A^T M A   per output position: its tile's 16 products, each times
 *                 a constant 0 or +-1, summed into [N, P, M] channels last
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
