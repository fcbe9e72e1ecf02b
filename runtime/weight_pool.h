/* Content-addressed, reference-counted weight buffers: one copy of a
 * param per memory domain, however many executables (buckets) and engines
 * use it. Not installed.
 *
 *   void *buf;
 *   sj__weight_pool_acquire(pool, hash, host_data, bytes, &backing, &buf);
 *   ...                                   // every bucket with that hash gets buf
 *   sj__weight_pool_release(pool, buf);    // the last release frees it
 *
 * Two pools exist: the context's, for memory the host addresses directly
 * (every host device of a context shares it, so engines on one context hold
 * one copy), and one per device whose memory the host cannot touch. The
 * backing says how a buffer is made and freed in that domain; an entry
 * keeps the backing it was made with, so it is freed there.
 *
 * A host-domain entry may instead lend bytes that lie in a read-only file
 * mapping (core/weight_map.h: ONNX external data whose layout is already
 * the runtime's): nothing is allocated or copied, the entry holds a
 * reference on the mapping, and its last release drops that. It answers
 * later acquires of the same hash like any entry. */
#ifndef SJ_CORE_WEIGHT_POOL_H
#define SJ_CORE_WEIGHT_POOL_H

#include "core/core_impl.h"
#include "core/weight_map.h"

#include <stddef.h>
#include <stdint.h>

typedef struct sj_weight_pool sj_weight_pool;

typedef struct sj_weight_backing {
    void *user;
    /* A buffer of `bytes` holding a copy of `src`; src NULL (the host
     * backings only): its bytes left for the caller to write. */
    sj_status (*make)(void *user, const void *src, size_t bytes, void **out);
    void (*free)(void *user, void *buf);
} sj_weight_backing;

typedef struct sj_weight_pool_stats {
    uint64_t buffers; /* distinct weights held */
    uint64_t bytes;   /* their size, counted once */
    uint64_t refs;    /* users of them (executables' params) */
    uint64_t shared;  /* acquires answered by a buffer already there */
    uint64_t mapped_buffers; /* of buffers, those lying in a file mapping */
    uint64_t mapped_bytes;   /* of bytes, theirs: mapped, not allocated */
    uint64_t mapped;  /* entries ever made from a mapping instead of a copy */
} sj_weight_pool_stats;

sj_status sj__weight_pool_create(sj_ctx *ctx, sj_weight_pool **out);
/* Frees what is still held, through each entry's backing. */
void sj__weight_pool_destroy(sj_weight_pool *p);

/* The buffer for `hash` (a content hash of the weight's bytes) and `bytes`:
 * the held one, with one more reference, or a fresh one made by `backing`
 * from `src`. */
sj_status sj__weight_pool_acquire(sj_weight_pool *p, const uint8_t hash[32], const void *src,
                                 size_t bytes, const sj_weight_backing *backing, void **out);
/* As acquire, but a fresh entry is `data` itself, which lies in map (the
 * entry takes a reference on it) rather than a copy: for the host domain,
 * whose kernels read params in place. data must stay valid and unchanged
 * while map lives (sj__weight_map_check says whether it did). */
sj_status sj__weight_pool_acquire_mapped(sj_weight_pool *p, const uint8_t hash[32], const void *data,
                                        size_t bytes, const sj_weight_backing *backing,
                                        sj_weight_map *map, void **out);
/* As acquire, but a fresh entry's bytes are written by fill(user, buf) into
 * memory the backing makes: for a host-domain buffer derived from a weight
 * (a GEMM's packed panels), made once under the pool's lock however many
 * loads ask for it at once. hash names the derived bytes, not the weight. */
sj_status sj__weight_pool_acquire_filled(sj_weight_pool *p, const uint8_t hash[32], size_t bytes,
                                        const sj_weight_backing *backing,
                                        void (*fill)(void *user, void *buf), void *user,
                                        void **out);
/* The held buffer for (hash, bytes, backing) with one more reference, or
 * false (nothing acquired): lets a caller that must first make the source
 * bytes (a narrowed weight) skip that when they are already held. */
bool sj__weight_pool_acquire_held(sj_weight_pool *p, const uint8_t hash[32], size_t bytes,
                                 const sj_weight_backing *backing, void **out);
/* Drops one reference to buf (a pointer acquire returned); NULL is a no-op. */
void sj__weight_pool_release(sj_weight_pool *p, void *buf);
void sj__weight_pool_stats_get(sj_weight_pool *p, sj_weight_pool_stats *out);
/* The mapping buf (a held buffer) lies in, NULL for a copy: valid while
 * the caller holds its reference on buf. */
sj_weight_map *sj__weight_pool_buffer_map(sj_weight_pool *p, const void *buf);

/* The context's pool of host-addressable weights. */
sj_weight_pool *sj__ctx_weight_pool(sj_ctx *ctx);
/* The backing for that pool: 64-byte aligned memory from the context's
 * allocator, which outlives any one device. */
const sj_weight_backing *sj__ctx_host_weight_backing(sj_ctx *ctx);

#endif
