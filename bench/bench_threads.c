/* Intra-request kernel threads, side by side: the wall-clock latency of one
 * sj_engine_run at threads 1 and at threads 2 (issue 15 item 4), for each
 * model and N, in one process with the two engines' batches interleaved
 * (the order alternating every round), so load from other processes on a
 * shared machine falls on both alike. Per engine the median per-call time
 * of ROUNDS rounds, each round one batch per engine of about 1 ms; and the
 * median of the rounds' own t2/t1 (the two batches of a round ran within
 * about 2 ms of each other, so a burst of load mostly falls on both).
 *
 *   bench_threads [--n 7,64,300,1024] [MODEL...]
 *   -> "ffn.sjg  N=64  t1 39.1 us  t2 38.0 us  t2/t1 0.97  (rounds' median 0.98)"
 *
 * MODEL defaults to the examples (mlp, ffn, attention) and an exported
 * encoder layer (tests/data/real_models/tel_prenorm_gelu_dynamo); an
 * exported .onnx is read with batch 1 and seq dynamic. Inputs are zeros of
 * each input's dtype, plus small values for float inputs (a zero matmul
 * costs the same, but keep the numbers finite and ordinary). Wall clock,
 * not CPU time: the second thread's time is what a split spends.
 *
 * First it prints the machine's capacity now: the work two spinning threads
 * do in 0.3 s over what one does. Where it is near 1 (a VM whose host
 * grants about one CPU of time, in bursts: this project's 2-vCPU machine
 * measured 1.0 sustained, more for the first second), no split can make
 * two threads faster, and the figures say only that they are not slower. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_sides.h"

#define MAX_NS 16

/* ---- capacity: spins counted by one thread, then by two, 0.3 s each */

static atomic_bool spin_stop;

static void *spin(void *arg) {
    uint64_t *count = arg;
    volatile uint64_t x = 0;
    while (!atomic_load_explicit(&spin_stop, memory_order_relaxed))
        for (int i = 0; i < 4096; i++) x++;
    *count = x;
    return NULL;
}

static double spins(int threads) {
    pthread_t th[2];
    uint64_t count[2] = {0, 0};
    atomic_store(&spin_stop, false);
    for (int i = 0; i < threads; i++) pthread_create(&th[i], NULL, spin, &count[i]);
    double t0 = bench_wall_ns();
    while (bench_wall_ns() - t0 < 3e8) {}
    atomic_store(&spin_stop, true);
    for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
    return (double)(count[0] + count[1]);
}

/* One model at one N: prints t1, t2 and their ratio. */
static sj_status compare(sj_ctx *ctx, const char *path, int64_t n) {
    sj_engine_config ec[2];
    for (int t = 0; t < 2; t++) {
        sj_engine_config_init(&ec[t]);
        ec[t].threads = t + 1;
    }
    bench_pair p = {{0, 0}, 0};
    SJ_TRY(bench_sides_measure(ctx, path, ec, n, &p));
    char label[64];
    bench_model_label(path, label, sizeof label);
    printf("%-26sN=%-6lld t1 %9.1f us  t2 %9.1f us  t2/t1 %.2f  (rounds' median %.2f)\n", label,
           (long long)n, p.us[0], p.us[1], p.us[1] / p.us[0], p.ratio);
    fflush(stdout);
    return SJ_OK;
}

int main(int argc, char **argv) {
    int64_t ns[MAX_NS] = {7, 64, 300, 1024};
    int n_ns = 4, first_model = 1;
    if (argc > 2 && strcmp(argv[1], "--n") == 0) {
        n_ns = 0;
        for (char *p = argv[2]; *p && n_ns < MAX_NS;) {
            char *end;
            long long v = strtoll(p, &end, 10);
            if (end == p || v < 1)
                return fprintf(stderr, "bench_threads: --n wants sizes >= 1, as 7,64,300\n"), 2;
            ns[n_ns++] = v;
            p = *end == ',' ? end + 1 : end;
        }
        first_model = 3;
    }
    static const char *defaults[] = {
        SJ_BENCH_MODELS "/mlp.sjg", SJ_BENCH_MODELS "/ffn.sjg", SJ_BENCH_MODELS "/attention.sjg",
        SJ_BENCH_MODELS "/../../tests/data/real_models/tel_prenorm_gelu_dynamo/model.onnx"};
    const char *const *models = first_model < argc ? (const char *const *)argv + first_model : defaults;
    int n_models = first_model < argc ? argc - first_model : 4;
    sj_ctx *ctx;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return 1;
    double one = spins(1), two = spins(2);
    printf("capacity: two threads do %.2fx the work of one (0.3 s each)\n", two / one);
    printf("wall-clock median per run, %d interleaved rounds; t2/t1 < 1: two threads faster\n",
           BENCH_SIDE_ROUNDS);
    int rc = 0;
    for (int m = 0; m < n_models && !rc; m++)
        for (int i = 0; i < n_ns && !rc; i++)
            if (compare(ctx, models[m], ns[i]) != SJ_OK) {
                fprintf(stderr, "bench_threads: %s at N=%lld: %s\n", models[m], (long long)ns[i],
                        sj_ctx_last_error(ctx));
                rc = 1;
            }
    sj_ctx_destroy(ctx);
    return rc;
}
