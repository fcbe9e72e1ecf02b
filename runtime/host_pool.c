/* The host device's kernel threads (host_pool.h). */
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

typedef struct worker {
    struct sj_host_pool *pool;
    int index; /* the part it runs: 1..threads-1 */
    pthread_t thread;
} worker;

struct sj_host_pool {
    sj_ctx *ctx;
    int threads;
    worker *workers; /* threads - 1 */
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    /* The launch: written by the caller before `generation` is published
     * (release), read by workers after they see it (acquire). */
    sj_host_rows_fn fn;
    void *const *buffers;
    const int64_t *info;
    int64_t extent;
    int64_t bounds[SJ_HOST_MAX_THREADS + 1];
    int parts;
    bool stop;
    atomic_uint_fast64_t generation;
    atomic_int pending; /* workers that have not finished the current launch */
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

/* Spins until generation moves past `seen` or SPIN_NS pass; then sleeps. */
static uint64_t wait_launch(sj_host_pool *p, uint64_t seen) {
    uint64_t g, start = 0;
    for (unsigned i = 0;; i++) {
        g = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (g != seen) return g;
        relax();
        if ((i & 63) == 0) {
            uint64_t t = now_ns();
            if (!start) start = t;
            else if (t - start > SPIN_NS) break;
        }
    }
    pthread_mutex_lock(&p->mu);
    while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen)
        pthread_cond_wait(&p->wake, &p->mu);
    pthread_mutex_unlock(&p->mu);
    return g;
}

static void *worker_main(void *arg) {
    worker *w = arg;
    sj_host_pool *p = w->pool;
    uint64_t seen = 0;
    for (;;) {
        seen = wait_launch(p, seen);
        if (p->stop) return NULL;
        if (w->index < p->parts)
            p->fn(p->buffers, p->info, p->extent, p->bounds[w->index], p->bounds[w->index + 1]);
        /* Every worker acknowledges every launch, so none still reads the
         * launch's fields when the caller writes the next one. */
        if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

static void post(sj_host_pool *p) {
    atomic_store_explicit(&p->pending, p->threads - 1, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
}

static void wait_done(sj_host_pool *p) {
    uint64_t start = 0;
    for (unsigned i = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; i++) {
        relax();
        if ((i & 63) == 0) {
            uint64_t t = now_ns();
            if (!start) start = t;
            else if (t - start > SPIN_NS) break;
        }
    }
    pthread_mutex_lock(&p->mu);
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0)
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
    p->parts = parts;
    memcpy(p->bounds, bounds, (size_t)(parts + 1) * sizeof *bounds);
    post(p);
    fn(buffers, info, active_extent, bounds[0], bounds[1]);
    wait_done(p);
}

/* Stops the first `started` workers and frees the pool. */
static void teardown(sj_host_pool *p, int started) {
    if (started > 0) {
        p->stop = true;
        post(p);
        for (int i = 0; i < started; i++) pthread_join(p->workers[i].thread, NULL);
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
    worker *ws = p ? sj_calloc(ctx, (size_t)threads - 1, sizeof *ws) : NULL;
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
    atomic_init(&p->generation, 0);
    atomic_init(&p->pending, 0);
    for (int i = 0; i < threads - 1; i++) {
        ws[i] = (worker){.pool = p, .index = i + 1};
        int err = pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]);
        if (err) {
            /* Workers already started wait for a launch; the stop launch
             * needs every worker's acknowledgement, so count only those. */
            p->threads = i + 1;
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
