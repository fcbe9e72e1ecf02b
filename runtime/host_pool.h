/* The host device's kernel threads: a fixed set of workers that run parts
 * of one row-parallel launch beside the calling thread. Not installed.
 *
 * One launch at a time (the device's lock serialises launches). Workers
 * spin briefly after a launch, since a run's kernels follow each other
 * within microseconds, then sleep on a condition variable; a launch posts
 * its parts, which the caller and the workers claim one at a time, and
 * returns when every part is done. Waking a sleeper costs more than a
 * small launch gains, so a launch wakes them only when asked to; the
 * workers awake help either way. Nothing is allocated per launch. */
#ifndef SJ_RUNTIME_HOST_POOL_H
#define SJ_RUNTIME_HOST_POOL_H

#include "shapejit/ext/device.h"

typedef struct sj_host_pool sj_host_pool;

/* `threads` counts the caller: threads - 1 workers are started (2..
 * SJ_HOST_MAX_THREADS). SJ_E_NOMEM when memory or a thread cannot be had. */
sj_status sj__host_pool_create(sj_ctx *ctx, int threads, sj_host_pool **out);
/* Stops and joins the workers. NULL is a no-op. */
void sj__host_pool_destroy(sj_host_pool *p);
int sj__host_pool_threads(const sj_host_pool *p);
/* Workers not asleep now (spinning after a launch, or running parts): a
 * hint, as a worker may fall asleep or wake right after. 0 for NULL. */
int sj__host_pool_awake(const sj_host_pool *p);

/* Wakes the sleeping workers without a launch, to spin for the launches of
 * a run about to start (its first kernels hide the wake-up's latency). */
void sj__host_pool_wake(sj_host_pool *p);

/* What a launch cost, for the caller's estimate of what waking is worth. */
typedef struct sj_host_pool_timing {
    uint64_t wall_ns;     /* the whole launch, post to the last part done */
    uint64_t caller_ns;   /* of which the caller spent in its own parts */
    int64_t caller_rows;  /* the rows of those parts */
    bool woke;            /* sleeping workers were woken for it */
} sj_host_pool_timing;

/* Runs fn over rows [bounds[i], bounds[i + 1]) for every i < parts (2 <=
 * parts <= SJ_HOST_MAX_THREADS), on the caller and any worker that is
 * awake (wake: the sleeping ones woken too), and returns when all are
 * done, with *t filled. The caller's parts get caller_scratch, a
 * worker's its own (each made with the pool). */
void sj__host_pool_run(sj_host_pool *p, sj_host_rows_fn fn, void *const *buffers,
                      const int64_t *info, int64_t active_extent, const int64_t *bounds,
                      int parts, bool wake, void *caller_scratch, sj_host_pool_timing *t);

/* A kernel's scratch (SJ_HOST_SCRATCH_BYTES, 64-byte aligned) for one
 * thread: *base is what sj__host_scratch_free takes. NULL when out of
 * memory. */
void *sj__host_scratch_alloc(sj_ctx *ctx, void **base);
void sj__host_scratch_free(sj_ctx *ctx, void *base);

#endif
