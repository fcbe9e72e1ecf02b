/* Precompiling a ladder at deploy time.
 *
 *   example_precompile MODEL STORE       (MODEL: examples/models/ffn.sjg)
 *
 * Run once per model, machine type and shapejit version (a deploy step, a
 * container build, an init job): every bucket of the ladder goes into the
 * store, so serving processes that open it later start warm. Buckets already
 * stored are loaded and checked, not compiled again: rerunning is cheap. The
 * serving processes must use the same ladder and backend: those (with the
 * graph, the CPU and the toolchain) make the store key.
 */
#include <stdio.h>

#include "shapejit/engine.h"

/* Called after each bucket, never by two threads at once. */
static void progress(void *user, int done, int total, int64_t extent) {
    (void)user;
    printf("  bucket %d/%d ready (extent %lld)\n", done, total, (long long)extent);
}

int main(int argc, char **argv) {
    if (argc != 3) return fprintf(stderr, "usage: %s MODEL STORE\n", argv[0]), 2;
    sj_ctx *ctx;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return 1;
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.ladder = "pow2:1:256";
    cfg.store_path = argv[2];
    sj_engine *e = NULL;
    sj_engine_stats s = {0};
    int rc = sj_engine_open(ctx, argv[1], &cfg, &e) == SJ_OK &&
             sj_engine_precompile(e, 2, progress, NULL) == SJ_OK;
    sj_engine_stats_get(e, &s);
    if (rc)
        printf("%d of %d buckets ready in %s: %llu compiled, %llu already stored\n",
               s.buckets_ready, s.buckets, argv[2], (unsigned long long)s.compiles,
               (unsigned long long)s.store_hits);
    else
        fprintf(stderr, "precompile: %s\n", sj_ctx_last_error(ctx));
    sj_engine_close(e);
    sj_ctx_destroy(ctx);
    return rc && s.buckets_ready == s.buckets ? 0 : 1;
}
