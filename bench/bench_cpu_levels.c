/* What portability costs: per-request latency of host code compiled for
 * this machine's CPU ("native") against the portable x86-64 levels a fleet
 * store would hold, side by side in one run, for each model and N.
 *
 *   bench_cpu_levels [MODEL...]     (default: the mlp, ffn and attention examples)
 *
 * Prints one row per (model, N): the median per-request wall time of each
 * CPU target and its ratio to native (above 1: the level is slower). Levels
 * this machine cannot run are left out. Each target gets its own engine
 * (no store: each compiles its own buckets first, untimed); requests of one
 * N alternate between the targets batch by batch, so a noisy neighbour
 * slows all of them alike. Inputs are seeded uniform floats.
 *
 * Then what `serve --native-after` wins back: per (model, N), a store
 * holding only x86-64-v2 and v3 code, a native engine serving the bucket
 * from the best level it runs, and native_after set so the last timed
 * request queues the recompile: the median latency on the level, the
 * recompile's time until swapped in, and the median on the native code
 * swapped in, side by side (before and after are timed one after the other,
 * not interleaved: the swap happens once).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench_timing.h"
#include "shapejit/engine.h"
#include "shapejit/ext/bucketed_cache.h"

#define MAX_TARGETS 4
#define MAX_IO 8

static const char *const cpus[MAX_TARGETS] = {"native", "x86-64-v4", "x86-64-v3", "x86-64-v2"};
static const int64_t sizes[] = {1, 64, 1024};

typedef struct target {
    sj_engine *e;
    sj_named_tensor in[MAX_IO];
    int n_in, n_out;
} target;

static void fill(sj_tensor *t, uint64_t seed) {
    uint64_t s = seed;
    for (int64_t i = 0; i < sj_tensor_numel(t); i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        t->data[i] = (float)((double)(s >> 40) / 8388608.0 - 1.0);
    }
}

static void free_inputs(sj_ctx *ctx, target *t) {
    for (int i = 0; i < t->n_in; i++) sj_tensor_free(ctx, &t->in[i].tensor);
    t->n_in = 0;
}

/* Inputs at n for target t's model; false (message printed) on failure. */
static bool make_inputs(sj_ctx *ctx, target *t, int64_t n) {
    free_inputs(ctx, t);
    int n_in = sj_engine_num_inputs(t->e);
    for (int i = 0; i < n_in && i < MAX_IO; i++) {
        sj_value_desc d;
        sj_engine_input(t->e, i, &d);
        if (d.dtype != SJ_F32) {
            fprintf(stderr, "bench_cpu_levels: input %s is %s; this benchmark feeds float32\n", d.name,
                    sj_dtype_name(d.dtype));
            return false;
        }
        int64_t dims[SJ_MAX_RANK];
        for (int k = 0; k < d.shape.rank; k++) dims[k] = d.shape.dims[k] == SJ_DIM_SYM ? n : d.shape.dims[k];
        if (sj_tensor_alloc(ctx, d.shape.rank, dims, &t->in[i].tensor) != SJ_OK) return false;
        t->in[i].name = d.name;
        fill(&t->in[i].tensor, 1 + (uint64_t)i);
        t->n_in++;
    }
    return true;
}

static bool run_once(sj_ctx *ctx, target *t) {
    sj_named_tensor out[MAX_IO];
    if (sj_engine_run(t->e, t->in, t->n_in, out, t->n_out, NULL) != SJ_OK) {
        fprintf(stderr, "bench_cpu_levels: %s\n", sj_ctx_last_error(ctx));
        return false;
    }
    for (int k = 0; k < t->n_out; k++) sj_tensor_free(ctx, &out[k].tensor);
    return true;
}

static int bench_model(sj_ctx *ctx, const char *model) {
    target t[MAX_TARGETS] = {{0}};
    const char *names[MAX_TARGETS];
    int n_targets = 0, rc = 0;
    for (int c = 0; c < MAX_TARGETS; c++) {
        sj_engine_config cfg;
        sj_engine_config_init(&cfg);
        cfg.ladder = "list:1,64,1024";
        cfg.cpu = cpus[c];
        target *x = &t[n_targets];
        if (sj_engine_open(ctx, model, &cfg, &x->e) != SJ_OK) {
            fprintf(stderr, "bench_cpu_levels: %s: %s\n", model, sj_ctx_last_error(ctx));
            rc = 1;
            break;
        }
        x->n_out = sj_engine_num_outputs(x->e);
        /* A level this CPU cannot run is refused at its first load. */
        if (!make_inputs(ctx, x, 1) || !run_once(ctx, x)) {
            fprintf(stderr, "bench_cpu_levels: %s left out on this machine\n", cpus[c]);
            free_inputs(ctx, x);
            sj_engine_close(x->e);
            x->e = NULL;
            continue;
        }
        names[n_targets++] = cpus[c];
    }
    for (size_t s = 0; rc == 0 && s < sizeof sizes / sizeof sizes[0]; s++) {
        int64_t n = sizes[s];
        int calls = n >= 1024 ? 20 : n >= 64 ? 200 : 2000;
        double samples[MAX_TARGETS][BENCH_BATCHES];
        for (int k = 0; k < n_targets && rc == 0; k++)
            if (!make_inputs(ctx, &t[k], n) || !run_once(ctx, &t[k])) rc = 1;
        for (int b = 0; rc == 0 && b < BENCH_BATCHES; b++)
            for (int k = 0; k < n_targets && rc == 0; k++) {
                double t0 = bench_wall_ns();
                for (int i = 0; i < calls && rc == 0; i++)
                    if (!run_once(ctx, &t[k])) rc = 1;
                samples[k][b] = (bench_wall_ns() - t0) / calls / 1e3;
            }
        if (rc) break;
        const char *base = strrchr(model, '/');
        printf("| %s | %lld |", base ? base + 1 : model, (long long)n);
        double native = bench_median(samples[0], BENCH_BATCHES);
        for (int k = 0; k < n_targets; k++) {
            double us = k ? bench_median(samples[k], BENCH_BATCHES) : native;
            printf(" %s %.2f us (%.2fx) |", names[k], us, us / native);
        }
        printf("\n");
        fflush(stdout);
    }
    for (int k = 0; k < MAX_TARGETS; k++) {
        free_inputs(ctx, &t[k]);
        sj_engine_close(t[k].e);
    }
    return rc;
}

/* calls timed runs in each of BENCH_BATCHES batches: the median per-run us. */
static bool time_runs(sj_ctx *ctx, target *t, int calls, double *median_us) {
    double samples[BENCH_BATCHES];
    for (int b = 0; b < BENCH_BATCHES; b++) {
        double t0 = bench_wall_ns();
        for (int i = 0; i < calls; i++)
            if (!run_once(ctx, t)) return false;
        samples[b] = (bench_wall_ns() - t0) / calls / 1e3;
    }
    *median_us = bench_median(samples, BENCH_BATCHES);
    return true;
}

/* The store at path holds the v2 and v3 code of model's buckets only. */
static bool store_levels(sj_ctx *ctx, const char *model, const char *path) {
    static const char *const levels[] = {"x86-64-v2", "x86-64-v3"};
    for (int i = 0; i < 2; i++) {
        sj_engine_config cfg;
        sj_engine_config_init(&cfg);
        cfg.ladder = "list:1,64,1024";
        cfg.cpu = levels[i];
        cfg.store_path = path;
        cfg.store_only = true;
        sj_engine *e;
        if (sj_engine_open(ctx, model, &cfg, &e) != SJ_OK || sj_engine_precompile(e, 2, NULL, NULL) != SJ_OK) {
            fprintf(stderr, "bench_cpu_levels: storing %s: %s\n", levels[i], sj_ctx_last_error(ctx));
            sj_engine_close(e);
            return false;
        }
        sj_engine_close(e);
    }
    return true;
}

/* One N's bucket, served from its level, then from native code swapped in. */
static int bench_swap_one(sj_ctx *ctx, const char *model, const char *store, int64_t n, int bucket) {
    int calls = n >= 1024 ? 20 : n >= 64 ? 200 : 2000;
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.ladder = "list:1,64,1024";
    cfg.store_path = store;
    /* the warm-up run and every timed one: the last queues the recompile */
    cfg.native_after = 1 + calls * BENCH_BATCHES;
    target t = {0};
    if (sj_engine_open(ctx, model, &cfg, &t.e) != SJ_OK) {
        fprintf(stderr, "bench_cpu_levels: %s: %s\n", model, sj_ctx_last_error(ctx));
        return 1;
    }
    t.n_out = sj_engine_num_outputs(t.e);
    sj_bucketed_cache *c = sj_engine_cache(t.e);
    int rc = 1;
    double before, after;
    char level[64] = "";
    if (make_inputs(ctx, &t, n) && run_once(ctx, &t)) {
        snprintf(level, sizeof level, "%s", sj_bucketed_cache_bucket_target(c, bucket));
        if (time_runs(ctx, &t, calls, &before)) {
            double t0 = bench_wall_ns();
            sj_bucketed_cache_specialise_wait(c);
            double swap_ms = (bench_wall_ns() - t0) / 1e6;
            sj_engine_stats st;
            sj_engine_stats_get(t.e, &st);
            const char *now = sj_bucketed_cache_bucket_target(c, bucket);
            if (st.specialised != 1) {
                char why[256];
                sj_bucketed_cache_specialise_error(c, why, sizeof why);
                fprintf(stderr, "bench_cpu_levels: no swap at N = %lld (%s)\n", (long long)n,
                        why[0] ? why : "the bucket did not serve from a level");
            } else if (run_once(ctx, &t) && time_runs(ctx, &t, calls, &after)) {
                const char *base = strrchr(model, '/');
                printf("| %s | %lld | %s %.2f us | %.0f ms | %s %.2f us | %.2fx |\n", base ? base + 1 : model,
                       (long long)n, level, before, swap_ms, now, after, before / after);
                fflush(stdout);
                rc = 0;
            }
        }
    }
    free_inputs(ctx, &t);
    sj_engine_close(t.e);
    return rc;
}

static int bench_swap(sj_ctx *ctx, const char *model) {
    char dir[] = "/tmp/bench_cpu_levels_XXXXXX", path[64];
    if (!mkdtemp(dir)) return 1;
    snprintf(path, sizeof path, "%s/store.db", dir);
    int rc = store_levels(ctx, model, path) ? 0 : 1;
    for (size_t s = 0; rc == 0 && s < sizeof sizes / sizeof sizes[0]; s++)
        rc = bench_swap_one(ctx, model, path, sizes[s], (int)s);
    static const char *const suffix[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char f[80];
        snprintf(f, sizeof f, "%s%s", path, suffix[i]);
        unlink(f);
    }
    rmdir(dir);
    return rc;
}

int main(int argc, char **argv) {
    static const char *const defaults[] = {SJ_BENCH_MODELS "/mlp.sjg", SJ_BENCH_MODELS "/ffn.sjg",
                                           SJ_BENCH_MODELS "/attention.sjg"};
    sj_ctx *ctx;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return 1;
    printf("| model | N | per-request latency, median (ratio to native) |\n|---|---|---|\n");
    int n_models = argc > 1 ? argc - 1 : (int)(sizeof defaults / sizeof defaults[0]);
    const char *const *models = argc > 1 ? (const char *const *)argv + 1 : defaults;
    int rc = 0;
    for (int i = 0; i < n_models && !rc; i++) rc = bench_model(ctx, models[i]);
    printf("\n| model | N | served from the level, median | recompile until swapped in | "
           "native code swapped in, median | level / native |\n|---|---|---|---|---|---|\n");
    for (int i = 0; i < n_models && !rc; i++) rc = bench_swap(ctx, models[i]);
    sj_ctx_destroy(ctx);
    return rc;
}
