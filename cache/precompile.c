/* Precompile: every bucket made ready (or only stored) by a pool of threads
 * pulling bucket indexes from a shared counter (the deploy step). */
#include "cache/bucketed_cache_impl.h"

#include <stdio.h>
#include <string.h>

typedef struct job {
    sj_bucketed_cache *c;
    _Atomic int next;
    int done;
    pthread_mutex_t mu; /* done, first failure, progress calls */
    sj_status first;
    char msg[512];
    sj_cache_progress_fn progress;
    void *user;
    bool store_only; /* compile and store, load nothing */
} job;

static void *worker(void *arg) {
    job *j = arg;
    sj_bucketed_cache *c = j->c;
    for (;;) {
        int i = atomic_fetch_add(&j->next, 1);
        if (i >= c->n_buckets) break;
        int64_t extent = sj_ladder_extent(c->ladder, i), got;
        void *exe;
        sj_status st = j->store_only ? sj__cache_store_bucket(c, extent)
                                     : sj_bucketed_cache_get_or_compile(c, extent, &got, &exe);
        pthread_mutex_lock(&j->mu);
        if (st != SJ_OK && j->first == SJ_OK) {
            j->first = st;
            strncpy(j->msg, sj_ctx_last_error(c->ctx), sizeof j->msg - 1);
        }
        j->done++;
        if (j->progress) j->progress(j->user, j->done, c->n_buckets, extent);
        pthread_mutex_unlock(&j->mu);
    }
    return NULL;
}

/* SJ_E_IO naming the buckets the local store refused, or SJ_OK. */
static sj_status not_stored_fail(sj_bucketed_cache *c) {
    if (!c->store) return SJ_OK;
    char extents[160] = "";
    size_t used = 0;
    int n = 0;
    for (int i = 0; i < c->n_buckets; i++) {
        if (!atomic_load_explicit(&c->buckets[i].not_stored, memory_order_relaxed)) continue;
        if (n++ < 8 && used < sizeof extents)
            used += (size_t)snprintf(extents + used, sizeof extents - used, "%s%lld", n > 1 ? ", " : "",
                                     (long long)sj_ladder_extent(c->ladder, i));
    }
    if (!n) return SJ_OK;
    pthread_mutex_lock(&c->store_fail_mu);
    sj_status st = sj_fail(c->ctx, SJ_E_IO,
                           "precompile: %d of %d buckets were compiled but not stored (extent%s %s%s): %s",
                           n, c->n_buckets, n > 1 ? "s" : "", extents, n > 8 ? ", ..." : "",
                           c->store_fail);
    pthread_mutex_unlock(&c->store_fail_mu);
    return st;
}

static sj_status precompile(sj_bucketed_cache *c, int jobs, sj_cache_progress_fn progress, void *user,
                            bool store_only) {
    if (jobs < 1) return sj_fail(c->ctx, SJ_E_INVALID_ARG, "precompile: jobs must be >= 1 (got %d)", jobs);
    if (jobs > c->n_buckets) jobs = c->n_buckets;
    job j;
    memset(&j, 0, sizeof j);
    j.c = c;
    atomic_init(&j.next, 0);
    j.progress = progress;
    j.user = user;
    j.store_only = store_only;
    pthread_mutex_init(&j.mu, NULL);
    pthread_t *th = sj_calloc(c->ctx, (size_t)jobs, sizeof *th);
    if (!th) {
        pthread_mutex_destroy(&j.mu);
        return sj_fail(c->ctx, SJ_E_NOMEM, "precompile: out of memory");
    }
    int started = 0;
    for (; started < jobs - 1; started++)
        if (pthread_create(&th[started], NULL, worker, &j) != 0) break;
    worker(&j); /* the calling thread works too */
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    sj_free(c->ctx, th);
    pthread_mutex_destroy(&j.mu);
    if (j.first != SJ_OK) return sj_fail(c->ctx, j.first, "precompile: %s", j.msg);
    return not_stored_fail(c);
}

sj_status sj_bucketed_cache_precompile(sj_bucketed_cache *c, int jobs, sj_cache_progress_fn progress,
                                       void *user) {
    if (!c) return SJ_E_INVALID_ARG;
    return precompile(c, jobs, progress, user, false);
}

sj_status sj_bucketed_cache_precompile_stored(sj_bucketed_cache *c, int jobs,
                                              sj_cache_progress_fn progress, void *user) {
    if (!c) return SJ_E_INVALID_ARG;
    if (!c->store && !c->remote)
        return sj_fail(c->ctx, SJ_E_STATE,
                       "precompile: compiling without loading needs a store or a remote tier to "
                       "keep the artifacts");
    return precompile(c, jobs, progress, user, true);
}
