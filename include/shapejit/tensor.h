/* shapejit/tensor.h — dense host tensors (float32, int64, int32, bool) and .npy files.
 *
 *   sj_tensor t;
 *   if (sj_npy_read(ctx, "x.npy", &t) != SJ_OK) puts(sj_ctx_last_error(ctx));
 *   ... t.data[i] ...
 *   sj_npy_write(ctx, "y.npy", &t);   // atomic: temp file + rename
 *   sj_tensor_free(ctx, &t);
 *
 * A tensor made by sj_tensor_alloc / sj_npy_read owns its data (allocated
 * through the context); one filled in by the caller may borrow memory and
 * must then not be passed to sj_tensor_free.
 */
#ifndef SHAPEJIT_TENSOR_H
#define SHAPEJIT_TENSOR_H

#include "shapejit/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sj_tensor {
    int rank;
    int64_t dims[SJ_MAX_RANK]; /* concrete, >= 0 */
    union {                    /* row-major, C order; read the member of `dtype` */
        float *data;
        int64_t *i64;
        int32_t *i32;
        uint8_t *b8; /* SJ_BOOL: 0 or 1 per element */
        void *bytes;
    };
    sj_dtype dtype; /* SJ_F32 (0) unless set */
} sj_tensor;

SJ_API int64_t sj_tensor_numel(const sj_tensor *t);
/* Allocates zero-filled float32 data for the given concrete shape. */
SJ_API sj_status sj_tensor_alloc(sj_ctx *ctx, int rank, const int64_t *dims, sj_tensor *out);
/* The same for any element type (sets out->dtype). */
SJ_API sj_status sj_tensor_alloc_typed(sj_ctx *ctx, sj_dtype dtype, int rank, const int64_t *dims,
                                sj_tensor *out);
/* Bytes of t's elements (numel * element size); -1 for a malformed tensor. */
SJ_API int64_t sj_tensor_bytes(const sj_tensor *t);
SJ_API void sj_tensor_free(sj_ctx *ctx, sj_tensor *t);
/* Fills t with seeded values, for benchmarks and tuning runs: floats
 * uniform in [-1, 1), integers in [0, 8) (valid token ids and positions
 * for any vocabulary of 8 or more), bools 0 or 1. The same seed gives the
 * same values on every machine. */
SJ_API void sj_tensor_fill_seeded(sj_tensor *t, uint64_t seed);

/* .npy version 1.0-3.0, dtype '<f4', '<i8', '<i4' or '|b1' (sets dtype), C order
 * only; anything else (another
 * dtype, Fortran order, a header that lies about the payload size, rank >
 * SJ_MAX_RANK) is SJ_E_PARSE with a message naming the file and the field. */
SJ_API sj_status sj_npy_read(sj_ctx *ctx, const char *path, sj_tensor *out);
SJ_API sj_status sj_npy_read_mem(sj_ctx *ctx, const void *bytes, size_t len, const char *what,
                                 sj_tensor *out);
/* Writes to path.tmp.<pid> then renames, so a failure leaves no partial file. */
SJ_API sj_status sj_npy_write(sj_ctx *ctx, const char *path, const sj_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
