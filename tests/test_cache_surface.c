/* The rest of the reference's bucketed-cache surface (issue 21 item 4):
 * explicit bucket ranges with gaps and a first range above 1 through the
 * cache and the engine (a key in a gap is out of range naming the gap, or a
 * one-off where allowed, answered exactly), and options per call as well as
 * per cache (another compiler's options get buckets of their own, stored
 * under their own key; the cache's own options are the cache itself). The
 * metadata info cache's clear() is tested in test_metadata_cache. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "shapejit/engine.h"
#include "shapejit/ext/backends.h"
#include "shapejit/ext/bucketed_cache.h"

#define IN 8
#define OUT 4

static sj_ctx *ctx;
static float w[IN * OUT];

static sj_graph *make_graph(void) {
    sj_graph *g;
    assert_int_equal(sj_graph_create(ctx, "N", &g), SJ_OK);
    int64_t xd[] = {SJ_DIM_SYM, IN}, wd[] = {IN, OUT};
    sj_value x, wv, y, r;
    assert_int_equal(sj_graph_input(g, "x", 2, xd, &x), SJ_OK);
    assert_int_equal(sj_graph_param(g, "w", 2, wd, w, &wv), SJ_OK);
    assert_int_equal(sj_graph_matmul(g, x, wv, &y), SJ_OK);
    assert_int_equal(sj_graph_unary(g, SJ_OP_RELU, y, &r), SJ_OK);
    assert_int_equal(sj_graph_output(g, r, "y"), SJ_OK);
    return g;
}

static int setup(void **state) {
    (void)state;
    for (int i = 0; i < IN * OUT; i++) w[i] = (float)((i * 7) % 9) / 9.0f - 0.4f;
    return sj_ctx_create(NULL, &ctx) == SJ_OK ? 0 : -1;
}
static int teardown(void **state) {
    (void)state;
    sj_ctx_destroy(ctx);
    return 0;
}

/* n rows through the engine, checked against plain loops. */
static sj_status run_rows(sj_engine *e, int64_t n, sj_run_info *info) {
    float *x = malloc((size_t)n * IN * sizeof *x);
    assert_non_null(x);
    for (int64_t i = 0; i < n * IN; i++) x[i] = (float)((i * 5) % 13) / 13.0f - 0.5f;
    sj_named_tensor in[1] = {{"x", {.rank = 2, .dims = {n, IN}, .data = x}}}, out[1];
    sj_status st = sj_engine_run(e, in, 1, out, 1, info);
    if (st == SJ_OK) {
        for (int64_t r = 0; r < n; r++)
            for (int j = 0; j < OUT; j++) {
                double acc = 0;
                for (int k = 0; k < IN; k++) acc += (double)x[r * IN + k] * w[k * OUT + j];
                assert_true(fabs(out[0].tensor.data[r * OUT + j] - (acc > 0 ? acc : 0)) < 1e-5);
            }
        sj_tensor_free(ctx, &out[0].tensor);
    }
    free(x);
    return st;
}

static sj_engine *open_engine(const char *ladder, bool one_offs) {
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.backend = "host";
    cfg.ladder = ladder;
    cfg.one_off_out_of_range = one_offs;
    sj_engine *e = NULL;
    if (sj_engine_open_graph(ctx, make_graph(), &cfg, &e) != SJ_OK)
        fail_msg("open: %s", sj_ctx_last_error(ctx));
    return e;
}

static void test_ranges_with_gaps(void **state) {
    (void)state;
    sj_engine *e = open_engine("ranges:3-8,17-32", false);
    assert_int_equal(sj_engine_num_buckets(e), 2);
    int64_t lo, hi;
    assert_int_equal(sj_engine_bucket(e, 1, &lo, &hi, NULL), SJ_OK);
    assert_int_equal(lo, 17);
    assert_int_equal(hi, 32);
    sj_run_info info;
    assert_int_equal(run_rows(e, 5, &info), SJ_OK);
    assert_int_equal(info.bucket, 8);
    assert_int_equal(run_rows(e, 17, &info), SJ_OK);
    assert_int_equal(info.bucket, 32);
    /* In the gap and below the first range: refused before any compile. */
    sj_engine_stats st;
    sj_engine_stats_get(e, &st);
    uint64_t compiles = st.compiles;
    assert_int_equal(run_rows(e, 12, NULL), SJ_E_OUT_OF_RANGE);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "gap between buckets [3, 8] and [17, 32]"));
    assert_int_equal(run_rows(e, 2, NULL), SJ_E_OUT_OF_RANGE);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "below the ladder's first bucket [3, 8]"));
    /* Ranges below 3 still run at the bucket's extent: 1..8 active fits E = 8. */
    sj_engine_stats_get(e, &st);
    assert_int_equal(st.compiles, compiles);
    sj_engine_close(e);

    /* Where one-offs are allowed, a gap key is one, compiled at its extent. */
    e = open_engine("ranges:3-8,17-32", true);
    assert_int_equal(run_rows(e, 12, &info), SJ_OK);
    assert_int_equal(info.bucket, 12);
    assert_int_equal(run_rows(e, 2, &info), SJ_OK);
    assert_int_equal(info.bucket, 2);
    sj_engine_stats_get(e, &st);
    assert_int_equal(st.one_offs, 2);
    assert_int_equal(st.buckets_ready, 0);
    sj_engine_close(e);
}

static void test_options_per_call(void **state) {
    (void)state;
    sj_graph *g = make_graph();
    sj_ladder *l;
    assert_int_equal(sj_ladder_parse(ctx, "pow2:1:16", &l), SJ_OK);
    sj_host_compiler_config hcfg;
    sj_host_compiler_config_init(&hcfg);
    sj_host_compiler *fused, *unfused;
    assert_int_equal(sj_host_compiler_create(ctx, &hcfg, &fused), SJ_OK);
    hcfg.options.fusion = false;
    hcfg.options.opt_level = 1;
    assert_int_equal(sj_host_compiler_create(ctx, &hcfg, &unfused), SJ_OK);
    sj_compiler a, b;
    sj_host_compiler_table(fused, &a);
    sj_host_compiler_table(unfused, &b);
    sj_store_config scfg;
    sj_store_config_init(&scfg); /* in memory */
    sj_store *store;
    assert_int_equal(sj_store_open(ctx, &scfg, &store), SJ_OK);
    sj_bucketed_cache *c;
    assert_int_equal(sj_bucketed_cache_create(g, l, &a, store, NULL, &c), SJ_OK);

    int64_t ext;
    void *own, *own_again, *other, *other_again;
    assert_int_equal(sj_bucketed_cache_get_or_compile(c, 5, &ext, &own), SJ_OK);
    /* The cache's own options, passed per call: the same executable. */
    assert_int_equal(sj_bucketed_cache_get_or_compile_with(c, 6, &a, &ext, &own_again), SJ_OK);
    assert_ptr_equal(own, own_again);
    /* Other options: their own bucket, compiled once, then a memory hit. */
    assert_int_equal(sj_bucketed_cache_get_or_compile_with(c, 5, &b, &ext, &other), SJ_OK);
    assert_int_equal(ext, 8);
    assert_ptr_not_equal(other, own);
    assert_int_equal(sj_bucketed_cache_get_or_compile_with(c, 7, &b, &ext, &other_again), SJ_OK);
    assert_ptr_equal(other, other_again);
    /* Both answer the same; and the store holds both option sets' rows. */
    float x[5 * IN];
    for (int i = 0; i < 5 * IN; i++) x[i] = (float)(i % 7) / 7.0f - 0.3f;
    sj_tensor in[1] = {{.rank = 2, .dims = {5, IN}, .data = x}}, o1[1] = {{0}}, o2[1] = {{0}};
    assert_int_equal(a.run(a.ctx, own, 5, in, o1), SJ_OK);
    assert_int_equal(b.run(b.ctx, other, 5, in, o2), SJ_OK);
    for (int i = 0; i < 5 * OUT; i++) assert_true(fabsf(o1[0].data[i] - o2[0].data[i]) < 1e-5f);
    sj_tensor_free(ctx, &o1[0]);
    sj_tensor_free(ctx, &o2[0]);
    sj_store_stats ss;
    assert_int_equal(sj_store_stats_get(store, &ss), SJ_OK);
    assert_int_equal(ss.entries, 2);
    sj_bucketed_cache_stats cs;
    sj_bucketed_cache_stats_get(c, &cs);
    assert_int_equal(cs.compiles, 1); /* the other options' compile is its sibling's */
    assert_int_equal(sj_bucketed_cache_get_or_compile_with(c, 5, NULL, &ext, &other), SJ_E_INVALID_ARG);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "needs a compiler"));

    sj_bucketed_cache_destroy(c);
    sj_store_close(store);
    sj_host_compiler_destroy(unfused);
    sj_host_compiler_destroy(fused);
    sj_ladder_destroy(l);
    sj_graph_destroy(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranges_with_gaps),
        cmocka_unit_test(test_options_per_call),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
