/* Tiered compilation: a bucket no store tier holds is served first by code
 * the quick compiler makes (the host's at a lower opt level: a fraction of
 * the compile time), while the background thread of specialise.c makes the
 * full code, stores it and swaps it in. The quick bytes are loaded and
 * dropped, never stored or published: the store tiers only ever hold a
 * bucket's full code, so another process (or this one restarted) loads
 * that or makes its own quick code, never mistakes quick code for final. */
#include "cache/bucketed_cache_impl.h"
#include "core/clock.h"

sj_status sj__cache_quick_make(sj_bucketed_cache *c, int64_t extent, void **exe) {
    void *art;
    size_t len;
    uint64_t t0 = sj__now_ns();
    sj_status st = c->quick.compile(c->quick.ctx, c->g, extent, &art, &len);
    atomic_fetch_add_explicit(&c->quick_compile_ns, sj__now_ns() - t0, memory_order_relaxed);
    if (st != SJ_OK) {
        sj__error_prefix(c->ctx, "bucket %lld: quick compile (tiered)", (long long)extent);
        return st;
    }
    atomic_fetch_add_explicit(&c->quick_compiles, 1, memory_order_relaxed);
    /* Loaded by the cache's own compiler: its run and destroy take it,
     * as they take the full code that replaces it. */
    st = c->comp.load(c->comp.ctx, c->g, extent, art, len, exe);
    sj_free(c->ctx, art);
    return st;
}
