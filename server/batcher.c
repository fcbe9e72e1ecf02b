/* Automatic batching for models whose rows are provably independent
 * (sj_graph_rows_independent): waiting requests are stacked along the
 * dynamic dim (always the first axis there) into one run, and each gets its
 * own rows of every output back. A batch never exceeds max_rows; a request
 * alone runs as it came, without a copy. Two workers take batches, so runs
 * of different buckets still overlap. When no run is going, a worker takes
 * what is queued at once (an idle server adds no latency); while one is
 * going, a worker waits up to the delay after the oldest request for
 * company, so the load that piles up behind a run becomes one batch. */
#include "server/server_impl.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH_WORKERS 2
#define BATCH_MAX_REQUESTS 256

typedef struct slot {
    int64_t rows;
    const sj_tensor *in;
    sj_tensor *out;
    sj_status st;
    char error[512];
    bool done;
    pthread_cond_t cv; /* its own, so a finished batch wakes only its requests */
    double t_enq;
    struct slot *next;
} slot;

struct srv_batcher {
    srv_model *m;
    double delay_s;
    int64_t max_rows;
    pthread_mutex_t mu;
    pthread_cond_t work;
    slot *head, *tail;
    int64_t queued_rows;
    int running; /* batches being run */
    bool stop;
    pthread_t workers[BATCH_WORKERS];
    int n_workers;
};

static void deadline(struct timespec *ts, double at_mono) {
    /* The conds use CLOCK_MONOTONIC (see create). */
    double whole;
    double frac = modf(at_mono, &whole);
    ts->tv_sec = (time_t)whole;
    ts->tv_nsec = (long)(frac * 1e9);
}

static size_t row_bytes(const sj_tensor *t, int64_t rows) {
    return (size_t)(sj_tensor_numel(t) / rows) * sj_dtype_size(t->dtype);
}

/* Runs slots[0..n) as one request of their summed rows. */
static void run_batch(srv_batcher *b, slot **s, int n, int64_t total) {
    srv_model *m = b->m;
    sj_ctx *ctx = m->srv->ctx;
    if (n == 1) {
        s[0]->st = srv_model_run_direct(m, s[0]->rows, s[0]->in, s[0]->out);
        if (s[0]->st != SJ_OK) snprintf(s[0]->error, sizeof s[0]->error, "%s", sj_ctx_last_error(ctx));
        return;
    }
    sj_tensor in[SRV_MAX_IO], out[SRV_MAX_IO];
    memset(in, 0, sizeof in);
    memset(out, 0, sizeof out);
    sj_status st = SJ_OK;
    for (int i = 0; st == SJ_OK && i < m->n_in; i++) {
        in[i] = s[0]->in[i];
        in[i].dims[0] = total;
        size_t rb = row_bytes(&s[0]->in[i], s[0]->rows);
        in[i].bytes = malloc(rb * (size_t)total + 1);
        if (!in[i].bytes) {
            st = sj_ctx_set_error(ctx, SJ_E_NOMEM, "batch: out of memory");
            break;
        }
        size_t at = 0;
        for (int k = 0; k < n; k++) {
            memcpy((char *)in[i].bytes + at, s[k]->in[i].bytes, rb * (size_t)s[k]->rows);
            at += rb * (size_t)s[k]->rows;
        }
    }
    if (st == SJ_OK) st = srv_model_run_direct(m, total, in, out);
    /* Each request's own rows of every output. */
    int64_t first = 0;
    for (int k = 0; k < n; k++) {
        slot *q = s[k];
        q->st = st;
        for (int o = 0; q->st == SJ_OK && o < m->n_out; o++) {
            sj_tensor t = out[o];
            t.dims[0] = q->rows;
            size_t rb = row_bytes(&out[o], total);
            t.bytes = sj_alloc(ctx, rb * (size_t)q->rows + 1);
            if (!t.bytes) {
                for (int j = 0; j < o; j++) sj_tensor_free(ctx, &q->out[j]);
                q->st = sj_ctx_set_error(ctx, SJ_E_NOMEM, "batch: out of memory");
                break;
            }
            memcpy(t.bytes, (char *)out[o].bytes + rb * (size_t)first, rb * (size_t)q->rows);
            q->out[o] = t;
        }
        if (q->st != SJ_OK) snprintf(q->error, sizeof q->error, "%s", sj_ctx_last_error(ctx));
        first += q->rows;
    }
    if (st == SJ_OK) {
        atomic_fetch_add(&m->m.batches, 1);
        atomic_fetch_add(&m->m.batched_requests, (uint64_t)n);
        for (int o = 0; o < m->n_out; o++) sj_tensor_free(ctx, &out[o]);
    }
    for (int i = 0; i < m->n_in; i++) free(in[i].bytes);
}

static void *worker(void *arg) {
    srv_batcher *b = arg;
    slot *batch[BATCH_MAX_REQUESTS];
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (!b->head && !b->stop) pthread_cond_wait(&b->work, &b->mu);
        if (!b->head) break;
        /* Wait for company until the oldest request's delay is up, or a
         * full batch is there. */
        double until = b->head->t_enq + b->delay_s;
        while (b->running > 0 && !b->stop && b->head && b->queued_rows < b->max_rows && srv_now() < until) {
            struct timespec ts;
            deadline(&ts, until);
            if (pthread_cond_timedwait(&b->work, &b->mu, &ts) == ETIMEDOUT) break;
        }
        if (!b->head) continue;
        int n = 0;
        int64_t total = 0;
        while (b->head && n < BATCH_MAX_REQUESTS && (n == 0 || total + b->head->rows <= b->max_rows)) {
            slot *q = b->head;
            b->head = q->next;
            if (!b->head) b->tail = NULL;
            b->queued_rows -= q->rows;
            total += q->rows;
            batch[n++] = q;
        }
        /* Others may start on what is left while this batch runs. */
        if (b->head) pthread_cond_signal(&b->work);
        b->running++;
        pthread_mutex_unlock(&b->mu);
        run_batch(b, batch, n, total);
        pthread_mutex_lock(&b->mu);
        b->running--;
        for (int k = 0; k < n; k++) {
            batch[k]->done = true;
            pthread_cond_signal(&batch[k]->cv);
        }
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

sj_status srv_batcher_run(srv_batcher *b, int64_t rows, const sj_tensor *in, sj_tensor *out) {
    /* A request as large as a batch gains nothing from waiting. */
    if (rows >= b->max_rows) return srv_model_run_direct(b->m, rows, in, out);
    slot q = {.rows = rows, .in = in, .out = out, .t_enq = srv_now()};
    pthread_cond_init(&q.cv, NULL);
    pthread_mutex_lock(&b->mu);
    if (b->tail)
        b->tail->next = &q;
    else
        b->head = &q;
    b->tail = &q;
    b->queued_rows += rows;
    pthread_cond_signal(&b->work);
    while (!q.done) pthread_cond_wait(&q.cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
    pthread_cond_destroy(&q.cv);
    if (q.st != SJ_OK) return sj_ctx_set_error(b->m->srv->ctx, q.st, "%s", q.error);
    return SJ_OK;
}

sj_status srv_batcher_create(srv_model *m, int64_t delay_us, int64_t max_rows, srv_batcher **out) {
    *out = NULL;
    srv_batcher *b = calloc(1, sizeof *b);
    if (!b) return sj_ctx_set_error(m->srv->ctx, SJ_E_NOMEM, "batch: out of memory");
    b->m = m;
    b->delay_s = (double)delay_us * 1e-6;
    b->max_rows = max_rows;
    pthread_mutex_init(&b->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&b->work, &ca);
    pthread_condattr_destroy(&ca);
    for (int i = 0; i < BATCH_WORKERS; i++) {
        if (pthread_create(&b->workers[i], NULL, worker, b) != 0) {
            srv_batcher_destroy(b);
            return sj_ctx_set_error(m->srv->ctx, SJ_E_INTERNAL, "batch: cannot start a thread");
        }
        b->n_workers++;
    }
    *out = b;
    return SJ_OK;
}

void srv_batcher_destroy(srv_batcher *b) {
    if (!b) return;
    pthread_mutex_lock(&b->mu);
    b->stop = true; /* queued requests are still run: workers leave only when the queue is empty */
    pthread_cond_broadcast(&b->work);
    pthread_mutex_unlock(&b->mu);
    for (int i = 0; i < b->n_workers; i++) pthread_join(b->workers[i], NULL);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->work);
    free(b);
}
