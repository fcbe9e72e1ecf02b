/* The host device's kernel threads (host_pool.h).
 *
 * A launch's parts are claimed, not assigned: the caller and every worker
 * take the next unclaimed part until none is left, so a worker the
 * scheduler has not woken yet (a busy machine) delays nothing: the caller
 * runs its parts too and waits only for parts another thread has started.
 * Which thread runs a part never changes its rows or its code. */
#include "host_pool.h"

#include "core/core_impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

/* How long a waiting thread spins before it sleeps: longer than the gap
 * between two launches of one run, short beside a request's time, so
 * workers stay awake through a run and sleep between requests. */
#define SPIN_NS 50000

/* The claim word: launch generation (high 32 bits), part count (16) and
 * the next unclaimed part (16). A thread claims part i of launch g by
 * compare-and-swap on the whole word, so a claim never lands on another
 * launch than the one whose fields it read. */
#define CLAIM(gen, parts, next) (((uint64_t)(gen) << 32) | ((uint64_t)(parts) << 16) | (uint64_t)(next))
#define CLAIM_GEN(c) ((uint32_t)((c) >> 32))
#define CLAIM_PARTS(c) ((int)(((c) >> 16) & 0xffff))
#define CLAIM_NEXT(c) ((int)((c) & 0xffff))

struct sj_host_pool {
    sj_ctx *ctx;
    int threads;
    pthread_t *workers; /* threads - 1 */
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    /* The launch: written by the caller before the claim word is published
     * (release), read by a thread after its claim succeeds (acquire); the
     * caller does not write them again until every claimed part is done. */
    sj_host_rows_fn fn;
    void *const *buffers;
    const int64_t *info;
    int64_t extent;
    int64_t bounds[SJ_HOST_MAX_THREADS + 1];
    bool stop;
    uint32_t generation;     /* the caller's; published through `posted` and `claim` */
    atomic_uint_fast32_t posted;
    atomic_uint_fast64_t claim;
    atomic_int finished;     /* parts of the current launch done */
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Whether spin iteration i is past SPIN_NS since the first (the clock is
 * read every 64th iteration only); *start holds that first reading. */
static bool spin_spent(unsigned i, uint64_t *start) {
    if ((i & 63) != 0) return false;
    uint64_t t = now_ns();
    if (!*start) {
        *start = t;
        return false;
    }
    return t - *start > SPIN_NS;
}

/* Spins until a launch after `seen` is posted, or SPIN_NS pass; then sleeps. */
static uint32_t wait_launch(sj_host_pool *p, uint32_t seen) {
    uint32_t g;
    uint64_t start = 0;
    for (unsigned i = 0;; i++) {
        g = (uint32_t)atomic_load_explicit(&p->posted, memory_order_acquire);
        if (g != seen) return g;
        relax();
        if (spin_spent(i, &start)) break;
    }
    pthread_mutex_lock(&p->mu);
    while ((g = (uint32_t)atomic_load_explicit(&p->posted, memory_order_acquire)) == seen)
        pthread_cond_wait(&p->wake, &p->mu);
    pthread_mutex_unlock(&p->mu);
    return g;
}

/* Runs parts of launch `gen` while any is unclaimed. */
static void run_parts(sj_host_pool *p, uint32_t gen) {
    uint64_t c = atomic_load_explicit(&p->claim, memory_order_acquire);
    for (;;) {
        if (CLAIM_GEN(c) != gen || CLAIM_NEXT(c) >= CLAIM_PARTS(c)) return;
        int parts = CLAIM_PARTS(c), i = CLAIM_NEXT(c);
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &c, c + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        p->fn(p->buffers, p->info, p->extent, p->bounds[i], p->bounds[i + 1]);
        if (atomic_fetch_add_explicit(&p->finished, 1, memory_order_acq_rel) + 1 == parts) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
        c = atomic_load_explicit(&p->claim, memory_order_acquire);
    }
}

static void *worker_main(void *arg) {
    sj_host_pool *p = arg;
    uint32_t seen = 0;
    for (;;) {
        seen = wait_launch(p, seen);
        if (p->stop) return NULL;
        run_parts(p, seen);
    }
}

static void post(sj_host_pool *p) {
    pthread_mutex_lock(&p->mu);
    atomic_store_explicit(&p->posted, p->generation, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
}

static void wait_done(sj_host_pool *p, int parts) {
    uint64_t start = 0;
    for (unsigned i = 0; atomic_load_explicit(&p->finished, memory_order_acquire) < parts; i++) {
        relax();
        if (spin_spent(i, &start)) break;
    }
    pthread_mutex_lock(&p->mu);
    while (atomic_load_explicit(&p->finished, memory_order_acquire) < parts)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void sj_host_pool_run(sj_host_pool *p, sj_host_rows_fn fn, void *const *buffers,
                      const int64_t *info, int64_t active_extent, const int64_t *bounds,
                      int parts) {
    p->fn = fn;
    p->buffers = buffers;
    p->info = info;
    p->extent = active_extent;
    memcpy(p->bounds, bounds, (size_t)(parts + 1) * sizeof *bounds);
    atomic_store_explicit(&p->finished, 0, memory_order_relaxed);
    uint32_t gen = ++p->generation;
    atomic_store_explicit(&p->claim, CLAIM(gen, parts, 0), memory_order_release);
    post(p);
    run_parts(p, gen);
    wait_done(p, parts);
}

/* Stops the first `started` workers and frees the pool. */
static void teardown(sj_host_pool *p, int started) {
    if (started > 0) {
        p->stop = true;
        ++p->generation;
        post(p);
        for (int i = 0; i < started; i++) pthread_join(p->workers[i], NULL);
    }
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    sj_free(p->ctx, p->workers);
    sj_free(p->ctx, p);
}

sj_status sj_host_pool_create(sj_ctx *ctx, int threads, sj_host_pool **out) {
    *out = NULL;
    if (threads < 2 || threads > SJ_HOST_MAX_THREADS)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "host threads: %d outside 2..%d", threads,
                       SJ_HOST_MAX_THREADS);
    sj_host_pool *p = sj_calloc(ctx, 1, sizeof *p);
    pthread_t *ws = p ? sj_calloc(ctx, (size_t)threads - 1, sizeof *ws) : NULL;
    if (!ws) {
        sj_free(ctx, p);
        return sj_fail(ctx, SJ_E_NOMEM, "host threads: out of memory");
    }
    p->ctx = ctx;
    p->threads = threads;
    p->workers = ws;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->posted, 0);
    atomic_init(&p->claim, 0);
    atomic_init(&p->finished, 0);
    for (int i = 0; i < threads - 1; i++) {
        int err = pthread_create(&ws[i], NULL, worker_main, p);
        if (err) {
            teardown(p, i);
            return sj_fail(ctx, SJ_E_NOMEM, "host threads: cannot start thread %d of %d (%s)",
                           i + 2, threads, strerror(err));
        }
    }
    *out = p;
    return SJ_OK;
}

void sj_host_pool_destroy(sj_host_pool *p) {
    if (p) teardown(p, p->threads - 1);
}

int sj_host_pool_threads(const sj_host_pool *p) { return p ? p->threads : 1; }
