/* A warm start: a new process over a store that already holds the buckets.
 *
 *   example_warm_start MODEL STORE [--expect-warm]
 *
 * What a restarted (or newly scaled-out) server does: open the same store
 * with the same ladder and backend, and serve. Each bucket's first request
 * costs a store read (checksum verified), a decompression and a load, not a
 * compile. With --expect-warm it exits 1 when anything had to be compiled
 * (the store was empty, or made for another CPU or version).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "shapejit/engine.h"

static double now_ms(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    bool expect_warm = argc == 4 && !strcmp(argv[3], "--expect-warm");
    if (argc != 3 && !expect_warm)
        return fprintf(stderr, "usage: %s MODEL STORE [--expect-warm]\n", argv[0]), 2;
    double t0 = now_ms();
    sj_ctx *ctx;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return 1;
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.ladder = "pow2:1:256";
    cfg.store_path = argv[2];
    sj_engine *e = NULL;
    static float x[40 * 64]; /* the first request: 40 rows, bucket 64 */
    sj_named_tensor in = {"x", {.rank = 2, .dims = {40, 64}, .data = x}}, out = {0};
    bool ok = sj_engine_open(ctx, argv[1], &cfg, &e) == SJ_OK &&
              sj_engine_run(e, &in, 1, &out, 1, NULL) == SJ_OK;
    double first = now_ms() - t0;
    /* Everything else the store holds, before the next requests arrive. */
    ok = ok && sj_engine_precompile(e, 1, NULL, NULL) == SJ_OK;
    sj_engine_stats s;
    sj_engine_stats_get(e, &s);
    if (!ok) fprintf(stderr, "warm_start: %s\n", sj_ctx_last_error(ctx));
    printf("first result after %.1f ms, all %d buckets ready after %.1f ms\n", first, s.buckets,
           now_ms() - t0);
    printf("%s start: %llu buckets loaded from the store, %llu compiled\n",
           s.compiles ? "cold" : "warm", (unsigned long long)s.store_hits,
           (unsigned long long)s.compiles);
    sj_tensor_free(ctx, &out.tensor);
    sj_engine_close(e);
    sj_ctx_destroy(ctx);
    return !ok || (expect_warm && s.compiles) ? 1 : 0;
}
