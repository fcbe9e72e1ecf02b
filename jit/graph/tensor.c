/* Host tensors: element counts and context-owned storage. (.npy reading and
 * writing live elsewhere.) */
#include "shapejit/tensor.h"
#include "core/core_impl.h"

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

sj_status sj_tensor_alloc(sj_ctx *ctx, int rank, const int64_t *dims, sj_tensor *out) {
    if (!ctx || !out)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    memset(out, 0, sizeof *out);
    if (rank < 0 || rank > SJ_MAX_RANK || (rank > 0 && !dims))
        return sj_fail(ctx, SJ_E_INVALID_ARG, "tensor: rank %d is outside 0..%d", rank,
                       SJ_MAX_RANK);
    sj_tensor t = {.rank = rank};
    if (rank > 0) memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    int64_t n = sj_tensor_numel(&t);
    if (n < 0)
        return sj_fail(ctx, SJ_E_INVALID_ARG,
                       "tensor: dims are negative or exceed 2^40 elements (rank %d)", rank);
    if (!(t.data = sj_calloc(ctx, (size_t)n, sizeof(float))))
        return sj_fail(ctx, SJ_E_NOMEM, "tensor: out of memory for %lld floats", (long long)n);
    *out = t;
    return SJ_OK;
}

void sj_tensor_free(sj_ctx *ctx, sj_tensor *t) {
    if (!ctx || !t) return;
    sj_free(ctx, t->data);
    t->data = NULL;
}
