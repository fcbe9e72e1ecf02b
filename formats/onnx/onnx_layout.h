/* Activations kept channels last between the ops of a conv net.
 *
 *   // a conv's output, [N, P, M] from its GEMM, as ONNX's [N, M, H, W]:
 *   sj__onnx_def_channels_last(L, 0, y, &nchw);
 *   // the next node reads it channels last where it can ...
 *   sj_value cl;
 *   sj_shape s;
 *   if (sj__onnx_in_channels_last(L, 0, &cl, &s)) ... // cl [N, P, C]
 *   // ... and any other reader gets [N, C, H, W] made on first use
 *   sj__onnx_in_value(L, 0, &x);
 *
 * Convs and pools compute channels last (each tap a run of C channels), so
 * an activation handed back channels first costs a transposing copy per
 * layer, and the next conv's gather transposes it again. Kept channels
 * last instead, the elementwise nodes between convs (bias, ReLU, residual
 * adds, BatchNorm's scale and shift, an SE block's gate) run on [N, P, C]:
 * the chain after a GEMM becomes its epilogue, and the next gather reads
 * runs of channels in place. Only a reader that needs the channels-first
 * value (a Reshape, Concat, an output) makes it, once. Private to
 * formats/onnx. */
#ifndef SJ_ONNX_LAYOUT_H
#define SJ_ONNX_LAYOUT_H

#include "formats/onnx/onnx_loader.h"

struct sj_onnx_op;

/* Whether input i is laid out channels last: then *cl is its [N, P, C]
 * value and *nchw the shape ONNX gives it. False (and *cl SJ_NO_VALUE)
 * otherwise, or when the input is missing: read it as usual. */
bool sj__onnx_in_channels_last(sj_onnx_loader *L, int i, sj_value *cl, sj_shape *nchw);

/* Defines output i as cl ([N, P, C], P the product of nchw's spatial dims)
 * standing for the channels-first shape nchw ([N, C, D...], rank >= 3). */
sj_status sj__onnx_def_channels_last(sj_onnx_loader *L, int i, sj_value cl, const sj_shape *nchw);

/* The channels-first value of v (laid out channels last), made on first
 * use and kept: cl transposed to [N, C, P], reshaped to cl_shape. */
sj_status sj__onnx_channels_first(sj_onnx_loader *L, sj_onnx_val *v, sj_value *out);

/* Maps the node channels last when it is an elementwise op that reads at
 * least one channels-last input and every other input broadcasts over the
 * positions (a per-channel vector, a scalar): *done then. Otherwise does
 * nothing and leaves the node to its usual mapping. */
sj_status sj__onnx_layout_try(sj_onnx_loader *L, const struct sj_onnx_op *op, bool *done);

/* sj__onnx_def_out's half for a node the above is mapping: o is output 0,
 * y what the mapper made of the substituted inputs. */
sj_status sj__onnx_layout_define(sj_onnx_loader *L, sj_onnx_val *o, sj_value y);

#endif
