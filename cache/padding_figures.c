/* The padding figures of a bucket: memory (rows its buffers hold beyond the
 * requests) and work (rows its kernels ran beyond them), kept apart because
 * kernels that run over the active extent pay the first and not the second. */
#include "cache/bucketed_cache_impl.h"

#include <string.h>

sj_status sj_bucketed_cache_bucket_padding(sj_bucketed_cache *c, int i, sj_bucket_padding *out) {
    if (!c || !out) return sj_fail(c ? c->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    memset(out, 0, sizeof *out);
    if (i < 0 || i >= c->n_buckets)
        return sj_fail(c->ctx, SJ_E_OUT_OF_RANGE, "bucketed cache: bucket %d of %d does not exist", i,
                       c->n_buckets);
    const sj_cache_bucket *b = &c->buckets[i];
    out->extent = sj_ladder_extent(c->ladder, i);
    /* rows first: a run bumps runs before rows, so every run in rows is in
     * runs and the difference below never goes negative mid-run. */
    out->rows = atomic_load_explicit(&b->rows, memory_order_seq_cst);
    out->runs = atomic_load_explicit(&b->runs, memory_order_seq_cst);
    out->padded_rows_allocated = out->runs * (uint64_t)out->extent - out->rows;
    if (!c->comp.memory) {
        out->padded_rows_computed = -1;
        return SJ_OK;
    }
    sj_executable_memory_info m;
    SJ_TRY(sj_bucketed_cache_bucket_memory(c, i, &m));
    out->padded_rows_computed = (int64_t)(m.rows_computed - m.rows_requested +
                                          atomic_load(&b->swapped_padded_computed));
    out->arena_bytes = m.arena_bytes;
    return SJ_OK;
}
