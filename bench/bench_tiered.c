/* What tiered compilation (sj_engine_config.tiered, serve --tiered) buys
 * and costs, for one model at one request size N.
 *
 *   bench_tiered MODEL N [REPS]        (REPS default 5)
 *
 * 1. Per opt level 0..3: the wall time of one bucket's compile (sj_compile,
 *    the host's compile threads) and the median request latency of its
 *    code (loaded on one host device, replayed), each the median of REPS.
 *    What a first request waits for at each level, and what the requests
 *    served by that level's code pay until the O3 code is swapped in.
 * 2. Cold first result, tiered off and on, runs alternating (a noisy
 *    neighbour slows both alike), each on a fresh context (no weight
 *    pooled from before), without a store and over an empty store (a new
 *    file per run): open -> first result, and with tiering the time from the first request's
 *    start until the O3 code is swapped in (stored by then). Medians of
 *    REPS. Then a second engine over the last tiered run's store: its
 *    first result loads the O3 code (store_hits 1, no compile, no tier-up).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench_timing.h"
#include "shapejit/engine.h"
#include "shapejit/ext/artifact.h"
#include "shapejit/ext/bucketed_cache.h"
#include "shapejit/ext/compile.h"
#include "shapejit/ext/device.h"
#include "shapejit/ext/runtime.h"

#define MAX_IO 8
#define MAX_REPS 31

/* The graph's inputs at n, in its input order, seeded; false on failure. */
static bool make_inputs(sj_ctx *ctx, const sj_graph *g, int64_t n, sj_tensor *in, int *n_in) {
    *n_in = sj_graph_num_inputs(g);
    if (*n_in > MAX_IO) return false;
    for (int i = 0; i < *n_in; i++) {
        sj_value_desc d;
        if (sj_graph_input_desc(g, i, &d) != SJ_OK) return false;
        int64_t dims[SJ_MAX_RANK];
        for (int k = 0; k < d.shape.rank; k++) dims[k] = d.shape.dims[k] == SJ_DIM_SYM ? n : d.shape.dims[k];
        if (sj_tensor_alloc_typed(ctx, d.dtype, d.shape.rank, dims, &in[i]) != SJ_OK) return false;
        sj_tensor_fill_seeded(&in[i], 1 + (uint64_t)i);
    }
    return true;
}

static void free_tensors(sj_ctx *ctx, sj_tensor *t, int n) {
    for (int i = 0; i < n; i++) sj_tensor_free(ctx, &t[i]);
}

static bool fail(sj_ctx *ctx, const char *what) {
    fprintf(stderr, "bench_tiered: %s: %s\n", what, sj_ctx_last_error(ctx));
    return false;
}

/* Level l's compile wall ms and its code's median request ms at n. */
static bool bench_level(sj_ctx *ctx, const sj_graph *g, int64_t n, int l, double *compile_ms,
                        double *run_ms) {
    sj_compile_options o;
    sj_compile_options_init(&o);
    o.opt_level = l;
    sj_artifact *a;
    double t0 = bench_wall_ns();
    if (sj_compile(g, n, &o, &a) != SJ_OK) return fail(ctx, "compile");
    *compile_ms = (bench_wall_ns() - t0) / 1e6;
    sj_device *dev;
    sj_executable *exe = NULL;
    sj_tensor in[MAX_IO] = {0}, out[MAX_IO];
    int n_in = 0, n_out = sj_graph_num_outputs(g);
    bool ok = sj_host_device_create(ctx, NULL, &dev) == SJ_OK;
    if (ok) ok = sj_artifact_load(a, dev, g, &exe) == SJ_OK && make_inputs(ctx, g, n, in, &n_in) &&
                 sj_executable_capture(exe) == SJ_OK;
    /* a warming run sizes the batches: a few runs each, about 1.5 s in all */
    double samples[BENCH_BATCHES], s0 = bench_wall_ns();
    memset(out, 0, sizeof out);
    ok = ok && sj_executable_run_or_replay(exe, n, in, out) == SJ_OK;
    if (ok) free_tensors(ctx, out, n_out);
    double per = bench_wall_ns() - s0;
    int calls = per > 70e6 ? 1 : (int)(70e6 / per) + 1;
    int batches = per > 100e6 ? (int)(1500e6 / per) : BENCH_BATCHES;
    batches = batches < 3 ? 3 : batches > BENCH_BATCHES ? BENCH_BATCHES : batches;
    for (int b = 0; ok && b < batches; b++) {
        s0 = bench_wall_ns();
        for (int i = 0; ok && i < calls; i++) {
            memset(out, 0, sizeof out);
            ok = sj_executable_run_or_replay(exe, n, in, out) == SJ_OK;
            if (ok) free_tensors(ctx, out, n_out);
        }
        samples[b] = (bench_wall_ns() - s0) / calls / 1e6;
    }
    if (!ok) fail(ctx, "level run");
    *run_ms = ok ? bench_median(samples, batches) : 0;
    free_tensors(ctx, in, n_in);
    sj_executable_destroy(exe);
    sj_device_destroy(dev);
    sj_artifact_destroy(a);
    return ok;
}

/* One cold engine: open -> first result ms; first request -> nothing left
 * in the background (with tiered, the O3 code swapped in) ms. store: a
 * file (the caller removed it) or NULL. */
static bool bench_cold(const char *model, int64_t n, const char *store, bool tiered, double *first_ms,
                       double *swap_ms, sj_engine_stats *st) {
    sj_ctx *ctx;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return false;
    char ladder[64];
    snprintf(ladder, sizeof ladder, "list:%lld", (long long)n);
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.ladder = ladder;
    cfg.store_path = store;
    cfg.weight_files = false; /* a cold process packs its weights */
    cfg.tiered = tiered;
    sj_engine *e = NULL;
    sj_tensor in[MAX_IO] = {0};
    sj_named_tensor nin[MAX_IO], out[MAX_IO];
    int n_in = 0;
    double t0 = bench_wall_ns();
    bool ok = sj_engine_open(ctx, model, &cfg, &e) == SJ_OK || fail(ctx, "open");
    ok = ok && make_inputs(ctx, sj_engine_graph(e), n, in, &n_in);
    for (int i = 0; ok && i < n_in; i++) {
        sj_value_desc d;
        sj_engine_input(e, i, &d);
        nin[i] = (sj_named_tensor){d.name, in[i]};
    }
    double r0 = bench_wall_ns();
    ok = ok && (sj_engine_run(e, nin, n_in, out, MAX_IO, NULL) == SJ_OK || fail(ctx, "run"));
    double r1 = bench_wall_ns();
    *first_ms = (r1 - t0) / 1e6; /* the inputs made in between are a few KB */
    if (ok) {
        for (int k = 0; k < sj_engine_num_outputs(e); k++) sj_tensor_free(ctx, &out[k].tensor);
        sj_bucketed_cache_specialise_wait(sj_engine_cache(e));
        *swap_ms = (bench_wall_ns() - r0) / 1e6;
        sj_engine_stats_get(e, st);
    }
    free_tensors(ctx, in, n_in);
    sj_engine_close(e);
    sj_ctx_destroy(ctx);
    return ok;
}

static void remove_store(const char *path) {
    static const char *const suffix[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char f[4200];
        snprintf(f, sizeof f, "%s%s", path, suffix[i]);
        unlink(f);
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_tiered MODEL N [REPS]\n");
        return 2;
    }
    const char *model = argv[1];
    int64_t n = atoll(argv[2]);
    int reps = argc > 3 ? atoi(argv[3]) : 5;
    if (n < 1 || reps < 1 || reps > MAX_REPS) return 2;
    const char *base = strrchr(model, '/');
    base = base ? base + 1 : model;

    sj_ctx *ctx;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return 1;
    sj_graph *g;
    if (sj_model_load(ctx, model, NULL, &g) != SJ_OK) return fail(ctx, model), 1;
    printf("| model | N | opt level | compile, median | request, median |\n|---|---|---|---|---|\n");
    /* levels alternate rep by rep: a noisy neighbour slows all alike */
    double c[4][MAX_REPS], r[4][MAX_REPS];
    for (int k = 0; k < reps; k++)
        for (int l = 0; l <= 3; l++)
            if (!bench_level(ctx, g, n, l, &c[l][k], &r[l][k])) return 1;
    for (int l = 0; l <= 3; l++)
        printf("| %s | %lld | O%d | %.1f ms | %.2f ms |\n", base, (long long)n, l, bench_median(c[l], reps),
               bench_median(r[l], reps));
    fflush(stdout);
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);

    char dir[] = "/tmp/bench_tiered_XXXXXX", store[80];
    if (!mkdtemp(dir)) return 1;
    snprintf(store, sizeof store, "%s/store.db", dir);
    /* t: tiered off/on, without a store, then over an empty store */
    double first[4][MAX_REPS], swap[4][MAX_REPS];
    sj_engine_stats st;
    for (int k = 0; k < reps; k++)
        for (int t = 0; t < 4; t++) {
            remove_store(store);
            bool tiered = t & 1;
            if (!bench_cold(model, n, t >= 2 ? store : NULL, tiered, &first[t][k], &swap[t][k], &st))
                return 1;
            if (tiered && (st.quick_compiles != 1 || st.tier_ups != 1 || st.compiles != 1)) {
                fprintf(stderr, "bench_tiered: expected one quick compile, one compile and one tier-up\n");
                return 1;
            }
        }
    printf("\n| model | N | store | cold first result, tiered off | tiered on | O3 swapped in after "
           "(from the first request) |\n|---|---|---|---|---|---|\n");
    for (int t = 0; t < 4; t += 2)
        printf("| %s | %lld | %s | %.0f ms | %.0f ms | %.0f ms |\n", base, (long long)n,
               t ? "empty" : "none", bench_median(first[t], reps), bench_median(first[t + 1], reps),
               bench_median(swap[t + 1], reps));
    /* A restart over the store the last tiered run filled. */
    double f, s;
    bool ok = bench_cold(model, n, store, true, &f, &s, &st);
    printf("\nrestart over that store, tiered: first result %.0f ms, store_hits %llu, compiles %llu, "
           "quick_compiles %llu, tier_ups %llu\n",
           f, (unsigned long long)st.store_hits, (unsigned long long)st.compiles,
           (unsigned long long)st.quick_compiles, (unsigned long long)st.tier_ups);
    remove_store(store);
    rmdir(dir);
    return ok ? 0 : 1;
}
