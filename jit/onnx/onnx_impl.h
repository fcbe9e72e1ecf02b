/* Private to jit/onnx: decoded ONNX tensors and the loader entry that the
 * conformance runner uses to bind int64 graph inputs (shapes, axes) as
 * constants. Not installed. */
#ifndef SJ_ONNX_IMPL_H
#define SJ_ONNX_IMPL_H

#include "shapejit/ext/onnx.h"
#include "core/core_impl.h"
#include "core/file_read.h"

#include "onnx.pb-c.h"

/* ONNX tensors may have more dims than the IR; constants used as shapes or
 * axes are rank 0 or 1, and float constants must fit SJ_MAX_RANK to become
 * params, so this bound only limits what can be decoded at all. */
#define SJ_ONNX_MAX_RANK 8

/* Messages nested deeper than this (model > graph > node > attribute >
 * graph ...) are refused before unpacking: protobuf-c recurses per level.
 * Real models with nested If/Loop bodies stay far below it. */
#define SJ_ONNX_MAX_NESTING 100

/* The newest default-domain opset whose op semantics the importer knows
 * (ONNX 1.18); newer models are refused rather than read the old way. */
#define SJ_ONNX_MAX_OPSET 23

/* SJ_E_PARSE "<what>: nesting too deep ..." when the wire bytes nest
 * messages of `desc` deeper than SJ_ONNX_MAX_NESTING; SJ_OK otherwise,
 * malformed bytes included (unpack reports those). Iterative. */
sj_status sj_onnx_check_nesting(sj_ctx *ctx, const ProtobufCMessageDescriptor *desc,
                                const void *bytes, size_t len, const char *what);

/* A decoded TensorProto: float32 or int64 data, owned (sj_alloc). */
typedef struct sj_onnx_tensor {
    int32_t dtype; /* ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT or __INT64 */
    int rank;
    int64_t dims[SJ_ONNX_MAX_RANK];
    int64_t numel;
    float *f;   /* dtype FLOAT */
    int64_t *i; /* dtype INT64 */
} sj_onnx_tensor;

/* Name of an ONNX TensorProto.DataType value ("FLOAT16", "INT64", ...). */
const char *sj_onnx_dtype_name(int32_t dtype);

/* Decodes t (float32 or int64 only; raw_data or typed fields). Anything else
 * (another dtype, external data, a payload whose size disagrees with dims)
 * is SJ_E_UNSUPPORTED / SJ_E_PARSE with a message naming `what`. */
sj_status sj_onnx_tensor_decode(sj_ctx *ctx, const Onnx__TensorProto *t, const char *what,
                                sj_onnx_tensor *out);
void sj_onnx_tensor_release(sj_ctx *ctx, sj_onnx_tensor *t);

/* protobuf-c allocations routed through the context's allocator hook. It
 * remembers a failed allocation, because protobuf-c reports out of memory
 * and malformed bytes alike (NULL). Must outlive what it unpacked. */
typedef struct sj_onnx_pb_alloc {
    ProtobufCAllocator base;
    sj_ctx *ctx;
    bool failed;
} sj_onnx_pb_alloc;

void sj_onnx_pb_alloc_init(sj_onnx_pb_alloc *a, sj_ctx *ctx);
/* The status for a NULL from protobuf-c's unpack: SJ_E_NOMEM or SJ_E_PARSE,
 * with "<what>: not a valid <kind> (truncated or corrupt)". */
sj_status sj_onnx_unpack_failed(const sj_onnx_pb_alloc *a, const char *what, const char *kind);

/* Unpacks a serialized ModelProto after the nesting check; SJ_E_PARSE when
 * the bytes are not one. Free with onnx__model_proto__free_unpacked. */
sj_status sj_onnx_model_unpack(sj_onnx_pb_alloc *a, const void *bytes, size_t len,
                               const char *what, Onnx__ModelProto **out);

/* Unpacks a serialized TensorProto; SJ_E_PARSE when the bytes are not one.
 * Free with onnx__tensor_proto__free_unpacked(*out, &a->base). */
sj_status sj_onnx_tensor_unpack(sj_onnx_pb_alloc *a, const void *bytes, size_t len,
                                const char *what, Onnx__TensorProto **out);

/* A graph input given a value at load time: the loader treats it as an
 * initialiser (so shape and axes inputs of the node tests are constants). */
typedef struct sj_onnx_binding {
    const char *name;
    const sj_onnx_tensor *tensor; /* borrowed */
} sj_onnx_binding;

sj_status sj_onnx_load_bound(sj_ctx *ctx, const void *bytes, size_t len, const char *filename,
                             const sj_model_options *o, int n_bound, const sj_onnx_binding *bound,
                             sj_graph **out);


#endif
