/* The runtime-only build (-DSJ_COMPILERS=OFF), built and run by
 * scripts/test-runtime-only.sh: it compiles nothing and refuses host code,
 * each with a message that says what to do; GPU artifacts precompiled by a
 * full build (the store SJ_TEST_GPU_STORE, from the environment or the
 * build: examples/models/ffn.sjg at
 * list:8,32, targets host, nvptx and nvrtc for sm_90, nvptx for sm_80) load
 * up to the device: without a driver SJ_E_NO_DEVICE naming libcuda.so.1,
 * on a GPU the interpreter's results, eagerly and by replaying a CUDA graph,
 * from the cubin and from the PTX. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/skip.h"
#include "tests/test_util.h"

#include <math.h>

#include "shapejit/engine.h"
#include "shapejit/ext/backends.h"
#include "shapejit/ext/compile.h"
#include "shapejit/ext/interp.h"
#include "shapejit/model.h"
#include "shapejit/ext/runtime.h"

/* Where the store and the model are: the environment first (the pack that
 * scripts/gpu-check.sh carries to a GPU machine), else the build's. */
static const char *store_path(void) {
    const char *env = getenv("SJ_TEST_GPU_STORE");
#ifdef SJ_TEST_GPU_STORE
    if (!env || !env[0]) env = SJ_TEST_GPU_STORE;
#endif
    return env && env[0] ? env : NULL;
}

static void model_path(char *buf, size_t len) {
    const char *env = getenv("SJ_TEST_MODELS");
    snprintf(buf, len, "%s/ffn.sjg", env && env[0] ? env : SJ_SOURCE_DIR "/examples/models");
}

typedef struct fixture {
    sj_ctx *ctx;
    sj_graph *g;
    sj_store *store; /* the precompiled store; NULL when none was given */
    sj_device *gpu;  /* NULL without a driver or GPU */
    char why[512];   /* why there is no GPU */
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (!f || sj_ctx_create(NULL, &f->ctx) != SJ_OK) return -1;
    char model[4096];
    model_path(model, sizeof model);
    if (sj_model_load(f->ctx, model, NULL, &f->g) != SJ_OK) {
        printf("cannot load %s: %s\n", model, sj_ctx_last_error(f->ctx));
        return -1;
    }
    if (store_path()) {
        sj_store_config sc;
        sj_store_config_init(&sc);
        sc.path = store_path();
        if (sj_store_open(f->ctx, &sc, &f->store) != SJ_OK) {
            printf("cannot open %s: %s\n", sc.path, sj_ctx_last_error(f->ctx));
            return -1;
        }
    }
    sj_cuda_device_info info;
    if (sj_cuda_probe(f->ctx, NULL, &info) == SJ_OK &&
        sj_cuda_device_create(f->ctx, NULL, NULL, &f->gpu) == SJ_OK)
        printf("GPU: %s (sm_%d)\n", info.name, info.sm);
    else
        snprintf(f->why, sizeof f->why, "%s", sj_ctx_last_error(f->ctx));
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    sj_device_destroy(f->gpu);
    sj_store_close(f->store);
    sj_graph_destroy(f->g);
    sj_ctx_destroy(f->ctx);
    free(f);
    return 0;
}

#define NEED_STORE(f)                                                                              \
    do {                                                                                           \
        if (!(f)->store)                                                                           \
            SJ_SKIP("no precompiled store (set SJ_TEST_GPU_STORE or configure with "               \
                    "-DSJ_TEST_GPU_STORE=PATH, as scripts/test-runtime-only.sh does)");            \
    } while (0)

static void assert_error_has(sj_ctx *ctx, const char *needle) {
    const char *msg = sj_ctx_last_error(ctx);
    if (!strstr(msg, needle)) fail_msg("'%s' not in the error: %s", needle, msg);
}

/* The first row of the store whose target is the host, its key's strings
 * copied out of the listing. */
typedef struct host_row {
    sj_store_key key;
    char triple[SJ_STORE_FIELD_MAX], cpu[SJ_STORE_FIELD_MAX], features[SJ_STORE_FIELD_MAX],
        sv[SJ_STORE_FIELD_MAX], cv[SJ_STORE_FIELD_MAX];
    bool ok;
} host_row;

static int find_host_row(void *user, const sj_store_entry *e) {
    host_row *r = user;
    if (strncmp(e->key.target_triple, "x86_64", 6) != 0) return 0;
    r->key = e->key;
    snprintf(r->triple, sizeof r->triple, "%s", e->key.target_triple);
    snprintf(r->cpu, sizeof r->cpu, "%s", e->key.target_cpu);
    snprintf(r->features, sizeof r->features, "%s", e->key.target_features);
    snprintf(r->sv, sizeof r->sv, "%s", e->key.shapejit_version);
    snprintf(r->cv, sizeof r->cv, "%s", e->key.compiler_version);
    r->key.target_triple = r->triple;
    r->key.target_cpu = r->cpu;
    r->key.target_features = r->features;
    r->key.shapejit_version = r->sv;
    r->key.compiler_version = r->cv;
    r->ok = true;
    return 1;
}

/* The host backend, and host artifact bytes from the store, are refused.
 * The host backend is not in this build (backends/host.c is left out with
 * compile/), so it is asked for by name, as a user would. */
static void test_host_code_refused(void **state) {
    fixture *f = *state;
    char model[4096];
    model_path(model, sizeof model);
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.backend = "host";
    sj_engine *e = (sj_engine *)f;
    assert_int_equal(sj_engine_open(f->ctx, model, &cfg, &e), SJ_E_UNSUPPORTED);
    assert_null(e);
    assert_error_has(f->ctx, "host artifacts run on a full build");
    NEED_STORE(f);
    host_row row = {0};
    assert_int_equal(sj_store_ls(f->store, find_host_row, &row), SJ_OK);
    if (!row.ok) fail_msg("the store holds no host row (precompile --target all)");
    void *bytes;
    size_t len;
    assert_int_equal(sj_store_get(f->store, &row.key, &bytes, &len), SJ_OK);
    sj_artifact *a;
    assert_int_equal(sj_artifact_deserialize(f->ctx, bytes, len, &a), SJ_OK);
    assert_int_equal(sj_artifact_check_host(a), SJ_E_UNSUPPORTED);
    assert_error_has(f->ctx, "neither compiles nor loads host code");
    sj_device *host;
    assert_int_equal(sj_host_device_create(f->ctx, NULL, &host), SJ_OK);
    sj_executable *exe = NULL;
    assert_int_equal(sj_artifact_load(a, host, f->g, &exe), SJ_E_UNSUPPORTED);
    assert_null(exe);
    sj_device_destroy(host);
    sj_artifact_destroy(a);
    sj_free(f->ctx, bytes);
}

/* A cache over the GPU compiler of `target` (load-only here). */
typedef struct gpu_cache {
    sj_gpu_compiler *gc;
    sj_ladder *ladder;
    sj_bucketed_cache *c;
} gpu_cache;

static void gpu_cache_open(fixture *f, sj_target target, const char *arch, const char *spec,
                           sj_store *store, gpu_cache *out) {
    sj_gpu_compiler_config cfg;
    sj_gpu_compiler_config_init(&cfg);
    cfg.options.target = target;
    cfg.options.arch = arch;
    assert_int_equal(sj_gpu_compiler_create(f->ctx, &cfg, &out->gc), SJ_OK);
    sj_compiler comp;
    sj_gpu_compiler_table(out->gc, &comp);
    sj_bucketed_cache_config bc;
    sj_bucketed_cache_config_init(&bc);
    assert_int_equal(sj_ladder_parse(f->ctx, spec, &out->ladder), SJ_OK);
    assert_int_equal(sj_bucketed_cache_create(f->g, out->ladder, &comp, store, &bc, &out->c),
                     SJ_OK);
}

static void gpu_cache_close(gpu_cache *g) {
    sj_bucketed_cache_destroy(g->c);
    sj_ladder_destroy(g->ladder);
    sj_gpu_compiler_destroy(g->gc);
}

/* A bucket the store lacks (64; or any, with no store, or a store without
 * GPU rows) is "not precompiled", naming the precompile to run. */
static void test_missing_bucket_names_the_precompile(void **state) {
    fixture *f = *state;
    sj_store *stores[] = {NULL, f->store};
    for (int s = 0; s < 2; s++)
        for (int t = 0; t < 2; t++) {
            if (s == 1 && !f->store) continue;
            gpu_cache gcache;
            gpu_cache_open(f, t ? SJ_TARGET_NVRTC : SJ_TARGET_NVPTX, NULL, "list:8,32,64",
                           stores[s], &gcache);
            int64_t extent;
            void *exe = NULL;
            assert_int_equal(sj_bucketed_cache_get_or_compile(gcache.c, 50, &extent, &exe),
                             SJ_E_NOT_FOUND);
            assert_null(exe);
            assert_error_has(f->ctx, "not precompiled for sm_90: bucket extent 64");
            assert_error_has(f->ctx, t ? "--target nvrtc --arch sm_90` on a build machine"
                                       : "--target nvptx --arch sm_90` on a build machine");
            gpu_cache_close(&gcache);
        }
    NEED_STORE(f);
}

static bool close_enough(float got, float want) {
    return fabs((double)got - want) <= 1e-3 * (1.0 + fabs(want));
}

static void assert_outputs_equal(const sj_tensor *got, const sj_tensor *want, const char *what) {
    assert_int_equal(got->rank, want->rank);
    int64_t n = sj_tensor_numel(want);
    assert_int_equal(sj_tensor_numel(got), n);
    for (int64_t i = 0; i < n; i++)
        if (!close_enough(got->data[i], want->data[i]))
            fail_msg("%s: element %lld is %g, the interpreter says %g", what, (long long)i,
                     got->data[i], want->data[i]);
}

static void random_input(sj_ctx *ctx, const sj_graph *g, int64_t n, sj_tensor *t) {
    sj_value_desc d;
    sj_graph_input_desc(g, 0, &d);
    sj_shape s = sj_shape_at(&d.shape, n);
    assert_int_equal(sj_tensor_alloc(ctx, s.rank, s.dims, t), SJ_OK);
    uint32_t x = 12345u + (uint32_t)n;
    for (int64_t i = 0; i < sj_tensor_numel(t); i++) {
        x = x * 1664525u + 1013904223u;
        t->data[i] = (float)(x >> 8) / 8388608.0f - 1.0f;
    }
}

/* Stored buckets load up to the device: without one, SJ_E_NO_DEVICE naming
 * the driver library; with one, results equal the interpreter's, eager and
 * replayed, at several extents inside each bucket. */
static void test_stored_buckets_run_on_the_gpu(void **state) {
    fixture *f = *state;
    NEED_STORE(f);
    for (int t = 0; t < 2; t++) {
        gpu_cache gcache;
        gpu_cache_open(f, t ? SJ_TARGET_NVRTC : SJ_TARGET_NVPTX, NULL, "list:8,32", f->store,
                       &gcache);
        int64_t extent;
        void *exe = NULL;
        sj_status st = sj_bucketed_cache_get_or_compile(gcache.c, 20, &extent, &exe);
        if (!f->gpu) {
            assert_int_equal(st, SJ_E_NO_DEVICE);
            assert_error_has(f->ctx, "libcuda.so.1");
            sj_bucketed_cache_stats s;
            sj_bucketed_cache_stats_get(gcache.c, &s);
            assert_int_equal(s.compiles, 0);
            gpu_cache_close(&gcache);
            continue;
        }
        assert_int_equal(st, SJ_OK);
        static const int64_t rows[] = {1, 5, 8, 9, 20, 32};
        for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
            assert_int_equal(sj_bucketed_cache_get_or_compile(gcache.c, rows[i], &extent, &exe),
                             SJ_OK);
            sj_tensor in = {0}, want = {0}, eager = {0}, replay = {0};
            random_input(f->ctx, f->g, rows[i], &in);
            assert_int_equal(sj_interp_run(f->g, rows[i], &in, &want), SJ_OK);
            assert_int_equal(sj_executable_run(exe, rows[i], &in, &eager), SJ_OK);
            /* The compiler captures at a bucket's first run through the cache;
             * run directly, the test captures it. */
            if (!sj_executable_has_capture(exe)) assert_int_equal(sj_executable_capture(exe), SJ_OK);
            assert_true(sj_executable_has_capture(exe));
            assert_int_equal(sj_executable_replay(exe, rows[i], &in, &replay), SJ_OK);
            assert_outputs_equal(&eager, &want, "eager");
            assert_outputs_equal(&replay, &want, "replay");
            sj_tensor *ts[] = {&in, &want, &eager, &replay};
            for (int k = 0; k < 4; k++) sj_tensor_free(f->ctx, ts[k]);
        }
        sj_bucketed_cache_stats s;
        sj_bucketed_cache_stats_get(gcache.c, &s);
        assert_int_equal(s.compiles, 0);
        assert_int_equal(s.store_hits, 2);
        gpu_cache_close(&gcache);
    }
}

/* The stored artifacts' code loads as a module from the cubin and from the
 * PTX alone; an sm_80 artifact on another GPU falls back to its PTX. */
static void test_modules_from_cubin_and_ptx(void **state) {
    fixture *f = *state;
    NEED_STORE(f);
    if (!f->gpu) SJ_SKIP("no CUDA device: %s", f->why);
    static const char *const arches[] = {"sm_90", "sm_80"};
    for (int a = 0; a < 2; a++) {
        gpu_cache gcache;
        gpu_cache_open(f, SJ_TARGET_NVPTX, arches[a], "list:8,32", f->store, &gcache);
        sj_compiler comp;
        sj_gpu_compiler_table(gcache.gc, &comp);
        sj_store_key key;
        sj_bucketed_cache_key(f->g, &comp, 32, &key);
        void *bytes;
        size_t len;
        assert_int_equal(sj_store_get(f->store, &key, &bytes, &len), SJ_OK);
        sj_artifact *art;
        assert_int_equal(sj_artifact_deserialize(f->ctx, bytes, len, &art), SJ_OK);
        const uint8_t *cubin, *ptx;
        size_t cubin_len, ptx_len;
        assert_int_equal(sj_artifact_find_code(art, SJ_CODE_CUBIN, &cubin, &cubin_len), SJ_OK);
        assert_int_equal(sj_artifact_find_code(art, SJ_CODE_PTX, &ptx, &ptx_len), SJ_OK);
        sj_module *m;
        assert_int_equal(sj_cuda_load_code(f->gpu, NULL, 0, (const char *)ptx, ptx_len, &m), SJ_OK);
        sj_module_destroy(m);
        sj_status st = sj_cuda_load_code(f->gpu, cubin, cubin_len, NULL, 0, &m);
        sj_cuda_device_info info;
        assert_int_equal(sj_cuda_probe(f->ctx, NULL, &info), SJ_OK);
        int sm = a ? 80 : 90;
        bool fits = info.sm / 10 == sm / 10 && info.sm >= sm;
        assert_int_equal(st, fits ? SJ_OK : SJ_E_MISMATCH);
        if (st == SJ_OK) sj_module_destroy(m);
        assert_int_equal(
            sj_cuda_load_code(f->gpu, cubin, cubin_len, (const char *)ptx, ptx_len, &m), SJ_OK);
        sj_module_destroy(m);
        sj_artifact_destroy(art);
        sj_free(f->ctx, bytes);
        gpu_cache_close(&gcache);
    }
}

/* A driver library that is not there, or too old, is SJ_E_NO_DEVICE naming it. */
static void test_missing_driver_is_named(void **state) {
    fixture *f = *state;
    sj_cuda_device_config cfg;
    sj_cuda_device_config_init(&cfg);
    cfg.driver_path = "/nonexistent/libcuda.so.1";
    sj_cuda_device_info info;
    assert_int_equal(sj_cuda_probe(f->ctx, &cfg, &info), SJ_E_NO_DEVICE);
    assert_error_has(f->ctx, "/nonexistent/libcuda.so.1");
    sj_device *dev = (sj_device *)f;
    assert_int_equal(sj_cuda_device_create(f->ctx, &cfg, NULL, &dev), SJ_E_NO_DEVICE);
    assert_null(dev);
    /* A library without the driver's entry points stands for a driver too
     * old: the first missing one is named. */
    cfg.driver_path = "libm.so.6";
    assert_int_equal(sj_cuda_probe(f->ctx, &cfg, &info), SJ_E_NO_DEVICE);
    assert_error_has(f->ctx, "driver libm.so.6 lacks cuInit (driver too old for CUDA");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_code_refused),
        cmocka_unit_test(test_missing_bucket_names_the_precompile),
        cmocka_unit_test(test_stored_buckets_run_on_the_gpu),
        cmocka_unit_test(test_modules_from_cubin_and_ptx),
        cmocka_unit_test(test_missing_driver_is_named),
    };
    return sj_run_tests(tests, setup, teardown);
}
