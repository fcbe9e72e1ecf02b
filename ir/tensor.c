/* Host tensors: element counts and context-owned storage. (.npy reading and
 * writing live elsewhere.) */
#include "shapejit/tensor.h"
#include "core/core_impl.h"
#include "core/hash.h"

#include <string.h>

/* -1 for a malformed tensor (bad rank, negative dim) or a count past
 * SJ_MAX_ELEMENTS, so callers never size a buffer from an overflowed
 * product. */
int64_t sj_tensor_numel(const sj_tensor *t) {
    if (!t || t->rank < 0 || t->rank > SJ_MAX_RANK) return -1;
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < 0 || sj_mul_overflow_i64(n, t->dims[i], &n) || n > SJ_MAX_ELEMENTS)
            return -1;
    return n;
}

int64_t sj_tensor_bytes(const sj_tensor *t) {
    int64_t n = sj_tensor_numel(t);
    size_t es = t ? sj_dtype_size(t->dtype) : 0;
    return n < 0 || es == 0 ? -1 : n * (int64_t)es;
}

sj_status sj_tensor_alloc(sj_ctx *ctx, int rank, const int64_t *dims, sj_tensor *out) {
    return sj_tensor_alloc_typed(ctx, SJ_F32, rank, dims, out);
}

sj_status sj_tensor_alloc_typed(sj_ctx *ctx, sj_dtype dtype, int rank, const int64_t *dims,
                                sj_tensor *out) {
    if (!ctx || !out)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    memset(out, 0, sizeof *out);
    if (rank < 0 || rank > SJ_MAX_RANK || (rank > 0 && !dims))
        return sj_fail(ctx, SJ_E_INVALID_ARG, "tensor: rank %d is outside 0..%d", rank,
                       SJ_MAX_RANK);
    if (sj_dtype_size(dtype) == 0)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "tensor: element type %d does not exist", (int)dtype);
    sj_tensor t = {.rank = rank, .dtype = dtype};
    if (rank > 0) memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    int64_t n = sj_tensor_numel(&t);
    if (n < 0)
        return sj_fail(ctx, SJ_E_INVALID_ARG,
                       "tensor: dims are negative or exceed 2^40 elements (rank %d)", rank);
    /* at least one byte, so a tensor with no elements still has data */
    if (!(t.bytes = sj_calloc(ctx, n ? (size_t)n : 1, sj_dtype_size(dtype))))
        return sj_fail(ctx, SJ_E_NOMEM, "tensor: out of memory for %lld %s elements",
                       (long long)n, sj_dtype_name(dtype));
    *out = t;
    return SJ_OK;
}

void sj_tensor_free(sj_ctx *ctx, sj_tensor *t) {
    if (!ctx || !t) return;
    sj_free(ctx, t->data);
    t->data = NULL;
}

void sj_tensor_fill_seeded(sj_tensor *t, uint64_t seed) {
    uint64_t state = seed;
    int64_t n = sj_tensor_numel(t);
    for (int64_t k = 0; k < n; k++) {
        uint64_t r = sj__splitmix64(&state) >> 40;
        switch (t->dtype) {
        case SJ_I64: t->i64[k] = (int64_t)(r & 7); break;
        case SJ_I32: t->i32[k] = (int32_t)(r & 7); break;
        case SJ_BOOL: t->b8[k] = (uint8_t)(r & 1); break;
        default: t->data[k] = (float)((double)r / 8388608.0 - 1.0); break;
        }
    }
}
