/* shapejit serve MODEL: a stream of requests of varying size, served by
 * worker threads through one bucketed cache; reports what a server sees:
 * latency percentiles, throughput, compile stalls, store hits, padding. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/ladder_switch.h"
#include "cli/cost_model.h"
#include "cli/request_stream.h"
#include "cli/serving.h"
#include "shapejit/ext/bucketed_cache.h"

static const char usage[] =
    "usage: shapejit serve MODEL [--trace FILE | --synthetic SPEC] [--workers N]\n"
    "                      [--ladder SPEC | --ladder fit:K [--fit-window N] [--fit-cost C]]\n"
    "                      [--store PATH|none] [--threads N]\n"
    "                      [--backend host|interp|cuda] [--emit llvm|nvrtc] [--arch sm_80|sm_90]\n"
    "                      [--cuda-driver PATH]\n"
    "                      [--cpu native|x86-64-v2|x86-64-v3|x86-64-v4|NAME] [--tune [--tune-budget-ms MS]]\n"
    "                      [--remote URL|none] [--remote-secret-file FILE] [--remote-read-only]\n"
    "                      [--remote-lease-ms MS]\n"
    "                      [--requests N] [--seed S] [--stats] [--max-resident-buckets N]\n"
    "                      [--native-after N] [--tiered] [--precision fp32|bf16|fp16]\n"
    "                      " CLI_MODEL_USAGE "\n"
    "       shapejit serve --listen [HOST:]PORT (MODEL | --model-repository DIR) ...\n"
    "                      (an HTTP endpoint: see 'shapejit serve --listen 0 --help')\n"
    "  Serves a stream of requests (sizes of the model's symbolic dim, each with\n"
    "  seeded random inputs) with N worker threads through one bucketed cache and\n"
    "  reports latency percentiles, throughput, compiles and compile stalls\n"
    "  (requests that waited for their bucket's compile), store hits and padding\n"
    "  per bucket: rows allocated past the requests (memory) and rows computed\n"
    "  past them (work), and the arena a run holds. Run it twice against one store: the\n"
    "  second run compiles nothing.\n"
    "  --trace FILE       one request size per line ('#' comments, blank lines skipped)\n"
    /* clang-format off */
    CLI_SYNTHETIC_USAGE
    "                     (default: lognormal:64:1:1024:1000:1)\n"
    "  --workers N        worker threads (default 2); the host backend gets a device\n"
    "                     per worker so different buckets run at once\n"
    "  --ladder SPEC      buckets (default pow2:1:MAX, MAX the largest request)\n"
    "  --ladder fit:K     fit K buckets to the traffic: serve on the default ladder\n"
    "                     (pow2:1:MAX), record the sizes of the first N requests, fit\n"
    "                     the K-bucket ladder of least expected cost to them (fewer\n"
    "                     buckets when they hold fewer distinct sizes), precompile it\n"
    "                     in the background and switch to it once every bucket is\n"
    "                     ready; no request waits for that. Sizes above the fitted\n"
    "                     top (the window's largest) stay on the default ladder. A\n"
    "                     window that never fills fits nothing and keeps the default\n"
    "  --fit-window N     requests recorded before the fit (default 1000)\n"
    "  --fit-cost C       measured (default): the cost model 'ladder fit MODEL' measures,\n"
    "                     here, in the background; rows: the rows a bucket computes (E)\n"
    CLI_STORE_USAGE
    CLI_REMOTE_USAGE
    CLI_RESIDENT_USAGE
    CLI_NATIVE_AFTER_USAGE
    CLI_TIERED_USAGE
    "                     (this replay waits for the background compiles it started\n"
    "                     before it reports)\n"
    /* clang-format on */
    "  --backend B        host (LLVM, this CPU), interp, or cuda: GPU 0, each bucket's\n"
    "                     launches captured once into a CUDA graph and replayed\n"
    "                     (needs the NVIDIA driver; fails at start without one);\n"
    "                     default " CLI_DEFAULT_BACKEND "\n"
    "  --emit P           cuda: llvm (LLVM NVPTX, default) or nvrtc (CUDA C via NVRTC)\n"
    CLI_CUDA_DRIVER_USAGE
    "  --arch A           cuda: sm_80 or sm_90 (default)\n"
    "  --cpu C            host: native (default; a stored x86-64 level this CPU runs is\n"
    "                     loaded before compiling), x86-64-v2|v3|v4, or an LLVM CPU name\n"
    CLI_PRECISION_USAGE
    CLI_TUNE_USAGE
    CLI_THREADS_USAGE
    "  --requests N       serve N requests: the stream is cut, or repeated\n"
    "  --seed S           seed of the inputs (request i uses S + i; default 0)\n"
    "  --stats            also print one JSON object of the figures on stderr\n";

#define DEFAULT_SYNTHETIC "lognormal:64:1:1024:1000:1"
#define MAX_WORKERS 64

typedef struct serve_state {
    sj_ctx *ctx;
    sj_engine *e;
    const sj_graph *g; /* the engine's */
    const char *backend;
    const char *native_after; /* --native-after as given, or NULL */
    bool tiered;              /* --tiered */
    char store_path[4096];
    const cli_stream *stream;
    uint64_t seed;
    _Atomic size_t next;
    _Atomic bool failed;
    pthread_mutex_t mu; /* first error, first result */
    char error[512];
    double t0, first_result_ms;
    double *latency_ms;
    sj_run_wait *wait; /* whether the request waited for its bucket, and why */
    sj_ladder_switch *fit; /* --ladder fit:K, else NULL */
    const char *fit_spec;   /* "fit:K" as given */
    const char *fit_cost;   /* "measured" or "rows" */
} serve_state;

static void fail_request(serve_state *s, size_t i, const char *msg) {
    pthread_mutex_lock(&s->mu);
    if (!atomic_load(&s->failed))
        snprintf(s->error, sizeof s->error, "request %zu (size %lld): %s", i + 1,
                 (long long)s->stream->sizes[i], msg);
    atomic_store(&s->failed, true);
    pthread_mutex_unlock(&s->mu);
}

static void serve_one(serve_state *s, size_t i, sj_named_tensor *in, sj_tensor *t, sj_named_tensor *out) {
    int n_in = sj_graph_num_inputs(s->g), n_out = sj_graph_num_outputs(s->g);
    int64_t rows = s->stream->sizes[i];
    sj_engine *e = s->e;
    if (s->fit) {
        sj_ladder_switch_record(s->fit, rows);
        e = sj_ladder_switch_route(s->fit, rows);
    }
    memset(t, 0, (size_t)n_in * sizeof *t);
    /* Inputs are made before the clock starts: latency is the server's. */
    if (cli_random_inputs("serve", s->ctx, s->g, rows, s->seed + i, t) != CLI_EXIT_OK) {
        fail_request(s, i, "cannot make inputs");
    } else {
        for (int k = 0; k < n_in; k++) {
            sj_value_desc d;
            sj_engine_input(e, k, &d);
            in[k] = (sj_named_tensor){d.name, t[k]};
        }
        sj_run_info info = {0};
        double start = cli_now_ms();
        sj_status st = sj_engine_run(e, in, n_in, out, n_out, &info);
        double done = cli_now_ms();
        s->latency_ms[i] = done - start;
        s->wait[i] = info.wait;
        if (st != SJ_OK) {
            fail_request(s, i, sj_ctx_last_error(s->ctx));
        } else {
            pthread_mutex_lock(&s->mu);
            if (s->first_result_ms < 0) s->first_result_ms = done - s->t0;
            pthread_mutex_unlock(&s->mu);
            for (int k = 0; k < n_out; k++) sj_tensor_free(s->ctx, &out[k].tensor);
        }
    }
    for (int k = 0; k < n_in; k++) sj_tensor_free(s->ctx, &t[k]);
}

static void *worker(void *arg) {
    serve_state *s = arg;
    int n_in = sj_graph_num_inputs(s->g), n_out = sj_graph_num_outputs(s->g);
    sj_named_tensor *in = calloc((size_t)n_in + 1, sizeof *in);
    sj_tensor *t = calloc((size_t)n_in + 1, sizeof *t);
    sj_named_tensor *out = calloc((size_t)n_out + 1, sizeof *out);
    for (;;) {
        size_t i = atomic_fetch_add(&s->next, 1);
        if (i >= s->stream->n || atomic_load(&s->failed)) break;
        if (!in || !out || !t) {
            fail_request(s, i, "out of memory");
            break;
        }
        serve_one(s, i, in, t, out);
    }
    free(in);
    free(t);
    free(out);
    return NULL;
}

typedef struct figures {
    double wall_s, mean, p50, p90, p99, max, rps;
    size_t compile_stalls, load_stalls;
    /* Padding over the buckets: rows their buffers held past the requests
     * (memory) and rows their kernels ran past them (work; -1: a compiler
     * that does not report it), out of the rows the buckets held. */
    uint64_t padded_allocated, bucket_rows;
    int64_t padded_computed;
} figures;

/* The engines the requests ran on: the one opened, and with --ladder fit:K
 * the fitted one once switched to. */
static int engines_used(serve_state *s, sj_engine **e, const char **label) {
    e[0] = s->e;
    label[0] = s->fit ? "provisional" : "";
    sj_engine *fitted = s->fit ? sj_ladder_switch_fitted(s->fit) : NULL;
    if (!fitted) return 1;
    e[1] = fitted;
    label[1] = "fitted";
    return 2;
}

static int summarise(serve_state *s, figures *f) {
    size_t n = s->stream->n;
    double *sorted = malloc(n * sizeof *sorted);
    if (!sorted) return cli_fail("serve", "out of memory");
    memcpy(sorted, s->latency_ms, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cli_cmp_double);
    f->mean = 0;
    for (size_t i = 0; i < n; i++) f->mean += sorted[i] / (double)n;
    f->p50 = cli_percentile(sorted, n, 0.50);
    f->p90 = cli_percentile(sorted, n, 0.90);
    f->p99 = cli_percentile(sorted, n, 0.99);
    f->max = sorted[n - 1];
    free(sorted);
    f->rps = f->wall_s > 0 ? (double)n / f->wall_s : 0;
    for (size_t i = 0; i < n; i++) {
        if (s->wait[i] == SJ_RUN_COMPILED) f->compile_stalls++;
        if (s->wait[i] == SJ_RUN_LOADED) f->load_stalls++;
    }
    sj_engine *e[2];
    const char *label[2];
    for (int k = 0, n_e = engines_used(s, e, label); k < n_e; k++) {
        for (int b = 0; b < sj_engine_num_buckets(e[k]); b++) {
            sj_engine_bucket_stats p;
            if (sj_engine_bucket_stats_get(e[k], b, &p) != SJ_OK) continue;
            f->padded_allocated += p.padded_rows_allocated;
            f->bucket_rows += p.runs * (uint64_t)p.hi;
            if (p.padded_rows_computed < 0 || f->padded_computed < 0)
                f->padded_computed = -1;
            else
                f->padded_computed += p.padded_rows_computed;
        }
    }
    return CLI_EXIT_OK;
}

/* A background compile failed: what, and the first one's message. */
static void warn_background(serve_state *s, const char *what) {
    char why[256];
    sj_bucketed_cache_specialise_error(sj_engine_cache(s->e), why, sizeof why);
    fprintf(stderr, "shapejit serve: warning: %s: %s\n", what, why);
}

/* What --native-after did: buckets moved from a stored level to code for
 * this CPU, and why any could not be. */
static void report_native(serve_state *s) {
    sj_engine_stats st;
    sj_engine_stats_get(s->e, &st);
    printf("  native code      %llu buckets recompiled for this CPU after %s runs on a stored level, "
           "%llu failed\n",
           (unsigned long long)st.specialised, s->native_after, (unsigned long long)st.specialise_failures);
    if (st.specialise_failures) warn_background(s, "a recompile for this CPU failed (the level kept serving)");
}

/* What --tiered did: buckets served quick code first and swapped to their
 * full code, and why any could not be. */
static void report_tiered(serve_state *s) {
    sj_engine_stats st;
    sj_engine_stats_get(s->e, &st);
    printf("  tiered           %llu buckets served -O%d code first, %llu swapped to the full code, "
           "%llu failed\n",
           (unsigned long long)st.quick_compiles, SJ_ENGINE_TIER_OPT_LEVEL,
           (unsigned long long)st.tier_ups, (unsigned long long)st.tier_up_failures);
    if (st.tier_up_failures) warn_background(s, "a full compile failed (the quick code kept serving)");
}

/* -1 (the compiler does not report its work) reads "not reported". */
static void print_computed(int64_t v) {
    if (v < 0)
        printf("not reported");
    else
        printf("%lld", (long long)v);
}

static void print_padding(serve_state *s, const figures *f) {
    printf("  padding          %llu rows allocated past the requests (%.1f%% of the buckets' rows; "
           "memory), ",
           (unsigned long long)f->padded_allocated,
           f->bucket_rows ? 100.0 * (double)f->padded_allocated / (double)f->bucket_rows : 0.0);
    print_computed(f->padded_computed);
    printf(" rows computed past them (work)\n");
    sj_engine *e[2];
    const char *label[2];
    for (int k = 0, n_e = engines_used(s, e, label); k < n_e; k++) {
        for (int b = 0; b < sj_engine_num_buckets(e[k]); b++) {
            sj_engine_bucket_stats p;
            if (sj_engine_bucket_stats_get(e[k], b, &p) != SJ_OK || !p.runs) continue;
            printf("    bucket %-8lld%s%s %llu runs, %llu rows: %llu padded rows allocated, ",
                   (long long)p.hi, *label[k] ? " " : "", label[k], (unsigned long long)p.runs,
                   (unsigned long long)p.rows, (unsigned long long)p.padded_rows_allocated);
            print_computed(p.padded_rows_computed);
            printf(" computed; arena %.1f KiB\n", (double)p.memory.arena_bytes / 1024.0);
        }
    }
}

static void json_padding(FILE *j, serve_state *s, const figures *f) {
    fprintf(j, "\"padded_rows_allocated\": %llu, \"padded_rows_computed\": ",
            (unsigned long long)f->padded_allocated);
    if (f->padded_computed < 0)
        fprintf(j, "null");
    else
        fprintf(j, "%lld", (long long)f->padded_computed);
    fprintf(j, ", \"padding_buckets\": [");
    sj_engine *e[2];
    const char *label[2];
    bool first = true;
    for (int k = 0, n_e = engines_used(s, e, label); k < n_e; k++) {
        for (int b = 0; b < sj_engine_num_buckets(e[k]); b++) {
            sj_engine_bucket_stats p;
            if (sj_engine_bucket_stats_get(e[k], b, &p) != SJ_OK || !p.runs) continue;
            fprintf(j, "%s{", first ? "" : ", ");
            if (*label[k]) fprintf(j, "\"ladder\": \"%s\", ", label[k]);
            fprintf(j,
                    "\"extent\": %lld, \"runs\": %llu, \"rows\": %llu, \"padded_rows_allocated\": %llu, "
                    "\"padded_rows_computed\": ",
                    (long long)p.hi, (unsigned long long)p.runs, (unsigned long long)p.rows,
                    (unsigned long long)p.padded_rows_allocated);
            if (p.padded_rows_computed < 0)
                fprintf(j, "null");
            else
                fprintf(j, "%lld", (long long)p.padded_rows_computed);
            fprintf(j, ", \"arena_bytes\": %llu}", (unsigned long long)p.memory.arena_bytes);
            first = false;
        }
    }
    fprintf(j, "], ");
}

/* --ladder fit:K: what was fitted, when the switch came, what ran on it. */
static void report_fit(serve_state *s, const char *spec) {
    sj_ladder_switch_report r;
    sj_ladder_switch_get(s->fit, &r);
    printf("  ladder fit       ");
    if (r.seen < r.window) {
        printf("the window did not fill (%zu of %zu requests): nothing fitted, %s served every request\n",
               r.seen, r.window, spec);
        return;
    }
    if (!r.fitted_spec) {
        printf("no switch: %s\n", r.error);
        return;
    }
    printf("%s fitted to the first %zu requests (sizes %lld..%lld, %d distinct; cost %s): %d bucket%s, "
           "expected %.4g %s per request", r.fitted_spec, r.window, (long long)r.lo, (long long)r.hi,
           r.distinct, s->fit_cost, r.fit.buckets, r.fit.buckets == 1 ? "" : "s", r.fit.expected_cost,
           strcmp(s->fit_cost, "rows") ? "us" : "rows");
    if (r.fit.buckets < r.k && r.fit.buckets == r.fit.candidates)
        printf(" (not %d: the window held %d distinct size%s)", r.k, r.distinct, r.distinct == 1 ? "" : "s");
    else if (r.fit.buckets < r.k)
        printf(" (not %d: more would not cost less)", r.k);
    putchar('\n');
    if (!r.switched) {
        printf("                   no switch: %s\n", r.error);
        return;
    }
    sj_engine_stats st;
    sj_engine_stats_get(sj_ladder_switch_fitted(s->fit), &st);
    printf("                   fitted in %.1f ms, ready in %.1f ms (%llu compiles, %llu store hits, "
           "%d of %d buckets ready); ",
           r.fit_ms, r.ready_ms, (unsigned long long)st.compiles, (unsigned long long)st.store_hits,
           st.buckets_ready, st.buckets);
    if (r.on_fitted + r.above_fitted == 0)
        printf("ready after the last of the %zu requests: none ran on it\n", r.switched_after);
    else
        printf("switched after %zu requests: %llu ran on it, %llu above its top on %s\n", r.switched_after,
               (unsigned long long)r.on_fitted, (unsigned long long)r.above_fitted, spec);
}

static void json_fit(FILE *j, serve_state *s, const char *spec) {
    sj_ladder_switch_report r;
    sj_ladder_switch_get(s->fit, &r);
    fprintf(j, "\"ladder_fit\": {\"k\": %d, \"window\": %zu, \"window_seen\": %zu, \"cost\": \"%s\", "
               "\"provisional\": \"%s\", \"fitted\": ",
            r.k, r.window, r.seen, s->fit_cost, spec);
    if (r.fitted_spec)
        cli_json_str(j, r.fitted_spec);
    else
        fprintf(j, "null");
    fprintf(j, ", \"buckets\": %d, \"distinct_sizes\": %d, \"expected_cost\": %.6g, \"switched\": %s, "
               "\"switched_after\": %zu, \"requests_on_fitted\": %llu, \"requests_above_fitted\": %llu, "
               "\"fit_ms\": %.3f, \"ready_ms\": %.3f, ",
            r.fit.buckets, r.distinct, r.fit.expected_cost, r.switched ? "true" : "false", r.switched_after,
            (unsigned long long)r.on_fitted, (unsigned long long)r.above_fitted, r.fit_ms, r.ready_ms);
    sj_engine_stats st = {0};
    if (r.switched) sj_engine_stats_get(sj_ladder_switch_fitted(s->fit), &st);
    fprintf(j, "\"fitted_compiles\": %llu, \"fitted_store_hits\": %llu, \"fitted_buckets_ready\": %d, "
               "\"error\": ",
            (unsigned long long)st.compiles, (unsigned long long)st.store_hits, st.buckets_ready);
    cli_json_str(j, r.error);
    fprintf(j, "}, ");
}

static void report(serve_state *s, const figures *f, const char *model, const char *source,
                   int workers, int threads, bool stats) {
    sj_engine_stats st;
    sj_engine_stats_get(s->e, &st);
    char spec[256];
    sj_ladder_format(sj_engine_ladder(s->e), spec, sizeof spec);
    const char *store = s->store_path[0] ? s->store_path : "none";
    sj_remote *remote = sj_engine_remote(s->e);
    printf("serve %s: %zu requests from %s, %d workers x %d threads, backend %s, ladder %s%s%s\n",
           model, s->stream->n, source, workers, threads, s->backend, s->fit ? s->fit_spec : spec,
           s->fit ? " from provisional " : "", s->fit ? spec : "");
    printf("  store            %s\n", store);
    printf("  first result     %.1f ms after start\n", s->first_result_ms);
    printf("  latency          p50 %.3f ms  p90 %.3f ms  p99 %.3f ms  max %.3f ms\n", f->p50,
           f->p90, f->p99, f->max);
    printf("  throughput       %.1f requests/s (%.3f s)\n", f->rps, f->wall_s);
    printf("  compiles         %llu (%.1f ms compiling), compile stalls %zu\n",
           (unsigned long long)st.compiles, st.compile_ms, f->compile_stalls);
    printf("  store hits       %llu (requests that waited for a store load: %zu)\n",
           (unsigned long long)st.store_hits, f->load_stalls);
    if (remote) {
        sj_remote_stats rs;
        sj_remote_stats_get(remote, &rs);
        printf("  remote           %s: %llu hits, %llu misses, %llu errors, %llu timeouts, "
               "%llu rejected\n",
               sj_remote_url(remote), (unsigned long long)st.remote_hits,
               (unsigned long long)rs.misses, (unsigned long long)rs.errors,
               (unsigned long long)rs.timeouts, (unsigned long long)rs.rejected);
        printf("  fleet            ");
        cli_remote_lease_summary(stdout, &rs);
        putchar('\n');
    }
    printf("  buckets used     %d of %d\n", st.buckets_ready, st.buckets);
    printf("  memory           weights %.1f MiB (shared by every bucket; %.1f MiB of them mapped "
           "from the model's files, %.1f MiB packed for the GEMM), run memory %.1f MiB in "
           "%d resident buckets (%llu trimmed), peak RSS %.1f MiB\n",
           (double)st.weight_bytes / 1048576.0, (double)st.weight_mapped_bytes / 1048576.0,
           (double)st.weight_packed_bytes / 1048576.0,
           (double)st.run_bytes / 1048576.0,
           st.buckets_resident, (unsigned long long)st.resident_evictions,
           (double)cli_peak_rss_bytes() / 1048576.0);
    if (s->fit) report_fit(s, spec);
    print_padding(s, f);
    if (s->native_after) report_native(s);
    if (s->tiered) report_tiered(s);
    if (!stats) return;
    fprintf(stderr, "{\"model\": ");
    cli_json_str(stderr, model);
    fprintf(stderr, ", \"source\": ");
    cli_json_str(stderr, source);
    fprintf(stderr, ", \"backend\": \"%s\", \"ladder\": \"%s\", \"store\": ", s->backend, spec);
    cli_json_str(stderr, s->store_path);
    fprintf(stderr,
            ", \"requests\": %zu, \"workers\": %d, \"wall_s\": %.6f, \"throughput_rps\": %.3f, "
            "\"first_result_ms\": %.3f, \"mean_ms\": %.6f, \"p50_ms\": %.6f, \"p90_ms\": %.6f, "
            "\"p99_ms\": %.6f, \"max_ms\": %.6f, \"compile_stalls\": %zu, \"store_load_stalls\": %zu, ",
            s->stream->n, workers, f->wall_s, f->rps, s->first_result_ms, f->mean, f->p50, f->p90, f->p99,
            f->max, f->compile_stalls, f->load_stalls);
    json_padding(stderr, s, f);
    if (s->fit) json_fit(stderr, s, spec);
    cli_stats_members(stderr, s->e);
    fprintf(stderr, "}\n");
}

/* --ladder fit:K: how the background fit opens engines (serve/ladder_switch.h). */
typedef struct fit_engines {
    sj_ctx *ctx;
    const sj_graph *model;
    cli_engine_args ea; /* the provisional engine's flags */
} fit_engines;

/* The fitted ladder's engine: the serve's flags (store, remote, backend)
 * with the fitted spec. */
static sj_status open_fitted(void *user, const char *spec, sj_engine **out, char *why, size_t cap) {
    fit_engines *fe = user;
    sj_graph *g;
    if (sj_graph_clone(fe->model, &g) != SJ_OK) {
        snprintf(why, cap, "cannot copy the model: %s", sj_ctx_last_error(fe->ctx));
        return SJ_E_NOMEM;
    }
    cli_engine_args ea = fe->ea;
    ea.ladder = spec;
    char store[4096];
    if (cli_engine_open("serve", fe->ctx, g, &ea, out, store, sizeof store) != CLI_EXIT_OK) {
        snprintf(why, cap, "the message above says why");
        return SJ_E_STATE;
    }
    return SJ_OK;
}

/* As `ladder fit MODEL` measures: one-bucket engines that keep nothing
 * (no store, no fleet tier), on the serve's backend. */
static sj_status measure_cost(void *user, int64_t lo, int64_t hi, sj_ladder_cost *out, char *why, size_t cap) {
    fit_engines *fe = user;
    cli_engine_args ea = fe->ea;
    ea.store = "none";
    ea.remote.url = "none";
    ea.native_after = NULL;
    ea.tiered = false;
    ea.max_resident = NULL;
    ea.backend.devices = 1;
    sj_ladder_cost_fit m;
    if (cli_cost_measure("serve", fe->ctx, fe->model, &ea, lo, hi, &m) != CLI_EXIT_OK) {
        snprintf(why, cap, "the message above says why");
        return SJ_E_STATE;
    }
    *out = m.cost;
    return SJ_OK;
}

static void print_fit_event(void *user, const char *line) {
    (void)user;
    fprintf(stderr, "shapejit serve: %s\n", line);
}

/* Takes g: the engine owns it once opened. fit_k > 0: --ladder fit:K. */
static int serve(serve_state *s, sj_graph *g, const cli_engine_args *ea, int workers, const char *model,
                 const char *source, bool stats, int fit_k, size_t fit_window) {
    size_t n = s->stream->n;
    s->latency_ms = calloc(n, sizeof *s->latency_ms);
    s->wait = calloc(n, sizeof *s->wait);
    if (!s->latency_ms || !s->wait) {
        sj_graph_destroy(g);
        return cli_fail("serve", "out of memory");
    }
    s->t0 = cli_now_ms();
    s->first_result_ms = -1;
    int rc = cli_engine_open("serve", s->ctx, g, ea, &s->e, s->store_path, sizeof s->store_path);
    if (rc != CLI_EXIT_OK) return rc;
    s->g = sj_engine_graph(s->e);
    fit_engines fe = {.ctx = s->ctx, .model = s->g, .ea = *ea};
    if (fit_k > 0) {
        sj_ladder_switch_config fc = {
            .ctx = s->ctx, .provisional = s->e, .k = fit_k, .window = fit_window,
            .cost = strcmp(s->fit_cost, "rows") ? measure_cost : NULL, .cost_user = &fe,
            .open = open_fitted, .open_user = &fe, .jobs = 1, .on_event = print_fit_event,
        };
        if (sj_ladder_switch_create(&fc, &s->fit) != SJ_OK) rc = cli_fail("serve", "%s", sj_ctx_last_error(s->ctx));
    }
    int64_t top = sj_ladder_max(sj_engine_ladder(s->e));
    if (s->stream->max > top) {
        for (size_t i = 0; i < n; i++)
            if (s->stream->sizes[i] > top) {
                rc = cli_fail("serve",
                              "request %zu has size %lld, above the ladder's largest bucket %lld",
                              i + 1, (long long)s->stream->sizes[i], (long long)top);
                break;
            }
    }
    pthread_t threads[MAX_WORKERS];
    int started = 0;
    for (int i = 0; rc == CLI_EXIT_OK && i < workers; i++) {
        if (pthread_create(&threads[i], NULL, worker, s) != 0) {
            atomic_store(&s->failed, true);
            rc = cli_fail("serve", "cannot start worker %d", i + 1);
            break;
        }
        started++;
    }
    for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
    figures f = {.wall_s = (cli_now_ms() - s->t0) / 1e3};
    /* After the clock: the report counts the recompiles the stream started. */
    if (s->native_after || s->tiered) sj_bucketed_cache_specialise_wait(sj_engine_cache(s->e));
    /* A fit the stream started is finished (and reported) before the end. */
    if (s->fit) sj_ladder_switch_wait(s->fit);
    if (rc == CLI_EXIT_OK && atomic_load(&s->failed)) rc = cli_fail("serve", "%s", s->error);
    if (rc == CLI_EXIT_OK) rc = summarise(s, &f);
    if (rc == CLI_EXIT_OK) report(s, &f, model, source, workers, cli_backend_threads(&ea->backend), stats);
    sj_ladder_switch_destroy(s->fit); /* the fitted engine, before the provisional */
    sj_engine_close(s->e);
    return rc;
}

int cli_cmd_serve_listen(int argc, char **argv); /* cmd_serve_http.c */

int cli_cmd_serve(int argc, char **argv) {
    /* With --listen, serve is an HTTP endpoint instead of a replayed stream. */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--listen") || !strncmp(argv[i], "--listen=", 9))
            return cli_cmd_serve_listen(argc, argv);
    const char *cmd = "serve";
    const char *trace = NULL, *synthetic = NULL;
    int64_t workers = 2, requests = INT64_MIN /* not given: the whole stream */, seed = 0;
    bool stats = false;
    const char *fit_cost = NULL;
    int64_t fit_window = INT64_MIN; /* not given: 1000 */
    cli_engine_args ca = {.backend.name = CLI_DEFAULT_BACKEND};
    cli_model_flags model = {0};
    const cli_opt opts[] = {
        {"--trace", CLI_OPT_STRING, &trace},    {"--synthetic", CLI_OPT_STRING, &synthetic},
        {"--workers", CLI_OPT_INT, &workers},   {"--ladder", CLI_OPT_STRING, &ca.ladder},
        {"--store", CLI_OPT_STRING, &ca.store}, {"--backend", CLI_OPT_STRING, &ca.backend.name},
        {"--requests", CLI_OPT_INT, &requests}, {"--seed", CLI_OPT_INT, &seed},
        {"--stats", CLI_OPT_FLAG, &stats},      {"--emit", CLI_OPT_STRING, &ca.backend.emit},
        {"--arch", CLI_OPT_STRING, &ca.backend.arch},
        {"--cuda-driver", CLI_OPT_STRING, &ca.backend.cuda_driver},
        {"--cpu", CLI_OPT_STRING, &ca.backend.cpu},
        {"--precision", CLI_OPT_STRING, &ca.backend.precision},
        CLI_TUNE_OPTS(ca.backend), CLI_THREADS_OPTS(ca.backend),
        CLI_MODEL_OPTS(model),
        CLI_REMOTE_OPTS(ca.remote), {"--max-resident-buckets", CLI_OPT_STRING, &ca.max_resident},
        {"--native-after", CLI_OPT_STRING, &ca.native_after},
        {"--tiered", CLI_OPT_FLAG, &ca.tiered},
        {"--fit-window", CLI_OPT_INT, &fit_window}, {"--fit-cost", CLI_OPT_STRING, &fit_cost},
    };
    const char *pos[1];
    int n_pos;
    cli_parse_result r =
        cli_parse(cmd, usage, argc, argv, opts, CLI_COUNT(opts), pos, 1, 1, &n_pos);
    if (r != CLI_PARSED) return cli_parse_exit(r);
    if (trace && synthetic) return cli_usage_error(cmd, "give --trace or --synthetic, not both");
    if (workers < 1 || workers > MAX_WORKERS)
        return cli_usage_error(cmd, "--workers must be in 1..%d", MAX_WORKERS);
    if (requests != INT64_MIN && (requests < 1 || requests > 10000000))
        return cli_usage_error(cmd, "--requests must be in 1..10000000, got %lld", (long long)requests);
    if (requests == INT64_MIN) requests = 0;
    if (seed < 0) return cli_usage_error(cmd, "--seed must be >= 0");
    int brc = cli_backend_check(cmd, &ca.backend);
    if (brc != CLI_EXIT_OK) return brc;
    int fit_k = 0;
    const char *fit_spec = NULL;
    int is_fit = sj_ladder_switch_parse(ca.ladder, &fit_k);
    if (is_fit < 0)
        return cli_usage_error(cmd, "--ladder fit:K: K must be a bucket count in 1..%d, got '%s'",
                               SJ_LADDER_MAX_BUCKETS, ca.ladder + 4);
    if (is_fit) {
        fit_spec = ca.ladder;
        ca.ladder = NULL; /* the provisional ladder: the default below */
    }
    if (!fit_k && (fit_window != INT64_MIN || fit_cost))
        return cli_usage_error(cmd, "--fit-window and --fit-cost need --ladder fit:K");
    if (fit_window == INT64_MIN) fit_window = SJ_LADDER_SWITCH_DEFAULT_WINDOW;
    if (fit_window < 1 || fit_window > SJ_LADDER_SWITCH_MAX_WINDOW)
        return cli_usage_error(cmd, "--fit-window must be in 1..%d requests, got %lld",
                               SJ_LADDER_SWITCH_MAX_WINDOW, (long long)fit_window);
    if (!fit_cost) fit_cost = "measured";
    if (strcmp(fit_cost, "measured") && strcmp(fit_cost, "rows"))
        return cli_usage_error(cmd, "--fit-cost must be measured or rows, got '%s'", fit_cost);

    cli_stream stream;
    const char *source = trace ? trace : synthetic ? synthetic : DEFAULT_SYNTHETIC;
    int rc =
        trace ? cli_stream_trace(cmd, trace, &stream) : cli_stream_synthetic(cmd, source, &stream);
    if (rc != CLI_EXIT_OK) return rc;
    if (requests) rc = cli_stream_resize(cmd, &stream, (size_t)requests);
    char default_ladder[64];
    if (!ca.ladder) {
        snprintf(default_ladder, sizeof default_ladder, "pow2:1:%lld", (long long)stream.max);
        ca.ladder = default_ladder;
    }
    sj_ctx *ctx = rc == CLI_EXIT_OK ? cli_ctx_create(cmd) : NULL;
    if (rc == CLI_EXIT_OK && !ctx) rc = CLI_EXIT_FAIL;
    sj_graph *g = NULL;
    if (rc == CLI_EXIT_OK) rc = cli_load_model(cmd, ctx, pos[0], &model, &g);
    if (rc == CLI_EXIT_OK && !sj_graph_symbol(g))
        rc = cli_fail(cmd, "%s has no symbolic dim: every request would be the same size", pos[0]);
    serve_state *s = rc == CLI_EXIT_OK ? calloc(1, sizeof *s) : NULL;
    if (rc == CLI_EXIT_OK && !s) rc = cli_fail(cmd, "out of memory");
    if (rc == CLI_EXIT_OK) {
        s->ctx = ctx;
        s->backend = ca.backend.name;
        s->native_after = ca.native_after;
        s->tiered = ca.tiered;
        s->stream = &stream;
        s->seed = (uint64_t)seed;
        s->fit_spec = fit_spec;
        s->fit_cost = fit_cost;
        pthread_mutex_init(&s->mu, NULL);
        ca.backend.devices = (int)workers;
        rc = serve(s, g, &ca, (int)workers, pos[0], source, stats, fit_k, (size_t)fit_window); /* takes g */
        pthread_mutex_destroy(&s->mu);
        free(s->latency_ms);
        free(s->wait);
        free(s);
    } else {
        sj_graph_destroy(g);
    }
    sj_ctx_destroy(ctx);
    cli_stream_free(&stream);
    return rc;
}
