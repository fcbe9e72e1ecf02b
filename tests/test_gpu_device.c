/* The CUDA device on a real GPU (ctest label `gpu`): graphs compiled by both
 * GPU paths run on it and match the interpreter at several extents of a
 * bucket; replaying a captured bucket equals eager launches; modules load
 * from cubin and from PTX, and a cubin of another arch falls back to PTX.
 * Where no driver or GPU is present every test skips saying why, and the
 * program exits 77 (ctest: Skipped, not Passed). The no-driver error, which
 * needs no GPU, is test_cuda_no_driver's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/skip.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "shapejit/ext/compile.h"
#include "shapejit/ext/cuda_device.h"
#include "shapejit/ext/interp.h"
#include "tools/conformance/conformance.h"
#include "shapejit/ext/device.h"
#include "shapejit/ext/runtime.h"
#include "compile/gpu/nvrtc_impl.h"
#include "tests/gpu_graphs.h"

#define N_RANDOM 8
#define TOL 1e-3
#define NODE_DIR "/usr/share/libonnx-testdata/data/node"

typedef struct fixture {
    sj_ctx *ctx;
    sj_device *dev;
    sj_cuda_device_info info;
    int sm; /* the arch compiled for: the device's when it is 80 or 90 */
    char why[512]; /* why there is no device */
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (!f || sj_ctx_create(NULL, &f->ctx) != SJ_OK) return -1;
    if (sj_cuda_probe(f->ctx, NULL, &f->info) == SJ_OK &&
        sj_cuda_device_create(f->ctx, NULL, NULL, &f->dev) == SJ_OK) {
        f->sm = f->info.sm == 80 || f->info.sm == 90 ? f->info.sm : 80;
        printf("GPU: %s (sm_%d, %d SMs, driver %d), compiling for sm_%d\n", f->info.name,
               f->info.sm, f->info.multiprocessors, f->info.driver_version, f->sm);
    } else {
        snprintf(f->why, sizeof f->why, "%s", sj_ctx_last_error(f->ctx));
        printf("no CUDA device, GPU tests skip: %s\n", f->why);
    }
    *state = f;
    return 0;
}
static int teardown(void **state) {
    fixture *f = *state;
    sj_device_destroy(f->dev);
    sj_ctx_destroy(f->ctx);
    free(f);
    return 0;
}

#define NEED_GPU(f)                                                                                \
    do {                                                                                           \
        if (!(f)->dev) SJ_SKIP("no CUDA device: %s", (f)->why);                                   \
    } while (0)

static int close_enough(float got, float want) {
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got)) return got == want;
    return fabs((double)got - want) <= TOL * (1.0 + fabs(want));
}

static void free_all(sj_ctx *ctx, sj_tensor *t, int n) {
    for (int i = 0; i < n; i++) sj_tensor_free(ctx, &t[i]);
}

static void random_inputs(const sj_graph *g, int64_t n, uint64_t *seed, sj_tensor *in) {
    for (int i = 0; i < sj_graph_num_inputs(g); i++) {
        sj_value_desc d;
        assert_int_equal(sj_graph_input_desc(g, i, &d), SJ_OK);
        sj_shape at = sj_shape_at(&d.shape, n);
        assert_int_equal(sj_tensor_alloc(sj_graph_ctx(g), at.rank, at.dims, &in[i]), SJ_OK);
        for (int64_t j = 0; j < sj_tensor_numel(&in[i]); j++) in[i].data[j] = gg_uniform(seed, -2, 2);
    }
}

/* Runs exe eagerly and by replay at each extent; both match the interpreter
 * and replay matches eager exactly. */
static void check_executable(fixture *f, sj_executable *exe, const sj_graph *g, const int64_t *ns,
                             int n_ns, uint64_t seed, const char *what) {
    int n_in = sj_graph_num_inputs(g), n_out = sj_graph_num_outputs(g);
    assert_int_equal(sj_executable_capture(exe), SJ_OK);
    for (int i = 0; i < n_ns; i++) {
        sj_tensor in[8] = {0}, want[8] = {0}, eager[8] = {0}, replay[8] = {0};
        assert_true(n_in <= 8 && n_out <= 8);
        random_inputs(g, ns[i], &seed, in);
        assert_int_equal(sj_interp_run(g, ns[i], in, want), SJ_OK);
        sj_status st = sj_executable_run(exe, ns[i], in, eager);
        if (st != SJ_OK) fail_msg("%s at n=%lld: run: %s", what, (long long)ns[i], sj_ctx_last_error(f->ctx));
        st = sj_executable_replay(exe, ns[i], in, replay);
        if (st != SJ_OK) fail_msg("%s at n=%lld: replay: %s", what, (long long)ns[i], sj_ctx_last_error(f->ctx));
        for (int o = 0; o < n_out; o++) {
            int64_t count = sj_tensor_numel(&want[o]);
            assert_int_equal(sj_tensor_numel(&eager[o]), count);
            for (int64_t j = 0; j < count; j++) {
                if (!close_enough(eager[o].data[j], want[o].data[j]))
                    fail_msg("%s at n=%lld: output %d [%lld]: gpu %.9g, interpreter %.9g", what,
                             (long long)ns[i], o, (long long)j, eager[o].data[j], want[o].data[j]);
                if (memcmp(&eager[o].data[j], &replay[o].data[j], sizeof(float)) != 0)
                    fail_msg("%s at n=%lld: output %d [%lld]: replay %.9g, eager %.9g", what,
                             (long long)ns[i], o, (long long)j, replay[o].data[j], eager[o].data[j]);
            }
        }
        free_all(f->ctx, in, n_in);
        free_all(f->ctx, want, n_out);
        free_all(f->ctx, eager, n_out);
        free_all(f->ctx, replay, n_out);
    }
}

static void run_graph(fixture *f, const sj_graph *g, int64_t E, sj_target target, bool fusion,
                      uint64_t seed, const char *name) {
    sj_compile_options o;
    sj_compile_options_init(&o);
    o.target = target;
    o.fusion = fusion;
    o.arch = f->sm == 80 ? "sm_80" : "sm_90";
    char what[128];
    snprintf(what, sizeof what, "%s (E=%lld, %s%s)", name, (long long)E,
             target == SJ_TARGET_NVPTX ? "nvptx" : "nvrtc", fusion ? "" : ", unfused");
    sj_artifact *a;
    if (sj_compile(g, E, &o, &a) != SJ_OK) fail_msg("%s: compile: %s", what, sj_ctx_last_error(f->ctx));
    sj_executable *exe;
    if (sj_artifact_load(a, f->dev, g, &exe) != SJ_OK)
        fail_msg("%s: load: %s", what, sj_ctx_last_error(f->ctx));
    int64_t ns[4] = {E, E / 2 + 1, 1, 1 + (int64_t)(gg_rng(&seed) % (uint64_t)E)};
    check_executable(f, exe, g, ns, E > 1 ? 4 : 1, seed, what);
    sj_executable_destroy(exe);
    sj_artifact_destroy(a);
}

static void test_models_both_paths(void **state) {
    fixture *f = *state;
    NEED_GPU(f);
    for (int i = 0; i < GG_N_MODELS; i++) {
        sj_graph *g = NULL;
        const char *name = "";
        assert_int_equal(gg_build(f->ctx, i, 3, &g, &name), SJ_OK);
        run_graph(f, g, 64, SJ_TARGET_NVPTX, true, 11, name);
        run_graph(f, g, 64, SJ_TARGET_NVRTC, true, 12, name);
        run_graph(f, g, 1, i % 2 ? SJ_TARGET_NVPTX : SJ_TARGET_NVRTC, true, 13, name);
        sj_graph_destroy(g);
    }
}

static void test_random_graphs_both_paths(void **state) {
    fixture *f = *state;
    NEED_GPU(f);
    for (int i = 0; i < N_RANDOM; i++) {
        sj_graph *g = NULL;
        const char *name = "";
        assert_int_equal(gg_build(f->ctx, GG_N_MODELS + i, 5, &g, &name), SJ_OK);
        char what[32];
        snprintf(what, sizeof what, "random graph %d", i);
        int64_t E = (int64_t)1 << (i % 8);
        run_graph(f, g, E, SJ_TARGET_NVPTX, i % 3 != 2, 20 + (uint64_t)i, what);
        run_graph(f, g, E, SJ_TARGET_NVRTC, i % 3 != 2, 40 + (uint64_t)i, what);
        sj_graph_destroy(g);
    }
}

/* A larger FFN bucket: grids of many blocks, grid-stride loops, k tiles. */
static void test_large_bucket(void **state) {
    fixture *f = *state;
    NEED_GPU(f);
    gg b = {.seed = 99};
    assert_int_equal(sj_graph_create(f->ctx, "N", &b.g), SJ_OK);
    gg_ffn_dims(&b, 96, 200);
    assert_int_equal(b.st, SJ_OK);
    run_graph(f, b.g, 512, SJ_TARGET_NVPTX, true, 7, "ffn 96x200");
    run_graph(f, b.g, 512, SJ_TARGET_NVRTC, true, 8, "ffn 96x200");
    sj_graph_destroy(b.g);
}

static const char *twice_src =
    "extern \"C\" __global__ void twice(void *const *buffers, const long long *info, long long n) {\n"
    "    float *y = (float *)buffers[0];\n"
    "    const float *x = (const float *)buffers[1];\n"
    "    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
    "    if (i < n) y[i] = 2.0f * x[i];\n"
    "}\n";

/* Launches `twice` from module m over 100 elements through the device API. */
static void launch_twice(fixture *f, sj_module *m) {
    sj_kernel_handle k;
    sj_kernel_attrs attrs;
    assert_int_equal(sj_module_kernel(m, "twice", &k, &attrs), SJ_OK);
    assert_true(attrs.max_threads >= 128);
    float host[100], back[100];
    for (int i = 0; i < 100; i++) host[i] = (float)i;
    void *x, *y, *table;
    assert_int_equal(sj_device_alloc(f->dev, sizeof host, &x), SJ_OK);
    assert_int_equal(sj_device_alloc(f->dev, sizeof host, &y), SJ_OK);
    assert_int_equal(sj_device_alloc(f->dev, 2 * sizeof(void *), &table), SJ_OK);
    void *ptrs[2] = {y, x};
    assert_int_equal(sj_device_copy(f->dev, x, host, sizeof host, SJ_COPY_H2D), SJ_OK);
    assert_int_equal(sj_device_copy(f->dev, table, ptrs, sizeof ptrs, SJ_COPY_H2D), SJ_OK);
    sj_launch_dims dims = {{1, 1, 1}, {128, 1, 1}, 0};
    assert_int_equal(sj_device_launch(f->dev, k, &dims, table, NULL, 100), SJ_OK);
    assert_int_equal(sj_device_sync(f->dev), SJ_OK);
    assert_int_equal(sj_device_copy(f->dev, back, y, sizeof back, SJ_COPY_D2H), SJ_OK);
    for (int i = 0; i < 100; i++) assert_true(back[i] == 2.0f * (float)i);
    sj_device_free(f->dev, x);
    sj_device_free(f->dev, y);
    sj_device_free(f->dev, table);
}

static void test_module_from_cubin_and_ptx(void **state) {
    fixture *f = *state;
    NEED_GPU(f);
    sj_gpu_code code;
    assert_int_equal(sj__nvrtc_compile(f->ctx, twice_src, "twice.cu", f->sm, &code), SJ_OK);
    sj_module *m;
    if (f->info.sm == f->sm) {
        assert_int_equal(sj_device_load_module(f->dev, SJ_CODE_CUBIN, code.cubin, code.cubin_len, &m), SJ_OK);
        launch_twice(f, m);
        sj_module_destroy(m);
    }
    assert_int_equal(sj_device_load_module(f->dev, SJ_CODE_PTX, code.ptx, code.ptx_len, &m), SJ_OK);
    launch_twice(f, m);
    sj_module_destroy(m);
    /* garbage PTX: the driver's JIT log comes back as a compile error */
    const char *bad = ".version 7.8\n.target sm_80\n.address_size 64\n.visible .entry twice() { bogus; }\n";
    assert_int_equal(sj_device_load_module(f->dev, SJ_CODE_PTX, bad, strlen(bad), &m), SJ_E_COMPILE);
    sj__gpu_code_free(f->ctx, &code);
}

/* A cubin for the other supported arch is refused by the device and the
 * loader falls back to the PTX next to it. */
static void test_arch_mismatch_falls_back_to_ptx(void **state) {
    fixture *f = *state;
    NEED_GPU(f);
    int other = f->info.sm == 90 ? 80 : 90;
    sj_gpu_code code;
    assert_int_equal(sj__nvrtc_compile(f->ctx, twice_src, "twice.cu", other, &code), SJ_OK);
    sj_module *m;
    assert_int_equal(sj_device_load_module(f->dev, SJ_CODE_CUBIN, code.cubin, code.cubin_len, &m),
                     SJ_E_MISMATCH);
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "PTX"));
    assert_int_equal(sj_cuda_load_code(f->dev, code.cubin, code.cubin_len, NULL, 0, &m), SJ_E_MISMATCH);
    sj__gpu_code_free(f->ctx, &code);
    /* PTX for sm_80 JITs on any newer GPU */
    assert_int_equal(sj__nvrtc_compile(f->ctx, twice_src, "twice.cu", 80, &code), SJ_OK);
    if (f->info.sm != 80) {
        assert_int_equal(sj_cuda_load_code(f->dev, code.cubin, code.cubin_len, code.ptx, code.ptx_len, &m),
                         SJ_OK);
        launch_twice(f, m);
        sj_module_destroy(m);
    }
    sj__gpu_code_free(f->ctx, &code);
}

static void test_host_code_is_refused(void **state) {
    fixture *f = *state;
    NEED_GPU(f);
    sj_module *m;
    const char obj[] = "\x7f" "ELF not for a GPU";
    assert_int_equal(sj_device_load_module(f->dev, SJ_CODE_HOST_OBJECT, obj, sizeof obj, &m),
                     SJ_E_UNSUPPORTED);
    assert_int_equal(sj_device_load_module(f->dev, SJ_CODE_CUBIN, obj, sizeof obj, &m), SJ_E_PARSE);
}

/* ---- ONNX backend node tests on the GPU, for both paths: every test the
 * host backend passes must pass on the CUDA device too. As on the host, a
 * graph with a symbolic dim is compiled at a bucket above the active extent,
 * so padded rows are checked as well. */

typedef struct cuda_backend {
    fixture *f;
    sj_target target;
} cuda_backend;

static int64_t bucket_above(int64_t extent) {
    int64_t b = 1;
    while (b <= extent && b < SJ_MAX_EXTENT) b *= 2;
    return b > extent ? b : extent;
}

static sj_status cuda_run(void *user, const sj_graph *g, int64_t extent, const sj_tensor *inputs,
                          sj_tensor *outputs) {
    cuda_backend *cb = user;
    sj_compile_options o;
    sj_compile_options_init(&o);
    o.target = cb->target;
    o.arch = cb->f->sm == 80 ? "sm_80" : "sm_90";
    sj_artifact *a;
    SJ_TRY(sj_compile(g, sj_graph_symbol(g) ? bucket_above(extent) : extent, &o, &a));
    sj_executable *exe;
    sj_status st = sj_artifact_load(a, cb->f->dev, g, &exe);
    if (st == SJ_OK) {
        for (int i = 0; i < sj_graph_num_outputs(g); i++) outputs[i].data = NULL;
        st = sj_executable_run(exe, extent, inputs, outputs);
        sj_executable_destroy(exe);
    }
    sj_artifact_destroy(a);
    return st;
}

#define MAX_PASSED 2048

typedef struct pass_list {
    char *names[MAX_PASSED];
    int n;
} pass_list;

static void record(void *user, const sj_onnx_test_result *r) {
    pass_list *pl = user;
    if (r->outcome == SJ_ONNX_TEST_PASSED && pl->n < MAX_PASSED) pl->names[pl->n++] = strdup(r->name);
    if (r->outcome == SJ_ONNX_TEST_FAILED) printf("  %s: %s\n", r->name, r->message);
}

static int listed(const pass_list *pl, const char *name) {
    for (int i = 0; i < pl->n; i++)
        if (!strcmp(pl->names[i], name)) return 1;
    return 0;
}

static void free_list(pass_list *pl) {
    for (int i = 0; i < pl->n; i++) free(pl->names[i]);
    pl->n = 0;
}

/* A kernel that faults for real (a store to address 0): the device reports
 * SJ_E_DEVICE_LOST, resets its context, refuses the old module's kernels
 * and runs a model as before (the real driver's side of what
 * test_cuda_fault checks on the fake one). */
static const char fault_ptx[] = ".version 7.0\n.target sm_80\n.address_size 64\n"
                                ".visible .entry sj_fault(.param .u64 b, .param .u64 i, "
                                ".param .u64 n)\n{\n .reg .u64 %a;\n mov.u64 %a, 0;\n"
                                " st.volatile.global.u32 [%a], 1;\n ret;\n}\n";

static void test_fault_resets_the_device(void **state) {
    fixture *f = *state;
    NEED_GPU(f);
    sj_module *m;
    assert_int_equal(sj_device_load_module(f->dev, SJ_CODE_PTX, fault_ptx, sizeof fault_ptx, &m),
                     SJ_OK);
    sj_kernel_handle k;
    assert_int_equal(sj_module_kernel(m, "sj_fault", &k, NULL), SJ_OK);
    sj_launch_dims dims = {{1, 1, 1}, {1, 1, 1}, 0};
    uint64_t gen = sj_device_generation(f->dev), resets = sj_device_resets(f->dev);
    sj_status st = sj_device_launch(f->dev, k, &dims, NULL, NULL, 1);
    if (st == SJ_OK) st = sj_device_sync(f->dev);
    if (st != SJ_E_DEVICE_LOST)
        fail_msg("a store to address 0: %s (%s)", sj_status_str(st), sj_ctx_last_error(f->ctx));
    printf("fault: %s\n", sj_ctx_last_error(f->ctx));
    assert_int_equal(sj_device_generation(f->dev), gen + 1);
    assert_int_equal(sj_device_resets(f->dev), resets + 1);
    assert_int_equal(sj_module_kernel(m, "sj_fault", &k, NULL), SJ_E_STATE);
    sj_module_destroy(m);
    sj_graph *g = NULL;
    const char *name = "";
    assert_int_equal(gg_build(f->ctx, 0, 3, &g, &name), SJ_OK);
    run_graph(f, g, 64, SJ_TARGET_NVPTX, true, 5, name);
    sj_graph_destroy(g);
}

static void test_onnx_conformance_both_paths(void **state) {
    fixture *f = *state;
    NEED_GPU(f);
    struct stat sb;
    if (stat(NODE_DIR, &sb) != 0) {
        SJ_SKIP("no ONNX node tests at %s (Debian: libonnx-testdata)", NODE_DIR);
    }
    static pass_list host, gpu;
    sj_onnx_conformance_options o;
    sj_onnx_conformance_options_init(&o);
    o.report = record;
    sj_onnx_conformance_summary hs, gs;
    sj_onnx_backend hb;
    assert_int_equal(sj_onnx_backend_host_create(f->ctx, &hb), SJ_OK);
    o.report_user = &host;
    assert_int_equal(sj_onnx_conformance_run(f->ctx, NODE_DIR, &hb, &o, &hs), SJ_OK);
    sj_onnx_backend_destroy(&hb);
    static const sj_target targets[] = {SJ_TARGET_NVPTX, SJ_TARGET_NVRTC};
    for (int t = 0; t < 2; t++) {
        cuda_backend cb = {f, targets[t]};
        sj_onnx_backend b = {t ? "cuda-nvrtc" : "cuda-nvptx", cuda_run, NULL, &cb};
        o.report_user = &gpu;
        assert_int_equal(sj_onnx_conformance_run(f->ctx, NODE_DIR, &b, &o, &gs), SJ_OK);
        printf("ONNX node tests on %s: %d passed, %d failed, %d unsupported (host: %d passed)\n",
               b.name, gs.passed, gs.failed, gs.unsupported, hs.passed);
        for (int i = 0; i < host.n; i++)
            if (!listed(&gpu, host.names[i]))
                fail_msg("%s: %s passes on the host backend but not on the GPU", b.name, host.names[i]);
        free_list(&gpu);
    }
    free_list(&host);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_module_from_cubin_and_ptx),
        cmocka_unit_test(test_arch_mismatch_falls_back_to_ptx),
        cmocka_unit_test(test_host_code_is_refused),
        cmocka_unit_test(test_models_both_paths),
        cmocka_unit_test(test_random_graphs_both_paths),
        cmocka_unit_test(test_large_bucket),
        cmocka_unit_test(test_onnx_conformance_both_paths),
        cmocka_unit_test(test_fault_resets_the_device),
    };
    return sj_run_tests(tests, setup, teardown);
}
