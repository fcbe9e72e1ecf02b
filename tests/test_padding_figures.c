/* Padding reported as what it costs, on a stream whose work is known:
 * rows ALLOCATED past the requests (memory: runs x extent - rows) and rows
 * COMPUTED past them (work, from what the executable ran), per bucket, with
 * the arena one run holds. Host kernels run over the active extent, so they
 * compute no padding; a test compiler whose executable runs its whole
 * extent shows the figure comes from the executable, not from the ladder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/skip.h"

#include <stdlib.h>
#include <string.h>

#include "shapejit/engine.h"
#include "shapejit/ext/bucketed_cache.h"
#include "shapejit/graph.h"
#include "cache/bucketed_cache_impl.h" /* sj__cache_run: a run without inputs */
#include "core/core_impl.h"
#include "tests/test_util.h"

/* The stream: sizes and the ladder list:8,16. Bucket 8 runs 3, 5, 8, 1
 * (17 rows in 4 runs: 32 - 17 = 15 padded rows allocated); bucket 16 runs
 * 9 and 16 (25 rows in 2 runs: 7 allocated). */
static const int64_t SIZES[] = {3, 9, 5, 8, 16, 1};
#define N_SIZES (sizeof SIZES / sizeof SIZES[0])
static const struct {
    int64_t extent;
    uint64_t runs, rows, allocated;
} WANT[] = {{8, 4, 17, 15}, {16, 2, 25, 7}};

static void run_engine_stream(sj_ctx *ctx, sj_engine *e) {
    for (size_t i = 0; i < N_SIZES; i++) {
        int64_t dims[2] = {SIZES[i], 64};
        sj_tensor x;
        assert_int_equal(sj_tensor_alloc(ctx, 2, dims, &x), SJ_OK);
        for (int64_t k = 0; k < SIZES[i] * 64; k++) x.data[k] = (float)(k % 7) * 0.1f;
        sj_named_tensor in = {"x", x}, out = {0};
        sj_run_info info;
        assert_int_equal(sj_engine_run(e, &in, 1, &out, 1, &info), SJ_OK);
        assert_int_equal(info.rows, SIZES[i]);
        sj_tensor_free(ctx, &out.tensor);
        sj_tensor_free(ctx, &x);
    }
}

static void check_engine(const char *backend, bool has_arena) {
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.ladder = "list:8,16";
    cfg.backend = backend;
    sj_engine *e;
    assert_int_equal(sj_engine_open(ctx, SJ_SOURCE_DIR "/examples/models/ffn.sjg", &cfg, &e), SJ_OK);
    run_engine_stream(ctx, e);
    sj_bucketed_cache *c = sj_engine_cache(e);
    assert_int_equal(sj_bucketed_cache_num_buckets(c), 2);
    for (int b = 0; b < 2; b++) {
        sj_bucket_padding p;
        assert_int_equal(sj_bucketed_cache_bucket_padding(c, b, &p), SJ_OK);
        assert_int_equal(p.extent, WANT[b].extent);
        assert_int_equal(p.runs, WANT[b].runs);
        assert_int_equal(p.rows, WANT[b].rows);
        assert_int_equal(p.padded_rows_allocated, WANT[b].allocated);
        assert_int_equal(p.padded_rows_computed, 0); /* kernels run over the active rows */
        sj_executable_memory_info m;
        assert_int_equal(sj_bucketed_cache_bucket_memory(c, b, &m), SJ_OK);
        /* What the executable itself counted: the rows it was asked for,
         * and the rows its launches were given. */
        assert_int_equal(m.runs, WANT[b].runs);
        assert_int_equal(m.rows_requested, WANT[b].rows);
        assert_int_equal(m.rows_computed, WANT[b].rows);
        assert_int_equal(p.arena_bytes, m.arena_bytes);
        if (has_arena)
            assert_true(p.arena_bytes > 0);
        else
            assert_int_equal(p.arena_bytes, 0);
    }
    sj_bucket_padding p;
    assert_int_equal(sj_bucketed_cache_bucket_padding(c, 2, &p), SJ_E_OUT_OF_RANGE);
    assert_int_equal(sj_bucketed_cache_bucket_padding(c, 0, NULL), SJ_E_INVALID_ARG);
    /* The engine's own report says the same, without the cache. */
    assert_int_equal(sj_engine_num_buckets(e), 2);
    for (int b = 0; b < 2; b++) {
        sj_engine_bucket_stats bs;
        assert_int_equal(sj_engine_bucket_stats_get(e, b, &bs), SJ_OK);
        assert_int_equal(bs.hi, WANT[b].extent);
        assert_int_equal(bs.lo, b == 0 ? 1 : 9);
        assert_true(bs.ready);
        assert_non_null(bs.cpu);
        assert_int_equal(bs.native, SJ_ENGINE_NATIVE_NONE);
        assert_int_equal(bs.runs, WANT[b].runs);
        assert_int_equal(bs.rows, WANT[b].rows);
        assert_int_equal(bs.padded_rows_allocated, WANT[b].allocated);
        assert_int_equal(bs.padded_rows_computed, 0);
        assert_int_equal(sj_bucketed_cache_bucket_padding(c, b, &p), SJ_OK);
        assert_int_equal(bs.memory.arena_bytes, p.arena_bytes);
        assert_true(bs.memory.loaded);
    }
    sj_engine_bucket_stats bs;
    assert_int_equal(sj_engine_bucket_stats_get(e, 2, &bs), SJ_E_OUT_OF_RANGE);
    assert_int_equal(sj_engine_bucket_stats_get(e, 0, NULL), SJ_E_INVALID_ARG);
    sj_engine_close(e);
    sj_ctx_destroy(ctx);
}

static void test_host_stream(void **state) {
    (void)state;
    check_engine("host", true);
}

static void test_interp_stream(void **state) {
    (void)state;
    check_engine("interp", false);
}

/* ---- A compiler whose executable runs its whole extent every time (a
 * kernel not bounded by the active extent): padding computed = allocated. */

typedef struct whole_exe {
    int64_t extent;
    uint64_t runs, rows, computed;
} whole_exe;

static sj_ctx *g_ctx; /* the test's; the compiler's ctx pointer is this */

static sj_status we_compile(void *p, const sj_graph *g, int64_t extent, void **artifact, size_t *len) {
    (void)p, (void)g;
    int64_t *a = sj_alloc(g_ctx, sizeof *a);
    if (!a) return SJ_E_NOMEM;
    *a = extent;
    *artifact = a;
    *len = sizeof *a;
    return SJ_OK;
}

static sj_status we_load(void *p, const sj_graph *g, int64_t extent, const void *artifact, size_t len,
                         void **exe) {
    (void)p, (void)g, (void)artifact, (void)len;
    whole_exe *e = sj_calloc(g_ctx, 1, sizeof *e);
    if (!e) return SJ_E_NOMEM;
    e->extent = extent;
    *exe = e;
    return SJ_OK;
}

static sj_status we_run(void *p, void *exe, int64_t active, const sj_tensor *in, sj_tensor *out) {
    (void)p, (void)in, (void)out;
    whole_exe *e = exe;
    e->runs++;
    e->rows += (uint64_t)active;
    e->computed += (uint64_t)e->extent; /* every row of the bucket, padding too */
    return SJ_OK;
}

static void we_memory(void *p, void *exe, sj_executable_memory_info *out) {
    (void)p;
    whole_exe *e = exe;
    memset(out, 0, sizeof *out);
    out->runs = e->runs;
    out->rows_requested = e->rows;
    out->rows_computed = e->computed;
}

static void we_destroy(void *p, void *exe) {
    (void)p;
    sj_free(g_ctx, exe);
}

static void run_cache(bool with_memory, int64_t want_computed_8, int64_t want_computed_16) {
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    g_ctx = ctx;
    sj_compiler comp = {.target_triple = "test", .target_cpu = "generic", .artifact_version = 1,
                        .compiler_version = "whole-1", .compile = we_compile, .load = we_load,
                        .run = we_run, .destroy = we_destroy,
                        .memory = with_memory ? we_memory : NULL};
    sj_graph *g;
    sj_ladder *l;
    sj_bucketed_cache *c;
    int64_t xd[] = {SJ_DIM_SYM, 4};
    sj_value x, y;
    assert_int_equal(sj_graph_create(ctx, "N", &g), SJ_OK);
    assert_int_equal(sj_graph_input(g, "x", 2, xd, &x), SJ_OK);
    assert_int_equal(sj_graph_unary(g, SJ_OP_RELU, x, &y), SJ_OK);
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    assert_int_equal(sj_ladder_parse(ctx, "list:8,16", &l), SJ_OK);
    assert_int_equal(sj_bucketed_cache_create(g, l, &comp, NULL, NULL, &c), SJ_OK);
    for (size_t i = 0; i < N_SIZES; i++)
        assert_int_equal(sj__cache_run(c, SIZES[i], SIZES[i], NULL, NULL, NULL, NULL), SJ_OK);
    sj_bucket_padding p;
    assert_int_equal(sj_bucketed_cache_bucket_padding(c, 0, &p), SJ_OK);
    assert_int_equal(p.padded_rows_allocated, 15);
    assert_int_equal(p.padded_rows_computed, want_computed_8);
    assert_int_equal(sj_bucketed_cache_bucket_padding(c, 1, &p), SJ_OK);
    assert_int_equal(p.padded_rows_allocated, 7);
    assert_int_equal(p.padded_rows_computed, want_computed_16);
    sj_bucketed_cache_destroy(c);
    sj_ladder_destroy(l);
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
}

static void test_executable_that_computes_padding(void **state) {
    (void)state;
    run_cache(true, 15, 7);
}

/* A compiler that does not report its work: computed is unknown (-1), never
 * a made-up 0; allocated is still the cache's own count. */
static void test_work_not_reported(void **state) {
    (void)state;
    run_cache(false, -1, -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_stream),
        cmocka_unit_test(test_interp_stream),
        cmocka_unit_test(test_executable_that_computes_padding),
        cmocka_unit_test(test_work_not_reported),
    };
    return sj_run_tests(tests, NULL, NULL);
}
