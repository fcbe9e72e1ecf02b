/* The bucketed cache's state, shared by its files. Not installed. */
#ifndef SJ_BUCKETED_CACHE_IMPL_H
#define SJ_BUCKETED_CACHE_IMPL_H

#include "shapejit/ext/bucketed_cache.h"
#include "shapejit/ext/remote_tier.h"

#include "core/core_impl.h"

#include <pthread.h>
#include <stdatomic.h>

/* How a lookup found its executable: in memory, or made while it waited,
 * from the store tiers or by a compile (what a server calls a stall). */
typedef enum sj_cache_made { SJ_CACHE_IN_MEMORY, SJ_CACHE_LOADED, SJ_CACHE_COMPILED } sj_cache_made;

/* Fallback targets a compiler may name (the x86-64 levels are three). */
#define SJ_CACHE_MAX_FALLBACKS 8

/* One per bucket, on its own cache lines so hits on neighbouring buckets do
 * not share a line with a bucket being compiled. */
typedef struct sj_cache_bucket {
    _Atomic(void *) exe; /* published once, with release; read with acquire */
    pthread_mutex_t mu;  /* guards the fields below; never held on the hit path */
    pthread_cond_t cv;
    bool compiling;
    unsigned fail_gen; /* bumped by each failed compile, so its waiters fail too */
    sj_status fail_status;
    char fail_msg[256];
    sj_cache_made made;     /* how exe was made (under mu), for the callers that waited */
    /* -1: the compiler's own target made exe, else the fallback's index;
     * stored before exe is published or swapped. */
    _Atomic int target;
    /* One run at a time on the executable; a native_after swap replaces
     * exe under it (and mu), so a run reads exe again once it holds it. */
    pthread_mutex_t run_mu;
    _Atomic uint64_t level_runs; /* runs served while target >= 0 (native_after) */
    /* Its background compile (specialise.c): the sj_cache_specialise_state,
     * and why it was queued (sj_cache_upgrade, set before the state leaves
     * NONE, so a reader of a state other than NONE sees the reason). */
    _Atomic int specialise;
    _Atomic int upgrade;
    /* Padded rows computed by the executable a native_after swap replaced
     * (its work counters go with it; the bucket's padding figures keep them). */
    _Atomic uint64_t swapped_padded_computed;
    _Atomic bool not_stored; /* its last compile's artifact was refused by the local store */
    _Atomic uint64_t runs, rows; /* runs through the cache, and the rows they asked for */
    /* What it will hold once loaded, read from the artifact a store-only
     * precompile handled (under mu; the compiler's estimate). */
    bool has_estimate;
    sj_executable_memory_info estimate;
    /* The artifact exe was loaded from, kept when the compiler's executables
     * can go stale (comp.stale), to load it again after a device reset. Set
     * before exe is published, never changed after. */
    void *art;
    size_t art_len;
} __attribute__((aligned(64))) sj_cache_bucket;

/* Why a bucket is made again in the background: native_after (served
 * from a fallback target) or tiered compilation (served quick code). */
typedef enum sj_cache_upgrade { SJ_UPGRADE_NATIVE = 0, SJ_UPGRADE_TIER } sj_cache_upgrade;

/* An executable compiled at an out-of-range key's exact extent. Kept in a
 * list bounded by one_off_capacity (least recently used evicted); refs and
 * evicted under one_off_mu: an evicted one-off still running is destroyed
 * by its last release. */
typedef struct sj_one_off {
    int64_t extent;
    _Atomic(void *) exe; /* replaced under run_mu after a device reset */
    uint64_t last_used; /* one_off_tick when last found */
    int refs;           /* lookups not yet released */
    bool evicted;
    pthread_mutex_t run_mu; /* one run at a time on the executable */
    struct sj_one_off *next;
} sj_one_off;

struct sj_bucketed_cache {
    sj_ctx *ctx;
    const sj_graph *g;
    const sj_ladder *ladder;
    sj_compiler comp;
    sj_store *store;
    sj_remote *remote; /* the fleet tier under the store, or NULL */
    bool one_off_out_of_range;
    void *options;
    size_t options_len;
    sj_store_key key; /* everything but the extent */
    sj_store_key fallback_keys[SJ_CACHE_MAX_FALLBACKS]; /* the compiler's fallback targets' */
    int n_buckets;
    sj_cache_bucket *buckets; /* 64-byte aligned inside buckets_mem */
    void *buckets_mem;
    pthread_mutex_t one_off_mu; /* the one-off list; never held across a compile */
    sj_one_off *one_offs;
    int n_listed, one_off_capacity;
    uint64_t one_off_tick;
    _Atomic uint64_t memory_hits, store_hits, remote_hits, compiles, compile_ns, corrupt, store_errors,
        n_one_offs, one_off_evictions, fallback_hits, device_lost, reloads;
    _Atomic int compiled;
    /* The graph's first hash (model_digests.c): how long it took, and
     * whether the weights' digests came from the store. */
    double hash_ms;
    bool digests_from_store;
    /* Caches for other compilers, asked for per call (variants.c). */
    sj_bucketed_cache_config cfg;
    pthread_mutex_t variants_mu;
    struct sj_cache_variant *variants;
    /* Residency (resident.c): which buckets hold run memory, by last run. */
    int max_resident;
    pthread_mutex_t resident_mu;
    uint64_t *resident_tick; /* per bucket, 0 = not resident; made at the first touch */
    int n_resident;
    uint64_t resident_clock;
    _Atomic uint64_t resident_evictions;
    pthread_mutex_t store_fail_mu; /* store_fail */
    char store_fail[256];          /* the local store's first refusal of a put: why */
    /* Background compiles (specialise.c): buckets made again with the
     * cache's compiler for the own target by one thread, started at the
     * first queued one: level buckets after native_after runs, and buckets
     * served quick code (tiered, quick.compile set) at once. */
    int native_after;
    sj_compiler quick; /* zeroed: tiering off */
    _Atomic uint64_t quick_compiles, quick_compile_ns, tier_ups, tier_up_failures;
    pthread_mutex_t spec_mu;     /* the fields below */
    pthread_cond_t spec_cv;      /* work queued, or stop */
    pthread_cond_t spec_idle_cv; /* nothing queued and nothing compiling */
    pthread_t spec_thread;
    bool spec_started, spec_stop, spec_busy;
    int *spec_queue; /* a ring of n_buckets: each bucket is queued at most once */
    int spec_head, spec_len;
    char spec_error[256]; /* the first failure: why */
    _Atomic uint64_t specialised, specialise_failures;
};

/* Finds or makes key's executable; *bucket is -1 for a one-off, then held
 * in *one (runs go under its run_mu) until sj__cache_release(c, *one); made
 * (may be NULL) says how it was found. */
sj_status sj__cache_lookup(sj_bucketed_cache *c, int64_t key, int64_t *extent, void **exe, int *bucket,
                          sj_cache_made *made, sj_one_off **one);
/* As sj__cache_lookup, for a run: a bucket the store tiers lack may be
 * served quick code first (tiered compilation). */
sj_status sj__cache_lookup_run(sj_bucketed_cache *c, int64_t key, int64_t *extent, void **exe,
                               int *bucket, sj_cache_made *made, sj_one_off **one);
void sj__cache_release(sj_bucketed_cache *c, sj_one_off *one);

/* Runs key's executable at `rows` (1..its extent) on inputs in the graph's
 * input order, each already of its shape at rows (the compiler's run
 * contract: outputs allocated, sliced to rows). One run per executable at a
 * time. extent and made may be NULL. */
sj_status sj__cache_run(sj_bucketed_cache *c, int64_t key, int64_t rows, const sj_tensor *inputs,
                       sj_tensor *outputs, int64_t *extent, sj_cache_made *made);

/* Bucket b is about to run: mark it most recently used and, over the
 * bound, trim the least recently run other buckets (each under its run_mu).
 * Call without holding any bucket's run_mu. */
void sj__cache_resident_touch(sj_bucketed_cache *c, int b);
/* After a run of bucket b, under its run lock: trims b if it lost its place
 * among the resident buckets meanwhile. */
void sj__cache_resident_after_run(sj_bucketed_cache *c, int b, void *exe);
void sj__cache_resident_destroy(sj_bucketed_cache *c);
void sj__cache_variants_destroy(sj_bucketed_cache *c);

/* The executable for `extent`: from the store tiers (the own target, then,
 * with fallbacks, the compiler's fallback targets in order), else compiled
 * for the own target and stored. *target: -1 for the own target, else the
 * fallback's index. Store trouble never fails the call; it costs a compile.
 * art (may be NULL): gets the artifact bytes loaded (the caller's to free)
 * when the compiler's executables can go stale, else NULL. */
sj_status sj__cache_materialize(sj_bucketed_cache *c, int64_t extent, bool fallbacks, void **exe,
                               sj_cache_made *made, int *target, void **art, size_t *art_len);
/* Its first half: the store tiers only (own target, then fallbacks as
 * above). SJ_E_NOT_FOUND when none holds it; nothing compiled. */
sj_status sj__cache_load_stored_any(sj_bucketed_cache *c, int64_t extent, bool fallbacks, void **exe,
                                    int *target, void **art, size_t *art_len);

/* Background compiles (specialise.c): init at create (nothing started;
 * reads c->native_after and c->quick), stop + join + free before the
 * executables go. queue: bucket b (published) made again in the background
 * for `why`, once in the cache's life; call without holding b's mu or
 * run_mu. note_run: native_after's policy, a bucket run counted after it
 * ends (without its run_mu). */
sj_status sj__cache_specialise_init(sj_bucketed_cache *c);
void sj__cache_specialise_queue(sj_bucketed_cache *c, int b, sj_cache_upgrade why);
void sj__cache_specialise_note_run(sj_bucketed_cache *c, int b);
void sj__cache_specialise_destroy(sj_bucketed_cache *c);

/* Tiered compilation (tiered.c): extent's executable compiled by c->quick
 * and loaded by the cache's compiler; nothing stored. Counted. */
sj_status sj__cache_quick_make(sj_bucketed_cache *c, int64_t extent, void **exe);

/* Makes sure the store tiers hold extent's artifact (compiling it when they
 * do not), loading nothing: precompile for another machine's device. */
sj_status sj__cache_store_bucket(sj_bucketed_cache *c, int64_t extent);

/* model_digests.c: hashes c->g (sj_graph_hash) once, taking the weights'
 * digests from the store when the files it was read from are unchanged,
 * and keeping them there when they were hashed. */
void sj__cache_hash_graph(sj_bucketed_cache *c);

#endif
