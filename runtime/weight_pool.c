/* The weight pool: a small table of (hash, size) -> buffer with reference
 * counts, under one mutex. Lookups happen when an executable is made or
 * destroyed, never on the launch path, so a scan of the table is enough. */
#include "runtime/weight_pool.h"
#include "core/weight_map.h"

#include <pthread.h>
#include <string.h>

#define WEIGHT_ALIGN 64 /* as the host device's memory: any vector load the emitters use */

typedef struct weight_entry {
    uint8_t hash[32];
    size_t bytes;
    void *buf;
    uint64_t refs;
    sj_weight_backing backing; /* the domain it serves; frees it unless map */
    sj_weight_map *map;        /* buf lies in this file mapping (a reference): nothing was allocated */
} weight_entry;

struct sj_weight_pool {
    sj_ctx *ctx;
    pthread_mutex_t mu;
    weight_entry *entries;
    size_t n, cap;
    uint64_t shared, mapped;
    sj_weight_backing host; /* the context pool's own backing */
};

/* Host backing: the aligned start with the raw pointer stored right before it. */
static sj_status host_make(void *user, const void *src, size_t bytes, void **out) {
    sj_ctx *ctx = user;
    size_t total;
    if (sj_add_overflow_size(bytes, WEIGHT_ALIGN + sizeof(void *), &total))
        return sj_fail(ctx, SJ_E_NOMEM, "weights: %zu bytes is too large", bytes);
    char *raw = sj_alloc(ctx, total);
    if (!raw) return sj_fail(ctx, SJ_E_NOMEM, "weights: out of memory for %zu bytes", bytes);
    uintptr_t start = ((uintptr_t)raw + sizeof(void *) + WEIGHT_ALIGN - 1) & ~(uintptr_t)(WEIGHT_ALIGN - 1);
    ((void **)start)[-1] = raw;
    if (bytes && src) memcpy((void *)start, src, bytes);
    *out = (void *)start;
    return SJ_OK;
}

static void host_free(void *user, void *buf) {
    if (buf) sj_free(user, ((void **)buf)[-1]);
}

sj_status sj__weight_pool_create(sj_ctx *ctx, sj_weight_pool **out) {
    sj_weight_pool *p = sj_calloc(ctx, 1, sizeof *p);
    if (!p) return SJ_E_NOMEM;
    p->ctx = ctx;
    pthread_mutex_init(&p->mu, NULL);
    p->host = (sj_weight_backing){ctx, host_make, host_free};
    *out = p;
    return SJ_OK;
}

/* Gives back what entry e holds: its mapping's reference, or its buffer. */
static void drop_entry(const weight_entry *e) {
    if (e->map)
        sj__weight_map_release(e->map);
    else
        e->backing.free(e->backing.user, e->buf);
}

void sj__weight_pool_destroy(sj_weight_pool *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) drop_entry(&p->entries[i]);
    sj_free(p->ctx, p->entries);
    pthread_mutex_destroy(&p->mu);
    sj_free(p->ctx, p);
}

static weight_entry *find_hash(sj_weight_pool *p, const uint8_t hash[32], size_t bytes,
                               const sj_weight_backing *backing) {
    for (size_t i = 0; i < p->n; i++) {
        weight_entry *e = &p->entries[i];
        if (e->bytes == bytes && e->backing.user == backing->user && e->backing.make == backing->make &&
            !memcmp(e->hash, hash, 32))
            return e;
    }
    return NULL;
}

/* Another reference on the entry for (hash, bytes, backing), if there is
 * one. Caller holds p->mu. */
static bool share_locked(sj_weight_pool *p, const uint8_t hash[32], size_t bytes,
                         const sj_weight_backing *backing, void **out) {
    weight_entry *e = find_hash(p, hash, bytes, backing);
    if (!e) return false;
    e->refs++;
    p->shared++;
    *out = e->buf;
    return true;
}

/* A new entry for (hash, bytes, backing): buf made by the backing from
 * src, or (map) src itself. Caller holds p->mu. */
static sj_status add_locked(sj_weight_pool *p, const uint8_t hash[32], const void *src, size_t bytes,
                            const sj_weight_backing *backing, sj_weight_map *map, void **out) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        weight_entry *grown = sj_realloc(p->ctx, p->entries, cap * sizeof *grown);
        if (!grown) return sj_fail(p->ctx, SJ_E_NOMEM, "weights: out of memory for the pool's table");
        p->entries = grown;
        p->cap = cap;
    }
    /* Entries are told apart by their buffer (release, buffer_map): two
     * tensors starting at one file offset (different lengths, so different
     * hashes) cannot both lend it; the second is copied. */
    for (size_t i = 0; map && i < p->n; i++)
        if (p->entries[i].buf == src) map = NULL;
    void *buf = (void *)src;
    if (!map) SJ_TRY(backing->make(backing->user, src, bytes, &buf));
    weight_entry *e = &p->entries[p->n++];
    memcpy(e->hash, hash, 32);
    e->bytes = bytes;
    e->buf = buf;
    e->refs = 1;
    e->backing = *backing;
    e->map = map;
    if (map) {
        sj__weight_map_retain(map);
        if (sj__weight_map_is_file(map)) p->mapped++;
    }
    *out = buf;
    return SJ_OK;
}

static sj_status acquire(sj_weight_pool *p, const uint8_t hash[32], const void *src, size_t bytes,
                         const sj_weight_backing *backing, sj_weight_map *map, void **out) {
    *out = NULL;
    pthread_mutex_lock(&p->mu);
    /* Made under the lock: two executables loading the same weight at once
     * must not both copy it (the point of the pool), and loads are rare. */
    sj_status st = share_locked(p, hash, bytes, backing, out)
                       ? SJ_OK
                       : add_locked(p, hash, src, bytes, backing, map, out);
    pthread_mutex_unlock(&p->mu);
    return st;
}

sj_status sj__weight_pool_acquire(sj_weight_pool *p, const uint8_t hash[32], const void *src,
                                 size_t bytes, const sj_weight_backing *backing, void **out) {
    return acquire(p, hash, src, bytes, backing, NULL, out);
}

sj_status sj__weight_pool_acquire_mapped(sj_weight_pool *p, const uint8_t hash[32], const void *data,
                                        size_t bytes, const sj_weight_backing *backing,
                                        sj_weight_map *map, void **out) {
    return acquire(p, hash, data, bytes, backing, map, out);
}

sj_status sj__weight_pool_acquire_filled(sj_weight_pool *p, const uint8_t hash[32], size_t bytes,
                                        const sj_weight_backing *backing,
                                        void (*fill)(void *user, void *buf), void *user,
                                        void **out) {
    *out = NULL;
    pthread_mutex_lock(&p->mu);
    sj_status st = SJ_OK;
    if (!share_locked(p, hash, bytes, backing, out)) {
        /* Under the lock, as acquire: concurrent loads make it once. */
        st = add_locked(p, hash, NULL, bytes, backing, NULL, out);
        if (st == SJ_OK) fill(user, *out);
    }
    pthread_mutex_unlock(&p->mu);
    return st;
}

bool sj__weight_pool_acquire_held(sj_weight_pool *p, const uint8_t hash[32], size_t bytes,
                                 const sj_weight_backing *backing, void **out) {
    pthread_mutex_lock(&p->mu);
    bool shared = share_locked(p, hash, bytes, backing, out);
    pthread_mutex_unlock(&p->mu);
    return shared;
}

void sj__weight_pool_release(sj_weight_pool *p, void *buf) {
    if (!p || !buf) return;
    weight_entry gone = {0};
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->n; i++) {
        weight_entry *e = &p->entries[i];
        if (e->buf != buf) continue;
        if (--e->refs == 0) {
            gone = *e;
            p->entries[i] = p->entries[--p->n];
        }
        break;
    }
    pthread_mutex_unlock(&p->mu);
    /* Freed outside the pool's lock: a device's free takes the device's lock,
     * which a thread making an executable holds while it acquires. */
    if (gone.buf) drop_entry(&gone);
}

void sj__weight_pool_stats_get(sj_weight_pool *p, sj_weight_pool_stats *out) {
    memset(out, 0, sizeof *out);
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    out->buffers = p->n;
    for (size_t i = 0; i < p->n; i++) {
        const weight_entry *e = &p->entries[i];
        out->bytes += e->bytes;
        out->refs += e->refs;
        if (e->map && sj__weight_map_is_file(e->map)) {
            out->mapped_buffers++;
            out->mapped_bytes += e->bytes;
        }
    }
    out->shared = p->shared;
    out->mapped = p->mapped;
    pthread_mutex_unlock(&p->mu);
}

sj_weight_map *sj__weight_pool_buffer_map(sj_weight_pool *p, const void *buf) {
    sj_weight_map *m = NULL;
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->n && !m; i++)
        if (p->entries[i].buf == buf) m = p->entries[i].map;
    pthread_mutex_unlock(&p->mu);
    return m;
}

const sj_weight_backing *sj__ctx_host_weight_backing(sj_ctx *ctx) {
    sj_weight_pool *p = sj__ctx_weight_pool(ctx);
    return p ? &p->host : NULL;
}

static void pool_destroy(void *p) {
    sj__weight_pool_destroy(p);
}

sj_weight_pool *sj__ctx_weight_pool(sj_ctx *ctx) {
    sj_weight_pool *p = sj__ctx_slot(ctx);
    if (p) return p;
    if (sj__weight_pool_create(ctx, &p) != SJ_OK) return NULL;
    return sj__ctx_slot_install(ctx, p, pool_destroy);
}
