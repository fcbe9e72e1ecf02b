/* A served model: its engine, what the protocol shows of it, its warm-up
 * (ready when all buckets are, after the largest one, or at once) and the
 * run path with zero-stall promotion: a request whose bucket is not ready
 * runs at once in the smallest ready larger bucket (exact: kernels run at
 * the active extent) while a background thread makes its own bucket ready. */
#include "server/server_impl.h"

#include "serve/ladder_switch.h"
#include "shapejit/ext/bucketed_cache.h"
#include "shapejit/remote.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool srv_model_ready(const srv_model *m) { return atomic_load(&m->state) == SRV_READY; }

static int dyn_axis(const sj_value_desc *d) {
    for (int k = 0; k < d->shape.rank; k++)
        if (d->shape.dims[k] == SJ_DIM_SYM) return k;
    return -1;
}

sj_status srv_model_create(srv_server *s, const char *name, sj_engine *e, srv_model **out) {
    *out = NULL;
    srv_model *m = calloc(1, sizeof *m);
    if (!m) {
        sj_engine_close(e);
        return sj_ctx_set_error(s->ctx, SJ_E_NOMEM, "serve: out of memory");
    }
    m->srv = s;
    m->e = e;
    snprintf(m->name, sizeof m->name, "%s", name);
    m->n_in = sj_engine_num_inputs(e);
    m->n_out = sj_engine_num_outputs(e);
    sj_status st = SJ_OK;
    if (m->n_in > SRV_MAX_IO || m->n_out > SRV_MAX_IO)
        st = sj_ctx_set_error(s->ctx, SJ_E_UNSUPPORTED, "model '%s': %d inputs and %d outputs; the server "
                     "takes at most %d of each", name, m->n_in, m->n_out, SRV_MAX_IO);
    for (int i = 0; st == SJ_OK && i < m->n_in; i++) {
        st = sj_engine_input(e, i, &m->in[i]);
        m->dyn_axis_in[i] = dyn_axis(&m->in[i]);
        m->has_dyn |= m->dyn_axis_in[i] >= 0;
    }
    for (int i = 0; st == SJ_OK && i < m->n_out; i++) {
        st = sj_engine_output(e, i, &m->out[i]);
        m->dyn_axis_out[i] = dyn_axis(&m->out[i]);
    }
    int nb = sj_engine_num_buckets(e);
    for (int i = 0; st == SJ_OK && i < nb; i++) {
        int64_t lo, hi;
        bool ready;
        st = sj_engine_bucket(e, i, &lo, &hi, &ready);
        if (hi > m->top) m->top = hi;
    }
    m->max_rows = s->cfg.max_rows > 0 && s->cfg.max_rows < m->top ? s->cfg.max_rows : m->top;
    if (!m->has_dyn) m->max_rows = 1;
    m->bg_queued = st == SJ_OK ? calloc((size_t)nb + 1, sizeof *m->bg_queued) : NULL;
    m->bg_queue = st == SJ_OK ? calloc((size_t)nb + 1, sizeof *m->bg_queue) : NULL;
    if (st == SJ_OK && (!m->bg_queued || !m->bg_queue))
        st = sj_ctx_set_error(s->ctx, SJ_E_NOMEM, "serve: out of memory");
    pthread_mutex_init(&m->bg_mu, NULL);
    pthread_cond_init(&m->bg_cv, NULL);
    if (st != SJ_OK) {
        srv_model_destroy(m);
        return st;
    }
    *out = m;
    return SJ_OK;
}

/* ---- warm-up */

static void warm_failed(srv_model *m, const char *what) {
    snprintf(m->warm_error, sizeof m->warm_error, "%s: %s", what, sj_ctx_last_error(m->srv->ctx));
    fprintf(stderr, "shapejit serve: model '%s': %s\n", m->name, m->warm_error);
    /* Ready already (first-bucket): requests still run, in a ready bucket
     * or by compiling their own; only a model that never got ready fails. */
    int loading = SRV_LOADING;
    atomic_compare_exchange_strong(&m->state, &loading, SRV_FAILED);
}

/* The rest of the warm-up on warm_jobs threads: each takes the next bucket
 * (smallest first) and checks the stop flag before taking one, so a stop at
 * shutdown ends the warm-up once every thread has finished the bucket in
 * hand. (sj_engine_precompile would compile every bucket before returning:
 * a SIGTERM during a 108-bucket warm-up waited 80-120 s for it.) */
typedef struct warm_pool {
    srv_model *m;
    int n; /* buckets 0..n-1 to make ready */
    _Atomic int next;
    _Atomic bool failed;
} warm_pool;

static void *warm_worker(void *arg) {
    warm_pool *p = arg;
    srv_model *m = p->m;
    while (!atomic_load(&m->stop) && !atomic_load(&p->failed)) {
        int i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n) break;
        if (sj_engine_prepare_bucket(m->e, i) != SJ_OK) {
            /* The first failure is the one told; the others stop. */
            if (!atomic_exchange(&p->failed, true)) warm_failed(m, "warm-up");
            break;
        }
    }
    return NULL;
}

static void *warm(void *arg) {
    srv_model *m = arg;
    int nb = sj_engine_num_buckets(m->e);
    /* Largest first: once it is ready every request fits somewhere, so
     * first-bucket readiness (with promotion) serves at once. */
    if (nb > 0 && sj_engine_prepare_bucket(m->e, nb - 1) != SJ_OK) {
        warm_failed(m, "warm-up");
        return NULL;
    }
    if (m->srv->cfg.ready_when == SRV_READY_FIRST_BUCKET) atomic_store(&m->state, SRV_READY);
    warm_pool p = {.m = m, .n = nb - 1};
    atomic_init(&p.next, 0);
    atomic_init(&p.failed, false);
    int jobs = m->srv->cfg.warm_jobs > 1 ? m->srv->cfg.warm_jobs : 1;
    if (jobs > nb - 1) jobs = nb - 1 > 0 ? nb - 1 : 1;
    pthread_t t[256];
    int started = 0;
    if (jobs > (int)(sizeof t / sizeof *t)) jobs = (int)(sizeof t / sizeof *t);
    /* This thread is one of the jobs; the others are started beside it. */
    for (int k = 1; k < jobs; k++)
        if (pthread_create(&t[started], NULL, warm_worker, &p) == 0) started++;
    warm_worker(&p);
    for (int k = 0; k < started; k++) pthread_join(t[k], NULL);
    if (atomic_load(&p.failed)) return NULL;
    if (!atomic_load(&m->stop)) atomic_store(&m->state, SRV_READY);
    return NULL;
}

/* Background compiles of buckets that requests were promoted out of. */
static void *background(void *arg) {
    srv_model *m = arg;
    pthread_mutex_lock(&m->bg_mu);
    for (;;) {
        while (!m->bg_pending && !atomic_load(&m->stop)) pthread_cond_wait(&m->bg_cv, &m->bg_mu);
        if (atomic_load(&m->stop)) break;
        int b = m->bg_queue[--m->bg_pending];
        pthread_mutex_unlock(&m->bg_mu);
        if (sj_engine_prepare_bucket(m->e, b) != SJ_OK)
            fprintf(stderr, "shapejit serve: model '%s': background compile of bucket %d: %s\n",
                    m->name, b, sj_ctx_last_error(m->srv->ctx));
        pthread_mutex_lock(&m->bg_mu);
        /* Failed or not, a later promotion may ask again. */
        atomic_store(&m->bg_queued[b], false);
    }
    pthread_mutex_unlock(&m->bg_mu);
    return NULL;
}

static void queue_background(srv_model *m, int b) {
    if (atomic_exchange(&m->bg_queued[b], true)) return;
    pthread_mutex_lock(&m->bg_mu);
    m->bg_queue[m->bg_pending++] = b;
    pthread_cond_signal(&m->bg_cv);
    pthread_mutex_unlock(&m->bg_mu);
}

sj_status srv_model_start(srv_model *m) {
    srv_server *s = m->srv;
    if (m->fit) SRV_TRY(srv_fit_start(m));
    if (s->cfg.max_batch_delay_us > 0) {
        char why[256];
        bool independent = false;
        SRV_TRY(sj_graph_rows_independent(sj_engine_graph(m->e), &independent, why, sizeof why));
        if (independent) {
            int64_t cap = s->cfg.max_batch_rows > 0 && s->cfg.max_batch_rows < m->top
                ? s->cfg.max_batch_rows
                : m->top;
            SRV_TRY(srv_batcher_create(m, s->cfg.max_batch_delay_us, cap, &m->batcher));
            m->batch_rows = cap;
        } else {
            snprintf(m->batch_why, sizeof m->batch_why, "%s", why);
            fprintf(stderr, "shapejit serve: model '%s': batching off: %s\n", m->name, why);
        }
    }
    if (s->cfg.promote) {
        if (pthread_create(&m->bg_thread, NULL, background, m) != 0)
            return sj_ctx_set_error(s->ctx, SJ_E_INTERNAL, "model '%s': cannot start a thread", m->name);
        m->bg_started = true;
    }
    if (s->cfg.ready_when == SRV_READY_NOW) {
        atomic_store(&m->state, SRV_READY);
        return SJ_OK;
    }
    if (pthread_create(&m->warm_thread, NULL, warm, m) != 0)
        return sj_ctx_set_error(s->ctx, SJ_E_INTERNAL, "model '%s': cannot start a thread", m->name);
    m->warm_started = true;
    return SJ_OK;
}

void srv_model_destroy(srv_model *m) {
    if (!m) return;
    atomic_store(&m->stop, true);
    if (m->bg_started) {
        pthread_mutex_lock(&m->bg_mu);
        pthread_cond_broadcast(&m->bg_cv);
        pthread_mutex_unlock(&m->bg_mu);
        pthread_join(m->bg_thread, NULL);
    }
    if (m->warm_started) pthread_join(m->warm_thread, NULL);
    srv_batcher_destroy(m->batcher);
    /* No run is in flight: the fitted engine goes first (a fit still
     * compiling is waited for), then the provisional it stood beside. */
    srv_fit_destroy(m);
    sj_engine_close(m->e);
    pthread_mutex_destroy(&m->bg_mu);
    pthread_cond_destroy(&m->bg_cv);
    free(m->bg_queued);
    free(m->bg_queue);
    free(m);
}

/* ---- running */

sj_status srv_model_run_direct(srv_model *m, int64_t rows, const sj_tensor *in, sj_tensor *out) {
    sj_named_tensor ni[SRV_MAX_IO], no[SRV_MAX_IO];
    for (int i = 0; i < m->n_in; i++) ni[i] = (sj_named_tensor){m->in[i].name, in[i]};
    memset(no, 0, sizeof no);
    sj_engine *e = srv_fit_route(m, rows);
    sj_engine_run_report rep;
    sj_status st = sj_engine_run_ready(e, ni, m->n_in, no, m->n_out, m->srv->cfg.promote, &rep);
    if (st != SJ_OK) return st;
    for (int i = 0; i < m->n_out; i++) out[i] = no[i].tensor;
    atomic_fetch_add(&m->m.rows, (uint64_t)rows);
    /* The fitted engine is routed to only once every bucket is ready. */
    if (rep.promoted && e == m->e) {
        atomic_fetch_add(&m->m.promotions, 1);
        queue_background(m, rep.own_bucket);
    } else if (rep.info.wait != SJ_RUN_READY) {
        atomic_fetch_add(&m->m.stalls, 1);
    }
    return SJ_OK;
}

sj_status srv_model_run(srv_model *m, int64_t rows, const sj_tensor *in, sj_tensor *out) {
    /* The fit's window records what clients ask for, one request at a
     * time, not the batches the batcher makes of them: batch sizes follow
     * the load and the batching delay of the moment, while the fitted
     * ladder must hold every request alone (its top is the largest
     * request), and a batch above that top still runs on the provisional. */
    if (m->fit && m->fit->ls) sj_ladder_switch_record(m->fit->ls, rows);
    if (m->batcher) return srv_batcher_run(m->batcher, rows, in, out);
    return srv_model_run_direct(m, rows, in, out);
}

void srv_model_tell_trouble(srv_model *m) {
    if (!atomic_load(&m->told_store)) {
        /* The cache's counters (atomics), not sj_engine_stats_get, which
         * also asks every bucket for its memory: this runs every second. */
        sj_bucketed_cache_stats es;
        sj_bucketed_cache_stats_get(sj_engine_cache(m->e), &es);
        if (es.store_errors && !atomic_exchange(&m->told_store, true)) {
            char why[256];
            sj_bucketed_cache_store_error(sj_engine_cache(m->e), why, sizeof why);
            fprintf(stderr, "shapejit serve: model '%s': the store failed (%llu time%s so far%s%s); "
                    "buckets compile and serve from memory meanwhile. Told once: /metrics "
                    "shapejit_store_errors_total counts every failure\n", m->name,
                    (unsigned long long)es.store_errors, es.store_errors == 1 ? "" : "s",
                    why[0] ? "; first refusal: " : "", why);
        }
    }
    sj_remote *r = sj_engine_remote(m->e);
    if (r && !atomic_load(&m->told_remote)) {
        sj_remote_stats rs;
        sj_remote_stats_get(r, &rs);
        uint64_t n = rs.errors + rs.timeouts + rs.rejected + rs.dropped_puts + rs.lease_errors;
        if (n && !atomic_exchange(&m->told_remote, true))
            fprintf(stderr, "shapejit serve: model '%s': the remote tier %s failed (%llu errors, %llu "
                    "timeouts, %llu values rejected, %llu puts dropped, %llu lease errors so far); "
                    "buckets compile here meanwhile. Told once: /metrics "
                    "shapejit_remote_errors_total counts every failure\n", m->name, sj_remote_url(r),
                    (unsigned long long)rs.errors, (unsigned long long)rs.timeouts,
                    (unsigned long long)rs.rejected, (unsigned long long)rs.dropped_puts,
                    (unsigned long long)rs.lease_errors);
    }
}
