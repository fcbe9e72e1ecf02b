/* sj_engine with backend cuda, on any machine: a store_only engine fills a
 * store with NVPTX and NVRTC code without a GPU; a loading engine then runs
 * from that store on a GPU (results equal the interpreter's, nothing
 * compiled), and where there is no GPU its open fails at once with one
 * message naming the backend and what is missing, leaving nothing open. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/skip.h"

#include <math.h>

#include "shapejit/engine.h"

#include "tests/skip.h"
#include "tests/test_util.h"

#define MODEL SJ_SOURCE_DIR "/examples/models/ffn.sjg"
#define ROWS  20

static alloc_counter counter;
static sj_ctx *ctx;
static char dir[256];

static sj_status open_engine(const char *backend, const char *emit, const char *store,
                             bool store_only, sj_engine **out) {
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.backend = backend;
    cfg.gpu_emit = emit;
    cfg.ladder = "list:8,32";
    cfg.store_path = store;
    cfg.store_only = store_only;
    return sj_engine_open(ctx, MODEL, &cfg, out);
}

/* The model's one output for ROWS seeded rows. */
static void run_rows(sj_engine *e, sj_tensor *y) {
    sj_value_desc d;
    assert_int_equal(sj_engine_input(e, 0, &d), SJ_OK);
    int64_t inner = d.shape.dims[1];
    float *x = malloc((size_t)(ROWS * inner) * sizeof *x);
    assert_non_null(x);
    for (int64_t i = 0; i < ROWS * inner; i++) x[i] = (float)(i % 17) / 17.0f - 0.5f;
    sj_named_tensor in = {d.name, {.rank = 2, .dims = {ROWS, inner}, .data = x}}, out = {0};
    sj_status st = sj_engine_run(e, &in, 1, &out, 1, NULL);
    if (st != SJ_OK) fail_msg("run: %s", sj_ctx_last_error(ctx));
    assert_int_equal(out.tensor.dims[0], ROWS);
    *y = out.tensor;
    free(x);
}

static void check_target(const char *emit) {
    char store[512];
    snprintf(store, sizeof store, "%s/%s.db", dir, emit);
    sj_engine *e;
    /* A build machine: compile and store, no GPU needed. */
    assert_int_equal(open_engine("cuda", emit, store, true, &e), SJ_OK);
    assert_int_equal(sj_engine_precompile(e, 2, NULL, NULL), SJ_OK);
    sj_engine_stats s;
    sj_engine_stats_get(e, &s);
    assert_int_equal(s.compiles, 2);
    assert_int_equal(s.buckets_ready, 0);
    assert_non_null(
        strstr(sj_engine_target(e), !strcmp(emit, "nvrtc") ? "nvrtc sm_90" : "nvptx sm_90"));
    sj_engine_close(e);

    long live = atomic_load(&counter.live);
    sj_engine *gpu = (sj_engine *)&gpu;
    sj_status st = open_engine("cuda", emit, store, false, &gpu);
    if (st != SJ_OK) {
        /* No GPU here: the open says so, and nothing stays open. */
        assert_int_equal(st, SJ_E_NO_DEVICE);
        assert_null(gpu);
        assert_error_contains(ctx, "backend cuda needs a GPU");
        assert_int_equal(atomic_load(&counter.live), live);
        return;
    }
    sj_engine *ref;
    assert_int_equal(open_engine("interp", NULL, NULL, false, &ref), SJ_OK);
    sj_tensor got, want;
    run_rows(gpu, &got);
    run_rows(ref, &want);
    for (int64_t i = 0; i < sj_tensor_numel(&want); i++)
        assert_true(fabsf(got.data[i] - want.data[i]) <= 1e-3f * (1.0f + fabsf(want.data[i])));
    sj_engine_stats_get(gpu, &s);
    assert_int_equal(s.compiles, 0);
    assert_int_equal(s.store_hits, 1);
    sj_tensor_free(ctx, &got);
    sj_tensor_free(ctx, &want);
    sj_engine_close(ref);
    sj_engine_close(gpu);
}

static void test_nvptx(void **state) {
    (void)state;
    check_target("llvm");
}

static void test_nvrtc(void **state) {
    (void)state;
    /* NVRTC is linked only when the build found the CUDA toolkit. */
    sj_engine *e;
    sj_status st = open_engine("cuda", "nvrtc", NULL, true, &e);
    if (st == SJ_E_UNSUPPORTED) {
        assert_error_contains(ctx, "backend cuda (nvrtc)");
        SJ_SKIP("built without the CUDA toolkit: %s", sj_ctx_last_error(ctx));
    }
    assert_int_equal(st, SJ_OK);
    sj_engine_close(e);
    check_target("nvrtc");
}

static int setup(void **state) {
    (void)state;
    ctx = ctx_with_counter(&counter);
    return ctx && scratch_dir_create(dir, sizeof dir, "gpu_engine") ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    remove_tree(dir);
    sj_ctx_destroy(ctx);
    return atomic_load(&counter.live) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_nvptx), cmocka_unit_test(test_nvrtc)};
    return sj_run_tests(tests, setup, teardown);
}
