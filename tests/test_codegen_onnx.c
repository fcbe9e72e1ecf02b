/* The ONNX backend node tests through both GPU code paths, without a GPU
 * (so not named test_gpu_*): every graph the conformance runner builds is
 * lowered at a bucket above its extent, compiled by the NVPTX path (PTX ->
 * cubin with nvJitLink, and sm_80 PTX also through ptxas for sm_90) and by
 * NVRTC, the arch alternating per test, then answered by the interpreter, so
 * a test fails here exactly when GPU code generation does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/skip.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "shapejit/ext/interp.h"
#include "tools/conformance/conformance.h"
#include "compile/lower/lower.h"
#include "compile/gpu/gpu_compile.h"
#include "compile/gpu/gpu_schedule.h"
#include "tests/ptxas_check.h"

#define NODE_DIR "/usr/share/libonnx-testdata/data/node"
/* Pinned like the CLI conformance tests (tests/onnx.cmake): a graph that
 * stops compiling for the GPU, or a new pass nobody pinned, fails here. */
#define GPU_PASSED 342
/* The models with a dynamic dim (tests/data/onnx/models), every one. */
#define MODELS_DIR SJ_SOURCE_DIR "/tests/data/onnx/models"
#define MODELS_PASSED 8

static int setup(void **state) {
    sj_ctx *ctx;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return -1;
    *state = ctx;
    return 0;
}
static int teardown(void **state) {
    sj_ctx_destroy(*state);
    return 0;
}

typedef struct onnx_codegen {
    sj_ctx *ctx;
    int count;
} onnx_codegen;

/* Strictly above `extent`, as the host conformance backend compiles. */
static int64_t bucket_above(int64_t extent) {
    int64_t b = 1;
    while (b <= extent && b < SJ_MAX_EXTENT) b *= 2;
    return b > extent ? b : extent;
}

static sj_status codegen_run(void *user, const sj_graph *g, int64_t extent, const sj_tensor *inputs,
                             sj_tensor *outputs) {
    onnx_codegen *oc = user;
    sj_ctx *ctx = oc->ctx;
    int64_t E = sj_graph_symbol(g) ? bucket_above(extent) : extent;
    int which = oc->count++;
    for (int p = 0; p < 2; p++) {
        sj_gpu_path path = p ? SJ_GPU_PATH_NVRTC : SJ_GPU_PATH_NVPTX;
#ifndef SJ_HAVE_CUDA
        if (path == SJ_GPU_PATH_NVRTC) continue;
#endif
        int sm = (which + p) % 2 ? 90 : 80;
        sj_lowered *l;
        sj_lower_options lo = {.fusion = true, .prefix = "sj_"};
        SJ_TRY(sj__lower(g, E, &lo, &l));
        sj_gpu_code code;
        sj_status st = sj__gpu_schedule_plan(ctx, l->kernels, l->n_kernels, &l->plan);
        if (st == SJ_OK) st = sj__gpu_compile_lowered(ctx, l, path, sm, true, &code, NULL);
        sj__lowered_destroy(l);
        SJ_TRY(st);
        /* nvJitLink has assembled the PTX for its own arch already (the
         * cubin); sm_80 PTX must also assemble for sm_90 */
        char log[2048];
        int rc = 0;
        if (path == SJ_GPU_PATH_NVPTX && sm == 80 && sj_test_have_ptxas())
            rc = sj_test_ptxas(code.ptx, 90, log, sizeof log);
        sj__gpu_code_free(ctx, &code);
        if (rc != 0) return sj_fail(ctx, SJ_E_COMPILE, "ptxas rejected the PTX: %s", log);
    }
    return sj_interp_run(g, extent, inputs, outputs);
}

static void report_failure(void *user, const sj_onnx_test_result *r) {
    (void)user;
    if (r->outcome == SJ_ONNX_TEST_FAILED) printf("  %s: %s\n", r->name, r->message);
}

static void test_onnx_node_tests(void **state) {
    sj_ctx *ctx = *state;
    struct stat sb;
    if (stat(NODE_DIR, &sb) != 0) {
        SJ_SKIP("no ONNX node tests at %s (Debian: libonnx-testdata)", NODE_DIR);
    }
    sj_onnx_conformance_options o;
    sj_onnx_conformance_options_init(&o);
    o.report = report_failure;
    sj_onnx_conformance_summary gpu;
    onnx_codegen oc = {.ctx = ctx};
    sj_onnx_backend gb = {"gpu-codegen", codegen_run, NULL, &oc};
    assert_int_equal(sj_onnx_conformance_run(ctx, NODE_DIR, &gb, &o, &gpu), SJ_OK);
    printf("ONNX node tests, GPU code generation: %d passed, %d failed, %d unsupported "
           "(%d graphs compiled by both paths)\n",
           gpu.passed, gpu.failed, gpu.unsupported, oc.count);
    /* every graph the runner builds must compile for the GPU */
    assert_int_equal(gpu.failed, 0);
    assert_int_equal(gpu.passed, GPU_PASSED);
}

/* Real-model pieces (slices, einsum, trilu, RMSNorm, rotary) through both
 * GPU paths at buckets above each data set's extent. */
static void test_dynamic_models(void **state) {
    sj_ctx *ctx = *state;
    sj_onnx_conformance_options o;
    sj_onnx_conformance_options_init(&o);
    o.report = report_failure;
    sj_onnx_conformance_summary sum;
    onnx_codegen oc = {.ctx = ctx};
    sj_onnx_backend gb = {"gpu-codegen", codegen_run, NULL, &oc};
    assert_int_equal(sj_onnx_conformance_run(ctx, MODELS_DIR, &gb, &o, &sum), SJ_OK);
    printf("dynamic models, GPU code generation: %d passed, %d failed, %d unsupported\n",
           sum.passed, sum.failed, sum.unsupported);
    assert_int_equal(sum.failed, 0);
    assert_int_equal(sum.unsupported, 0);
    assert_int_equal(sum.passed, MODELS_PASSED);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_onnx_node_tests),
        cmocka_unit_test(test_dynamic_models),
    };
    return sj_run_tests(tests, setup, teardown);
}
