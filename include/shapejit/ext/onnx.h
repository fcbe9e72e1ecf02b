/* shapejit/ext/onnx.h — ONNX TensorProto files. (Loading .onnx models:
 * sj_model_load / sj_onnx_load_mem in shapejit/model.h; the ONNX node-test
 * conformance runner is a tool over the library: tools/conformance/.)
 *
 *   sj_tensor x;
 *   if (sj_onnx_tensor_read(ctx, "input_0.pb", &x) != SJ_OK) puts(sj_ctx_last_error(ctx));
 *   sj_tensor_free(ctx, &x);
 *
 * Extension tier (include/shapejit/ext/): for backends, tools and tests
 * that work below sj_engine; it may change between minor versions.
 */
#ifndef SHAPEJIT_ONNX_H
#define SHAPEJIT_ONNX_H

#include "shapejit/model.h"
#include "shapejit/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads a serialized onnx.TensorProto holding float32 data (raw_data or
 * float_data). Another dtype is SJ_E_UNSUPPORTED naming it; malformed bytes,
 * a payload that disagrees with the dims, or rank > SJ_MAX_RANK are
 * SJ_E_PARSE / SJ_E_UNSUPPORTED naming the file. *out owns its data. */
SJ_API sj_status sj_onnx_tensor_read(sj_ctx *ctx, const char *path, sj_tensor *out);
SJ_API sj_status sj_onnx_tensor_read_mem(sj_ctx *ctx, const void *bytes, size_t len, const char *what,
                                         sj_tensor *out);

#ifdef __cplusplus
}
#endif
#endif
