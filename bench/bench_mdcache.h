/* Metadata info cache figures (issue 7): hit cost, and insert-with-eviction
 * cost in a full cache of 16, 4096, 65536 entries (flat when eviction is
 * O(1)). Shared by bench programs and `shapejit bench`; header-only. */
#ifndef SJ_BENCH_MDCACHE_H
#define SJ_BENCH_MDCACHE_H

#include <stdint.h>

#include "bench/bench_timing.h"
#include "shapejit/ext/metadata_cache.h"

#define BENCH_INFO_WORDS 12 /* a rank-2 and a rank-3 tensor's shapes and strides, a scalar */

/* The cache owns nothing real here: buffers are tags, so only the cache's
 * own work is timed. */
static inline void bench_release_nothing(void *user, void *buffer) {
    (void)user;
    (void)buffer;
}

static inline void bench_fill_key(int64_t *w, int64_t id) {
    for (int i = 0; i < BENCH_INFO_WORDS; i++) w[i] = id * 31 + i;
}

/* Median ns of a lookup that hits, over 256 stored keys. 0 on success. */
static inline int bench_mdcache_hit(sj_ctx *ctx, double *out_ns) {
    sj_mdcache *c;
    if (sj_mdcache_create(ctx, NULL, bench_release_nothing, NULL, &c) != SJ_OK) return 1;
    enum { KEYS = 256, CALLS = 200000 };
    static int64_t keys[KEYS][BENCH_INFO_WORDS];
    for (int k = 0; k < KEYS; k++) {
        bench_fill_key(keys[k], k);
        sj_mdcache_store(c, keys[k], BENCH_INFO_WORDS, (void *)(uintptr_t)(k + 1));
    }
    double t[BENCH_BATCHES];
    uintptr_t sink = 0;
    for (int b = 0; b < BENCH_BATCHES; b++) {
        double t0 = bench_cpu_ns();
        for (int i = 0; i < CALLS; i++) {
            void *buf = NULL;
            sj_mdcache_lookup(c, keys[i % KEYS], BENCH_INFO_WORDS, &buf);
            sink += (uintptr_t)buf;
        }
        t[b] = (bench_cpu_ns() - t0) / CALLS;
    }
    sj_mdcache_destroy(c);
    if (sink == 0) return 1; /* every lookup hit, so the sum cannot be 0 */
    *out_ns = bench_median(t, BENCH_BATCHES);
    return 0;
}

/* A full cache of `entries`: each store of a new key evicts the LRU one.
 * Median ns per lookup-miss + store; *probes: entries looked at per eviction. */
static inline int bench_mdcache_evict_insert(sj_ctx *ctx, size_t entries, double *out_ns,
                                             double *probes) {
    sj_mdcache_policy p;
    sj_mdcache_policy_init(&p);
    p.max_entries = entries;
    sj_mdcache *c;
    if (sj_mdcache_create(ctx, &p, bench_release_nothing, NULL, &c) != SJ_OK) return 1;
    int64_t w[BENCH_INFO_WORDS], id = 0;
    for (size_t i = 0; i < entries; i++) {
        bench_fill_key(w, id++);
        sj_mdcache_store(c, w, BENCH_INFO_WORDS, (void *)(uintptr_t)id);
    }
    enum { CALLS = 50000 };
    double t[BENCH_BATCHES];
    for (int b = 0; b < BENCH_BATCHES; b++) {
        double t0 = bench_cpu_ns();
        for (int i = 0; i < CALLS; i++) {
            bench_fill_key(w, id++);
            void *buf;
            if (sj_mdcache_lookup(c, w, BENCH_INFO_WORDS, &buf) == SJ_MDCACHE_BUILD_STORE)
                sj_mdcache_store(c, w, BENCH_INFO_WORDS, (void *)(uintptr_t)id);
        }
        t[b] = (bench_cpu_ns() - t0) / CALLS;
    }
    sj_mdcache_stats s;
    sj_mdcache_stats_get(c, &s);
    sj_mdcache_destroy(c);
    if (s.entries != entries || s.evictions == 0) return 1;
    *out_ns = bench_median(t, BENCH_BATCHES);
    *probes = (double)s.eviction_probes / (double)s.evictions;
    return 0;
}

#endif
