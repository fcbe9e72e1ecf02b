/* The weight pool: a small table of (hash, size) -> buffer with reference
 * counts, under one mutex. Lookups happen when an executable is made or
 * destroyed, never on the launch path, so a scan of the table is enough. */
#include "weight_pool.h"

#include <pthread.h>
#include <string.h>

#define WEIGHT_ALIGN 64 /* as the host device's memory: any vector load the emitters use */

typedef struct weight_entry {
    uint8_t hash[32];
    size_t bytes;
    void *buf;
    uint64_t refs;
    sj_weight_backing backing;
} weight_entry;

struct sj_weight_pool {
    sj_ctx *ctx;
    pthread_mutex_t mu;
    weight_entry *entries;
    size_t n, cap;
    uint64_t shared;
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
    if (bytes) memcpy((void *)start, src, bytes);
    *out = (void *)start;
    return SJ_OK;
}

static void host_free(void *user, void *buf) {
    if (buf) sj_free(user, ((void **)buf)[-1]);
}

sj_status sj_weight_pool_create(sj_ctx *ctx, sj_weight_pool **out) {
    sj_weight_pool *p = sj_calloc(ctx, 1, sizeof *p);
    if (!p) return SJ_E_NOMEM;
    p->ctx = ctx;
    pthread_mutex_init(&p->mu, NULL);
    p->host = (sj_weight_backing){ctx, host_make, host_free};
    *out = p;
    return SJ_OK;
}

void sj_weight_pool_destroy(sj_weight_pool *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) p->entries[i].backing.free(p->entries[i].backing.user, p->entries[i].buf);
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

sj_status sj_weight_pool_acquire(sj_weight_pool *p, const uint8_t hash[32], const void *src,
                                 size_t bytes, const sj_weight_backing *backing, void **out) {
    *out = NULL;
    pthread_mutex_lock(&p->mu);
    if (share_locked(p, hash, bytes, backing, out)) {
        pthread_mutex_unlock(&p->mu);
        return SJ_OK;
    }
    /* Made under the lock: two executables loading the same weight at once
     * must not both copy it (the point of the pool), and loads are rare. */
    sj_status st = SJ_OK;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        weight_entry *grown = sj_realloc(p->ctx, p->entries, cap * sizeof *grown);
        if (!grown) st = sj_fail(p->ctx, SJ_E_NOMEM, "weights: out of memory for the pool's table");
        else {
            p->entries = grown;
            p->cap = cap;
        }
    }
    void *buf = NULL;
    if (st == SJ_OK) st = backing->make(backing->user, src, bytes, &buf);
    if (st == SJ_OK) {
        weight_entry *e = &p->entries[p->n++];
        memcpy(e->hash, hash, 32);
        e->bytes = bytes;
        e->buf = buf;
        e->refs = 1;
        e->backing = *backing;
        *out = buf;
    }
    pthread_mutex_unlock(&p->mu);
    return st;
}

bool sj_weight_pool_acquire_held(sj_weight_pool *p, const uint8_t hash[32], size_t bytes,
                                 const sj_weight_backing *backing, void **out) {
    pthread_mutex_lock(&p->mu);
    bool shared = share_locked(p, hash, bytes, backing, out);
    pthread_mutex_unlock(&p->mu);
    return shared;
}

void sj_weight_pool_release(sj_weight_pool *p, void *buf) {
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
    if (gone.buf) gone.backing.free(gone.backing.user, gone.buf);
}

void sj_weight_pool_stats_get(sj_weight_pool *p, sj_weight_pool_stats *out) {
    memset(out, 0, sizeof *out);
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    out->buffers = p->n;
    for (size_t i = 0; i < p->n; i++) {
        out->bytes += p->entries[i].bytes;
        out->refs += p->entries[i].refs;
    }
    out->shared = p->shared;
    pthread_mutex_unlock(&p->mu);
}

const sj_weight_backing *sj_ctx_host_weight_backing(sj_ctx *ctx) {
    sj_weight_pool *p = sj_ctx_weight_pool(ctx);
    return p ? &p->host : NULL;
}
