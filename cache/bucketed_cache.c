/* The bucketed compile cache: one executable per bucket, made once (from
 * memory, the store, or a compile), found without a lock once made. */
#include "cache/bucketed_cache_impl.h"
#include "core/clock.h"
#include "store/store_impl.h"

#include <llvm-c/blake3.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void sj_bucketed_cache_config_init(sj_bucketed_cache_config *cfg) { memset(cfg, 0, sizeof *cfg); }

static void options_hash(const void *options, size_t len, uint8_t out[32]) {
    llvm_blake3_hasher h;
    llvm_blake3_hasher_init(&h);
    llvm_blake3_hasher_update(&h, "shapejit compile options", 24);
    if (len) llvm_blake3_hasher_update(&h, options, len);
    llvm_blake3_hasher_finalize(&h, out, 32);
}

void sj_bucketed_cache_key(const sj_graph *g, const sj_compiler *comp, int64_t extent,
                           sj_store_key *out) {
    memset(out, 0, sizeof *out);
    sj_graph_hash(g, out->graph_hash);
    out->extent = extent;
    options_hash(comp->options, comp->options_len, out->options_hash);
    out->target_triple = comp->target_triple;
    out->target_cpu = comp->target_cpu;
    out->target_features = comp->target_features;
    out->artifact_version = comp->artifact_version;
    out->shapejit_version = sj_version_string();
    out->compiler_version = comp->compiler_version;
}

sj_status sj_bucketed_cache_create(const sj_graph *g, const sj_ladder *ladder, const sj_compiler *comp,
                                   sj_store *store, const sj_bucketed_cache_config *cfg,
                                   sj_bucketed_cache **out) {
    if (!g || !out)
        return sj_fail(g ? sj_graph_ctx(g) : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *out = NULL;
    sj_ctx *ctx = sj_graph_ctx(g);
    if (!ladder) return sj_fail(ctx, SJ_E_INVALID_ARG, "bucketed cache: no ladder");
    if (!comp || !comp->compile || !comp->load || !comp->run || !comp->destroy)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "bucketed cache: the compiler needs compile, load, run and destroy");
    sj_bucketed_cache_config dflt;
    sj_bucketed_cache_config_init(&dflt);
    if (!cfg) cfg = &dflt;
    if (comp->options_len && !comp->options)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "bucketed cache: the compiler has options_len %zu and no options",
                       comp->options_len);
    if (cfg->max_resident_buckets < 0)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "bucketed cache: max_resident_buckets %d is negative",
                       cfg->max_resident_buckets);
    if (cfg->native_after < 0)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "bucketed cache: native_after %d is negative (0 = never)",
                       cfg->native_after);
    if (cfg->quick && !cfg->quick->compile)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "bucketed cache: the quick compiler (tiered) has no compile");
    if (comp->n_fallbacks < 0 || comp->n_fallbacks > SJ_CACHE_MAX_FALLBACKS ||
        (comp->n_fallbacks && !comp->fallbacks))
        return sj_fail(ctx, SJ_E_INVALID_ARG, "bucketed cache: %d fallback targets, expected 0..%d",
                       comp->n_fallbacks, SJ_CACHE_MAX_FALLBACKS);
    if (cfg->remote && sj_remote_ctx(cfg->remote) != ctx)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "bucketed cache: the remote tier belongs to another context than the graph");

    sj_bucketed_cache *c = sj_calloc(ctx, 1, sizeof *c);
    if (!c) return sj_fail(ctx, SJ_E_NOMEM, "bucketed cache: out of memory");
    c->ctx = ctx;
    c->g = g;
    c->ladder = ladder;
    c->comp = *comp;
    c->store = store;
    c->remote = cfg->remote;
    c->one_off_out_of_range = cfg->one_off_out_of_range;
    c->one_off_capacity = cfg->one_off_capacity > 0 ? cfg->one_off_capacity : 16;
    c->n_buckets = sj_ladder_num_buckets(ladder);
    c->options_len = comp->options_len;
    c->options = sj_alloc(ctx, comp->options_len);
    /* Over-allocate to place the 64-byte aligned buckets by hand. */
    c->buckets_mem = sj_calloc(ctx, 1, ((size_t)c->n_buckets + 1) * sizeof(sj_cache_bucket));
    if (!c->options || !c->buckets_mem) {
        sj_free(ctx, c->options);
        sj_free(ctx, c->buckets_mem);
        sj_free(ctx, c);
        return sj_fail(ctx, SJ_E_NOMEM, "bucketed cache: out of memory");
    }
    if (comp->options_len) memcpy(c->options, comp->options, comp->options_len);
    /* The table keeps the cache's copy, so the caller's bytes may go. */
    c->comp.options = c->options;
    c->buckets = (sj_cache_bucket *)(((uintptr_t)c->buckets_mem + 63) & ~(uintptr_t)63);
    for (int i = 0; i < c->n_buckets; i++) {
        sj_cache_bucket *b = &c->buckets[i];
        atomic_init(&b->exe, NULL);
        atomic_init(&b->runs, 0);
        atomic_init(&b->rows, 0);
        pthread_mutex_init(&b->mu, NULL);
        pthread_cond_init(&b->cv, NULL);
        pthread_mutex_init(&b->run_mu, NULL);
        atomic_init(&b->target, -1);
    }
    pthread_mutex_init(&c->one_off_mu, NULL);
    pthread_mutex_init(&c->store_fail_mu, NULL);
    c->max_resident = cfg->max_resident_buckets;
    pthread_mutex_init(&c->resident_mu, NULL);
    c->cfg = *cfg;
    pthread_mutex_init(&c->variants_mu, NULL);
    c->native_after = cfg->native_after;
    if (cfg->quick) c->quick = *cfg->quick;
    if (sj__cache_specialise_init(c) != SJ_OK) {
        sj_bucketed_cache_destroy(c);
        return sj_fail(ctx, SJ_E_NOMEM, "bucketed cache: out of memory");
    }

    sj__cache_hash_graph(c);
    sj_bucketed_cache_key(g, &c->comp, 0, &c->key);
    for (int i = 0; i < comp->n_fallbacks; i++) {
        const sj_compiler_target *t = &comp->fallbacks[i];
        sj_store_key *k = &c->fallback_keys[i];
        *k = c->key;
        k->target_cpu = t->cpu;
        k->target_features = t->features;
        options_hash(t->options, t->options_len, k->options_hash);
    }
    *out = c;
    return SJ_OK;
}

static void one_off_free(sj_bucketed_cache *c, sj_one_off *o) {
    c->comp.destroy(c->comp.ctx, o->exe);
    pthread_mutex_destroy(&o->run_mu);
    sj_free(c->ctx, o);
}

void sj_bucketed_cache_destroy(sj_bucketed_cache *c) {
    if (!c) return;
    /* A recompile in flight ends (and swaps) before the executables go. */
    sj__cache_specialise_destroy(c);
    for (int i = 0; i < c->n_buckets; i++) {
        sj_cache_bucket *b = &c->buckets[i];
        void *e = atomic_load_explicit(&b->exe, memory_order_acquire);
        if (e) c->comp.destroy(c->comp.ctx, e);
        sj_free(c->ctx, b->art);
        pthread_mutex_destroy(&b->mu);
        pthread_cond_destroy(&b->cv);
        pthread_mutex_destroy(&b->run_mu);
    }
    for (sj_one_off *o = c->one_offs, *next; o; o = next) {
        next = o->next;
        one_off_free(c, o);
    }
    pthread_mutex_destroy(&c->one_off_mu);
    pthread_mutex_destroy(&c->store_fail_mu);
    sj__cache_resident_destroy(c);
    sj__cache_variants_destroy(c);
    sj_free(c->ctx, c->buckets_mem);
    sj_free(c->ctx, c->options);
    sj_free(c->ctx, c);
}

/* The bytes the store tiers hold for key; their trouble is counted, never
 * returned: any status other than SJ_OK is a miss. */
static sj_status stored_bytes(sj_bucketed_cache *c, const sj_store_key *key, void **bytes,
                              size_t *len, sj_tier *from) {
    if (!c->store && !c->remote) return SJ_E_NOT_FOUND;
    sj_status st = sj_tiered_get(c->store, c->remote, key, bytes, len, from);
    if (st == SJ_E_CORRUPT)
        atomic_fetch_add_explicit(&c->corrupt, 1, memory_order_relaxed);
    else if (st != SJ_OK && st != SJ_E_NOT_FOUND)
        atomic_fetch_add_explicit(&c->store_errors, 1, memory_order_relaxed);
    if (st != SJ_OK) sj_ctx_clear_error(c->ctx);
    return st;
}

static void count_hit(sj_bucketed_cache *c, sj_tier from) {
    atomic_fetch_add_explicit(from == SJ_TIER_REMOTE ? &c->remote_hits : &c->store_hits, 1,
                              memory_order_relaxed);
}

/* Remembers whether the local store holds the bucket compiled at extent
 * (precompile reports the ones it does not) and the first reason why not. */
static void note_stored(sj_bucketed_cache *c, int64_t extent, bool stored) {
    int i = sj_ladder_find(c->ladder, extent);
    if (i >= 0 && sj_ladder_extent(c->ladder, i) == extent)
        atomic_store_explicit(&c->buckets[i].not_stored, !stored, memory_order_relaxed);
    if (stored) return;
    pthread_mutex_lock(&c->store_fail_mu);
    if (!c->store_fail[0])
        snprintf(c->store_fail, sizeof c->store_fail, "%s", sj_ctx_last_error(c->ctx));
    pthread_mutex_unlock(&c->store_fail_mu);
}

void sj_bucketed_cache_store_error(sj_bucketed_cache *c, char *buf, size_t cap) {
    if (!buf || !cap) return;
    buf[0] = '\0';
    if (!c) return;
    pthread_mutex_lock(&c->store_fail_mu);
    snprintf(buf, cap, "%s", c->store_fail);
    pthread_mutex_unlock(&c->store_fail_mu);
}

/* A kernel's code as the local store keeps it under its name (a part
 * another model or an earlier compile put); a damaged part is a miss: the
 * kernel is compiled, and the put after it repairs the part. */
static sj_status find_part(void *cache, const uint8_t name[32], void **bytes, size_t *len) {
    sj_bucketed_cache *c = cache;
    sj_status st = sj_store_get_named_part(c->store, name, bytes, len);
    if (st != SJ_OK) sj_ctx_clear_error(c->ctx);
    return st;
}

/* Names the parts just stored for later compiles to find (best effort: a
 * part not named is compiled again, nothing else). */
static void name_parts(sj_bucketed_cache *c, const void *art, size_t len, const sj_store_part *parts,
                       int n_parts) {
    uint8_t (*names)[32] = NULL;
    int n = 0;
    if (!c->comp.part_names || c->comp.part_names(c->comp.ctx, c->g, art, len, &names, &n) != SJ_OK ||
        n != n_parts) {
        sj_free(c->ctx, names);
        sj_ctx_clear_error(c->ctx);
        return;
    }
    uint8_t (*keys)[32] = sj_alloc(c->ctx, (size_t)n * sizeof *keys);
    for (int i = 0; keys && i < n; i++) memcpy(keys[i], parts[i].key, 32);
    if (!keys || sj_store_name_parts(c->store, (const uint8_t(*)[32])names, (const uint8_t(*)[32])keys, n) != SJ_OK)
        sj_ctx_clear_error(c->ctx);
    sj_free(c->ctx, keys);
    sj_free(c->ctx, names);
}

/* Compiles key's extent and hands the bytes to the store tiers (a failed
 * put costs a count, and for the local store a note on the bucket); *art is
 * the caller's to free. Under a fleet lease (lease non-NULL) the lease ends
 * after the put, or at once when the compile failed. */
static sj_status compile_and_store(sj_bucketed_cache *c, const sj_store_key *key,
                                   sj_remote_lease *lease, void **art, size_t *art_len) {
    *art = NULL;
    *art_len = 0;
    uint64_t t0 = sj__now_ns();
    sj_status st = c->store && c->comp.compile_from
                       ? c->comp.compile_from(c->comp.ctx, c->g, key->extent, find_part, c, art,
                                              art_len)
                       : c->comp.compile(c->comp.ctx, c->g, key->extent, art, art_len);
    atomic_fetch_add_explicit(&c->compile_ns, sj__now_ns() - t0, memory_order_relaxed);
    if (st != SJ_OK) {
        sj_remote_lease_end(lease, false);
        return st;
    }
    atomic_fetch_add_explicit(&c->compiles, 1, memory_order_relaxed);
    if (!c->store && !c->remote) return SJ_OK;
    /* The code parts let the local store keep each kernel once; bytes the
     * compiler cannot cut are stored whole. sj_tiered_put_parts' status is
     * the local store's; the remote tier's drops are counted in its own
     * stats. */
    sj_store_part *parts = NULL;
    int n_parts = 0;
    if (c->store && c->comp.parts && c->comp.parts(c->comp.ctx, c->g, *art, *art_len, &parts, &n_parts) != SJ_OK) {
        sj_ctx_clear_error(c->ctx);
        n_parts = 0;
    }
    bool stored = sj_tiered_put_parts(c->store, c->remote, key, *art, *art_len, parts, n_parts) == SJ_OK;
    if (stored && n_parts) name_parts(c, *art, *art_len, parts, n_parts);
    sj_free(c->ctx, parts);
    sj_remote_lease_end(lease, true);
    if (!stored) atomic_fetch_add_explicit(&c->store_errors, 1, memory_order_relaxed);
    if (c->store) note_stored(c, key->extent, stored);
    if (!stored) sj_ctx_clear_error(c->ctx);
    return SJ_OK;
}

/* Every tier missed key: with a remote tier, the fleet's compile lease
 * decides (see sj_remote_lease_claim). SJ_OK with *bytes: another node
 * published it while this one waited; otherwise *bytes is NULL and the
 * caller compiles, under *lease when it won one. */
static sj_status claim_compile(sj_bucketed_cache *c, const sj_store_key *key,
                               sj_remote_lease **lease, void **bytes, size_t *len) {
    *lease = NULL;
    *bytes = NULL;
    *len = 0;
    if (!c->remote) return SJ_OK;
    sj_remote_claim how;
    SJ_TRY(sj_tiered_claim(c->store, c->remote, key, &how, lease, bytes, len));
    if (how == SJ_REMOTE_CLAIM_FETCHED)
        atomic_fetch_add_explicit(&c->remote_hits, 1, memory_order_relaxed);
    return SJ_OK;
}

/* Loaded bytes: kept for the caller when it asks and the compiler's
 * executables can go stale (a reload after a device reset), else freed. */
static void keep_bytes(sj_bucketed_cache *c, void *bytes, size_t len, void **art, size_t *art_len) {
    if (art && c->comp.stale) {
        *art = bytes;
        *art_len = len;
    } else {
        sj_free(c->ctx, bytes);
    }
}

/* Load failures a compile would not mend: returned as they are. */
static bool load_fatal(sj_status st) {
    return st == SJ_E_NOMEM || st == SJ_E_NO_DEVICE || st == SJ_E_DEVICE_LOST || st == SJ_E_STATE;
}

/* key's stored artifact as an executable: SJ_E_NOT_FOUND on a miss or on
 * bytes the compiler refuses (counted corrupt: a compile for the own key
 * overwrites them); no memory or no device are returned as they are, since
 * a compile would end the same way. */
static sj_status load_stored(sj_bucketed_cache *c, const sj_store_key *key, void **exe, void **art,
                             size_t *art_len) {
    void *bytes;
    size_t len;
    sj_tier from;
    if (stored_bytes(c, key, &bytes, &len, &from) != SJ_OK) return SJ_E_NOT_FOUND;
    sj_status st = c->comp.load(c->comp.ctx, c->g, key->extent, bytes, len, exe);
    if (st == SJ_OK) {
        keep_bytes(c, bytes, len, art, art_len);
        count_hit(c, from);
        return SJ_OK;
    }
    sj_free(c->ctx, bytes);
    if (load_fatal(st)) return st;
    atomic_fetch_add_explicit(&c->corrupt, 1, memory_order_relaxed);
    sj_ctx_clear_error(c->ctx);
    return SJ_E_NOT_FOUND;
}

sj_status sj__cache_load_stored_any(sj_bucketed_cache *c, int64_t extent, bool fallbacks, void **exe,
                                    int *target, void **keep, size_t *keep_len) {
    *target = -1;
    if (keep) *keep = NULL;
    sj_store_key key = c->key;
    key.extent = extent;
    sj_status st = load_stored(c, &key, exe, keep, keep_len);
    for (int i = 0; fallbacks && st == SJ_E_NOT_FOUND && i < c->comp.n_fallbacks; i++) {
        sj_store_key fk = c->fallback_keys[i];
        fk.extent = extent;
        st = load_stored(c, &fk, exe, keep, keep_len);
        if (st == SJ_OK) {
            *target = i;
            atomic_fetch_add_explicit(&c->fallback_hits, 1, memory_order_relaxed);
        }
    }
    return st;
}

sj_status sj__cache_materialize(sj_bucketed_cache *c, int64_t extent, bool fallbacks, void **exe,
                               sj_cache_made *made, int *target, void **keep, size_t *keep_len) {
    *made = SJ_CACHE_LOADED;
    sj_status st = sj__cache_load_stored_any(c, extent, fallbacks, exe, target, keep, keep_len);
    if (st != SJ_E_NOT_FOUND) return st;
    sj_store_key key = c->key;
    key.extent = extent;
    void *art;
    size_t art_len;
    sj_remote_lease *lease;
    SJ_TRY(claim_compile(c, &key, &lease, &art, &art_len));
    if (art) { /* another node compiled it while this one waited */
        st = c->comp.load(c->comp.ctx, c->g, extent, art, art_len, exe);
        if (st == SJ_OK) {
            keep_bytes(c, art, art_len, keep, keep_len);
            return st;
        }
        sj_free(c->ctx, art);
        if (load_fatal(st)) return st;
        atomic_fetch_add_explicit(&c->corrupt, 1, memory_order_relaxed);
        sj_ctx_clear_error(c->ctx);
    }
    *made = SJ_CACHE_COMPILED;
    SJ_TRY(compile_and_store(c, &key, lease, &art, &art_len));
    st = c->comp.load(c->comp.ctx, c->g, extent, art, art_len, exe);
    if (st == SJ_OK)
        keep_bytes(c, art, art_len, keep, keep_len);
    else
        sj_free(c->ctx, art);
    return st;
}

/* Keeps what the bucket at extent will cost once loaded (the compiler's
 * estimate from the bytes; none when it has no estimate or cannot read
 * them, which the load would then say). */
static void note_estimate(sj_bucketed_cache *c, int64_t extent, const void *bytes, size_t len) {
    int i = sj_ladder_find(c->ladder, extent);
    if (!c->comp.estimate || i < 0 || sj_ladder_extent(c->ladder, i) != extent) return;
    sj_executable_memory_info m;
    if (c->comp.estimate(c->comp.ctx, c->g, bytes, len, &m) != SJ_OK) {
        sj_ctx_clear_error(c->ctx);
        return;
    }
    sj_cache_bucket *b = &c->buckets[i];
    pthread_mutex_lock(&b->mu);
    b->estimate = m;
    b->has_estimate = true;
    pthread_mutex_unlock(&b->mu);
}

sj_status sj__cache_store_bucket(sj_bucketed_cache *c, int64_t extent) {
    sj_store_key key = c->key;
    key.extent = extent;
    void *bytes;
    size_t len;
    sj_tier from;
    if (stored_bytes(c, &key, &bytes, &len, &from) == SJ_OK) {
        count_hit(c, from);
    } else {
        sj_remote_lease *lease;
        SJ_TRY(claim_compile(c, &key, &lease, &bytes, &len));
        /* bytes: published by another node meanwhile (the compiler checks
         * them where it loads); otherwise compiled here */
        if (!bytes) SJ_TRY(compile_and_store(c, &key, lease, &bytes, &len));
    }
    note_estimate(c, extent, bytes, len);
    sj_free(c->ctx, bytes);
    return SJ_OK;
}

/* Bucket i's executable from the store tiers, else (*quick in: tiered
 * compilation, for a run) quick code, else the full compile. *quick out:
 * quick code was made, so the caller queues the bucket's full code once
 * it is published. */
static sj_status make_executable(sj_bucketed_cache *c, int i, bool *quick, void **e, sj_cache_made *made,
                                 int *target, void **art, size_t *art_len) {
    int64_t extent = sj_ladder_extent(c->ladder, i);
    bool try_quick = *quick;
    *quick = false;
    if (!try_quick) return sj__cache_materialize(c, extent, true, e, made, target, art, art_len);
    *made = SJ_CACHE_LOADED;
    sj_status st = sj__cache_load_stored_any(c, extent, true, e, target, art, art_len);
    if (st != SJ_E_NOT_FOUND) return st;
    /* No lease is claimed here: the tier-up claims it in the background,
     * so a run never waits for another node's compile either. */
    *made = SJ_CACHE_COMPILED;
    st = sj__cache_quick_make(c, extent, e);
    *quick = st == SJ_OK;
    if (st == SJ_OK || st == SJ_E_NOMEM) return st;
    /* Quick code is an optimisation: a request it cannot serve waits for
     * the full code (stored as any) instead of failing. */
    sj_ctx_clear_error(c->ctx);
    return sj__cache_materialize(c, extent, false, e, made, target, art, art_len);
}

/* The slow path: wait for the compile in flight, or be the one to do it;
 * quick_ok: a run, which tiered compilation may serve quick code. */
static sj_status bucket_make(sj_bucketed_cache *c, int i, bool quick_ok, void **exe, sj_cache_made *made) {
    sj_cache_bucket *b = &c->buckets[i];
    pthread_mutex_lock(&b->mu);
    while (b->compiling) {
        unsigned gen = b->fail_gen;
        while (b->compiling && b->fail_gen == gen) pthread_cond_wait(&b->cv, &b->mu);
        if (b->fail_gen != gen && !atomic_load_explicit(&b->exe, memory_order_acquire)) {
            sj_status st = b->fail_status;
            char msg[sizeof b->fail_msg];
            memcpy(msg, b->fail_msg, sizeof msg);
            pthread_mutex_unlock(&b->mu);
            return sj_fail(c->ctx, st, "%s", msg);
        }
    }
    void *e = atomic_load_explicit(&b->exe, memory_order_acquire);
    if (e) { /* made by the compile this call waited for: a memory hit */
        *made = b->made;
        pthread_mutex_unlock(&b->mu);
        atomic_fetch_add_explicit(&c->memory_hits, 1, memory_order_relaxed);
        *exe = e;
        return SJ_OK;
    }
    b->compiling = true;
    pthread_mutex_unlock(&b->mu);

    int target;
    void *art;
    size_t art_len;
    bool quick = quick_ok && c->quick.compile;
    sj_status st = make_executable(c, i, &quick, &e, made, &target, &art, &art_len);

    pthread_mutex_lock(&b->mu);
    b->compiling = false;
    if (st == SJ_OK) {
        b->made = *made;
        if (art && !b->art) { /* made once: a bucket is made again only after a failure */
            b->art = art;
            b->art_len = art_len;
        } else {
            sj_free(c->ctx, art);
        }
        atomic_store_explicit(&b->target, target, memory_order_relaxed);
        atomic_store_explicit(&b->exe, e, memory_order_release);
        atomic_fetch_add_explicit(&c->compiled, 1, memory_order_relaxed);
        *exe = e;
    } else {
        b->fail_gen++;
        b->fail_status = st;
        snprintf(b->fail_msg, sizeof b->fail_msg, "%s", sj_ctx_last_error(c->ctx));
    }
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    if (quick) sj__cache_specialise_queue(c, i, SJ_UPGRADE_TIER); /* published: the swap may replace it */
    return st;
}

/* The listed one-off for key, held for the caller; one_off_mu held. */
static sj_one_off *one_off_find(sj_bucketed_cache *c, int64_t key) {
    for (sj_one_off *o = c->one_offs; o; o = o->next)
        if (o->extent == key) {
            o->refs++;
            o->last_used = ++c->one_off_tick;
            return o;
        }
    return NULL;
}

/* Unlinks the least recently used one-off when the list is full; returns it
 * when nothing holds it (the caller destroys it outside the lock).
 * one_off_mu held. */
static sj_one_off *one_off_evict(sj_bucketed_cache *c) {
    if (c->n_listed < c->one_off_capacity) return NULL;
    sj_one_off **victim = &c->one_offs;
    for (sj_one_off **p = &c->one_offs; *p; p = &(*p)->next)
        if ((*p)->last_used < (*victim)->last_used) victim = p;
    sj_one_off *o = *victim;
    *victim = o->next;
    c->n_listed--;
    o->evicted = true;
    atomic_fetch_add_explicit(&c->one_off_evictions, 1, memory_order_relaxed);
    return o->refs == 0 ? o : NULL;
}

/* A key outside every bucket: its exact extent, compiled outside the lock
 * (memory hits on other one-offs never wait for it), kept in a list of at
 * most one_off_capacity so distinct out-of-range keys cannot grow memory
 * without bound. Two threads missing the same key may both compile; the
 * second keeps the first one's. */
static sj_status one_off(sj_bucketed_cache *c, int64_t key, void **exe, sj_cache_made *made,
                         sj_one_off **held) {
    if (key < 1 || key > SJ_MAX_EXTENT)
        return sj_fail(c->ctx, SJ_E_OUT_OF_RANGE, "bucketed cache: key %lld is not a valid extent (1..%lld)",
                       (long long)key, (long long)SJ_MAX_EXTENT);
    pthread_mutex_lock(&c->one_off_mu);
    sj_one_off *o = one_off_find(c, key);
    pthread_mutex_unlock(&c->one_off_mu);
    if (o) {
        atomic_fetch_add_explicit(&c->memory_hits, 1, memory_order_relaxed);
        *exe = o->exe;
        *made = SJ_CACHE_IN_MEMORY;
        *held = o;
        return SJ_OK;
    }
    void *e;
    int target;
    SJ_TRY(sj__cache_materialize(c, key, true, &e, made, &target, NULL, NULL));
    sj_one_off *fresh = sj_calloc(c->ctx, 1, sizeof *fresh);
    if (!fresh) {
        c->comp.destroy(c->comp.ctx, e);
        return sj_fail(c->ctx, SJ_E_NOMEM, "bucketed cache: out of memory");
    }
    fresh->extent = key;
    fresh->exe = e;
    fresh->refs = 1;
    pthread_mutex_init(&fresh->run_mu, NULL);
    sj_one_off *dead = NULL;
    pthread_mutex_lock(&c->one_off_mu);
    o = one_off_find(c, key);
    if (o) {
        dead = fresh; /* another thread listed it first */
    } else {
        dead = one_off_evict(c);
        fresh->last_used = ++c->one_off_tick;
        fresh->next = c->one_offs;
        c->one_offs = fresh;
        c->n_listed++;
        atomic_fetch_add_explicit(&c->n_one_offs, 1, memory_order_relaxed);
        o = fresh;
    }
    pthread_mutex_unlock(&c->one_off_mu);
    if (dead) one_off_free(c, dead);
    *exe = o->exe;
    *held = o;
    return SJ_OK;
}

void sj__cache_release(sj_bucketed_cache *c, sj_one_off *one) {
    if (!one) return;
    pthread_mutex_lock(&c->one_off_mu);
    bool dead = --one->refs == 0 && one->evicted;
    pthread_mutex_unlock(&c->one_off_mu);
    if (dead) one_off_free(c, one);
}

static sj_status lookup(sj_bucketed_cache *c, int64_t key, bool quick_ok, int64_t *extent, void **exe,
                        int *bucket, sj_cache_made *made, sj_one_off **one) {
    sj_cache_made ignored;
    if (!made) made = &ignored;
    *made = SJ_CACHE_IN_MEMORY;
    int i = sj_ladder_find(c->ladder, key);
    *bucket = i;
    *one = NULL;
    if (i < 0) {
        if (!c->one_off_out_of_range) return sj_ladder_bucket_for(c->ladder, key, &i);
        *extent = key;
        return one_off(c, key, exe, made, one);
    }
    *extent = sj_ladder_extent(c->ladder, i);
    void *e = atomic_load_explicit(&c->buckets[i].exe, memory_order_acquire);
    if (e) {
        atomic_fetch_add_explicit(&c->memory_hits, 1, memory_order_relaxed);
        *exe = e;
        return SJ_OK;
    }
    return bucket_make(c, i, quick_ok, exe, made);
}

sj_status sj__cache_lookup(sj_bucketed_cache *c, int64_t key, int64_t *extent, void **exe, int *bucket,
                          sj_cache_made *made, sj_one_off **one) {
    return lookup(c, key, false, extent, exe, bucket, made, one);
}

sj_status sj__cache_lookup_run(sj_bucketed_cache *c, int64_t key, int64_t *extent, void **exe,
                               int *bucket, sj_cache_made *made, sj_one_off **one) {
    return lookup(c, key, true, extent, exe, bucket, made, one);
}

sj_status sj_bucketed_cache_get_or_compile(sj_bucketed_cache *c, int64_t key, int64_t *extent,
                                           void **exe) {
    int b;
    sj_one_off *one;
    sj_status st = sj__cache_lookup(c, key, extent, exe, &b, NULL, &one);
    sj__cache_release(c, one); /* documented: valid until evicted */
    return st;
}

int sj_bucketed_cache_bucket_for(const sj_bucketed_cache *c, int64_t key) {
    return sj_ladder_find(c->ladder, key);
}
int sj_bucketed_cache_num_buckets(const sj_bucketed_cache *c) { return c->n_buckets; }
int sj_bucketed_cache_num_ready(const sj_bucketed_cache *c) {
    return atomic_load_explicit(&c->compiled, memory_order_relaxed);
}

int sj_bucketed_cache_ready_at_least(const sj_bucketed_cache *c, int64_t key) {
    int i = sj_ladder_find(c->ladder, key);
    for (; i >= 0 && i < c->n_buckets; i++)
        if (atomic_load_explicit(&c->buckets[i].exe, memory_order_acquire)) return i;
    return -1;
}

sj_status sj_bucketed_cache_bucket(const sj_bucketed_cache *c, int i, int64_t *lo, int64_t *hi, bool *ready) {
    if (i < 0 || i >= c->n_buckets)
        return sj_fail(c->ctx, SJ_E_OUT_OF_RANGE, "bucketed cache: bucket %d of %d does not exist", i,
                       c->n_buckets);
    if (lo) *lo = sj_ladder_lower(c->ladder, i);
    if (hi) *hi = sj_ladder_extent(c->ladder, i);
    if (ready) *ready = atomic_load_explicit(&c->buckets[i].exe, memory_order_acquire) != NULL;
    return SJ_OK;
}

const sj_compiler *sj_bucketed_cache_compiler(const sj_bucketed_cache *c) { return &c->comp; }

const char *sj_bucketed_cache_bucket_target(const sj_bucketed_cache *c, int i) {
    if (!c || i < 0 || i >= c->n_buckets) return NULL;
    sj_cache_bucket *b = &c->buckets[i];
    if (!atomic_load_explicit(&b->exe, memory_order_acquire)) return NULL;
    /* target is written before exe is published with release. */
    int t = atomic_load_explicit(&b->target, memory_order_relaxed);
    return t < 0 ? c->key.target_cpu : c->fallback_keys[t].target_cpu;
}

void sj_bucketed_cache_stats_get(const sj_bucketed_cache *c, sj_bucketed_cache_stats *out) {
    memset(out, 0, sizeof *out);
    out->memory_hits = atomic_load(&c->memory_hits);
    out->store_hits = atomic_load(&c->store_hits);
    out->remote_hits = atomic_load(&c->remote_hits);
    out->compiles = atomic_load(&c->compiles);
    out->compile_ms = (double)atomic_load(&c->compile_ns) / 1e6;
    out->corrupt = atomic_load(&c->corrupt);
    out->store_errors = atomic_load(&c->store_errors);
    out->one_offs = atomic_load(&c->n_one_offs);
    out->one_off_evictions = atomic_load(&c->one_off_evictions);
    out->resident_evictions = atomic_load(&c->resident_evictions);
    out->fallback_hits = atomic_load(&c->fallback_hits);
    out->specialised = atomic_load(&c->specialised);
    out->specialise_failures = atomic_load(&c->specialise_failures);
    out->quick_compiles = atomic_load(&c->quick_compiles);
    out->quick_compile_ms = (double)atomic_load(&c->quick_compile_ns) / 1e6;
    out->tier_ups = atomic_load(&c->tier_ups);
    out->tier_up_failures = atomic_load(&c->tier_up_failures);
    out->device_lost = atomic_load(&c->device_lost);
    out->reloads = atomic_load(&c->reloads);
    out->hash_ms = c->hash_ms;
    out->digests_from_store = c->digests_from_store;
    if (c->comp.stages) c->comp.stages(c->comp.ctx, &out->stages);
    for (int i = 0; i < c->n_buckets; i++)
        out->not_stored += atomic_load_explicit(&c->buckets[i].not_stored, memory_order_relaxed);
    /* counters only: the SQL scan of sj_store_stats_get could fail with no
     * one to tell */
    if (c->store) {
        sj_store_stats ss;
        sj__store_counters(c->store, &ss);
        out->evictions = ss.evictions;
    }
}
