/* --ladder fit:K for a served model: the switch itself is the library's
 * (serve/ladder_switch.c, the same code `shapejit serve` replays through);
 * this file opens models with it, keeps what the background fit needs to
 * open the fitted engine (the model's engine config, copied, since the
 * caller's strings and secret do not outlive the open), and says what
 * happened on stderr and in the model's metadata. */
#include "server/server_impl.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/ladder_cost.h"
#include "serve/ladder_switch.h"

#define DEFAULT_PROVISIONAL "pow2:1:1024"

static void fit_free(srv_fit *f) {
    if (!f) return;
    if (f->cfg.remote_secret) {
        memset((void *)f->cfg.remote_secret, 0, f->cfg.remote_secret_len);
        __asm__ __volatile__("" : : "r"(f->cfg.remote_secret) : "memory");
    }
    for (int i = 0; i < f->n_owned; i++) free(f->owned[i]);
    free(f);
}

/* A copy of n bytes owned by f (NULL stays NULL). */
static bool own(srv_fit *f, const void **field, size_t n) {
    if (!*field) return true;
    char *p = malloc(n + 1);
    if (!p) return false;
    memcpy(p, *field, n);
    p[n] = '\0';
    f->owned[f->n_owned++] = p;
    *field = p;
    return true;
}

static bool own_str(srv_fit *f, const char **field) {
    return own(f, (const void **)field, *field ? strlen(*field) : 0);
}

static sj_status fit_new(srv_server *s, const sj_engine_config *cfg, int k, const srv_fit_options *fo,
                         const char *provisional, srv_fit **out) {
    int64_t window = fo->window ? fo->window : SJ_LADDER_SWITCH_DEFAULT_WINDOW;
    if (window < 1 || window > SJ_LADDER_SWITCH_MAX_WINDOW)
        return sj_ctx_set_error(s->ctx, SJ_E_INVALID_ARG, "ladder fit: the window must be 1..%d requests, got %lld",
                       SJ_LADDER_SWITCH_MAX_WINDOW, (long long)window);
    srv_fit *f = calloc(1, sizeof *f);
    if (!f) return sj_ctx_set_error(s->ctx, SJ_E_NOMEM, "serve: out of memory");
    f->k = k;
    f->window = window;
    f->cost_rows = fo->cost_rows;
    snprintf(f->provisional, sizeof f->provisional, "%s", provisional);
    f->cfg = *cfg;
    /* The fitted engine opens a copy of the provisional's graph: the model
     * file's options are spent. */
    sj_model_options_init(&f->cfg.model);
    f->cfg.ladder = NULL;
    bool ok = own_str(f, &f->cfg.store_path) && own_str(f, &f->cfg.backend) && own_str(f, &f->cfg.gpu_emit) &&
              own_str(f, &f->cfg.arch) && own_str(f, &f->cfg.cpu) && own_str(f, &f->cfg.remote_url) &&
              own_str(f, &f->cfg.cuda_driver) &&
              own(f, &f->cfg.remote_secret, f->cfg.remote_secret_len);
    if (!ok) {
        fit_free(f);
        return sj_ctx_set_error(s->ctx, SJ_E_NOMEM, "serve: out of memory");
    }
    *out = f;
    return SJ_OK;
}

sj_status srv_open_fitting(srv_server *s, const char *name, const char *path, sj_graph *g,
                           const sj_engine_config *cfg, const srv_fit_options *fo) {
    int k = 0;
    int is_fit = sj_ladder_switch_parse(cfg->ladder, &k);
    if (is_fit < 0) {
        sj_graph_destroy(g);
        return sj_ctx_set_error(s->ctx, SJ_E_INVALID_ARG, "ladder '%s': fit:K needs K, a bucket count in 1..%d",
                       cfg->ladder, SJ_LADDER_MAX_BUCKETS);
    }
    sj_engine_config c = *cfg;
    const char *provisional = fo->provisional ? fo->provisional : DEFAULT_PROVISIONAL;
    if (is_fit) c.ladder = provisional;
    srv_fit *f = NULL;
    sj_status st = is_fit ? fit_new(s, cfg, k, fo, provisional, &f) : SJ_OK;
    if (st != SJ_OK) {
        sj_graph_destroy(g);
        return st;
    }
    sj_engine *e;
    st = g ? sj_engine_open_graph(s->ctx, g, &c, &e) : sj_engine_open(s->ctx, path, &c, &e);
    /* said once, at start: the store fell back to memory, or is read-only
     * (what it holds is served, what is compiled is not saved) */
    if (st == SJ_OK && sj_engine_warning(e)[0])
        fprintf(stderr, "shapejit serve: model '%s': warning: %s\n", name, sj_engine_warning(e));
    if (st == SJ_OK) st = srv_add_model(s, name, e); /* takes e */
    if (st != SJ_OK) {
        if (is_fit) sj_ctx_prefix_error(s->ctx, "ladder fit:%d on provisional %s", k, provisional);
        fit_free(f);
        return st;
    }
    s->models[s->n_models - 1]->fit = f;
    return SJ_OK;
}

sj_status srv_open_model(srv_server *s, const char *name, const char *path, const sj_engine_config *cfg) {
    return srv_open_fitting(s, name, path, NULL, cfg, &s->cfg.fit);
}

sj_status srv_open_graph(srv_server *s, const char *name, sj_graph *g, const sj_engine_config *cfg) {
    return srv_open_fitting(s, name, NULL, g, cfg, &s->cfg.fit);
}

/* ---- the switch's callbacks (on its background thread) */

/* An engine over a copy of the model's graph with the model's config and
 * `spec`; measuring: one that keeps nothing (no store, no fleet tier), as
 * `ladder fit MODEL` measures. */
static sj_status open_spec(srv_model *m, const char *spec, bool measuring, sj_engine **out, char *why,
                           size_t cap) {
    sj_ctx *ctx = m->srv->ctx;
    sj_graph *g;
    if (sj_graph_clone(sj_engine_graph(m->e), &g) != SJ_OK) {
        snprintf(why, cap, "cannot copy the model: %s", sj_ctx_last_error(ctx));
        return SJ_E_NOMEM;
    }
    sj_engine_config c = m->fit->cfg;
    c.ladder = spec;
    if (measuring) {
        c.store_path = NULL;
        c.remote_url = NULL;
        c.remote_secret = NULL;
        c.remote_secret_len = 0;
        c.native_after = 0;
        c.tiered = false;
        c.max_resident_buckets = 0;
        c.workers = 1;
    }
    sj_status st = sj_engine_open_graph(ctx, g, &c, out);
    if (st != SJ_OK) snprintf(why, cap, "%s", sj_ctx_last_error(ctx));
    return st;
}

static sj_status open_fitted(void *user, const char *spec, sj_engine **out, char *why, size_t cap) {
    return open_spec(user, spec, false, out, why, cap);
}

static sj_status open_measuring(void *user, const char *spec, sj_engine **out, char *why, size_t cap) {
    return open_spec(user, spec, true, out, why, cap);
}

static sj_status measure_cost(void *user, int64_t lo, int64_t hi, sj_ladder_cost *out, char *why, size_t cap) {
    srv_model *m = user;
    sj_ladder_cost_fit fit;
    sj_status st = sj_ladder_cost_measure(m->srv->ctx, lo, hi, open_measuring, m, &fit);
    if (st != SJ_OK) {
        snprintf(why, cap, "%s", sj_ctx_last_error(m->srv->ctx));
        return st;
    }
    *out = fit.cost;
    return SJ_OK;
}

static void tell(void *user, const char *line) {
    srv_model *m = user;
    fprintf(stderr, "shapejit serve: model '%s': %s\n", m->name, line);
}

sj_status srv_fit_start(srv_model *m) {
    srv_fit *f = m->fit;
    sj_ladder_switch_config c = {
        .ctx = m->srv->ctx,
        .provisional = m->e,
        .k = f->k,
        .window = (size_t)f->window,
        .cost = f->cost_rows ? NULL : measure_cost,
        .cost_user = m,
        .open = open_fitted,
        .open_user = m,
        .jobs = m->srv->cfg.warm_jobs,
        .on_event = tell,
        .event_user = m,
    };
    SRV_TRY(sj_ladder_switch_create(&c, &f->ls));
    fprintf(stderr,
            "shapejit serve: model '%s': ladder fit:%d: serving on %s, fitting to the first %lld requests "
            "(cost %s)\n",
            m->name, f->k, f->provisional, (long long)f->window, f->cost_rows ? "rows" : "measured");
    return SJ_OK;
}

void srv_fit_destroy(srv_model *m) {
    srv_fit *f = m->fit;
    if (!f) return;
    if (f->ls) {
        /* A window that never filled fitted nothing: said once, at the end. */
        sj_ladder_switch_report r;
        sj_ladder_switch_get(f->ls, &r);
        if (r.state == SJ_LADDER_SWITCH_RECORDING)
            fprintf(stderr,
                    "shapejit serve: model '%s': ladder fit: the window did not fill (%zu of %zu requests): "
                    "nothing fitted, %s served every request\n",
                    m->name, r.seen, r.window, f->provisional);
    }
    sj_ladder_switch_destroy(f->ls);
    fit_free(f);
    m->fit = NULL;
}

sj_engine *srv_fit_route(srv_model *m, int64_t rows) {
    return m->fit && m->fit->ls ? sj_ladder_switch_route(m->fit->ls, rows) : m->e;
}

json_t *srv_fit_json(srv_model *m) {
    srv_fit *f = m->fit;
    if (!f || !f->ls) return NULL;
    sj_ladder_switch_report r;
    sj_ladder_switch_get(f->ls, &r);
    return json_pack("{s:i,s:I,s:I,s:s,s:s,s:s,s:o,s:i,s:I,s:I,s:I,s:f,s:f,s:s}", "k", f->k, "window",
                     (json_int_t)r.window, "seen", (json_int_t)r.seen, "cost", f->cost_rows ? "rows" : "measured",
                     "state", sj_ladder_switch_state_name(r.state), "provisional", f->provisional, "fitted",
                     r.fitted_spec ? json_string(r.fitted_spec) : json_null(), "buckets", r.fit.buckets,
                     "switched_after", (json_int_t)r.switched_after, "runs_on_fitted", (json_int_t)r.on_fitted,
                     "runs_above_fitted", (json_int_t)r.above_fitted, "fit_ms", r.fit_ms, "ready_ms", r.ready_ms,
                     "error", r.error);
}
