/* shapejit bench: the figures that say whether the cache does its job, in
 * one run: cold compile vs warm load of a ladder, the hit path, the metadata
 * cache, eager vs replayed dispatch, padding waste per ladder kind, and
 * end-to-end latency per request size; a table, JSON, and PNG charts. */
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench_mdcache.h"
#include "bench/bench_timing.h"
#include "cli/request_stream.h"
#include "cli/serving.h"
#include "shapejit/ext/backends.h"
#include "client_util/files.h"
#include "shapejit/ext/compile.h"

static const char usage[] =
    "usage: shapejit bench [--json FILE] [--model MODEL] [--quick] [--threads N]\n"
    "  Runs the benchmark suite on the host backend and prints a table:\n"
    "    cold compile ms per bucket (host; nvptx and nvrtc when built: compile\n"
    "    only, no GPU needed), warm load us per artifact (store read,\n"
    "    verify, decompress, load), time to ready for the ladder pow2:1:1024\n"
    "    cold (compile every bucket) vs warm (load every bucket from the store),\n"
    "    get_or_compile hit ns, metadata cache hit and evict-insert ns, eager vs\n"
    "    replayed dispatch, rows allocated per row requested (padding costs memory,\n"
    "    not work) per ladder kind on a lognormal trace,\n"
    "    and end-to-end latency per request size per ladder.\n"
    "  Every figure is a median over repeated runs in this process.\n"
    "  --json FILE   also write the figures as one JSON object, and (when gnuplot\n"
    "                is installed) bench-latency.png and bench-ready.png next to it\n"
    "  --model M     the model (default examples/models/ffn.sjg, found from the\n"
    "                working directory or next to the binary)\n"
    "  --quick       fewer repetitions (a smoke run; figures are noisier)\n"
    CLI_THREADS_USAGE;

#define LADDER "pow2:1:1024"
#define TRACE "lognormal:64:1:1024:20000:1"
#define MAX_BUCKETS 64

static const char *const waste_ladders[] = {"pow2:1:1024", "geo:1:1024:1.5", "geo:1:1024:1.25",
                                            "list:16,32,48,64,96,128,192,256,384,512,768,1024"};
#define N_WASTE ((int)(sizeof waste_ladders / sizeof waste_ladders[0]))
static const char *const latency_ladders[] = {"pow2:1:1024", "geo:1:1024:1.25"};
#define N_LAT ((int)(sizeof latency_ladders / sizeof latency_ladders[0]))
static const int64_t latency_sizes[] = {1,  2,  3,   5,   8,   13,  21,  34,
                                        55, 89, 144, 233, 377, 610, 987, 1024};
#define N_SIZES ((int)(sizeof latency_sizes / sizeof latency_sizes[0]))

typedef struct figures {
    int buckets, cold_runs, warm_runs;
    double cold_compile_ms, warm_load_us, cold_ready_ms, warm_ready_ms, ratio;
    double gpu_compile_ms[2];
    char gpu_missing[2][256]; /* why a GPU target was not measured; "" when it was */
    double cold_ready_cpu_ms, warm_ready_cpu_ms, ratio_cpu;
    double hit_ns, md_hit_ns, md_evict_ns[3], md_probes[3];
    double eager_us, replay_us, dispatch_ratio;
    int launches;
    double waste[N_WASTE], max_waste[N_WASTE];
    int waste_buckets[N_WASTE];
    double latency_us[N_LAT][N_SIZES];
    int64_t latency_extent[N_LAT][N_SIZES];
    uint64_t latency_compiles[N_LAT];
} figures;

static const size_t md_sizes[3] = {16, 4096, 65536};

typedef struct bench {
    sj_ctx *ctx;
    sj_graph *g;
    const char *model;
    char dir[PATH_MAX];
    bool quick;
    int threads; /* kernel threads of every engine opened */
    figures f;
} bench;

static int fail_ctx(bench *b, const char *what) {
    return cli_fail("bench", "%s: %s", what, sj_ctx_last_error(b->ctx));
}

/* --- one process's worth of engine over a store */

typedef struct session {
    sj_engine *e;
    sj_bucketed_cache *cache; /* the engine's, for the hit-path figures */
    const sj_ladder *ladder;
} session;

static void session_close(session *s) {
    sj_engine_close(s->e);
    memset(s, 0, sizeof *s);
}

/* Everything a serving process sets up, as one engine over its own copy
 * of the model (an engine owns its graph). */
static int session_open(bench *b, const char *store_path, const char *spec, session *s) {
    memset(s, 0, sizeof *s);
    sj_graph *g;
    if (sj_graph_clone(b->g, &g) != SJ_OK) return fail_ctx(b, "model");
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.ladder = spec;
    cfg.store_path = store_path;
    cfg.threads = b->threads;
    if (sj_engine_open_graph(b->ctx, g, &cfg, &s->e) != SJ_OK) return fail_ctx(b, "engine");
    s->cache = sj_engine_cache(s->e);
    s->ladder = sj_engine_ladder(s->e);
    return CLI_EXIT_OK;
}

/* A process start to every bucket ready, one bucket after another: the
 * time to ready, and each bucket's time (compile+put+load cold, get+verify+
 * decompress+load warm). The session stays open for the caller when
 * `keep` is given. */
static int ready_run(bench *b, const char *store_path, double *ready_ms, double *ready_cpu_ms,
                     double *per_bucket_us, double *compile_ms, sj_engine_stats *st, session *s,
                     bool keep) {
    double t0 = bench_wall_ns(), c0 = bench_cpu_ns();
    int rc = session_open(b, store_path, LADDER, s);
    int n = rc == CLI_EXIT_OK ? sj_ladder_num_buckets(s->ladder) : 0;
    if (n > MAX_BUCKETS) rc = cli_fail("bench", "%s has more than %d buckets", LADDER, MAX_BUCKETS);
    for (int i = 0; rc == CLI_EXIT_OK && i < n; i++) {
        int64_t extent;
        void *exe;
        /* One bucket at a time on this thread: the compile time the
         * engine adds up during the call is this bucket's. */
        sj_engine_stats before, after;
        sj_engine_stats_get(s->e, &before);
        double t = bench_wall_ns();
        if (sj_bucketed_cache_get_or_compile(s->cache, sj_ladder_extent(s->ladder, i), &extent,
                                             &exe) != SJ_OK)
            rc = fail_ctx(b, "get_or_compile");
        per_bucket_us[i] = (bench_wall_ns() - t) / 1e3;
        sj_engine_stats_get(s->e, &after);
        compile_ms[i] = after.compile_ms - before.compile_ms;
    }
    *ready_ms = (bench_wall_ns() - t0) / 1e6;
    *ready_cpu_ms = (bench_cpu_ns() - c0) / 1e6;
    b->f.buckets = n;
    if (rc == CLI_EXIT_OK) sj_engine_stats_get(s->e, st);
    if (rc != CLI_EXIT_OK || !keep) session_close(s);
    return rc;
}

static void remove_store(const char *path) {
    static const char *const suffixes[] = {"", "-wal", "-shm", "-sjlock", "-journal"};
    char p[PATH_MAX + 64];
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        snprintf(p, sizeof p, "%s%s", path, suffixes[i]);
        unlink(p);
    }
}

static int bench_cold_warm(bench *b, session *warm) {
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/ladder.db", b->dir);
    int cold_runs = b->quick ? 1 : 3, warm_runs = b->quick ? 3 : 15;
    double cold_ready[16], warm_ready[16], cold_cpu[16], warm_cpu[16], compile_ms[16 * MAX_BUCKETS],
        load_us[16 * MAX_BUCKETS];
    int n_compile = 0, n_load = 0;
    double per_bucket[MAX_BUCKETS], per_bucket_compile[MAX_BUCKETS];
    sj_engine_stats st;
    /* LLVM's one-time target set-up is not any bucket's cost. */
    sj_host_compiler *hc;
    if (sj_host_compiler_create(b->ctx, NULL, &hc) != SJ_OK) return fail_ctx(b, "host compiler");
    sj_host_compiler_destroy(hc);
    for (int r = 0; r < cold_runs; r++) {
        remove_store(path);
        session s;
        int rc = ready_run(b, path, &cold_ready[r], &cold_cpu[r], per_bucket, per_bucket_compile, &st,
                           &s, true);
        if (rc != CLI_EXIT_OK) return rc;
        if (st.compiles != (uint64_t)b->f.buckets) {
            session_close(&s);
            return cli_fail("bench", "cold run compiled %llu of %d buckets",
                            (unsigned long long)st.compiles, b->f.buckets);
        }
        for (int i = 0; i < b->f.buckets; i++) compile_ms[n_compile++] = per_bucket_compile[i];
        session_close(&s);
    }
    for (int r = 0; r < warm_runs; r++) {
        /* The last warm process stays open for the figures that need one. */
        bool last = r == warm_runs - 1;
        session s;
        session *into = last ? warm : &s;
        int rc = ready_run(b, path, &warm_ready[r], &warm_cpu[r], per_bucket, per_bucket_compile, &st,
                           into, last);
        if (rc != CLI_EXIT_OK) return rc;
        if (st.compiles != 0)
            return cli_fail("bench", "warm run compiled %llu buckets",
                            (unsigned long long)st.compiles);
        for (int i = 0; i < b->f.buckets; i++) load_us[n_load++] = per_bucket[i];
    }
    b->f.cold_runs = cold_runs;
    b->f.warm_runs = warm_runs;
    b->f.cold_compile_ms = bench_median(compile_ms, n_compile);
    b->f.warm_load_us = bench_median(load_us, n_load);
    b->f.cold_ready_ms = bench_median(cold_ready, cold_runs);
    b->f.warm_ready_ms = bench_median(warm_ready, warm_runs);
    b->f.ratio = b->f.cold_ready_ms / b->f.warm_ready_ms;
    b->f.cold_ready_cpu_ms = bench_median(cold_cpu, cold_runs);
    b->f.warm_ready_cpu_ms = bench_median(warm_cpu, warm_runs);
    b->f.ratio_cpu = b->f.cold_ready_cpu_ms / b->f.warm_ready_cpu_ms;
    return CLI_EXIT_OK;
}

/* get_or_compile on compiled buckets: keys 1..1024 over and over. */
static int bench_hit_path(bench *b, sj_bucketed_cache *c) {
    enum { SAMPLES = 201, CALLS = 1024 };
    double t[SAMPLES];
    int64_t sink = 0;
    for (int r = 0; r < SAMPLES; r++) {
        double t0 = bench_cpu_ns();
        for (int64_t k = 1; k <= CALLS; k++) {
            int64_t e;
            void *exe;
            if (sj_bucketed_cache_get_or_compile(c, k, &e, &exe) != SJ_OK)
                return fail_ctx(b, "hit path");
            sink += e;
        }
        t[r] = (bench_cpu_ns() - t0) / CALLS;
    }
    if (sink <= 0) return cli_fail("bench", "hit path returned no extents");
    b->f.hit_ns = bench_median(t, SAMPLES);
    return CLI_EXIT_OK;
}

static int bench_metadata(bench *b) {
    if (bench_mdcache_hit(b->ctx, &b->f.md_hit_ns))
        return cli_fail("bench", "metadata cache hit benchmark failed");
    for (int i = 0; i < 3; i++)
        if (bench_mdcache_evict_insert(b->ctx, md_sizes[i], &b->f.md_evict_ns[i],
                                       &b->f.md_probes[i]))
            return cli_fail("bench", "metadata cache evict-insert benchmark at %zu entries failed",
                            md_sizes[i]);
    return CLI_EXIT_OK;
}

/* One executable (the FFN's bucket 1) at N = 1: eager launches through the
 * op and metadata caches vs replaying the captured launch list. */
static int bench_dispatch(bench *b, sj_bucketed_cache *c) {
    int64_t extent;
    void *exe;
    if (sj_bucketed_cache_get_or_compile(c, 1, &extent, &exe) != SJ_OK)
        return fail_ctx(b, "bucket 1");
    sj_executable *e = exe;
    /* Captured by a bucket's first run through the cache; made here if the
     * bucket has not run yet. */
    if (!sj_executable_has_capture(e) && sj_executable_capture(e) != SJ_OK)
        return fail_ctx(b, "capture bucket 1");
    int n_in = sj_graph_num_inputs(b->g), n_out = sj_graph_num_outputs(b->g);
    sj_tensor *in = calloc((size_t)n_in + 1, sizeof *in),
              *out = calloc((size_t)n_out + 1, sizeof *out);
    int rc = in && out ? cli_random_inputs("bench", b->ctx, b->g, 1, 1, in)
                       : cli_fail("bench", "out of memory");
    for (int i = 0; rc == CLI_EXIT_OK && i < n_out; i++) {
        sj_value_desc d;
        sj_graph_output_desc(b->g, i, &d);
        sj_shape s = sj_shape_at(&d.shape, 1);
        if (sj_tensor_alloc(b->ctx, s.rank, s.dims, &out[i]) != SJ_OK) rc = fail_ctx(b, "outputs");
    }
    enum { RUNS = 400 };
    double eager[BENCH_BATCHES], replay[BENCH_BATCHES];
    /* Alternating batches, so drift on a shared machine hits both alike. */
    for (int r = 0; rc == CLI_EXIT_OK && r < BENCH_BATCHES; r++) {
        double t0 = bench_cpu_ns();
        for (int i = 0; i < RUNS && rc == CLI_EXIT_OK; i++)
            if (sj_executable_run(e, 1, in, out) != SJ_OK) rc = fail_ctx(b, "eager run");
        double t1 = bench_cpu_ns();
        for (int i = 0; i < RUNS && rc == CLI_EXIT_OK; i++)
            if (sj_executable_replay(e, 1, in, out) != SJ_OK) rc = fail_ctx(b, "replay");
        double t2 = bench_cpu_ns();
        eager[r] = (t1 - t0) / RUNS / 1e3;
        replay[r] = (t2 - t1) / RUNS / 1e3;
    }
    if (rc == CLI_EXIT_OK) {
        b->f.eager_us = bench_median(eager, BENCH_BATCHES);
        b->f.replay_us = bench_median(replay, BENCH_BATCHES);
        b->f.dispatch_ratio = b->f.eager_us / b->f.replay_us;
        sj_compile_options o;
        sj_compile_options_init(&o);
        if (sj_compile_kernel_count(b->g, extent, &o, &b->f.launches) != SJ_OK)
            rc = fail_ctx(b, "kernel count");
    }
    for (int i = 0; in && i < n_in; i++) sj_tensor_free(b->ctx, &in[i]);
    for (int i = 0; out && i < n_out; i++) sj_tensor_free(b->ctx, &out[i]);
    free(in);
    free(out);
    return rc;
}

static int bench_padding(bench *b) {
    cli_stream s;
    int rc = cli_stream_synthetic("bench", TRACE, &s);
    for (int l = 0; rc == CLI_EXIT_OK && l < N_WASTE; l++) {
        sj_ladder *ladder;
        if (sj_ladder_parse(b->ctx, waste_ladders[l], &ladder) != SJ_OK) {
            rc = fail_ctx(b, waste_ladders[l]);
            break;
        }
        int64_t padded = 0, real = 0;
        for (size_t i = 0; i < s.n; i++) {
            int64_t p, r;
            if (sj_ladder_padding(ladder, s.sizes[i], 1, &p, &r) == SJ_OK) {
                padded += p;
                real += r;
            }
        }
        b->f.waste[l] = (double)padded / (double)real;
        b->f.max_waste[l] = sj_ladder_max_waste(ladder);
        b->f.waste_buckets[l] = sj_ladder_num_buckets(ladder);
        sj_ladder_destroy(ladder);
    }
    cli_stream_free(&s);
    return rc;
}

static int bench_latency(bench *b) {
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/ladder.db", b->dir);
    for (int l = 0; l < N_LAT; l++) {
        session s;
        int rc = session_open(b, path, latency_ladders[l], &s);
        for (int i = 0; rc == CLI_EXIT_OK && i < N_SIZES; i++)
            rc = cli_warm_latency("bench", b->ctx, s.e, latency_sizes[i], b->quick ? 2e7 : 1.5e8,
                                  &b->f.latency_us[l][i], &b->f.latency_extent[l][i]);
        sj_engine_stats st;
        if (rc == CLI_EXIT_OK) sj_engine_stats_get(s.e, &st);
        if (rc == CLI_EXIT_OK) b->f.latency_compiles[l] = st.compiles;
        session_close(&s);
        if (rc != CLI_EXIT_OK) return rc;
    }
    return CLI_EXIT_OK;
}

/* The GPU targets compile without a GPU (PTX, cubin, NVRTC): sj_compile
 * for every bucket of the ladder, after one compile that pays the
 * libraries' start-up. Not through the cache: no GPU compiler table is
 * behind it here, and loading needs a device. */
static const char *const gpu_names[2] = {"nvptx", "nvrtc"};
static const sj_target gpu_targets[2] = {SJ_TARGET_NVPTX, SJ_TARGET_NVRTC};

static void bench_gpu_compile(bench *b) {
    sj_ladder *l;
    if (sj_ladder_parse(b->ctx, LADDER, &l) != SJ_OK) return;
    int n = sj_ladder_num_buckets(l);
    for (int t = 0; t < 2; t++) {
        sj_compile_options o;
        sj_compile_options_init(&o);
        o.target = gpu_targets[t];
        sj_artifact *a;
        if (sj_compile(b->g, 1, &o, &a) != SJ_OK) {
            snprintf(b->f.gpu_missing[t], sizeof b->f.gpu_missing[t], "%s",
                     sj_ctx_last_error(b->ctx));
            continue;
        }
        sj_artifact_destroy(a);
        double ms[MAX_BUCKETS];
        int done = 0;
        for (int i = 0; i < n && i < MAX_BUCKETS; i++) {
            /* --quick: the first, middle and last bucket only. */
            if (b->quick && i != 0 && i != n / 2 && i != n - 1) continue;
            double t0 = bench_wall_ns();
            if (sj_compile(b->g, sj_ladder_extent(l, i), &o, &a) != SJ_OK) {
                snprintf(b->f.gpu_missing[t], sizeof b->f.gpu_missing[t], "extent %lld: %s",
                         (long long)sj_ladder_extent(l, i), sj_ctx_last_error(b->ctx));
                break;
            }
            ms[done++] = (bench_wall_ns() - t0) / 1e6;
            sj_artifact_destroy(a);
        }
        if (!b->f.gpu_missing[t][0]) b->f.gpu_compile_ms[t] = bench_median(ms, done);
    }
    sj_ladder_destroy(l);
}

static void print_table(const bench *b) {
    const figures *f = &b->f;
    printf("shapejit bench: %s on the host backend (%d kernel threads), ladder %s (%d buckets)\n\n",
           b->model, b->threads, LADDER, f->buckets);
    printf("%-34s %12s  %s\n", "figure", "value", "note");
    printf("%-34s %12.2f  median over %d cold runs x %d buckets\n",
           "cold_compile_ms_per_bucket.host", f->cold_compile_ms, f->cold_runs, f->buckets);
    for (int t = 0; t < 2; t++) {
        char name[64];
        snprintf(name, sizeof name, "cold_compile_ms_per_bucket.%s", gpu_names[t]);
        if (!f->gpu_missing[t][0])
            printf("%-34s %12.2f  sj_compile alone (no GPU needed), median over %d buckets\n", name,
                   f->gpu_compile_ms[t], b->quick ? 3 : f->buckets);
    }
    printf("%-34s %12.2f  store read + verify + decompress + load, median\n",
           "warm_load_us_per_artifact", f->warm_load_us);
    printf("%-34s %12.2f  process start to every bucket compiled\n", "cold_ready_ms",
           f->cold_ready_ms);
    printf("%-34s %12.2f  process start to every bucket loaded\n", "warm_ready_ms",
           f->warm_ready_ms);
    printf("%-34s %12.1f  goal >= 100 (wall clock)\n", "warm_vs_cold_ready_ratio", f->ratio);
    printf("%-34s %12.1f  the same in this thread's CPU time (%.1f / %.2f ms)\n",
           "warm_vs_cold_ready_ratio_cpu", f->ratio_cpu, f->cold_ready_cpu_ms,
           f->warm_ready_cpu_ms);
    printf("%-34s %12.2f  goal <= 50 (thread CPU time)\n", "hit_path_ns", f->hit_ns);
    printf("%-34s %12.2f  goal <= 50\n", "metadata_hit_ns", f->md_hit_ns);
    for (int i = 0; i < 3; i++) {
        char name[64];
        snprintf(name, sizeof name, "metadata_evict_insert_ns.%zu", md_sizes[i]);
        printf("%-34s %12.2f  %.2f entries probed per eviction\n", name, f->md_evict_ns[i],
               f->md_probes[i]);
    }
    printf("%-34s %12.2f  %d launches at N = 1\n", "eager_us_per_run", f->eager_us, f->launches);
    printf("%-34s %12.2f\n", "replay_us_per_run", f->replay_us);
    printf("%-34s %12.3f  eager / replay\n", "replay_vs_eager_dispatch", f->dispatch_ratio);
    printf("\npadding: rows allocated / rows requested (memory; kernels compute the requested "
           "rows only) on %s:\n", TRACE);
    for (int l = 0; l < N_WASTE; l++)
        printf("  %-52s %6.3fx  (%d buckets, worst bucket %.2fx)\n", waste_ladders[l], f->waste[l],
               f->waste_buckets[l], f->max_waste[l]);
    printf("\nend-to-end latency per request size (us, warm, median):\n  %-8s", "size");
    for (int l = 0; l < N_LAT; l++) printf(" %22s", latency_ladders[l]);
    printf("\n");
    for (int i = 0; i < N_SIZES; i++) {
        printf("  %-8lld", (long long)latency_sizes[i]);
        for (int l = 0; l < N_LAT; l++) {
            char cell[48];
            snprintf(cell, sizeof cell, "%.1f (E=%lld)", f->latency_us[l][i],
                     (long long)f->latency_extent[l][i]);
            printf(" %22s", cell);
        }
        printf("\n");
    }
    for (int t = 0; t < 2; t++)
        if (f->gpu_missing[t][0])
            printf("\nnot measured: cold_compile_ms_per_bucket.%s: %s\n", gpu_names[t],
                   f->gpu_missing[t]);
}

static void write_json(FILE *j, const bench *b) {
    const figures *f = &b->f;
    fprintf(j, "{\n  \"model\": ");
    cli_json_str(j, b->model);
    fprintf(j, ",\n  \"ladder\": \"%s\",\n  \"buckets\": %d,\n", LADDER, f->buckets);
    fprintf(j, "  \"hit_path_ns\": %.3f,\n  \"metadata_hit_ns\": %.3f,\n", f->hit_ns, f->md_hit_ns);
    fprintf(j, "  \"metadata_evict_insert_ns\": {\"16\": %.3f, \"4096\": %.3f, \"65536\": %.3f},\n",
            f->md_evict_ns[0], f->md_evict_ns[1], f->md_evict_ns[2]);
    fprintf(j, "  \"metadata_evict_probes\": {\"16\": %.3f, \"4096\": %.3f, \"65536\": %.3f},\n",
            f->md_probes[0], f->md_probes[1], f->md_probes[2]);
    fprintf(j, "  \"warm_load_us_per_artifact\": %.3f,\n", f->warm_load_us);
    fprintf(j, "  \"cold_compile_ms_per_bucket\": {\"host\": %.3f", f->cold_compile_ms);
    for (int t = 0; t < 2; t++)
        if (!f->gpu_missing[t][0]) fprintf(j, ", \"%s\": %.3f", gpu_names[t], f->gpu_compile_ms[t]);
    fprintf(j, "},\n  \"not_measured\": {");
    for (int t = 0, n = 0; t < 2; t++)
        if (f->gpu_missing[t][0]) {
            fprintf(j, "%s\"cold_compile_ms_per_bucket.%s\": ", n++ ? ", " : "", gpu_names[t]);
            cli_json_str(j, f->gpu_missing[t]);
        }
    fprintf(j, "},\n");
    fprintf(j, "  \"cold_ready_ms\": %.3f,\n  \"warm_ready_ms\": %.3f,\n", f->cold_ready_ms,
            f->warm_ready_ms);
    fprintf(j, "  \"warm_vs_cold_ready_ratio\": %.3f,\n", f->ratio);
    fprintf(j, "  \"cold_ready_cpu_ms\": %.3f,\n  \"warm_ready_cpu_ms\": %.3f,\n",
            f->cold_ready_cpu_ms, f->warm_ready_cpu_ms);
    fprintf(j, "  \"warm_vs_cold_ready_ratio_cpu\": %.3f,\n", f->ratio_cpu);
    fprintf(j,
            "  \"eager_us_per_run\": %.3f,\n  \"replay_us_per_run\": %.3f,\n  "
            "\"launches_per_run\": %d,\n",
            f->eager_us, f->replay_us, f->launches);
    fprintf(j, "  \"replay_vs_eager_dispatch\": %.4f,\n", f->dispatch_ratio);
    fprintf(j, "  \"padding_trace\": \"%s\",\n  \"padding_waste\": {", TRACE);
    for (int l = 0; l < N_WASTE; l++)
        fprintf(j, "%s\n    \"%s\": {\"waste\": %.4f, \"buckets\": %d, \"max_waste\": %.4f}",
                l ? "," : "", waste_ladders[l], f->waste[l], f->waste_buckets[l], f->max_waste[l]);
    fprintf(j, "\n  },\n  \"latency_us_by_size\": {");
    for (int l = 0; l < N_LAT; l++) {
        fprintf(j, "%s\n    \"%s\": {", l ? "," : "", latency_ladders[l]);
        for (int i = 0; i < N_SIZES; i++)
            fprintf(j, "%s\"%lld\": %.2f", i ? ", " : "", (long long)latency_sizes[i],
                    f->latency_us[l][i]);
        fprintf(j, "}");
    }
    fprintf(j, "\n  }\n}\n");
}

/* PNGs next to the JSON file, drawn by gnuplot when it is installed. */
static void write_charts(const bench *b, const char *json_path) {
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        printf("charts: gnuplot not found, none drawn\n");
        return;
    }
    char copy[PATH_MAX], dir[PATH_MAX], data[PATH_MAX + 32], lat[PATH_MAX + 32],
        ready[PATH_MAX + 32];
    snprintf(copy, sizeof copy, "%s", json_path);
    snprintf(dir, sizeof dir, "%s", dirname(copy));
    snprintf(data, sizeof data, "%s/latency.dat", b->dir);
    snprintf(lat, sizeof lat, "%s/bench-latency.png", dir);
    snprintf(ready, sizeof ready, "%s/bench-ready.png", dir);
    FILE *d = fopen(data, "w");
    if (!d) return;
    for (int i = 0; i < N_SIZES; i++) {
        fprintf(d, "%lld", (long long)latency_sizes[i]);
        for (int l = 0; l < N_LAT; l++) fprintf(d, " %.3f", b->f.latency_us[l][i] / 1e3);
        fprintf(d, "\n");
    }
    fclose(d);
    FILE *gp = popen("gnuplot", "w");
    if (!gp) return;
    fprintf(gp, "set terminal pngcairo size 900,560 font 'sans,11'\nset output '%s'\n", lat);
    fprintf(gp, "set title 'End-to-end latency per request size (%s, host, warm)'\n", b->model);
    fprintf(gp,
            "set xlabel 'request size N (rows)'\nset ylabel 'latency (ms, median)'\n"
            "set logscale xy\nset xrange [0.8:1400]\nset grid\nset key top left\n");
    fprintf(gp, "plot ");
    for (int l = 0; l < N_LAT; l++)
        fprintf(gp, "%s'%s' using 1:%d with linespoints lw 2 title '%s'", l ? ", " : "", data,
                l + 2, latency_ladders[l]);
    fprintf(gp, "\n");
    fprintf(gp,
            "set output '%s'\nunset logscale\nset logscale y\nset autoscale x\n"
            "set title 'Time to ready, %s (%d buckets): warm is %.0fx faster'\n",
            ready, LADDER, b->f.buckets, b->f.ratio);
    fprintf(
        gp,
        "set xlabel ''\nset ylabel 'ms (log scale)'\nset style fill solid 0.6\nset boxwidth 0.5\n"
        "set key off\nset xrange [-0.6:1.6]\nset yrange [0.1:*]\n");
    fprintf(gp, "set xtics ('cold: compile every bucket' 0, 'warm: load from the store' 1)\n");
    fprintf(gp, "$ready << EOD\n0 %.3f\n1 %.3f\nEOD\n", b->f.cold_ready_ms, b->f.warm_ready_ms);
    fprintf(
        gp,
        "plot $ready using 1:2 with boxes lc rgb '#4477aa', '' using 1:2:(sprintf('%%.1f ms', $2)) "
        "with labels offset 0,1\n");
    if (pclose(gp) == 0)
        printf("charts: %s, %s\n", lat, ready);
    else
        printf("charts: gnuplot failed, see above\n");
}

static const char *default_model(char *buf, size_t cap) {
    static const char rel[] = "examples/models/ffn.sjg";
    if (access(rel, R_OK) == 0) return rel;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return rel;
    exe[n] = '\0';
    snprintf(buf, cap, "%s/../%s", dirname(exe), rel);
    return access(buf, R_OK) == 0 ? buf : rel;
}

static int rm_dir(const char *dir) {
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/latency.dat", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/ladder.db", dir);
    remove_store(p);
    return rmdir(dir);
}

int cli_cmd_bench(int argc, char **argv) {
    const char *cmd = "bench";
    const char *json = NULL, *model = NULL;
    bool quick = false;
    cli_backend_args backend = {.devices = 1}; /* the host backend, one worker */
    const cli_opt opts[] = {
        {"--json", CLI_OPT_STRING, &json},
        {"--model", CLI_OPT_STRING, &model},
        {"--quick", CLI_OPT_FLAG, &quick},
        CLI_THREADS_OPTS(backend),
    };
    int n_pos;
    cli_parse_result r =
        cli_parse(cmd, usage, argc, argv, opts, CLI_COUNT(opts), NULL, 0, 0, &n_pos);
    if (r != CLI_PARSED) return cli_parse_exit(r);
    int rc = cli_backend_check(cmd, &backend);
    if (rc != CLI_EXIT_OK) return rc;
    char model_buf[PATH_MAX];
    bench *b = calloc(1, sizeof *b);
    if (!b) return cli_fail(cmd, "out of memory");
    b->model = model ? model : default_model(model_buf, sizeof model_buf);
    b->quick = quick;
    b->threads = cli_backend_threads(&backend);
    const char *tmp = getenv("TMPDIR");
    snprintf(b->dir, sizeof b->dir, "%s/shapejit-bench.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(b->dir)) {
        free(b);
        return cli_fail(cmd, "cannot make a scratch directory under %s",
                        tmp && tmp[0] ? tmp : "/tmp");
    }
    b->ctx = cli_ctx_create(cmd);
    if (!b->ctx) rc = CLI_EXIT_FAIL;
    cli_model_flags mf = {0};
    if (rc == CLI_EXIT_OK) rc = cli_load_model(cmd, b->ctx, b->model, &mf, &b->g);
    if (rc == CLI_EXIT_OK && !sj_graph_symbol(b->g))
        rc = cli_fail(cmd, "%s has no symbolic dim to bucket", b->model);
    /* The JSON is put in place by rename, which would replace a FIFO, a
     * symlink or a device node there: refused now, not after the bench. */
    sj_status jst = SJ_OK;
    if (rc == CLI_EXIT_OK && json && (jst = cu_check_replaceable(b->ctx, "--json", json)) != SJ_OK)
        rc = cli_fail_status(cmd, b->ctx, jst);
    session warm = {0};
    bool have_warm = false;
    if (rc == CLI_EXIT_OK) {
        fprintf(stderr, "bench: cold vs warm %s ...\n", LADDER);
        rc = bench_cold_warm(b, &warm);
        have_warm = rc == CLI_EXIT_OK;
    }
    if (rc == CLI_EXIT_OK) {
        fprintf(stderr, "bench: hit path, metadata cache, dispatch ...\n");
        rc = bench_hit_path(b, warm.cache);
    }
    if (rc == CLI_EXIT_OK) rc = bench_metadata(b);
    if (rc == CLI_EXIT_OK) rc = bench_dispatch(b, warm.cache);
    if (have_warm) session_close(&warm);
    if (rc == CLI_EXIT_OK) rc = bench_padding(b);
    if (rc == CLI_EXIT_OK) {
        fprintf(stderr, "bench: GPU targets' compile time ...\n");
        bench_gpu_compile(b);
    }
    if (rc == CLI_EXIT_OK) {
        fprintf(stderr, "bench: latency per request size ...\n");
        rc = bench_latency(b);
    }
    if (rc == CLI_EXIT_OK) print_table(b);
    if (rc == CLI_EXIT_OK && json) {
        char tmpname[PATH_MAX + 8];
        snprintf(tmpname, sizeof tmpname, "%s.tmp", json);
        FILE *j = fopen(tmpname, "w");
        if (!j) rc = cli_fail(cmd, "cannot write %s", tmpname);
        if (j) {
            write_json(j, b);
            if (fclose(j) != 0 || rename(tmpname, json) != 0) {
                remove(tmpname);
                rc = cli_fail(cmd, "cannot write %s", json);
            }
        }
        if (rc == CLI_EXIT_OK) {
            printf("json: %s\n", json);
            write_charts(b, json);
        }
    }
    sj_graph_destroy(b->g);
    sj_ctx_destroy(b->ctx);
    rm_dir(b->dir);
    free(b);
    return rc;
}
