/* --ladder fit:K (serve/ladder_switch.h): the window, the background fit,
 * and the routing of each run to the provisional or fitted engine. The
 * routing is one atomic load: the fitted engine is published only once
 * every bucket of it is ready, and neither engine is closed while runs may
 * still use it (the provisional is the caller's, the fitted is closed by
 * destroy, after the caller's workers). */
#include "serve/ladder_switch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct sj_ladder_switch {
    sj_ladder_switch_config cfg;
    int64_t *sizes;           /* the window, cfg.window entries */
    _Atomic size_t claimed;   /* slots handed out */
    _Atomic size_t recorded;  /* slots written; the writer of the last starts the fit */
    _Atomic size_t routed;    /* requests routed, for switched_after */
    _Atomic(sj_engine *) live; /* the fitted engine once ready, else NULL */
    _Atomic uint64_t on_fitted, above_fitted;
    pthread_t thread;
    _Atomic bool started;     /* the fit thread exists (joined by wait) */
    _Atomic bool finished;    /* the fields below are final (the fit thread is done) */
    bool joined;
    pthread_mutex_t join_mu;
    /* Written by the fit thread, read after wait. */
    sj_engine *fitted;
    char *spec;
    sj_ladder_fit_result fit;
    int distinct;
    int64_t lo, hi;
    double fit_ms, ready_ms;
    char error[512];
};

int sj_ladder_switch_parse(const char *spec, int *k) {
    if (!spec || strncmp(spec, "fit:", 4)) return 0;
    char *end;
    long long v = strtoll(spec + 4, &end, 10);
    if (!spec[4] || *end || v < 1 || v > SJ_LADDER_MAX_BUCKETS) return -1;
    *k = (int)v;
    return 1;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void tell(sj_ladder_switch *ls, const char *line) {
    if (ls->cfg.on_event) ls->cfg.on_event(ls->cfg.event_user, line);
}

static void give_up(sj_ladder_switch *ls, const char *what, const char *why) {
    snprintf(ls->error, sizeof ls->error, "%s: %s", what, why && *why ? why : "unknown error");
    atomic_store(&ls->finished, true);
    char line[640];
    snprintf(line, sizeof line, "ladder fit: %s; the provisional ladder keeps serving", ls->error);
    tell(ls, line);
}

/* The window's sizes: distinct count and range (sizes sorted in place; the
 * fit does not depend on their order). */
static void window_figures(sj_ladder_switch *ls) {
    size_t n = ls->cfg.window;
    qsort(ls->sizes, n, sizeof *ls->sizes, cmp_i64);
    ls->lo = ls->sizes[0];
    ls->hi = ls->sizes[n - 1];
    ls->distinct = 1;
    for (size_t i = 1; i < n; i++)
        if (ls->sizes[i] != ls->sizes[i - 1]) ls->distinct++;
}

static void *fit_thread(void *arg) {
    sj_ladder_switch *ls = arg;
    sj_ctx *ctx = ls->cfg.ctx;
    double t0 = now_ms();
    window_figures(ls);
    sj_ladder_cost cost = {.c = 1};
    char why[512] = "";
    if (ls->cfg.cost && ls->cfg.cost(ls->cfg.cost_user, ls->lo, ls->hi, &cost, why, sizeof why) != SJ_OK) {
        give_up(ls, "measuring the cost model failed", why);
        return NULL;
    }
    sj_ladder *l;
    if (sj_ladder_fit(ctx, ls->sizes, ls->cfg.window, &cost, ls->cfg.k, 0, &l, &ls->fit) != SJ_OK) {
        give_up(ls, "the fit failed", sj_ctx_last_error(ctx));
        return NULL;
    }
    size_t cap = 8 + 21 * (size_t)sj_ladder_num_buckets(l);
    ls->spec = malloc(cap);
    if (ls->spec) sj_ladder_format(l, ls->spec, cap);
    sj_ladder_destroy(l);
    if (!ls->spec) {
        give_up(ls, "the fit failed", "out of memory");
        return NULL;
    }
    ls->fit_ms = now_ms() - t0;
    double t1 = now_ms();
    sj_engine *e = NULL;
    if (ls->cfg.open(ls->cfg.open_user, ls->spec, &e, why, sizeof why) != SJ_OK) {
        give_up(ls, "opening the fitted ladder failed", why);
        return NULL;
    }
    /* Every bucket ready before the first request is routed to it. */
    if (sj_engine_precompile(e, ls->cfg.jobs > 0 ? ls->cfg.jobs : 1, NULL, NULL) != SJ_OK) {
        give_up(ls, "precompiling the fitted ladder failed", sj_ctx_last_error(ctx));
        sj_engine_close(e);
        return NULL;
    }
    ls->ready_ms = now_ms() - t1;
    ls->fitted = e;
    size_t after = atomic_load(&ls->routed);
    atomic_store(&ls->live, e);
    atomic_store(&ls->finished, true);
    char line[600];
    snprintf(line, sizeof line,
             "ladder fit: switched to %.*s (%d bucket%s fitted to the first %zu requests in %.1f ms, "
             "ready in %.1f ms) after %zu requests",
             300, ls->spec, ls->fit.buckets, ls->fit.buckets == 1 ? "" : "s", ls->cfg.window, ls->fit_ms,
             ls->ready_ms, after);
    tell(ls, line);
    return NULL;
}

sj_status sj_ladder_switch_create(const sj_ladder_switch_config *cfg, sj_ladder_switch **out) {
    *out = NULL;
    if (!cfg || !cfg->ctx || !cfg->provisional || !cfg->open || cfg->k < 1 ||
        cfg->k > SJ_LADDER_MAX_BUCKETS || cfg->window < 1 || cfg->window > SJ_LADDER_SWITCH_MAX_WINDOW)
        return cfg && cfg->ctx ? sj_ctx_set_error(cfg->ctx, SJ_E_INVALID_ARG,
                                         "ladder fit: needs a provisional engine, an opener, K in 1..%d "
                                         "and a window in 1..%d requests (got K %d, window %zu)",
                                         SJ_LADDER_MAX_BUCKETS, SJ_LADDER_SWITCH_MAX_WINDOW,
                                         cfg->k, cfg->window)
                               : SJ_E_INVALID_ARG;
    sj_ladder_switch *ls = calloc(1, sizeof *ls);
    if (!ls) return sj_ctx_set_error(cfg->ctx, SJ_E_NOMEM, "ladder fit: out of memory");
    ls->sizes = malloc(cfg->window * sizeof *ls->sizes);
    if (!ls->sizes) {
        free(ls);
        return sj_ctx_set_error(cfg->ctx, SJ_E_NOMEM, "ladder fit: out of memory for a window of %zu requests",
                       cfg->window);
    }
    ls->cfg = *cfg;
    pthread_mutex_init(&ls->join_mu, NULL);
    *out = ls;
    return SJ_OK;
}

void sj_ladder_switch_record(sj_ladder_switch *ls, int64_t rows) {
    if (atomic_load(&ls->live)) return;
    atomic_fetch_add(&ls->routed, 1);
    if (atomic_load(&ls->claimed) >= ls->cfg.window) return;
    size_t slot = atomic_fetch_add(&ls->claimed, 1);
    if (slot >= ls->cfg.window) return;
    ls->sizes[slot] = rows;
    /* The call that writes the last slot starts the fit: every slot is
     * written by then (seq_cst increments). */
    if (atomic_fetch_add(&ls->recorded, 1) + 1 != ls->cfg.window) return;
    int err = pthread_create(&ls->thread, NULL, fit_thread, ls);
    if (err == 0)
        atomic_store(&ls->started, true);
    else
        give_up(ls, "cannot start the fit thread", strerror(err));
}

sj_engine *sj_ladder_switch_route(sj_ladder_switch *ls, int64_t rows) {
    sj_engine *fitted = atomic_load(&ls->live);
    if (!fitted) return ls->cfg.provisional;
    if (sj_ladder_find(sj_engine_ladder(fitted), rows) >= 0) {
        atomic_fetch_add(&ls->on_fitted, 1);
        return fitted;
    }
    atomic_fetch_add(&ls->above_fitted, 1);
    return ls->cfg.provisional;
}

void sj_ladder_switch_wait(sj_ladder_switch *ls) {
    pthread_mutex_lock(&ls->join_mu);
    if (atomic_load(&ls->started) && !ls->joined) {
        pthread_join(ls->thread, NULL);
        ls->joined = true;
    }
    pthread_mutex_unlock(&ls->join_mu);
}

void sj_ladder_switch_destroy(sj_ladder_switch *ls) {
    if (!ls) return;
    sj_ladder_switch_wait(ls);
    sj_engine_close(ls->fitted);
    pthread_mutex_destroy(&ls->join_mu);
    free(ls->spec);
    free(ls->sizes);
    free(ls);
}

const char *sj_ladder_switch_state_name(sj_ladder_switch_state s) {
    switch (s) {
    case SJ_LADDER_SWITCH_RECORDING: return "recording";
    case SJ_LADDER_SWITCH_FITTING: return "fitting";
    case SJ_LADDER_SWITCH_SWITCHED: return "switched";
    case SJ_LADDER_SWITCH_FAILED: return "failed";
    }
    return "?";
}

void sj_ladder_switch_get(sj_ladder_switch *ls, sj_ladder_switch_report *out) {
    size_t seen = atomic_load(&ls->recorded);
    /* live is published after every field it needs is written. */
    bool switched = atomic_load(&ls->live) != NULL;
    bool done = switched || atomic_load(&ls->finished);
    *out = (sj_ladder_switch_report){
        .k = ls->cfg.k,
        .state = switched ? SJ_LADDER_SWITCH_SWITCHED
                 : done   ? SJ_LADDER_SWITCH_FAILED
                 : seen < ls->cfg.window ? SJ_LADDER_SWITCH_RECORDING
                                         : SJ_LADDER_SWITCH_FITTING,
        .window = ls->cfg.window,
        .seen = seen,
        .fitted = done && ls->spec,
        .switched = switched,
        .fitted_spec = done ? ls->spec : NULL,
        .fit = done ? ls->fit : (sj_ladder_fit_result){0},
        .distinct = done ? ls->distinct : 0,
        .lo = done ? ls->lo : 0,
        .hi = done ? ls->hi : 0,
        .switched_after = atomic_load(&ls->routed),
        .on_fitted = atomic_load(&ls->on_fitted),
        .above_fitted = atomic_load(&ls->above_fitted),
        .fit_ms = done ? ls->fit_ms : 0,
        .ready_ms = done ? ls->ready_ms : 0,
        .error = done ? ls->error : "",
    };
}

sj_engine *sj_ladder_switch_fitted(sj_ladder_switch *ls) {
    return atomic_load(&ls->live);
}
