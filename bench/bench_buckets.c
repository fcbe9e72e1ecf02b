/* Tight buckets against one large bucket, side by side in one process
 * (issue 19): the wall-clock latency of one sj_engine_run on
 *   single  list:1024, untuned: every request runs in the one large bucket
 *   tight   pow2:1:1024 with --tune: each request in its own tight bucket,
 *           its schedules timed when the bucket compiled
 * for each model and N, one worker, one kernel thread, the two engines'
 * batches interleaved (bench/bench_sides.h), so the ratio is measured on
 * the same machine state. No store: each engine compiles (and the tight
 * one tunes) the bucket it needs before the clock starts.
 *
 *   bench_buckets [--n 1,7,64,300,1024] [--max 1024] [MODEL...]
 *   -> "ffn.sjg  N=7  single 4.85 us  tight 4.91 us  single/tight 0.99  (rounds' median 0.99)"
 *
 * --max E: the largest extent (list:E against pow2:1:E), for a model whose
 * dynamic dim is bounded (BERT's and GPT-2's 128 positions); sizes above
 * E are left out.
 *
 * MODEL defaults to the examples (mlp, ffn, attention) and two exported
 * layers (an encoder layer, attention with a residual and LayerNorm); an
 * exported .onnx is read with batch 1 and seq dynamic. bench/tuned_buckets.sh
 * gives the same comparison through `shapejit serve`, with the tuning cost
 * and ONNX Runtime beside it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_sides.h"

#define MAX_NS 16

static sj_status compare(sj_ctx *ctx, const char *path, int64_t n, int64_t max) {
    char ladders[2][48];
    snprintf(ladders[0], sizeof ladders[0], "list:%lld", (long long)max);
    snprintf(ladders[1], sizeof ladders[1], "pow2:1:%lld", (long long)max);
    sj_engine_config ec[2];
    for (int t = 0; t < 2; t++) {
        sj_engine_config_init(&ec[t]);
        ec[t].ladder = ladders[t];
        ec[t].threads = 1;
        ec[t].tune = t == 1;
    }
    bench_pair p = {{0, 0}, 0};
    SJ_TRY(bench_sides_measure(ctx, path, ec, n, &p));
    char label[64];
    bench_model_label(path, label, sizeof label);
    printf("%-26sN=%-6lld single %9.2f us  tight %9.2f us  single/tight %.2f  (rounds' median %.2f)\n",
           label, (long long)n, p.us[0], p.us[1], p.us[0] / p.us[1], 1 / p.ratio);
    fflush(stdout);
    return SJ_OK;
}

static int usage(void) {
    fprintf(stderr, "usage: bench_buckets [--n 1,7,64] [--max E] [MODEL...] (sizes and E in 1..65536)\n");
    return 2;
}

int main(int argc, char **argv) {
    int64_t ns[MAX_NS] = {1, 7, 64, 300, 1024}, max = 1024;
    int n_ns = 5, first_model = 1;
    while (first_model + 1 < argc && argv[first_model][0] == '-') {
        const char *flag = argv[first_model], *value = argv[first_model + 1];
        if (strcmp(flag, "--n") == 0) {
            n_ns = 0;
            for (const char *p = value; *p && n_ns < MAX_NS;) {
                char *end;
                long long v = strtoll(p, &end, 10);
                if (end == p || v < 1 || v > 65536) return usage();
                ns[n_ns++] = v;
                p = *end == ',' ? end + 1 : end;
            }
        } else if (strcmp(flag, "--max") == 0) {
            char *end;
            max = strtoll(value, &end, 10);
            if (*end || max < 1 || max > 65536) return usage();
        } else {
            return usage();
        }
        first_model += 2;
    }
    static const char *defaults[] = {
        SJ_BENCH_MODELS "/mlp.sjg", SJ_BENCH_MODELS "/ffn.sjg", SJ_BENCH_MODELS "/attention.sjg",
        SJ_BENCH_MODELS "/../../tests/data/real_models/tel_postnorm_relu_dynamo/model.onnx",
        SJ_BENCH_MODELS "/../../tests/data/real_models/mha_residual_ln_dynamo/model.onnx"};
    const char *const *models = first_model < argc ? (const char *const *)argv + first_model : defaults;
    int n_models = first_model < argc ? argc - first_model : 5;
    sj_ctx *ctx;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return 1;
    printf("wall-clock median per run, %d interleaved rounds, 1 thread, list:%lld against pow2:1:%lld;"
           " single/tight > 1: tight faster\n", BENCH_SIDE_ROUNDS, (long long)max, (long long)max);
    int rc = 0;
    for (int m = 0; m < n_models && !rc; m++)
        for (int i = 0; i < n_ns && !rc; i++)
            if (ns[i] <= max && compare(ctx, models[m], ns[i], max) != SJ_OK) {
                fprintf(stderr, "bench_buckets: %s at N=%lld: %s\n", models[m], (long long)ns[i],
                        sj_ctx_last_error(ctx));
                rc = 1;
            }
    sj_ctx_destroy(ctx);
    return rc;
}
