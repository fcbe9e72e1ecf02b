/* Embedding shapejit in a request loop.
 *
 *   example_request_loop MODEL STORE      (MODEL: examples/models/ffn.sjg)
 *
 * A server receives requests of any size N (tokens, rows, ...). The engine
 * splits N into buckets (powers of two up to 256), compiles a bucket the
 * first time a request lands in it, keeps it in memory and in the store, and
 * runs every later request of that bucket straight away; results have N rows.
 */
#include <stdio.h>

#include "shapejit/engine.h"

int main(int argc, char **argv) {
    if (argc != 3) return fprintf(stderr, "usage: %s MODEL STORE\n", argv[0]), 2;
    sj_ctx *ctx;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return 1;
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.ladder = "pow2:1:256";
    cfg.store_path = argv[2];
    sj_engine *e;
    int rc = sj_engine_open(ctx, argv[1], &cfg, &e) == SJ_OK ? 0 : 1;
    static float x[256 * 64]; /* the model's x is [N, 64] */
    for (int i = 0; i < 256 * 64; i++) x[i] = (float)(i % 13) / 13.0f - 0.5f;
    static const int64_t sizes[] = {3, 17, 5, 120, 9, 33, 2, 250, 17, 64, 1, 31, 100, 7};
    for (size_t r = 0; rc == 0 && r < sizeof sizes / sizeof sizes[0]; r++) {
        sj_named_tensor in = {"x", {.rank = 2, .dims = {sizes[r], 64}, .data = x}}, out = {0};
        sj_run_info info;
        rc = sj_engine_run(e, &in, 1, &out, 1, &info) == SJ_OK ? 0 : 1;
        if (rc == 0)
            printf("request %2zu: N = %3lld ran in bucket %3lld -> %s [%lld, %lld], first %.5f\n",
                   r + 1, (long long)info.rows, (long long)info.bucket, out.name,
                   (long long)out.tensor.dims[0], (long long)out.tensor.dims[1],
                   out.tensor.data[0]);
        sj_tensor_free(ctx, &out.tensor);
    }
    sj_engine_stats s;
    sj_engine_stats_get(e, &s);
    if (rc == 0)
        printf(
            "%d of %d buckets used: %llu compiled, %llu loaded from the store, %llu memory hits\n",
            s.buckets_ready, s.buckets, (unsigned long long)s.compiles,
            (unsigned long long)s.store_hits, (unsigned long long)s.memory_hits);
    else
        fprintf(stderr, "request_loop: %s\n", sj_ctx_last_error(ctx));
    sj_engine_close(e);
    sj_ctx_destroy(ctx);
    return rc;
}
