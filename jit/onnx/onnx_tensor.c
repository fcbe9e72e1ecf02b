/* ONNX TensorProto decoding: initialisers, Constant values and the .pb files
 * of the node tests. */
#include "onnx_impl.h"

#include <string.h>

const char *sj_onnx_dtype_name(int32_t dtype) {
    static const char *const names[] = {
        "UNDEFINED", "FLOAT",  "UINT8",  "INT8",      "UINT16",     "INT16",
        "INT32",     "INT64",  "STRING", "BOOL",      "FLOAT16",    "DOUBLE",
        "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN",
        "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4",
    };
    if (dtype < 0 || (size_t)dtype >= sizeof names / sizeof names[0]) return "unknown dtype";
    return names[dtype];
}

static void *pb_alloc(void *user, size_t size) {
    sj_onnx_pb_alloc *a = user;
    void *p = sj_alloc(a->ctx, size);
    if (!p) a->failed = true;
    return p;
}

static void pb_free(void *user, void *ptr) {
    sj_onnx_pb_alloc *a = user;
    sj_free(a->ctx, ptr);
}

void sj_onnx_pb_alloc_init(sj_onnx_pb_alloc *a, sj_ctx *ctx) {
    a->base = (ProtobufCAllocator){pb_alloc, pb_free, a};
    a->ctx = ctx;
    a->failed = false;
}

sj_status sj_onnx_unpack_failed(const sj_onnx_pb_alloc *a, const char *what, const char *kind) {
    if (a->failed) return sj_fail(a->ctx, SJ_E_NOMEM, "%s: out of memory reading the protobuf", what);
    return sj_fail(a->ctx, SJ_E_PARSE, "%s: not a valid %s (truncated or corrupt protobuf)", what,
                   kind);
}

void sj_onnx_tensor_release(sj_ctx *ctx, sj_onnx_tensor *t) {
    if (!t) return;
    sj_free(ctx, t->f);
    sj_free(ctx, t->i);
    t->f = NULL;
    t->i = NULL;
}

static bool is_external(const Onnx__TensorProto *t) {
    return t->n_external_data > 0 ||
           (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL);
}

sj_status sj_onnx_tensor_decode(sj_ctx *ctx, const Onnx__TensorProto *t, const char *what,
                                sj_onnx_tensor *out) {
    memset(out, 0, sizeof *out);
    if (is_external(t))
        return sj_fail(ctx, SJ_E_UNSUPPORTED,
                       "%s: tensor data stored in an external file is not supported", what);
    if (t->segment)
        return sj_fail(ctx, SJ_E_UNSUPPORTED, "%s: segmented tensors are not supported", what);
    int32_t dtype = t->has_data_type ? t->data_type : ONNX__TENSOR_PROTO__DATA_TYPE__UNDEFINED;
    if (dtype != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && dtype != ONNX__TENSOR_PROTO__DATA_TYPE__INT64)
        return sj_fail(ctx, SJ_E_UNSUPPORTED, "%s: dtype %s is not supported (float32 only)", what,
                       sj_onnx_dtype_name(dtype));
    if (t->n_dims > SJ_ONNX_MAX_RANK)
        return sj_fail(ctx, SJ_E_UNSUPPORTED, "%s: rank %zu is too large (at most %d)", what,
                       t->n_dims, SJ_ONNX_MAX_RANK);
    int64_t numel = 1;
    for (size_t d = 0; d < t->n_dims; d++) {
        if (t->dims[d] < 0)
            return sj_fail(ctx, SJ_E_PARSE, "%s: dim %zu is negative (%lld)", what, d,
                           (long long)t->dims[d]);
        if (sj_mul_overflow_i64(numel, t->dims[d], &numel) || numel > SJ_MAX_ELEMENTS)
            return sj_fail(ctx, SJ_E_UNSUPPORTED, "%s: too many elements", what);
        out->dims[d] = t->dims[d];
    }
    out->rank = (int)t->n_dims;
    out->numel = numel;
    out->dtype = dtype;

    size_t esize = dtype == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ? sizeof(float) : sizeof(int64_t);
    size_t typed_n = dtype == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ? t->n_float_data : t->n_int64_data;
    const void *src;
    if (t->has_raw_data && (t->raw_data.len > 0 || typed_n == 0)) {
        if (t->raw_data.len != (size_t)numel * esize)
            return sj_fail(ctx, SJ_E_PARSE,
                           "%s: raw_data holds %zu bytes but the dims need %lld %s values", what,
                           t->raw_data.len, (long long)numel, sj_onnx_dtype_name(dtype));
        src = t->raw_data.data; /* little-endian on every host shapejit targets */
    } else {
        if (typed_n != (size_t)numel)
            return sj_fail(ctx, SJ_E_PARSE, "%s: %zu values stored but the dims need %lld", what,
                           typed_n, (long long)numel);
        src = dtype == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ? (const void *)t->float_data
                                                          : (const void *)t->int64_data;
    }
    void *dst = sj_alloc(ctx, (size_t)numel * esize);
    if (!dst) return sj_fail(ctx, SJ_E_NOMEM, "%s: out of memory", what);
    if (numel) memcpy(dst, src, (size_t)numel * esize);
    if (dtype == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        out->f = dst;
    else
        out->i = dst;
    return SJ_OK;
}

sj_status sj_onnx_tensor_unpack(sj_onnx_pb_alloc *a, const void *bytes, size_t len,
                                const char *what, Onnx__TensorProto **out) {
    *out = NULL;
    SJ_TRY(sj_onnx_check_nesting(a->ctx, &onnx__tensor_proto__descriptor, bytes, len, what));
    *out = onnx__tensor_proto__unpack(&a->base, len, bytes);
    return *out ? SJ_OK : sj_onnx_unpack_failed(a, what, "onnx.TensorProto");
}

sj_status sj_onnx_model_unpack(sj_onnx_pb_alloc *a, const void *bytes, size_t len,
                               const char *what, Onnx__ModelProto **out) {
    *out = NULL;
    SJ_TRY(sj_onnx_check_nesting(a->ctx, &onnx__model_proto__descriptor, bytes, len, what));
    *out = onnx__model_proto__unpack(&a->base, len, bytes);
    return *out ? SJ_OK : sj_onnx_unpack_failed(a, what, "ONNX model");
}

sj_status sj_onnx_tensor_read_mem(sj_ctx *ctx, const void *bytes, size_t len, const char *what,
                                  sj_tensor *out) {
    memset(out, 0, sizeof *out);
    Onnx__TensorProto *tp;
    sj_onnx_pb_alloc pa;
    sj_onnx_pb_alloc_init(&pa, ctx);
    SJ_TRY(sj_onnx_tensor_unpack(&pa, bytes, len, what, &tp));
    sj_onnx_tensor t;
    sj_status st = sj_onnx_tensor_decode(ctx, tp, what, &t);
    onnx__tensor_proto__free_unpacked(tp, &pa.base);
    if (st != SJ_OK) return st;
    if (t.dtype != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
        st = sj_fail(ctx, SJ_E_UNSUPPORTED, "%s: dtype %s is not supported (float32 only)", what,
                     sj_onnx_dtype_name(t.dtype));
    } else if (t.rank > SJ_MAX_RANK) {
        st = sj_fail(ctx, SJ_E_UNSUPPORTED, "%s: rank %d is too large (at most %d)", what, t.rank,
                     SJ_MAX_RANK);
    } else {
        out->rank = t.rank;
        memcpy(out->dims, t.dims, sizeof(int64_t) * (size_t)t.rank);
        out->data = t.f;
        return SJ_OK;
    }
    sj_onnx_tensor_release(ctx, &t);
    return st;
}

sj_status sj_onnx_tensor_read(sj_ctx *ctx, const char *path, sj_tensor *out) {
    memset(out, 0, sizeof *out);
    char *bytes;
    size_t len;
    SJ_TRY(sj_read_file(ctx, path, &bytes, &len));
    sj_status st = sj_onnx_tensor_read_mem(ctx, bytes, len, path, out);
    sj_free(ctx, bytes);
    return st;
}
