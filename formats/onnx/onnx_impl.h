/* Private to formats/onnx: decoded ONNX tensors and the loader entry that the
 * conformance runner uses to bind int64 graph inputs (shapes, axes) as
 * constants. Not installed. */
#ifndef SJ_ONNX_IMPL_H
#define SJ_ONNX_IMPL_H

#include "shapejit/ext/onnx.h"
#include "core/core_impl.h"
#include "core/file_read.h"
#include "core/weight_map.h"

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
sj_status sj__onnx_check_nesting(sj_ctx *ctx, const ProtobufCMessageDescriptor *desc,
                                const void *bytes, size_t len, const char *what);

/* A decoded TensorProto, owned (sj_alloc): FLOAT and DOUBLE values as
 * float in f, every integer dtype and BOOL as int64 in i. */
typedef struct sj_onnx_tensor {
    int32_t dtype; /* the ONNX dtype it was stored as */
    int rank;
    int64_t dims[SJ_ONNX_MAX_RANK];
    int64_t numel;
    float *f;   /* FLOAT, DOUBLE */
    int64_t *i; /* the integer dtypes and BOOL */
    /* f lies read-only in this mapping of its external-data file, or in
     * this adopted block of raw_data (sj__onnx_tensor_take): one
     * reference, not f, is owned; NULL when f or i are allocations. */
    sj_weight_map *map;
} sj_onnx_tensor;

/* Where one load reads external data: the model's folder, and each file
 * mapped so far (one mapping per file, shared by its tensors). A FLOAT
 * tensor at an offset aligned to 4 bytes is mapped in place (this is a
 * little-endian-only build, as raw_data already assumes); any other is
 * read into memory and counted in copied. */
typedef struct sj_onnx_external {
    const char *base_dir; /* NULL refuses external data */
    bool copy;            /* read every tensor into memory, map none */
    struct sj_onnx_mapped_file *files;
    int n_files, cap_files;
    int64_t copied;
    uint64_t copied_bytes;
} sj_onnx_external;
/* Drops the load's references on the files (tensors and graphs hold their own). */
void sj__onnx_external_free(sj_ctx *ctx, sj_onnx_external *x);

bool sj__onnx_dtype_is_float(int32_t dtype);
/* The IR element type of an ONNX dtype; false when the IR has none. */
bool sj__onnx_dtype_to_sj(int32_t onnx_dtype, sj_dtype *out);
/* A host tensor of t's IR dtype (SJ_E_UNSUPPORTED for another). */
sj_status sj__onnx_tensor_to_host(sj_ctx *ctx, const sj_onnx_tensor *t, const char *what,
                                 sj_tensor *out);

/* Name of an ONNX TensorProto.DataType value ("FLOAT16", "INT64", ...). */
const char *sj__onnx_dtype_name(int32_t dtype);

/* Decodes t (float, double, the integer dtypes and bool; raw_data, typed
 * fields or external data). External data (location, offset, length) is
 * mapped or read from ext->base_dir, the model's folder: an absolute
 * location, a '..' component or a symlink out of the folder is refused;
 * NULL ext (or base_dir) refuses external data. Anything else (another dtype, a payload whose
 * size disagrees with dims, a missing or truncated file) is
 * SJ_E_UNSUPPORTED / SJ_E_PARSE / SJ_E_IO with a message naming `what`
 * and the file. */
sj_status sj__onnx_tensor_decode(sj_ctx *ctx, const Onnx__TensorProto *t, const char *what,
                                sj_onnx_external *ext, sj_onnx_tensor *out);
/* As decode, but FLOAT raw_data (the bulk of a model's bytes) moves into
 * a weights block (out->map, out->f in it) instead of being copied,
 * leaving t without it: for a message decoded once and freed by this load
 * (the top graph's initialisers). */
sj_status sj__onnx_tensor_take(sj_ctx *ctx, Onnx__TensorProto *t, const char *what,
                              sj_onnx_external *ext, sj_onnx_tensor *out);
void sj__onnx_tensor_release(sj_ctx *ctx, sj_onnx_tensor *t);
/* out: src's values in an allocation of its own (src may be mapped or lent). */
sj_status sj__onnx_tensor_clone(sj_ctx *ctx, const sj_onnx_tensor *src, sj_onnx_tensor *out);

/* protobuf-c allocations routed through the context's allocator hook. It
 * remembers a failed allocation, because protobuf-c reports out of memory
 * and malformed bytes alike (NULL). Must outlive what it unpacked. */
typedef struct sj_onnx_pb_alloc {
    ProtobufCAllocator base;
    sj_ctx *ctx;
    bool failed;
} sj_onnx_pb_alloc;

void sj__onnx_pb_alloc_init(sj_onnx_pb_alloc *a, sj_ctx *ctx);
/* The status for a NULL from protobuf-c's unpack: SJ_E_NOMEM or SJ_E_PARSE,
 * with "<what>: not a valid <kind> (truncated or corrupt)". */
sj_status sj__onnx_unpack_failed(const sj_onnx_pb_alloc *a, const char *what, const char *kind);

/* Unpacks a serialized ModelProto after the nesting check; SJ_E_PARSE when
 * the bytes are not one. Free with onnx__model_proto__free_unpacked. */
sj_status sj__onnx_model_unpack(sj_onnx_pb_alloc *a, const void *bytes, size_t len,
                               const char *what, Onnx__ModelProto **out);

/* Unpacks a serialized TensorProto; SJ_E_PARSE when the bytes are not one.
 * Free with onnx__tensor_proto__free_unpacked(*out, &a->base). */
sj_status sj__onnx_tensor_unpack(sj_onnx_pb_alloc *a, const void *bytes, size_t len,
                                const char *what, Onnx__TensorProto **out);

/* A graph input given a value at load time: the loader treats it as an
 * initialiser (so shape and axes inputs of the node tests are constants). */
typedef struct sj_onnx_binding {
    const char *name;
    const sj_onnx_tensor *tensor; /* borrowed */
} sj_onnx_binding;

sj_status sj__onnx_load_bound(sj_ctx *ctx, const void *bytes, size_t len, const char *filename,
                             const sj_model_options *o, int n_bound, const sj_onnx_binding *bound,
                             sj_graph **out);
/* As sj__onnx_load_bound from m, unpacked with pa; frees m. */
sj_status sj__onnx_load_unpacked(sj_ctx *ctx, sj_onnx_pb_alloc *pa, Onnx__ModelProto *m,
                                const char *filename, const sj_model_options *o, int n_bound,
                                const sj_onnx_binding *bound, sj_graph **out);

#endif
