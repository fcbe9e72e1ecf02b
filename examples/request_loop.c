/* Embedding the bucketed cache in a request loop.
 *
 *   example_request_loop MODEL STORE
 *
 * A server receives requests of any size N (tokens, rows, ...). Compiling
 * one executable per N would compile forever; one executable for the
 * largest N would waste work on every small request. The cache splits N
 * into buckets (here powers of two up to 256), compiles a bucket the first
 * time a request lands in it, keeps it in memory and in the store, and runs
 * every later request of that bucket straight away, padding it to the
 * bucket's extent and slicing the padding off the result.
 */
#include <stdio.h>
#include <stdlib.h>

#include "shapejit/backends.h"
#include "shapejit/bucketed_cache.h"
#include "shapejit/model.h"
#include "shapejit/store.h"

#define INNER 64 /* the model's x is [N, 64] */

static int fail(sj_ctx *ctx, const char *what) {
    fprintf(stderr, "request_loop: %s: %s\n", what, sj_ctx_last_error(ctx));
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL STORE  (MODEL: examples/models/ffn.sjg)\n", argv[0]);
        return 2;
    }
    sj_ctx *ctx;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return 1;
    int rc = 1;
    sj_graph *g = NULL;
    sj_ladder *ladder = NULL;
    sj_store *store = NULL;
    sj_host_compiler *hc = NULL;
    sj_bucketed_cache *cache = NULL;

    /* Once, at start-up: the model, the ladder, the store, the compiler. */
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

    /* The loop: each request is N rows of 64 floats. */
    static const int64_t sizes[] = {3, 17, 5, 120, 9, 33, 2, 250, 17, 64, 1, 31, 100, 7};
    float *x = malloc(256 * INNER * sizeof *x);
    if (!x) goto out;
    for (int i = 0; i < 256 * INNER; i++) x[i] = (float)(i % 13) / 13.0f - 0.5f;
    for (size_t r = 0; r < sizeof sizes / sizeof sizes[0]; r++) {
        int64_t n = sizes[r], extent, inner = INNER;
        sj_cache_input in = {.name = "x", .data = x, .inner = INNER, .pad = true};
        sj_tensor y;
        /* key = n picks the bucket; actual rows = n; y comes back [n, 64]. */
        if (sj_bucketed_cache_run_padded(cache, n, n, &in, 1, &inner, 1, &y, 1, &extent) != SJ_OK) {
            free(x);
            rc = fail(ctx, "request");
            goto out;
        }
        printf("request %2zu: N = %3lld ran in bucket %3lld -> y [%lld, %lld], y[0][0] = %.5f\n",
               r + 1, (long long)n, (long long)extent, (long long)y.dims[0], (long long)y.dims[1],
               y.data[0]);
        sj_tensor_free(ctx, &y);
    }
    free(x);

    sj_bucketed_cache_stats s;
    sj_bucketed_cache_stats_get(cache, &s);
    printf("%d of %d buckets used: %llu compiled, %llu loaded from the store, %llu memory hits\n",
           sj_bucketed_cache_compiled_count(cache), sj_bucketed_cache_total_buckets(cache),
           (unsigned long long)s.compiles, (unsigned long long)s.store_hits,
           (unsigned long long)s.memory_hits);
    rc = 0;
out:
    /* The cache first: it holds executables from the compiler and borrows the rest. */
    sj_bucketed_cache_destroy(cache);
    sj_host_compiler_destroy(hc);
    sj_store_close(store);
    sj_ladder_destroy(ladder);
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
    return rc;
}
