/* Precompiling a ladder at deploy time.
 *
 *   example_precompile MODEL STORE
 *
 * Run this once per model, machine type and shapejit version (in a deploy
 * step, a container build, an init job): it compiles every bucket of the
 * ladder into the store, so the serving processes that open the store later
 * start warm and never stall a request on a compile. Buckets already in the
 * store are loaded and checked instead of compiled again, so rerunning it is
 * cheap.
 */
#include <stdio.h>
#include <time.h>

#include "shapejit/backends.h"
#include "shapejit/bucketed_cache.h"
#include "shapejit/model.h"
#include "shapejit/store.h"

static double now_s(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Called after each bucket, never by two threads at once. */
static void progress(void *user, int done, int total, int64_t extent) {
    (void)user;
    printf("  bucket %d/%d ready (extent %lld)\n", done, total, (long long)extent);
}

static int fail(sj_ctx *ctx, const char *what) {
    fprintf(stderr, "precompile: %s: %s\n", what, sj_ctx_last_error(ctx));
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
    /* The serving processes must use the same ladder, options and compiler:
     * those (with the graph, the CPU and the toolchain) make the store key. */
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
    printf("precompiling %d buckets into %s with 2 jobs\n", sj_bucketed_cache_total_buckets(cache),
           argv[2]);
    double t0 = now_s();
    if (sj_bucketed_cache_precompile(cache, 2, progress, NULL) != SJ_OK) {
        rc = fail(ctx, "precompile");
        goto out;
    }
    sj_bucketed_cache_stats s;
    sj_bucketed_cache_stats_get(cache, &s);
    printf("done in %.2f s: %llu compiled, %llu already stored\n", now_s() - t0,
           (unsigned long long)s.compiles, (unsigned long long)s.store_hits);
    rc = sj_bucketed_cache_compiled_count(cache) == sj_bucketed_cache_total_buckets(cache) ? 0 : 1;
out:
    sj_bucketed_cache_destroy(cache);
    sj_host_compiler_destroy(hc);
    sj_store_close(store);
    sj_ladder_destroy(ladder);
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
    return rc;
}
