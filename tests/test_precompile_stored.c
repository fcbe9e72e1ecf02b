/* Precompile for another machine: sj_bucketed_cache_precompile_stored fills
 * the store without loading anything, and the GPU compiler table keys its
 * rows by (nvptx64-nvidia-cuda, arch, "") and its toolchain, compiling with
 * no GPU. Where there is no driver, loading fails with SJ_E_NO_DEVICE and
 * the stored rows are left alone (not counted corrupt, not recompiled). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "shapejit/ext/backends.h"
#include "shapejit/ext/bucketed_cache.h"
#include "shapejit/model.h"
#include "tests/test_util.h"

static sj_ctx *ctx;
static sj_graph *g;
static char dir[64], path[128];

static int setup(void **state) {
    (void)state;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return -1;
    sj_model_options mo;
    sj_model_options_init(&mo);
    if (sj_model_load(ctx, SJ_SOURCE_DIR "/examples/models/ffn.sjg", &mo, &g) != SJ_OK) return -1;
    if (!scratch_dir_create(dir, sizeof dir, "test_precompile_stored")) return -1;
    snprintf(path, sizeof path, "%s/store.db", dir);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    remove_tree(dir);
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
    return 0;
}

static int fresh_store(void **state) {
    (void)state;
    remove_tree(dir);
    return mkdir(dir, 0700);
}

static sj_store *open_store(void) {
    sj_store_config cfg;
    sj_store_config_init(&cfg);
    cfg.path = path;
    sj_store *s;
    if (sj_store_open(ctx, &cfg, &s) != SJ_OK) fail_msg("%s", sj_ctx_last_error(ctx));
    return s;
}

/* The interpreter's table with its loads counted. */
static atomic_int loads;
static sj_compiler interp;
static sj_status counting_load(void *c, const sj_graph *gr, int64_t extent, const void *art,
                               size_t len, void **exe) {
    atomic_fetch_add(&loads, 1);
    return interp.load(c, gr, extent, art, len, exe);
}

typedef struct rows {
    int n;
    int64_t extent_sum;
    bool all_gpu;
} rows;

static int count_row(void *user, const sj_store_entry *e) {
    rows *r = user;
    r->n++;
    r->extent_sum += e->key.extent;
    r->all_gpu = r->all_gpu && !strcmp(e->key.target_triple, "nvptx64-nvidia-cuda") &&
                 !strcmp(e->key.target_features, "");
    return 0;
}

static void test_stored_loads_nothing(void **state) {
    (void)state;
    sj_interp_compiler(&interp);
    sj_compiler comp = interp;
    comp.load = counting_load;
    atomic_store(&loads, 0);
    sj_ladder *l;
    assert_int_equal(sj_ladder_parse(ctx, "pow2:1:16", &l), SJ_OK);
    sj_store *s = open_store();
    sj_bucketed_cache *c;
    assert_int_equal(sj_bucketed_cache_create(g, l, &comp, s, NULL, &c), SJ_OK);
    assert_int_equal(sj_bucketed_cache_precompile_stored(c, 2, NULL, NULL), SJ_OK);
    sj_bucketed_cache_stats st;
    sj_bucketed_cache_stats_get(c, &st);
    assert_int_equal(st.compiles, 5);
    assert_int_equal(atomic_load(&loads), 0);
    assert_int_equal(sj_bucketed_cache_num_ready(c), 0);
    /* Again: every row is found, nothing compiled or loaded. */
    assert_int_equal(sj_bucketed_cache_precompile_stored(c, 2, NULL, NULL), SJ_OK);
    sj_bucketed_cache_stats_get(c, &st);
    assert_int_equal(st.compiles, 5);
    assert_int_equal(st.store_hits, 5);
    assert_int_equal(atomic_load(&loads), 0);
    /* A serving cache over the same store loads them without compiling. */
    sj_bucketed_cache *warm;
    assert_int_equal(sj_bucketed_cache_create(g, l, &comp, s, NULL, &warm), SJ_OK);
    assert_int_equal(sj_bucketed_cache_precompile(warm, 2, NULL, NULL), SJ_OK);
    sj_bucketed_cache_stats_get(warm, &st);
    assert_int_equal(st.compiles, 0);
    assert_int_equal(st.store_hits, 5);
    assert_int_equal(atomic_load(&loads), 5);
    sj_bucketed_cache_destroy(warm);
    sj_bucketed_cache_destroy(c);
    sj_store_close(s);
    sj_ladder_destroy(l);
}

static void test_stored_needs_somewhere_to_keep(void **state) {
    (void)state;
    sj_compiler comp;
    sj_interp_compiler(&comp);
    sj_ladder *l;
    assert_int_equal(sj_ladder_parse(ctx, "list:4", &l), SJ_OK);
    sj_bucketed_cache *c;
    assert_int_equal(sj_bucketed_cache_create(g, l, &comp, NULL, NULL, &c), SJ_OK);
    assert_int_equal(sj_bucketed_cache_precompile_stored(c, 1, NULL, NULL), SJ_E_STATE);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "needs a store or a remote tier"));
    sj_bucketed_cache_destroy(c);
    sj_ladder_destroy(l);
}

static void test_gpu_compiler_key_and_config(void **state) {
    (void)state;
    sj_gpu_compiler_config gcfg;
    sj_gpu_compiler_config_init(&gcfg);
    gcfg.options.arch = "sm_80";
    sj_gpu_compiler *gc;
    assert_int_equal(sj_gpu_compiler_create(ctx, &gcfg, &gc), SJ_OK);
    sj_compiler comp;
    sj_gpu_compiler_table(gc, &comp);
    assert_string_equal(comp.target_triple, "nvptx64-nvidia-cuda");
    assert_string_equal(comp.target_cpu, "sm_80");
    assert_string_equal(comp.target_features, "");
    assert_non_null(strstr(comp.compiler_version, "llvm-"));
    sj_gpu_compiler_destroy(gc);

    /* NULL arch is sm_90, spelled out so both share one key. */
    gcfg.options.arch = NULL;
    gcfg.options.target = SJ_TARGET_NVRTC;
    sj_status st = sj_gpu_compiler_create(ctx, &gcfg, &gc);
    if (st == SJ_OK) {
        sj_gpu_compiler_table(gc, &comp);
        assert_string_equal(comp.target_cpu, "sm_90");
        assert_non_null(strstr(comp.compiler_version, "nvrtc-"));
        sj_gpu_compiler_destroy(gc);
    } else { /* a build without the CUDA toolkit */
        assert_int_equal(st, SJ_E_UNSUPPORTED);
    }

    gcfg.options.target = SJ_TARGET_HOST;
    assert_int_equal(sj_gpu_compiler_create(ctx, &gcfg, &gc), SJ_E_INVALID_ARG);
    gcfg.options.target = SJ_TARGET_NVPTX;
    gcfg.options.arch = "sm_70";
    assert_int_equal(sj_gpu_compiler_create(ctx, &gcfg, &gc), SJ_E_UNSUPPORTED);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "sm_70"));
    sj_gpu_compiler_destroy(NULL);
}

/* GPU code into the store on a machine that may have no GPU; then a cache
 * that loads: on a GPU it runs from the store, without one it fails with
 * SJ_E_NO_DEVICE and leaves the rows as they were. */
static void test_gpu_precompile_without_device(void **state) {
    (void)state;
    sj_gpu_compiler *gc;
    assert_int_equal(sj_gpu_compiler_create(ctx, NULL, &gc), SJ_OK);
    sj_compiler comp;
    sj_gpu_compiler_table(gc, &comp);
    sj_ladder *l;
    assert_int_equal(sj_ladder_parse(ctx, "list:8,32", &l), SJ_OK);
    sj_store *s = open_store();
    sj_bucketed_cache *c;
    assert_int_equal(sj_bucketed_cache_create(g, l, &comp, s, NULL, &c), SJ_OK);
    assert_int_equal(sj_bucketed_cache_precompile_stored(c, 2, NULL, NULL), SJ_OK);
    sj_bucketed_cache_stats st;
    sj_bucketed_cache_stats_get(c, &st);
    assert_int_equal(st.compiles, 2);
    sj_bucketed_cache_destroy(c);
    rows r = {.all_gpu = true};
    assert_int_equal(sj_store_ls(s, count_row, &r), SJ_OK);
    assert_int_equal(r.n, 2);
    assert_int_equal(r.extent_sum, 40);
    assert_true(r.all_gpu);

    sj_device *dev;
    bool have_gpu = sj_gpu_compiler_device(gc, &dev) == SJ_OK;
    assert_int_equal(sj_bucketed_cache_create(g, l, &comp, s, NULL, &c), SJ_OK);
    int64_t extent;
    void *exe;
    sj_status run = sj_bucketed_cache_get_or_compile(c, 20, &extent, &exe);
    sj_bucketed_cache_stats_get(c, &st);
    if (have_gpu) {
        assert_int_equal(run, SJ_OK);
        assert_int_equal(extent, 32);
        assert_int_equal(st.store_hits, 1);
    } else {
        assert_int_equal(run, SJ_E_NO_DEVICE);
        assert_non_null(strstr(sj_ctx_last_error(ctx), "cuda"));
        assert_int_equal(st.store_hits, 0);
        assert_int_equal(st.corrupt, 0);
    }
    assert_int_equal(st.compiles, 0);
    sj_bucketed_cache_destroy(c);
    sj_store_close(s);
    sj_ladder_destroy(l);
    sj_gpu_compiler_destroy(gc);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_stored_loads_nothing, fresh_store),
        cmocka_unit_test(test_stored_needs_somewhere_to_keep),
        cmocka_unit_test(test_gpu_compiler_key_and_config),
        cmocka_unit_test_setup(test_gpu_precompile_without_device, fresh_store),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
