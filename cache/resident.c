/* The LRU bound on resident buckets: buckets whose executables hold run
 * memory (arena, padded inputs and outputs). Loading a bucket costs only
 * code and shared weights; serving it costs its run memory, so memory
 * follows the buckets in use, not the ladder's length. A trimmed bucket's
 * next run makes its run memory again (the executable does that itself, so
 * this bookkeeping may lag a racing run without ever being unsafe). */
#include "cache/bucketed_cache_impl.h"

#include <string.h>

/* The least recently run resident bucket other than keep, or -1; resident_mu held. */
static int lru_victim(sj_bucketed_cache *c, int keep) {
    int v = -1;
    for (int i = 0; i < c->n_buckets; i++)
        if (i != keep && c->resident_tick[i] &&
            (v < 0 || c->resident_tick[i] < c->resident_tick[v]))
            v = i;
    return v;
}

void sj__cache_resident_touch(sj_bucketed_cache *c, int b) {
    if (c->max_resident <= 0 || !c->comp.trim) return;
    pthread_mutex_lock(&c->resident_mu);
    if (!c->resident_tick) {
        c->resident_tick = sj_calloc(c->ctx, (size_t)c->n_buckets, sizeof *c->resident_tick);
        if (!c->resident_tick) { /* no bookkeeping, no bound: the run itself still works */
            pthread_mutex_unlock(&c->resident_mu);
            return;
        }
    }
    if (!c->resident_tick[b]) c->n_resident++;
    c->resident_tick[b] = ++c->resident_clock;
    while (c->n_resident > c->max_resident) {
        int v = lru_victim(c, b);
        if (v < 0) break;
        c->resident_tick[v] = 0;
        c->n_resident--;
        /* Trimmed outside resident_mu, under the victim's run lock: a run of
         * it in flight finishes first. Never two run locks at once. */
        pthread_mutex_unlock(&c->resident_mu);
        sj_cache_bucket *vb = &c->buckets[v];
        pthread_mutex_lock(&vb->run_mu);
        void *exe = atomic_load_explicit(&vb->exe, memory_order_acquire);
        if (exe) c->comp.trim(c->comp.ctx, exe);
        pthread_mutex_unlock(&vb->run_mu);
        atomic_fetch_add_explicit(&c->resident_evictions, 1, memory_order_relaxed);
        pthread_mutex_lock(&c->resident_mu);
    }
    pthread_mutex_unlock(&c->resident_mu);
}

void sj__cache_resident_after_run(sj_bucketed_cache *c, int b, void *exe) {
    if (c->max_resident <= 0 || !c->comp.trim) return;
    pthread_mutex_lock(&c->resident_mu);
    bool kept = c->resident_tick && c->resident_tick[b];
    pthread_mutex_unlock(&c->resident_mu);
    /* Another worker chose b as its victim between b's touch and its run (or
     * while it ran): b made its run memory again after that trim, so it
     * gives it back now, and the bound holds whenever no run is in flight. */
    if (!kept) {
        c->comp.trim(c->comp.ctx, exe);
        atomic_fetch_add_explicit(&c->resident_evictions, 1, memory_order_relaxed);
    }
}

void sj__cache_resident_destroy(sj_bucketed_cache *c) {
    sj_free(c->ctx, c->resident_tick);
    pthread_mutex_destroy(&c->resident_mu);
}

sj_status sj_bucketed_cache_bucket_memory(sj_bucketed_cache *c, int i, sj_executable_memory_info *out) {
    if (!c || !out) return sj_fail(c ? c->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    memset(out, 0, sizeof *out);
    if (i < 0 || i >= c->n_buckets)
        return sj_fail(c->ctx, SJ_E_OUT_OF_RANGE, "bucketed cache: bucket %d of %d does not exist", i,
                       c->n_buckets);
    /* Under the bucket's mu: a native_after swap frees the executable it
     * replaces only after it let go of mu. */
    sj_cache_bucket *b = &c->buckets[i];
    pthread_mutex_lock(&b->mu);
    void *exe = atomic_load_explicit(&b->exe, memory_order_acquire);
    if (exe) {
        if (c->comp.memory) c->comp.memory(c->comp.ctx, exe, out);
    } else if (b->has_estimate) {
        *out = b->estimate;
    }
    pthread_mutex_unlock(&b->mu);
    return SJ_OK;
}
