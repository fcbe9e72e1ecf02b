/* Small-N latency under the precision policies (issue 21, item 3):
 *
 *   bench_precision [REPS]   -> one row per N = 1..8: median ms per request
 *                               for fp32, bf16 and fp16 weights, and the
 *                               fp32 / bf16 speed-up
 *
 * The model is the two-matmul one: x [N,1024] @ w1 [1024,4096],
 * ReLU, @ w2 [4096,1024], 32 MiB of float32 weights (16 MiB narrowed),
 * ladder pow2:1:8, host backend, no store. At these sizes each request
 * streams every weight once and does little arithmetic per byte, so the
 * time follows the bytes read: the goal is bf16 >= 1.6x faster than fp32.
 * Each figure is the median over BENCH_BATCHES batches of REPS requests
 * (default 20) of the wall time per request (sj_engine_run: inputs copied
 * in, both matmuls, the output copied out), after a warm-up run per size
 * that compiles its bucket; the three policies' batches take turns. The thread's CPU time is printed beside it: on
 * a shared machine the wall figure includes time spent descheduled. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_timing.h"
#include "shapejit/engine.h"

#define D_IN 1024
#define D_HID 4096
#define MAX_N 8
#define POLICIES 3

static const char *const policies[POLICIES] = {"fp32", "bf16", "fp16"};

static sj_graph *two_matmul(sj_ctx *ctx) {
    float *w1 = malloc((size_t)D_IN * D_HID * sizeof *w1), *w2 = malloc((size_t)D_HID * D_IN * sizeof *w2);
    sj_graph *g = NULL;
    if (!w1 || !w2) goto done;
    /* Small values, as trained weights are: fp16 keeps them in range. */
    for (size_t i = 0; i < (size_t)D_IN * D_HID; i++) {
        w1[i] = ((float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f) * 0.06f;
        w2[i] = ((float)((i * 40503u) % 1000) / 1000.0f - 0.5f) * 0.06f;
    }
    int64_t xd[] = {SJ_DIM_SYM, D_IN}, d1[] = {D_IN, D_HID}, d2[] = {D_HID, D_IN};
    sj_value x, a, b, h, r, y;
    if (sj_graph_create(ctx, "N", &g) != SJ_OK || sj_graph_input(g, "x", 2, xd, &x) != SJ_OK ||
        sj_graph_param(g, "w1", 2, d1, w1, &a) != SJ_OK || sj_graph_param(g, "w2", 2, d2, w2, &b) != SJ_OK ||
        sj_graph_matmul(g, x, a, &h) != SJ_OK || sj_graph_unary(g, SJ_OP_RELU, h, &r) != SJ_OK ||
        sj_graph_matmul(g, r, b, &y) != SJ_OK || sj_graph_output(g, y, "y") != SJ_OK) {
        sj_graph_destroy(g);
        g = NULL;
    }
done:
    free(w1);
    free(w2);
    return g;
}

static int run_once(sj_engine *e, sj_ctx *ctx, float *x, int64_t n) {
    sj_named_tensor in = {"x", {.rank = 2, .dims = {n, D_IN}, .data = x}}, out = {0};
    if (sj_engine_run(e, &in, 1, &out, 1, NULL) != SJ_OK) return 1;
    sj_tensor_free(ctx, &out.tensor);
    return 0;
}

typedef struct policy_engine {
    sj_ctx *ctx;
    sj_engine *e;
} policy_engine;

static int open_policy(const char *policy, policy_engine *pe) {
    if (sj_ctx_create(NULL, &pe->ctx) != SJ_OK) return 1;
    sj_graph *g = two_matmul(pe->ctx);
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.ladder = "pow2:1:8";
    if (sj_precision_from_name(policy, &cfg.precision) != SJ_OK) {
        fprintf(stderr, "bench_precision: unknown policy %s\n", policy);
        return 1;
    }
    if (!g || sj_engine_open_graph(pe->ctx, g, &cfg, &pe->e) != SJ_OK) {
        fprintf(stderr, "bench_precision: %s: %s\n", policy, sj_ctx_last_error(pe->ctx));
        return 1;
    }
    return 0;
}

/* Median wall and CPU ms per request at each N for every policy. The
 * policies' batches take turns, so a machine whose load changes during the
 * run weighs on all of them alike. */
static int measure(policy_engine *pe, int reps, double wall_ms[POLICIES][MAX_N],
                   double cpu_ms[POLICIES][MAX_N]) {
    float *x = malloc((size_t)MAX_N * D_IN * sizeof *x);
    if (!x) return 1;
    for (int i = 0; i < MAX_N * D_IN; i++) x[i] = (float)(i % 13) * 0.1f - 0.6f;
    int rc = 0;
    for (int64_t n = 1; !rc && n <= MAX_N; n++) {
        double wall[POLICIES][BENCH_BATCHES], cpu[POLICIES][BENCH_BATCHES];
        for (int p = 0; !rc && p < POLICIES; p++) rc = run_once(pe[p].e, pe[p].ctx, x, n); /* compiles */
        for (int b = 0; !rc && b < BENCH_BATCHES; b++)
            for (int p = 0; !rc && p < POLICIES; p++) {
                double w0 = bench_wall_ns(), c0 = bench_cpu_ns();
                for (int r = 0; !rc && r < reps; r++) rc = run_once(pe[p].e, pe[p].ctx, x, n);
                wall[p][b] = (bench_wall_ns() - w0) / reps / 1e6;
                cpu[p][b] = (bench_cpu_ns() - c0) / reps / 1e6;
            }
        for (int p = 0; !rc && p < POLICIES; p++) {
            wall_ms[p][n - 1] = bench_median(wall[p], BENCH_BATCHES);
            cpu_ms[p][n - 1] = bench_median(cpu[p], BENCH_BATCHES);
        }
        if (rc) fprintf(stderr, "bench_precision: run at N=%lld failed\n", (long long)n);
    }
    free(x);
    return rc;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 20;
    if (reps < 1) {
        fprintf(stderr, "usage: bench_precision [REPS >= 1]\n");
        return 2;
    }
    double wall[POLICIES][MAX_N], cpu[POLICIES][MAX_N];
    policy_engine pe[POLICIES] = {{0}};
    int rc = 0;
    for (int p = 0; !rc && p < POLICIES; p++) rc = open_policy(policies[p], &pe[p]);
    if (!rc) rc = measure(pe, reps, wall, cpu);
    for (int p = 0; p < POLICIES; p++) {
        sj_engine_close(pe[p].e);
        sj_ctx_destroy(pe[p].ctx);
    }
    if (rc) return 1;
    printf("two-matmul [N,1024]x[1024,4096] relu x[4096,1024], host, median ms per request "
           "(wall / thread CPU)\n");
    printf("%3s  %17s  %17s  %17s  %13s\n", "N", "fp32", "bf16", "fp16", "fp32/bf16");
    for (int n = 0; n < MAX_N; n++) {
        printf("%3d", n + 1);
        for (int p = 0; p < POLICIES; p++) printf("  %7.3f / %7.3f", wall[p][n], cpu[p][n]);
        printf("  %5.2fx / %5.2fx\n", wall[0][n] / wall[1][n], cpu[0][n] / cpu[1][n]);
    }
    return 0;
}
