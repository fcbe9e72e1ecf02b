/* A warm start: a new process over a store that already holds the buckets.
 *
 *   example_warm_start MODEL STORE [--expect-warm]
 *
 * What a restarted (or newly scaled-out) server does: open the same store
 * with the same ladder and compiler, and serve. Each bucket's first request
 * now costs a store read (checksum verified), a decompression and a load,
 * not a compile. With --expect-warm it exits 1 when anything had to be
 * compiled (the store was empty, or made for another CPU or version).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "shapejit/backends.h"
#include "shapejit/bucketed_cache.h"
#include "shapejit/model.h"
#include "shapejit/store.h"

static double now_ms(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int fail(sj_ctx *ctx, const char *what) {
    fprintf(stderr, "warm_start: %s: %s\n", what, sj_ctx_last_error(ctx));
    return 1;
}

int main(int argc, char **argv) {
    bool expect_warm = argc == 4 && !strcmp(argv[3], "--expect-warm");
    if (argc != 3 && !expect_warm) {
        fprintf(stderr, "usage: %s MODEL STORE [--expect-warm]\n", argv[0]);
        return 2;
    }
    double t0 = now_ms();
    sj_ctx *ctx;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return 1;
    int rc = 1;
    sj_graph *g = NULL;
    sj_ladder *ladder = NULL;
    sj_store *store = NULL;
    sj_host_compiler *hc = NULL;
    sj_bucketed_cache *cache = NULL;
    sj_store_config scfg;
    sj_store_config_init(&scfg);
    scfg.path = argv[2];
    sj_compiler comp;
    sj_bucketed_cache_config cfg;
    sj_bucketed_cache_config_init(&cfg);

    if (sj_model_load(ctx, argv[1], NULL, &g) != SJ_OK) {
        rc = fail(ctx, argv[1]);
        goto out;
    }
    if (sj_ladder_parse(ctx, "pow2:1:256", &ladder) != SJ_OK) {
        rc = fail(ctx, "ladder");
        goto out;
    }
    if (sj_store_open(ctx, &scfg, &store) != SJ_OK) {
        rc = fail(ctx, "store");
        goto out;
    }
    if (sj_host_compiler_create(ctx, NULL, &hc) != SJ_OK) {
        rc = fail(ctx, "host compiler");
        goto out;
    }
    sj_host_compiler_table(hc, &comp);
    sj_host_compiler_cache_config(hc, &cfg);
    if (sj_bucketed_cache_create(g, ladder, &comp, store, &cfg, &cache) != SJ_OK) {
        rc = fail(ctx, "cache");
        goto out;
    }

    /* The first request: 40 rows, bucket 64. */
    static float x[40 * 64];
    for (int i = 0; i < 40 * 64; i++) x[i] = (float)(i % 7) / 7.0f;
    sj_cache_input in = {.name = "x", .data = x, .inner = 64, .pad = true};
    int64_t inner = 64;
    sj_tensor y;
    if (sj_bucketed_cache_run_padded(cache, 40, 40, &in, 1, &inner, 1, &y, 1, NULL) != SJ_OK) {
        rc = fail(ctx, "first request");
        goto out;
    }
    double first = now_ms() - t0;
    sj_tensor_free(ctx, &y);

    /* Everything else the store holds, before the next requests arrive. */
    if (sj_bucketed_cache_precompile(cache, 1, NULL, NULL) != SJ_OK) {
        rc = fail(ctx, "loading the ladder");
        goto out;
    }
    double ready = now_ms() - t0;
    sj_bucketed_cache_stats s;
    sj_bucketed_cache_stats_get(cache, &s);
    printf("first result after %.1f ms, all %d buckets ready after %.1f ms\n", first,
           sj_bucketed_cache_total_buckets(cache), ready);
    printf("%s start: %llu buckets loaded from the store, %llu compiled\n",
           s.compiles ? "cold" : "warm", (unsigned long long)s.store_hits,
           (unsigned long long)s.compiles);
    rc = expect_warm && s.compiles ? 1 : 0;
out:
    sj_bucketed_cache_destroy(cache);
    sj_host_compiler_destroy(hc);
    sj_store_close(store);
    sj_ladder_destroy(ladder);
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
    return rc;
}
