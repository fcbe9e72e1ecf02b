/* shapejit/ext/metadata_cache.h — read-only metadata info buffers (shapes,
 * strides, scalars of one launch) keyed by their exact words, shared by every
 * launch with the same words, pinned while a captured graph records them.
 *
 *   sj_mdcache_policy pol;
 *   sj_mdcache_policy_init(&pol);                  // 4096 entries, <= 2048 bytes
 *   sj_mdcache *c;
 *   sj_mdcache_create(ctx, &pol, free_device_buffer, dev, &c);
 *   void *buf;
 *   switch (sj_mdcache_lookup(c, words, n_words, &buf)) {
 *   case SJ_MDCACHE_HIT: break;                    // buf is the cached buffer
 *   case SJ_MDCACHE_BUILD_STORE:                   // build it, hand it over
 *       buf = upload(words, n_words);
 *       if (sj_mdcache_store(c, words, n_words, buf) != SJ_OK) { ... buf is still yours ... }
 *       break;
 *   case SJ_MDCACHE_BUILD_FORGET: buf = upload(...); ...; free it yourself; break;
 *   }
 *   sj_mdcache_destroy(c);                         // releases every buffer
 *
 * Policy apart from mechanism: sj_mdcache_policy decides whether an info is
 * worth caching (by size and mode), how many entries to keep and whether the
 * entries touched now are pinned; the cache only carries that out.
 *
 * Modes. Normal: infos up to max_cached_bytes are cached, at most max_entries
 * of them; a store into a full cache first evicts the least-recently-used
 * entry no graph pins, in O(1). Capture (between sj_mdcache_capture_begin and
 * commit/discard): every info is cached whatever its size, nothing is
 * evicted, and every entry the capture touches, hit or fresh, is pinned once
 * per capture. capture_commit(graph) seals those pins under the graph;
 * graph_release(graph) drops them and frees each entry no other live graph
 * pins, since the graph was the reason it stayed. Pins are counted, so an
 * entry shared by two graphs lives until both are released.
 *
 * Buffers are opaque handles (device memory); the cache owns each stored one
 * and gives it back through the release callback when the entry goes. A hit
 * hashes the caller's words and compares them in place: no copy, no
 * allocation. Not thread-safe: the owner (a device) serialises calls.
 *
 * Extension tier (include/shapejit/ext/): for backends, tools and tests
 * that work below sj_engine; it may change between minor versions.
 */
#ifndef SHAPEJIT_METADATA_CACHE_H
#define SHAPEJIT_METADATA_CACHE_H

#include "shapejit/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sj_cache_mode {
    SJ_CACHE_NORMAL,
    SJ_CACHE_CAPTURE
} sj_cache_mode;

typedef struct sj_mdcache_policy {
    size_t max_entries;      /* 0 disables caching in Normal mode */
    size_t max_cached_bytes; /* largest info cached in Normal mode */
    sj_cache_mode mode;
} sj_mdcache_policy;

/* 4096 entries of at most 2048 bytes (256 words: a few tensors' shapes and
 * strides; bigger infos cost less to rebuild than to hash), Normal mode. */
SJ_API void sj_mdcache_policy_init(sj_mdcache_policy *p);
/* Whether an info of `bytes` goes through the cache at all. */
SJ_API bool sj_mdcache_policy_should_cache(const sj_mdcache_policy *p, size_t bytes);
/* The entry bound to keep; false when unbounded (Capture). */
SJ_API bool sj_mdcache_policy_capacity(const sj_mdcache_policy *p, size_t *out);
/* Whether entries touched now are pinned to the graph being captured. */
SJ_API bool sj_mdcache_policy_pins_entries(const sj_mdcache_policy *p);

typedef struct sj_mdcache sj_mdcache;

/* Called with `user` and a buffer when the cache lets go of it. */
typedef void (*sj_mdcache_release_fn)(void *user, void *buffer);

/* policy NULL = defaults; its mode is ignored (a cache starts Normal). */
SJ_API sj_status sj_mdcache_create(sj_ctx *ctx, const sj_mdcache_policy *policy,
                                   sj_mdcache_release_fn release, void *user, sj_mdcache **out);
/* Releases every buffer, pinned or not. NULL is a no-op. */
SJ_API void sj_mdcache_destroy(sj_mdcache *c);

typedef enum sj_mdcache_lookup_result {
    SJ_MDCACHE_HIT,          /* *out is the cached buffer (still owned by the cache) */
    SJ_MDCACHE_BUILD_STORE,  /* miss: build the buffer and sj_mdcache_store it */
    SJ_MDCACHE_BUILD_FORGET  /* the policy does not cache this info: build, use, free */
} sj_mdcache_lookup_result;

/* What to do about the info `words[0..n_words)`. A hit marks the entry most
 * recently used and, during a capture, pins it (once per capture). */
SJ_API sj_mdcache_lookup_result sj_mdcache_lookup(sj_mdcache *c, const int64_t *words, size_t n_words,
                                                  void **out);
/* Records `buffer` for `words` after SJ_MDCACHE_BUILD_STORE; the words are
 * copied. In a full cache (Normal mode) the LRU unpinned entry goes first and
 * its memory is reused, so inserting allocates nothing in steady state. On
 * SJ_OK the cache owns the buffer. On failure the caller still does:
 * SJ_E_NOMEM (an eviction it made stays made); SJ_E_STATE when the words are
 * already cached or the policy would not cache them now. */
SJ_API sj_status sj_mdcache_store(sj_mdcache *c, const int64_t *words, size_t n_words, void *buffer);

/* Capture. begin: SJ_E_STATE when a capture is already in progress. commit:
 * SJ_E_STATE with no capture in progress, SJ_E_INVALID_ARG when `graph` is
 * already live (both leave the capture as it was), SJ_E_NOMEM (the capture
 * stays in progress; discard it). A capture that touched nothing still
 * commits its (empty) graph, so every commit is paired with one release.
 * discard: unpins what the
 * capture pinned, keeping the entries as ordinary ones; no capture in
 * progress = no-op. Both commit and discard return to Normal mode. */
SJ_API sj_status sj_mdcache_capture_begin(sj_mdcache *c);
SJ_API sj_status sj_mdcache_capture_commit(sj_mdcache *c, uint64_t graph);
SJ_API void sj_mdcache_capture_discard(sj_mdcache *c);
/* Drops `graph`'s pins; SJ_E_NOT_FOUND (nothing changes) for a graph that is
 * not live. */
SJ_API sj_status sj_mdcache_graph_release(sj_mdcache *c, uint64_t graph);
/* Frees every entry nothing pins (no live graph, no capture in progress). */
SJ_API void sj_mdcache_clear_unpinned(sj_mdcache *c);
/* Drops every entry: from now on every lookup misses. Unpinned buffers are
 * released at once; a buffer a live graph (or the capture in progress)
 * pinned is retired instead, never found again but kept until its last
 * graph is released (or the capture discarded), because that graph replays
 * against its pointer. */
SJ_API void sj_mdcache_clear(sj_mdcache *c);

SJ_API sj_cache_mode sj_mdcache_mode(const sj_mdcache *c);
SJ_API const sj_mdcache_policy *sj_mdcache_policy_of(const sj_mdcache *c);

typedef struct sj_mdcache_stats {
    size_t entries;     /* cached now */
    size_t pinned;      /* of those, pinned by a live graph or the capture */
    size_t lru_length;  /* evictable entries (the unpinned ones) */
    size_t live_graphs;
    size_t retired;     /* dropped by sj_mdcache_clear, kept for the graphs that pin them */
    uint64_t hits, misses, evictions;
    /* Entries examined to pick eviction victims; equals `evictions` because
     * the victim is always the LRU list's tail (no scan). */
    uint64_t eviction_probes;
} sj_mdcache_stats;

SJ_API void sj_mdcache_stats_get(const sj_mdcache *c, sj_mdcache_stats *out);

#ifdef __cplusplus
}
#endif
#endif
