/* Every failing call leaves a message of its own: each case below sets a
 * sentinel message first, makes a status-returning public function fail,
 * and checks the message changed (sj_ctx_last_error used to show an older,
 * unrelated one after about 90 bare-status error paths). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/core_impl.h"
#include "shapejit/ext/artifact.h"
#include "shapejit/ext/backends.h"
#include "shapejit/ext/bucketed_cache.h"
#include "shapejit/engine.h"
#include "shapejit/ext/interp.h"
#include "shapejit/ladder.h"
#include "shapejit/model.h"
#include "shapejit/ext/onnx.h"
#include "shapejit/ext/remote_tier.h"
#include "shapejit/remote.h"
#include "shapejit/store.h"
#include "shapejit/tensor.h"
#include "tests/test_util.h"

static sj_ctx *ctx;
static int n_checked;

#define SENTINEL "sentinel: an older failure"

#define EXPECT_FRESH(call)                                                                         \
    do {                                                                                           \
        sj__set_error(ctx, SENTINEL);                                                               \
        sj_status st_ = (call);                                                                    \
        const char *m_ = sj_ctx_last_error(ctx);                                                   \
        if (st_ == SJ_OK) fail_msg("%s succeeded", #call);                                         \
        if (!m_[0] || strstr(m_, SENTINEL))                                                        \
            fail_msg("%s: %s, but the message is '%s'", #call, sj_status_str(st_), m_);            \
        n_checked++;                                                                               \
    } while (0)

static int visit(void *user, const sj_store_entry *e) { return 0; }
static void explained(void *user, const sj_store_entry *e, unsigned differs) {}

static sj_store_key some_key(void) {
    sj_store_key k;
    memset(&k, 0, sizeof k);
    k.extent = 4;
    k.target_triple = "x86_64-pc-linux-gnu";
    k.target_cpu = "generic";
    k.target_features = "";
    k.artifact_version = 1;
    k.shapejit_version = "0";
    k.compiler_version = "test";
    return k;
}

static void test_models_and_files(void **state) {
    (void)state;
    sj_graph *g;
    sj_tensor t;
    sj_artifact *a;
    sj_ladder *l;
    sj_model_options o;
    sj_model_options_init(&o);
    EXPECT_FRESH(sj_sjg_parse(ctx, "graph {", 7, "t.sjg", NULL, &g));
    EXPECT_FRESH(sj_sjg_parse(ctx, NULL, 3, "t.sjg", NULL, &g));
    EXPECT_FRESH(sj_model_load(ctx, "/nonexistent/m.sjg", &o, &g));
    EXPECT_FRESH(sj_onnx_load_mem(ctx, "\xff\xff", 2, "m.onnx", &o, &g));
    EXPECT_FRESH(sj_onnx_tensor_read_mem(ctx, "\xff\xff", 2, "t.pb", &t));
    EXPECT_FRESH(sj_onnx_tensor_read(ctx, "/nonexistent/t.pb", &t));
    EXPECT_FRESH(sj_npy_read_mem(ctx, "xx", 2, "x.npy", &t));
    EXPECT_FRESH(sj_npy_read(ctx, "/nonexistent/x.npy", &t));
    EXPECT_FRESH(sj_tensor_alloc(ctx, 99, (int64_t[]){1}, &t));
    EXPECT_FRESH(sj_tensor_alloc(ctx, 1, (int64_t[]){1}, NULL));
    EXPECT_FRESH(sj_artifact_deserialize(ctx, "xx", 2, &a));
    EXPECT_FRESH(sj_ladder_parse(ctx, "bogus:1", &l));
    EXPECT_FRESH(sj_ladder_pow2(ctx, 0, 5, &l));
    EXPECT_FRESH(sj_ladder_pow2(ctx, 1, 5, NULL));
    EXPECT_FRESH(sj_ladder_list(ctx, NULL, 0, &l));
    EXPECT_FRESH(sj_graph_create(ctx, "N", NULL));
}

static void test_graphs(void **state) {
    (void)state;
    sj_graph *g;
    assert_int_equal(sj_graph_create(ctx, "N", &g), SJ_OK);
    sj_value x, w, y;
    assert_int_equal(sj_graph_input(g, "x", 2, (int64_t[]){SJ_DIM_SYM, 4}, &x), SJ_OK);
    float wd[6] = {0};
    assert_int_equal(sj_graph_param(g, "w", 2, (int64_t[]){3, 2}, wd, &w), SJ_OK);
    EXPECT_FRESH(sj_graph_matmul(g, x, w, &y));
    EXPECT_FRESH(sj_graph_matmul(g, x, w, NULL));
    EXPECT_FRESH(sj_graph_input(g, "x", 2, (int64_t[]){SJ_DIM_SYM, 4}, &y));
    EXPECT_FRESH(sj_graph_output(g, 12345, "nope"));
    EXPECT_FRESH(sj_graph_reshape(g, x, 1, (int64_t[]){7}, &y));
    EXPECT_FRESH(sj_graph_transpose(g, x, (int[]){0, 0}, &y));
    EXPECT_FRESH(sj_graph_clone(g, NULL));
    sj_ladder *l;
    assert_int_equal(sj_ladder_pow2(ctx, 1, 8, &l), SJ_OK);
    sj_bucketed_cache *c;
    sj_compiler comp;
    sj_interp_compiler(&comp);
    EXPECT_FRESH(sj_bucketed_cache_create(g, NULL, &comp, NULL, NULL, &c));
    EXPECT_FRESH(sj_bucketed_cache_create(g, l, &comp, NULL, NULL, NULL));
    assert_int_equal(sj_graph_output(g, x, "y"), SJ_OK);
    assert_int_equal(sj_bucketed_cache_create(g, l, &comp, NULL, NULL, &c), SJ_OK);
    int64_t extent;
    void *exe;
    EXPECT_FRESH(sj_bucketed_cache_get_or_compile(c, 9, &extent, &exe));
    EXPECT_FRESH(sj_bucketed_cache_precompile(c, 0, NULL, NULL));
    EXPECT_FRESH(sj_bucketed_cache_precompile_stored(c, 1, NULL, NULL));
    EXPECT_FRESH(sj_bucketed_cache_bucket(c, 99, NULL, NULL, NULL));
    EXPECT_FRESH(sj_bucketed_cache_run_padded(c, 2, 2, NULL, 1, NULL, 0, NULL, 1, NULL));
    sj_bucketed_cache_destroy(c);
    sj_ladder_destroy(l);
    sj_graph_destroy(g);
}

static void test_store_and_remote(void **state) {
    (void)state;
    sj_store_config cfg;
    sj_store_config_init(&cfg);
    sj_store *s;
    cfg.path = "";
    EXPECT_FRESH(sj_store_open(ctx, &cfg, &s));
    cfg.path = NULL;
    cfg.max_artifact_bytes = 0;
    EXPECT_FRESH(sj_store_open(ctx, &cfg, &s));
    EXPECT_FRESH(sj_store_open(ctx, NULL, &s));
    sj_store_config_init(&cfg);
    assert_int_equal(sj_store_open(ctx, &cfg, &s), SJ_OK);
    sj_store_key k = some_key();
    void *bytes;
    size_t len;
    int64_t n, m;
    EXPECT_FRESH(sj_store_get(s, &k, &bytes, &len));
    EXPECT_FRESH(sj_store_get(s, &k, NULL, NULL));
    EXPECT_FRESH(sj_store_get(s, NULL, &bytes, &len));
    EXPECT_FRESH(sj_store_put(s, NULL, "x", 1));
    EXPECT_FRESH(sj_store_put(s, &k, NULL, 5));
    EXPECT_FRESH(sj_store_stats_get(s, NULL));
    EXPECT_FRESH(sj_store_ls(s, NULL, NULL));
    EXPECT_FRESH(sj_store_rm_prefix(s, "zz", &n));
    EXPECT_FRESH(sj_store_rm_prefix(s, NULL, &n));
    EXPECT_FRESH(sj_store_rm(s, NULL, &n));
    EXPECT_FRESH(sj_store_export(s, NULL, NULL, &n));
    EXPECT_FRESH(sj_store_export(s, "/nonexistent/dir/x.sjs", NULL, &n));
    EXPECT_FRESH(sj_store_import(s, NULL, &n, &m));
    EXPECT_FRESH(sj_store_import(s, "/nonexistent/x.sjs", &n, &m));
    EXPECT_FRESH(sj_store_explain(s, &k, 0, explained, NULL));
    EXPECT_FRESH(sj_store_explain(s, NULL, 3, explained, NULL));
    EXPECT_FRESH(sj_tiered_get(s, NULL, &k, NULL, NULL, NULL));
    EXPECT_FRESH(sj_tiered_put(s, NULL, &k, NULL, 3));
    (void)visit;

    sj_remote_config rc;
    sj_remote_config_init(&rc);
    sj_remote *r;
    rc.url = "http://example";
    EXPECT_FRESH(sj_remote_create(ctx, &rc, &r));
    rc.url = "redis://127.0.0.1:1";
    rc.pool_size = 0;
    EXPECT_FRESH(sj_remote_create(ctx, &rc, &r));
    EXPECT_FRESH(sj_remote_create(ctx, NULL, &r));
    sj_remote_config_init(&rc);
    rc.url = "redis://127.0.0.1:1";
    rc.read_only = true;
    assert_int_equal(sj_remote_create(ctx, &rc, &r), SJ_OK);
    uint8_t key[SJ_REMOTE_KEY_SIZE] = {1};
    EXPECT_FRESH(sj_remote_get(r, key, NULL, NULL));
    EXPECT_FRESH(sj_remote_get(r, key, &bytes, &len)); /* nothing listens there */
    EXPECT_FRESH(sj_remote_put(r, NULL, "x", 1));
    sj_remote_destroy(r);
    sj_store_close(s);
}

static void test_engines_and_compilers(void **state) {
    (void)state;
    sj_engine_config ec;
    sj_engine_config_init(&ec);
    ec.store_path = NULL;
    sj_engine *e;
    EXPECT_FRESH(sj_engine_open(ctx, "/nonexistent/m.sjg", &ec, &e));
    EXPECT_FRESH(sj_engine_open(ctx, NULL, &ec, &e));
    EXPECT_FRESH(sj_engine_open(ctx, SJ_SOURCE_DIR "/examples/models/ffn.sjg", &ec, NULL));
    ec.ladder = "pow2:0:0";
    EXPECT_FRESH(sj_engine_open(ctx, SJ_SOURCE_DIR "/examples/models/ffn.sjg", &ec, &e));
    sj_host_compiler_config hc;
    sj_host_compiler_config_init(&hc);
    hc.devices = 0;
    sj_host_compiler *h;
    EXPECT_FRESH(sj_host_compiler_create(ctx, &hc, &h));
    EXPECT_FRESH(sj_host_compiler_create(ctx, NULL, NULL));
}

static void test_count(void **state) {
    (void)state;
    print_message("%d failing calls, each with a fresh message\n", n_checked);
    assert_true(n_checked >= 60);
}

static int setup(void **state) {
    (void)state;
    return sj_ctx_create(NULL, &ctx) == SJ_OK ? 0 : -1;
}
static int teardown(void **state) {
    (void)state;
    sj_ctx_destroy(ctx);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_models_and_files),
        cmocka_unit_test(test_graphs),
        cmocka_unit_test(test_store_and_remote),
        cmocka_unit_test(test_engines_and_compilers),
        cmocka_unit_test(test_count),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
