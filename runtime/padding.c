/* Chunks of an active tensor inside its padded layout: everything after the
 * last symbolic axis is one contiguous run per outer index (a k*N axis's
 * active part being its first k*n entries). */
#include "runtime/padding_impl.h"

static int last_sym_axis(const sj_shape *s) {
    int k = -1;
    for (int i = 0; i < s->rank; i++)
        if (sj_dim_is_sym(s->dims[i])) k = i;
    return k;
}

static int64_t dim_at(const sj_shape *s, int i, int64_t extent) {
    return sj_dim_at(s->dims[i], extent);
}

int64_t sj__pad_chunk_count(const sj_shape *s, int64_t active) {
    int64_t n = 1;
    for (int i = 0; i < last_sym_axis(s); i++) n *= dim_at(s, i, active);
    return n;
}

int64_t sj__pad_chunks(const sj_shape *s, int64_t active, int64_t extent, sj_pad_chunk_fn fn,
                      void *user) {
    int k = last_sym_axis(s);
    int64_t run = 1;
    for (int i = k < 0 ? 0 : k; i < s->rank; i++) run *= dim_at(s, i, k < 0 ? extent : active);
    if (k <= 0) {
        fn(user, 0, 0, run);
        return 1;
    }
    /* Strides of the outer axes 0..k-1 in both layouts, in elements. */
    int64_t dense_stride[SJ_MAX_RANK], padded_stride[SJ_MAX_RANK], count[SJ_MAX_RANK];
    int64_t ds = 1, ps = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        if (i < k) {
            dense_stride[i] = ds;
            padded_stride[i] = ps;
            count[i] = dim_at(s, i, active);
        }
        ds *= dim_at(s, i, active);
        ps *= dim_at(s, i, extent);
    }
    int64_t idx[SJ_MAX_RANK] = {0};
    int64_t chunks = 0;
    for (;;) {
        int64_t d = 0, p = 0;
        for (int i = 0; i < k; i++) {
            d += idx[i] * dense_stride[i];
            p += idx[i] * padded_stride[i];
        }
        fn(user, d, p, run);
        chunks++;
        int i = k - 1;
        while (i >= 0 && ++idx[i] == count[i]) idx[i--] = 0;
        if (i < 0) return chunks;
    }
}
