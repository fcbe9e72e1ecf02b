/* Both GPU emitters on the model blocks and the random graphs, without a
 * GPU (so not named test_gpu_*, which would label it `gpu`): NVRTC compiles
 * every CUDA C source, every PTX the NVPTX path makes assembles with ptxas
 * and links to a cubin, for sm_80 and sm_90 (the models at the full bucket
 * for both; the one-element bucket and the random graphs alternate arches
 * to keep the suite fast); both define every kernel of the plan, and every
 * launch has a geometry. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/skip.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "shapejit/ext/compile.h"
#include "compile/lower/lower.h"
#include "compile/gpu/gpu_compile.h"
#include "compile/gpu/gpu_schedule.h"
#include "tests/gpu_graphs.h"
#include "tests/ptxas_check.h"

#define N_RANDOM 8

typedef struct fixture {
    sj_ctx *ctx;
    int ptxas_runs;
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (!f || sj_ctx_create(NULL, &f->ctx) != SJ_OK) return -1;
    *state = f;
    return 0;
}
static int teardown(void **state) {
    fixture *f = *state;
    sj_ctx_destroy(f->ctx);
    free(f);
    return 0;
}

static int defines_entry(const char *ptx, const char *name) {
    char needle[SJ_KERNEL_NAME_MAX + 16];
    snprintf(needle, sizeof needle, ".entry %s(", name);
    return strstr(ptx, needle) != NULL;
}

static void check_code(fixture *f, const sj_lowered *l, const sj_gpu_code *code, sj_gpu_path path,
                       const char *what) {
    for (int i = 0; i < l->n_kernels; i++)
        if (!defines_entry(code->ptx, l->kernels[i].name))
            fail_msg("%s: PTX lacks kernel %s", what, l->kernels[i].name);
    for (int i = 0; i < l->plan.n_launches; i++) {
        const sj_launch *la = &l->plan.launches[i];
        assert_true(la->grid[0] >= 1 && la->grid[1] >= 1 && la->grid[2] >= 1);
        assert_true(la->block[0] * la->block[1] * la->block[2] >= 32);
    }
#ifdef SJ_HAVE_NVJITLINK
    assert_non_null(code->cubin);
    assert_true(code->cubin_len > 4 && memcmp(code->cubin, "\x7f" "ELF", 4) == 0);
#endif
    if (path == SJ_GPU_PATH_NVPTX && sj_test_have_ptxas()) {
        char log[4096];
        int rc = sj_test_ptxas(code->ptx, code->sm, log, sizeof log);
        if (rc != 0) fail_msg("%s: ptxas -arch=sm_%d (rc %d): %s", what, code->sm, rc, log);
        f->ptxas_runs++;
    }
}

/* Lowers g at E and compiles it by both paths for the arches in `arches`
 * (bit 0: sm_80, bit 1: sm_90). */
static void compile_everything(fixture *f, const sj_graph *g, int64_t E, bool fusion,
                               unsigned arches, const char *name) {
    static const sj_gpu_path paths[] = {SJ_GPU_PATH_NVPTX, SJ_GPU_PATH_NVRTC};
    static const int sms[] = {80, 90};
    for (int p = 0; p < 2; p++) {
#ifndef SJ_HAVE_CUDA
        if (paths[p] == SJ_GPU_PATH_NVRTC) continue;
#endif
        for (int a = 0; a < 2; a++) {
            if (!((arches >> a) & 1)) continue;
            sj_lowered *l;
            sj_lower_options o = {.fusion = fusion, .prefix = "sj_"};
            sj_status st = sj__lower(g, E, &o, &l);
            if (st != SJ_OK) fail_msg("%s: lower at %lld: %s", name, (long long)E, sj_ctx_last_error(f->ctx));
            char what[160];
            snprintf(what, sizeof what, "%s at E=%lld, %s, sm_%d%s", name, (long long)E,
                     paths[p] == SJ_GPU_PATH_NVPTX ? "nvptx" : "nvrtc", sms[a],
                     fusion ? "" : ", unfused");
            sj_gpu_code code;
            char *source;
            st = sj__gpu_schedule_plan(f->ctx, l->kernels, l->n_kernels, &l->plan);
            if (st == SJ_OK) st = sj__gpu_compile_lowered(f->ctx, l, paths[p], sms[a], true, &code, &source);
            if (st != SJ_OK) fail_msg("%s: %s", what, sj_ctx_last_error(f->ctx));
            assert_non_null(source);
            check_code(f, l, &code, paths[p], what);
            sj_free(f->ctx, source);
            sj__gpu_code_free(f->ctx, &code);
            sj__lowered_destroy(l);
        }
    }
}

static void test_models(void **state) {
    fixture *f = *state;
    for (int i = 0; i < GG_N_MODELS; i++) {
        sj_graph *g = NULL;
        const char *name = "";
        if (gg_build(f->ctx, i, 1, &g, &name) != SJ_OK)
            fail_msg("building model %d: %s", i, sj_ctx_last_error(f->ctx));
        compile_everything(f, g, 64, true, 3u, name);
        /* the one-element bucket: every grid collapses to its minimum */
        compile_everything(f, g, 1, true, i % 2 ? 1u : 2u, name);
        sj_graph_destroy(g);
    }
    if (!sj_test_have_ptxas()) print_message("ptxas not found at build time: PTX not assembled\n");
}

static void test_random_graphs(void **state) {
    fixture *f = *state;
    for (int i = 0; i < N_RANDOM; i++) {
        sj_graph *g = NULL;
        const char *name = "";
        if (gg_build(f->ctx, GG_N_MODELS + i, 7, &g, &name) != SJ_OK)
            fail_msg("building random graph %d: %s", i, sj_ctx_last_error(f->ctx));
        char what[48];
        snprintf(what, sizeof what, "random graph %d", i);
        int64_t E = (int64_t)1 << (i % 8);
        compile_everything(f, g, E, i % 4 != 3, i % 2 ? 1u : 2u, what);
        sj_graph_destroy(g);
    }
}

/* An emitter that produced invalid CUDA C would surface as SJ_E_COMPILE
 * with NVRTC's log naming the kernel file; check that path end to end. */
static void test_compile_error_names_kernel_source(void **state) {
#ifndef SJ_HAVE_CUDA
    SJ_SKIP("built without the CUDA toolkit: no NVRTC to reject the source");
#else
    fixture *f = *state;
    sj_gpu_code code;
    const char *src = "extern \"C\" __global__ void sj_k0(void *const *b, const long long *i, long long n) "
                      "{ ((float *)b[0])[0] = undefined_value; }\n";
    assert_int_equal(sj__nvrtc_compile(f->ctx, src, "shapejit_kernels.cu", 90, &code), SJ_E_COMPILE);
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "undefined_value"));
#endif
}

static void test_bad_arch_is_refused(void **state) {
    fixture *f = *state;
    int sm;
    assert_int_equal(sj__gpu_parse_arch(f->ctx, "sm_90", &sm), SJ_OK);
    assert_int_equal(sm, 90);
    assert_int_equal(sj__gpu_parse_arch(f->ctx, "sm_80", &sm), SJ_OK);
    assert_int_equal(sm, 80);
    assert_int_equal(sj__gpu_parse_arch(f->ctx, "sm_75", &sm), SJ_E_UNSUPPORTED);
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "sm_75"));
}

/* Compiles run concurrently (a bucketed cache compiles different buckets on
 * different threads): both paths from four threads at once, one context. */
typedef struct compile_job {
    const sj_graph *g;
    sj_target target;
    int64_t extent;
    sj_status st;
    int n_code;
} compile_job;

static void *compile_thread(void *p) {
    compile_job *j = p;
    sj_compile_options o;
    sj_compile_options_init(&o);
    o.target = j->target;
    o.arch = j->extent % 2 ? "sm_80" : "sm_90";
    sj_artifact *a;
    j->st = sj_compile(j->g, j->extent, &o, &a);
    if (j->st == SJ_OK) {
        sj_artifact_info info;
        sj_artifact_get_info(a, &info);
        j->n_code = info.n_code;
        sj_artifact_destroy(a);
    }
    return NULL;
}

static void test_concurrent_compiles(void **state) {
    fixture *f = *state;
    sj_graph *g = NULL;
    const char *name = "";
    assert_int_equal(gg_build(f->ctx, 4, 1, &g, &name), SJ_OK); /* the FFN block */
    compile_job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (compile_job){g, i % 2 ? SJ_TARGET_NVRTC : SJ_TARGET_NVPTX, 8 + i, SJ_OK, 0};
#ifndef SJ_HAVE_CUDA
        jobs[i].target = SJ_TARGET_NVPTX;
#endif
        assert_int_equal(pthread_create(&th[i], NULL, compile_thread, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) {
        if (jobs[i].st != SJ_OK) fail_msg("compile thread %d failed (%d)", i, (int)jobs[i].st);
        assert_true(jobs[i].n_code >= 1); /* PTX, and the cubin where nvJitLink is */
    }
    sj_graph_destroy(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_models),
        cmocka_unit_test(test_random_graphs),
        cmocka_unit_test(test_compile_error_names_kernel_source),
        cmocka_unit_test(test_bad_arch_is_refused),
        cmocka_unit_test(test_concurrent_compiles),
    };
    return sj_run_tests(tests, setup, teardown);
}
