/* The host device's kernel threads (host_pool.h).
 *
 * A launch's parts are claimed, not assigned: the caller and every worker
 * take the next unclaimed part until none is left, so a worker the
 * scheduler has not woken yet (a busy machine) delays nothing: the caller
 * runs its parts too and waits only for parts another thread has started.
 * Which thread runs a part never changes its rows or its code.
 *
 * A worker asleep costs the launch that wakes it a futex wake (on a VM, the
 * other vCPU leaving halt too; on a busy machine the woken worker often
 * takes the caller's own CPU): measured 30 to 400 us a launch on this
 * project's 2-vCPU machine, more than a whole small run. So the sleepers
 * are counted, a launch posts without waking them unless it asks to
 * (host_device.c asks when every thread's share repays a wake-up), and a
 * post with nobody asleep is one atomic store, no lock. */
#include "runtime/host_pool.h"

#include "core/core_impl.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

/* How long a waiting thread spins before it sleeps: longer than the gap
 * between two launches of one run, short beside a request's time, so
 * workers stay awake through a run and sleep between requests. */
#define SPIN_NS 50000
/* Past this much of its spin a waiting thread yields its CPU at every
 * clock reading: on a busy machine the thread it waits for (the caller, or
 * the worker running the last part) may be queued on the same CPU, behind
 * the spinner. With nothing else to run, a yield returns at once. */
#define YIELD_AFTER_NS 5000

/* The claim word: launch generation (high 32 bits), part count (16) and
 * the next unclaimed part (16). A thread claims part i of launch g by
 * compare-and-swap on the whole word, so a claim never lands on another
 * launch than the one whose fields it read. */
#define CLAIM(gen, parts, next) (((uint64_t)(gen) << 32) | ((uint64_t)(parts) << 16) | (uint64_t)(next))
#define CLAIM_GEN(c) ((uint32_t)((c) >> 32))
#define CLAIM_PARTS(c) ((int)(((c) >> 16) & 0xffff))
#define CLAIM_NEXT(c) ((int)((c) & 0xffff))

/* A worker thread and the scratch its parts get. */
typedef struct pool_worker {
    struct sj_host_pool *pool;
    pthread_t thread;
    void *scratch, *scratch_base;
} pool_worker;

struct sj_host_pool {
    sj_ctx *ctx;
    int threads;
    pool_worker *workers; /* threads - 1 */
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
    /* Workers asleep, or about to wait on `wake` (changed under mu):
     * against `posted`, a Dekker pair (both sequentially consistent), so
     * a post that reads 0 here is seen by the worker before it waits. */
    atomic_int asleep;
    uint32_t nudges; /* wake-ups without a launch (sj__host_pool_wake), under mu */
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
 * read every 64th iteration only); *start holds that first reading. Yields
 * past YIELD_AFTER_NS. */
static bool spin_spent(unsigned i, uint64_t *start) {
    if ((i & 63) != 0) return false;
    uint64_t t = now_ns();
    if (!*start) {
        *start = t;
        return false;
    }
    if (t - *start > YIELD_AFTER_NS) sched_yield();
    return t - *start > SPIN_NS;
}

/* Whether launch `gen` still has parts running (on the caller, or another
 * worker): its run goes on, and its next launch follows within microseconds. */
static bool in_flight(sj_host_pool *p, uint32_t gen) {
    uint64_t c = atomic_load_explicit(&p->claim, memory_order_acquire);
    return CLAIM_GEN(c) == gen &&
           atomic_load_explicit(&p->finished, memory_order_acquire) < CLAIM_PARTS(c);
}

/* Spins until a launch after `seen` is posted, or SPIN_NS pass after launch
 * `seen` is done (a worker that finished its parts early would otherwise
 * sleep through the rest of the run and cost its next launch a wake-up,
 * measured about 100 us on this project's VM); then sleeps. */
static uint32_t wait_launch(sj_host_pool *p, uint32_t seen) {
    for (;;) {
        uint32_t g;
        uint64_t start = 0, idle = 0; /* spinning since; launch `seen` done since */
        for (unsigned i = 0;; i++) {
            g = (uint32_t)atomic_load_explicit(&p->posted, memory_order_acquire);
            if (g != seen) return g;
            relax();
            if ((i & 63) != 0) continue; /* the clock every 64th spin */
            uint64_t t = now_ns();
            if (!start) start = t;
            if (t - start > YIELD_AFTER_NS) sched_yield();
            if (!idle || in_flight(p, seen)) idle = t;
            if (t - idle > SPIN_NS) break;
        }
        pthread_mutex_lock(&p->mu);
        atomic_fetch_add(&p->asleep, 1);
        uint32_t nudges = p->nudges;
        while ((g = (uint32_t)atomic_load(&p->posted)) == seen && p->nudges == nudges)
            pthread_cond_wait(&p->wake, &p->mu);
        atomic_fetch_sub(&p->asleep, 1);
        pthread_mutex_unlock(&p->mu);
        if (g != seen) return g;
        /* nudged (sj__host_pool_wake): spin again for the run's launches */
    }
}

/* Runs parts of launch `gen` while any is unclaimed, each with this
 * thread's scratch; the caller's parts are timed into t (NULL on a
 * worker). */
static void run_parts(sj_host_pool *p, uint32_t gen, void *scratch, sj_host_pool_timing *t) {
    uint64_t c = atomic_load_explicit(&p->claim, memory_order_acquire);
    for (;;) {
        if (CLAIM_GEN(c) != gen || CLAIM_NEXT(c) >= CLAIM_PARTS(c)) return;
        int parts = CLAIM_PARTS(c), i = CLAIM_NEXT(c);
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &c, c + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        uint64_t t0 = t ? now_ns() : 0;
        p->fn(p->buffers, p->info, p->extent, p->bounds[i], p->bounds[i + 1], scratch);
        if (t) {
            t->caller_ns += now_ns() - t0;
            t->caller_rows += p->bounds[i + 1] - p->bounds[i];
        }
        if (atomic_fetch_add_explicit(&p->finished, 1, memory_order_acq_rel) + 1 == parts) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
        c = atomic_load_explicit(&p->claim, memory_order_acquire);
    }
}

static void *worker_main(void *arg) {
    pool_worker *w = arg;
    sj_host_pool *p = w->pool;
    uint32_t seen = 0;
    for (;;) {
        seen = wait_launch(p, seen);
        if (p->stop) return NULL;
        run_parts(p, seen, w->scratch, NULL);
    }
}

/* Publishes the launch; wakes the sleepers only when asked to. */
static void post(sj_host_pool *p, bool wake) {
    atomic_store(&p->posted, p->generation);
    if (!wake || atomic_load(&p->asleep) == 0) return;
    pthread_mutex_lock(&p->mu);
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

void sj__host_pool_wake(sj_host_pool *p) {
    if (atomic_load(&p->asleep) == 0) return;
    pthread_mutex_lock(&p->mu);
    p->nudges++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
}

void sj__host_pool_run(sj_host_pool *p, sj_host_rows_fn fn, void *const *buffers,
                      const int64_t *info, int64_t active_extent, const int64_t *bounds,
                      int parts, bool wake, void *caller_scratch, sj_host_pool_timing *t) {
    *t = (sj_host_pool_timing){0};
    uint64_t start = now_ns();
    p->fn = fn;
    p->buffers = buffers;
    p->info = info;
    p->extent = active_extent;
    memcpy(p->bounds, bounds, (size_t)(parts + 1) * sizeof *bounds);
    atomic_store_explicit(&p->finished, 0, memory_order_relaxed);
    uint32_t gen = ++p->generation;
    atomic_store_explicit(&p->claim, CLAIM(gen, parts, 0), memory_order_release);
    t->woke = wake && atomic_load(&p->asleep) > 0;
    post(p, wake);
    run_parts(p, gen, caller_scratch, t);
    wait_done(p, parts);
    t->wall_ns = now_ns() - start;
}

void *sj__host_scratch_alloc(sj_ctx *ctx, void **base) {
    *base = sj_alloc(ctx, SJ_HOST_SCRATCH_BYTES + 63);
    return *base ? (void *)(((uintptr_t)*base + 63) & ~(uintptr_t)63) : NULL;
}

void sj__host_scratch_free(sj_ctx *ctx, void *base) { sj_free(ctx, base); }

/* Stops the first `started` workers and frees the pool. */
static void teardown(sj_host_pool *p, int started) {
    if (started > 0) {
        p->stop = true;
        ++p->generation;
        post(p, true);
        for (int i = 0; i < started; i++) pthread_join(p->workers[i].thread, NULL);
    }
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    for (int i = 0; i < p->threads - 1; i++) sj__host_scratch_free(p->ctx, p->workers[i].scratch_base);
    sj_free(p->ctx, p->workers);
    sj_free(p->ctx, p);
}

sj_status sj__host_pool_create(sj_ctx *ctx, int threads, sj_host_pool **out) {
    *out = NULL;
    if (threads < 2 || threads > SJ_HOST_MAX_THREADS)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "host threads: %d outside 2..%d", threads,
                       SJ_HOST_MAX_THREADS);
    sj_host_pool *p = sj_calloc(ctx, 1, sizeof *p);
    pool_worker *ws = p ? sj_calloc(ctx, (size_t)threads - 1, sizeof *ws) : NULL;
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
    atomic_init(&p->asleep, 0);
    for (int i = 0; i < threads - 1; i++) {
        ws[i].pool = p;
        if (!(ws[i].scratch = sj__host_scratch_alloc(ctx, &ws[i].scratch_base))) {
            teardown(p, i);
            return sj_fail(ctx, SJ_E_NOMEM, "host threads: no scratch for thread %d of %d", i + 2, threads);
        }
        int err = pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]);
        if (err) {
            teardown(p, i);
            return sj_fail(ctx, SJ_E_NOMEM, "host threads: cannot start thread %d of %d (%s)",
                           i + 2, threads, strerror(err));
        }
    }
    *out = p;
    return SJ_OK;
}

void sj__host_pool_destroy(sj_host_pool *p) {
    if (p) teardown(p, p->threads - 1);
}

int sj__host_pool_threads(const sj_host_pool *p) { return p ? p->threads : 1; }

int sj__host_pool_awake(const sj_host_pool *p) {
    if (!p) return 0;
    int asleep = atomic_load_explicit(&p->asleep, memory_order_relaxed);
    return p->threads - 1 - asleep;
}
