/* /metrics: per-model counters and a latency histogram in the Prometheus
 * text exposition format (version 0.0.4), plus the engine's own counters
 * (compiles, store and remote hits, buckets ready). Counters are atomics
 * bumped on the request path; rendering reads them without a lock. */
#include "server/server_impl.h"
#include "shapejit/ext/bucketed_cache.h"
#include "serve/ladder_switch.h"
#include "shapejit/remote.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const double srv_hist_bounds[SRV_HIST_N] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                            0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                            1,      2.5,     5,      10};

void srv_metrics_observe(srv_metrics *m, double seconds, bool failed) {
    atomic_fetch_add(&m->requests, 1);
    if (failed) atomic_fetch_add(&m->failures, 1);
    int b = 0;
    while (b < SRV_HIST_N && seconds > srv_hist_bounds[b]) b++;
    atomic_fetch_add(&m->hist[b], 1);
    atomic_fetch_add(&m->latency_ns, (uint64_t)(seconds * 1e9));
}

typedef struct buf {
    char *p;
    size_t len, cap;
    bool oom;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap * 2 + (size_t)n;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

static void head(buf *b, const char *name, const char *type, const char *help) {
    put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One counter or gauge line per model. */
#define PER_MODEL(b, s, metric, type, help, fmt, expr)                                             \
    do {                                                                                           \
        head(b, metric, type, help);                                                                 \
        for (int i_ = 0; i_ < (s)->n_models; i_++) {                                               \
            srv_model *m = (s)->models[i_];                                                        \
            sj_engine_stats *es = &st[i_];                                                         \
            (void)es;                                                                              \
            put(b, "%s{model=\"%s\"} " fmt "\n", metric, m->name, expr);                            \
        }                                                                                          \
    } while (0)

/* Padding per bucket, in its two costs: rows allocated past the requests
 * (memory) and rows computed past them (work: what the executable's kernels
 * ran; 0 for kernels bounded by the active extent), and a run's arena. */
static void padding_metrics(buf *b, srv_server *s) {
    static const struct {
        const char *name, *type, *help;
    } m[] = {
        {"shapejit_bucket_runs_total", "counter", "Runs of the bucket (a batch is one run)."},
        {"shapejit_bucket_padded_rows_allocated_total", "counter",
         "Rows the bucket's buffers held past the rows requested (memory)."},
        {"shapejit_bucket_padded_rows_computed_total", "counter",
         "Rows the bucket's kernels computed past the rows requested (work); absent when the "
         "backend does not report it."},
        {"shapejit_bucket_arena_bytes", "gauge", "Intermediate arena one run of the bucket holds."},
    };
    for (size_t k = 0; k < sizeof m / sizeof m[0]; k++) {
        head(b, m[k].name, m[k].type, m[k].help);
        for (int i = 0; i < s->n_models; i++) {
            /* With --ladder fit:K, the provisional ladder's buckets and the
             * fitted one's, told apart by a ladder label. */
            srv_model *sm = s->models[i];
            sj_engine *fitted = sm->fit && sm->fit->ls ? sj_ladder_switch_fitted(sm->fit->ls) : NULL;
            for (int e = 0; e < (fitted ? 2 : 1); e++) {
                sj_engine *en = e ? fitted : sm->e;
                const char *ladder = !sm->fit ? "" : e ? ",ladder=\"fitted\"" : ",ladder=\"provisional\"";
                for (int j = 0; j < sj_engine_num_buckets(en); j++) {
                    sj_engine_bucket_stats p;
                    if (sj_engine_bucket_stats_get(en, j, &p) != SJ_OK) continue;
                    long long v = k == 0 ? (long long)p.runs
                                  : k == 1 ? (long long)p.padded_rows_allocated
                                  : k == 2 ? p.padded_rows_computed
                                           : (long long)p.memory.arena_bytes;
                    if (v < 0) continue;
                    put(b, "%s{model=\"%s\",extent=\"%lld\"%s} %lld\n", m[k].name, sm->name,
                        (long long)p.hi, ladder, v);
                }
            }
        }
    }
}

/* --ladder fit:K: one info line per fitting model (K, the window, the cost,
 * the provisional and fitted specs, the state), the window's fill and the
 * runs each ladder took after the switch, and the fitted engine's
 * compiles. Models without a fit have no lines. */
static void fit_metrics(buf *b, srv_server *s) {
    static const struct {
        const char *name, *type, *help;
    } m[] = {
        {"shapejit_ladder_fit_info", "gauge",
         "1 per model served with --ladder fit:K, labelled with K, the window, the cost model, the "
         "provisional and fitted ladders and the state (recording, fitting, switched, failed)."},
        {"shapejit_ladder_fit_window_requests", "gauge", "Requests recorded in the fit's window so far."},
        {"shapejit_ladder_fit_switched", "gauge", "1 once runs go to the fitted ladder."},
        {"shapejit_ladder_fit_runs_total", "counter",
         "Runs after the switch, by the ladder that ran them (fitted, or provisional above the fitted top)."},
        {"shapejit_ladder_fit_compiles_total", "counter", "Buckets of the fitted ladder compiled."},
        {"shapejit_ladder_fit_store_hits_total", "counter", "Buckets of the fitted ladder loaded from the store."},
    };
    for (size_t k = 0; k < sizeof m / sizeof m[0]; k++) {
        head(b, m[k].name, m[k].type, m[k].help);
        for (int i = 0; i < s->n_models; i++) {
            srv_fit *f = s->models[i]->fit;
            if (!f || !f->ls) continue;
            const char *name = s->models[i]->name;
            sj_ladder_switch_report r;
            sj_ladder_switch_get(f->ls, &r);
            sj_engine_stats es = {0};
            if (r.switched) sj_engine_stats_get(sj_ladder_switch_fitted(f->ls), &es);
            switch (k) {
            case 0:
                put(b, "%s{model=\"%s\",k=\"%d\",window=\"%zu\",cost=\"%s\",provisional=\"%s\",fitted=\"%s\","
                       "state=\"%s\"} 1\n",
                    m[k].name, name, f->k, r.window, f->cost_rows ? "rows" : "measured", f->provisional,
                    r.fitted_spec ? r.fitted_spec : "", sj_ladder_switch_state_name(r.state));
                break;
            case 1: put(b, "%s{model=\"%s\"} %zu\n", m[k].name, name, r.seen); break;
            case 2: put(b, "%s{model=\"%s\"} %d\n", m[k].name, name, r.switched ? 1 : 0); break;
            case 3:
                put(b, "%s{model=\"%s\",ladder=\"fitted\"} %llu\n", m[k].name, name,
                    (unsigned long long)r.on_fitted);
                put(b, "%s{model=\"%s\",ladder=\"provisional\"} %llu\n", m[k].name, name,
                    (unsigned long long)r.above_fitted);
                break;
            case 4: put(b, "%s{model=\"%s\"} %llu\n", m[k].name, name, (unsigned long long)es.compiles); break;
            default: put(b, "%s{model=\"%s\"} %llu\n", m[k].name, name, (unsigned long long)es.store_hits); break;
            }
        }
    }
}

/* The fleet tier's failures by kind, per model with one. */
static void remote_metrics(buf *b, srv_server *s) {
    head(b, "shapejit_remote_errors_total", "counter",
         "Remote (Redis) tier failures by kind: error (connection, I/O, server reply), timeout, "
         "rejected (a value refused), dropped_put (not published), lease_error.");
    for (int i = 0; i < s->n_models; i++) {
        sj_remote *r = sj_engine_remote(s->models[i]->e);
        if (!r) continue;
        sj_remote_stats rs;
        sj_remote_stats_get(r, &rs);
        const struct {
            const char *kind;
            uint64_t n;
        } k[] = {{"error", rs.errors}, {"timeout", rs.timeouts}, {"rejected", rs.rejected},
                 {"dropped_put", rs.dropped_puts}, {"lease_error", rs.lease_errors}};
        for (size_t j = 0; j < sizeof k / sizeof k[0]; j++)
            put(b, "shapejit_remote_errors_total{model=\"%s\",kind=\"%s\"} %llu\n", s->models[i]->name,
                k[j].kind, (unsigned long long)k[j].n);
    }
}

char *srv_metrics_render(srv_server *s, size_t *len) {
    buf b = {.cap = 8192};
    b.p = malloc(b.cap);
    if (!b.p) return NULL;
    sj_engine_stats st[SRV_MAX_MODELS];
    for (int i = 0; i < s->n_models; i++) sj_engine_stats_get(s->models[i]->e, &st[i]);
#define U(x) (unsigned long long)(x)
    PER_MODEL(&b, s, "shapejit_requests_total", "counter", "Inference requests answered.", "%llu",
              U(atomic_load(&m->m.requests)));
    PER_MODEL(&b, s, "shapejit_request_failures_total", "counter",
              "Inference requests answered with an error.", "%llu", U(atomic_load(&m->m.failures)));
    head(&b, "shapejit_request_duration_seconds", "histogram",
         "Inference request latency in the server, from a complete body to a response.");
    for (int i = 0; i < s->n_models; i++) {
        srv_model *m = s->models[i];
        uint64_t cum = 0;
        for (int k = 0; k <= SRV_HIST_N; k++) {
            cum += atomic_load(&m->m.hist[k]);
            if (k < SRV_HIST_N)
                put(&b, "shapejit_request_duration_seconds_bucket{model=\"%s\",le=\"%g\"} %llu\n",
                    m->name, srv_hist_bounds[k], U(cum));
            else
                put(&b, "shapejit_request_duration_seconds_bucket{model=\"%s\",le=\"+Inf\"} %llu\n",
                    m->name, U(cum));
        }
        put(&b, "shapejit_request_duration_seconds_sum{model=\"%s\"} %.9f\n", m->name,
            (double)atomic_load(&m->m.latency_ns) * 1e-9);
        put(&b, "shapejit_request_duration_seconds_count{model=\"%s\"} %llu\n", m->name, U(cum));
    }
    PER_MODEL(&b, s, "shapejit_compiles_total", "counter", "Buckets compiled.", "%llu",
              U(es->compiles));
    PER_MODEL(&b, s, "shapejit_compile_seconds_total", "counter", "Time spent compiling buckets.",
              "%.6f", es->compile_ms / 1e3);
    PER_MODEL(&b, s, "shapejit_store_hits_total", "counter", "Buckets loaded from the store.", "%llu",
              U(es->store_hits));
    PER_MODEL(&b, s, "shapejit_remote_hits_total", "counter",
              "Buckets loaded from the remote (Redis) tier.", "%llu", U(es->remote_hits));
    PER_MODEL(&b, s, "shapejit_store_errors_total", "counter",
              "Store reads and writes that failed (a full disk, a locked or unwritable file); the "
              "bucket compiled or served from memory instead.", "%llu", U(es->store_errors));
    PER_MODEL(&b, s, "shapejit_store_not_stored_buckets", "gauge",
              "Buckets compiled whose artifact the store refused to keep.", "%llu", U(es->not_stored));
    remote_metrics(&b, s);
    PER_MODEL(&b, s, "shapejit_compile_stalls_total", "counter",
              "Requests that waited for their bucket to be compiled or loaded.", "%llu",
              U(atomic_load(&m->m.stalls)));
    PER_MODEL(&b, s, "shapejit_promotions_total", "counter",
              "Requests run in a larger ready bucket while their own compiled.", "%llu",
              U(atomic_load(&m->m.promotions)));
    PER_MODEL(&b, s, "shapejit_rows_total", "counter", "Rows requested along the dynamic dim.",
              "%llu", U(atomic_load(&m->m.rows)));
    padding_metrics(&b, s);
    fit_metrics(&b, s);
    PER_MODEL(&b, s, "shapejit_batches_total", "counter",
              "Runs that served several concatenated requests.", "%llu",
              U(atomic_load(&m->m.batches)));
    PER_MODEL(&b, s, "shapejit_batched_requests_total", "counter",
              "Requests served inside a batched run.", "%llu",
              U(atomic_load(&m->m.batched_requests)));
    PER_MODEL(&b, s, "shapejit_buckets_ready", "gauge", "Buckets compiled or loaded.", "%d",
              es->buckets_ready);
    PER_MODEL(&b, s, "shapejit_buckets", "gauge", "Buckets of the model's ladder.", "%d", es->buckets);
    PER_MODEL(&b, s, "shapejit_model_ready", "gauge", "1 when the model answers inferences.", "%d",
              srv_model_ready(m) ? 1 : 0);
    PER_MODEL(&b, s, "shapejit_native_recompiles_total", "counter",
              "Buckets served from a stored CPU level, recompiled for this CPU and swapped in "
              "(--native-after).", "%llu", U(es->specialised));
    PER_MODEL(&b, s, "shapejit_native_recompile_failures_total", "counter",
              "Such recompiles that failed (the level kept serving).", "%llu",
              U(es->specialise_failures));
    PER_MODEL(&b, s, "shapejit_tier_ups_total", "counter",
              "Buckets served quick (-O0) code first and swapped to their full code (--tiered).", "%llu",
              U(es->tier_ups));
    PER_MODEL(&b, s, "shapejit_tier_up_failures_total", "counter",
              "Such full compiles that failed (the quick code kept serving).", "%llu",
              U(es->tier_up_failures));
    PER_MODEL(&b, s, "shapejit_device_lost_total", "counter",
              "Runs a kernel fault failed, losing the GPU's context.", "%llu", U(es->device_lost));
    PER_MODEL(&b, s, "shapejit_device_resets_total", "counter",
              "GPU context resets after such faults.", "%llu", U(es->device_resets));
    PER_MODEL(&b, s, "shapejit_bucket_reloads_total", "counter",
              "Buckets loaded again from their artifacts after a reset (no compile).", "%llu",
              U(es->reloads));
    head(&b, "shapejit_bucket_cpu", "gauge", "1 per ready bucket, labelled with the CPU its code was built for.");
    for (int i = 0; i < s->n_models; i++) {
        sj_engine *e = s->models[i]->e;
        for (int k = 0; k < sj_engine_num_buckets(e); k++) {
            sj_engine_bucket_stats bs;
            if (sj_engine_bucket_stats_get(e, k, &bs) != SJ_OK || !bs.cpu) continue;
            put(&b, "shapejit_bucket_cpu{model=\"%s\",extent=\"%lld\",cpu=\"%s\"} 1\n",
                s->models[i]->name, (long long)bs.hi, bs.cpu[0] ? bs.cpu : "none");
        }
    }
    head(&b, "shapejit_http_responses_total", "counter", "HTTP responses by status class.");
    put(&b, "shapejit_http_responses_total{class=\"2xx\"} %llu\n", U(atomic_load(&s->http_2xx)));
    put(&b, "shapejit_http_responses_total{class=\"4xx\"} %llu\n", U(atomic_load(&s->http_4xx)));
    put(&b, "shapejit_http_responses_total{class=\"5xx\"} %llu\n", U(atomic_load(&s->http_5xx)));
    head(&b, "shapejit_http_connections_cut_total", "counter",
         "Requests ended without a complete response (client gone, timeout, limit).");
    put(&b, "shapejit_http_connections_cut_total %llu\n", U(atomic_load(&s->http_closed)));
    head(&b, "shapejit_json_memory_bytes", "gauge",
         "Memory held now by parsed request JSON and response bodies (--max-json-memory-bytes).");
    put(&b, "shapejit_json_memory_bytes %zu\n", atomic_load(&s->json.used));
    head(&b, "shapejit_json_memory_refused_total", "counter",
         "Requests refused for the JSON memory budget: alone above it (over_limit), or while "
         "others held it (busy, 503).");
    put(&b, "shapejit_json_memory_refused_total{reason=\"over_limit\"} %llu\n", U(atomic_load(&s->json_over_limit)));
    put(&b, "shapejit_json_memory_refused_total{reason=\"busy\"} %llu\n", U(atomic_load(&s->json_busy)));
    head(&b, "shapejit_requests_in_flight", "gauge", "Requests being read or answered.");
    put(&b, "shapejit_requests_in_flight %d\n", atomic_load(&s->in_flight));
#undef U
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}
