/* GPU toolchain without a GPU: NVRTC turns CUDA C into PTX and cubin for
 * sm_80 and sm_90, rejects bad source with its log, and nvJitLink links PTX
 * into a cubin. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/skip.h"

#include <string.h>

#include "compile/gpu/nvrtc_impl.h"
#include "shapejit/ext/cuda_device.h"
#include "tests/ptxas_check.h"

static const char *scale_kernel =
    "extern \"C\" __global__ void scale(void *const *buffers, const long long *info,\n"
    "                                   long long active_extent) {\n"
    "    const float *x = (const float *)buffers[0];\n"
    "    float *y = (float *)buffers[1];\n"
    "    long long n = active_extent * info[0];\n"
    "    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;\n"
    "         i += (long long)gridDim.x * blockDim.x)\n"
    "        y[i] = expf(x[i]) * __int_as_float((int)info[1]);\n"
    "}\n";

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

#ifdef SJ_HAVE_CUDA
/* A cubin is an ELF image. */
static int is_elf(const void *p, size_t n) {
    return n > 4 && memcmp(p, "\x7f" "ELF", 4) == 0;
}

static void test_compile_both_arches(void **state) {
    sj_ctx *ctx = *state;
    const int arches[] = {80, 90};
    for (int i = 0; i < 2; i++) {
        sj_gpu_code code;
        sj_status st = sj__nvrtc_compile(ctx, scale_kernel, "scale.cu", arches[i], &code);
        if (st != SJ_OK) fail_msg("sm_%d: %s", arches[i], sj_ctx_last_error(ctx));
        assert_int_equal(code.sm, arches[i]);
        assert_non_null(strstr(code.ptx, ".entry scale"));
        char target[32];
        snprintf(target, sizeof target, ".target sm_%d", arches[i]);
        assert_non_null(strstr(code.ptx, target));
        assert_int_equal(strlen(code.ptx), code.ptx_len);
        assert_true(is_elf(code.cubin, code.cubin_len));
        sj__gpu_code_free(ctx, &code);
        sj__gpu_code_free(ctx, NULL);
    }
}

static void test_syntax_error_carries_log(void **state) {
    sj_ctx *ctx = *state;
    sj_gpu_code code;
    const char *bad = "extern \"C\" __global__ void broken(float *x) { x[0] = undeclared_name + ; }\n";
    assert_int_equal(sj__nvrtc_compile(ctx, bad, "broken.cu", 80, &code), SJ_E_COMPILE);
    const char *msg = sj_ctx_last_error(ctx);
    assert_non_null(strstr(msg, "broken.cu"));
    assert_non_null(strstr(msg, "sm_80"));
    assert_non_null(strstr(msg, "undeclared_name"));
    assert_null(code.ptx);
    assert_null(code.cubin);
}

static void test_huge_log_is_truncated(void **state) {
    sj_ctx *ctx = *state;
    /* Many errors make a log far longer than an error message holds. */
    char src[8192] = "";
    for (int i = 0; i < 60; i++) {
        char line[96];
        snprintf(line, sizeof line, "__global__ void k%d(float *x) { x[0] = missing_%d; }\n", i, i);
        strcat(src, line);
    }
    sj_gpu_code code;
    assert_int_equal(sj__nvrtc_compile(ctx, src, "many.cu", 90, &code), SJ_E_COMPILE);
    const char *msg = sj_ctx_last_error(ctx);
    assert_non_null(strstr(msg, "missing_0"));
    assert_non_null(strstr(msg, "[log truncated]"));
}

static void test_unsupported_arch(void **state) {
    sj_ctx *ctx = *state;
    sj_gpu_code code;
    assert_int_equal(sj__nvrtc_compile(ctx, scale_kernel, "scale.cu", 70, &code), SJ_E_UNSUPPORTED);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "sm_70"));
}

static void test_toolchain_names(void **state) {
    sj_ctx *ctx = *state;
    char name[64];
    assert_int_equal(sj__nvrtc_toolchain(ctx, name, sizeof name), SJ_OK);
    assert_int_equal(strncmp(name, "nvrtc-", 6), 0);
#ifdef SJ_HAVE_NVJITLINK
    assert_int_equal(sj__nvjitlink_toolchain(ctx, name, sizeof name), SJ_OK);
    assert_int_equal(strncmp(name, "nvjitlink-", 10), 0);
#endif
}

static void test_ptx_links_to_cubin(void **state) {
#ifndef SJ_HAVE_NVJITLINK
    SJ_SKIP("built without nvJitLink");
#else
    sj_ctx *ctx = *state;
    for (int sm = 80; sm <= 90; sm += 10) {
        sj_gpu_code code;
        assert_int_equal(sj__nvrtc_compile(ctx, scale_kernel, "scale.cu", sm, &code), SJ_OK);
        void *cubin;
        size_t n;
        sj_status st = sj__ptx_to_cubin(ctx, code.ptx, code.ptx_len, sm, &cubin, &n);
        if (st != SJ_OK) fail_msg("sm_%d: %s", sm, sj_ctx_last_error(ctx));
        assert_true(is_elf(cubin, n));
        sj_free(ctx, cubin);
        char log[4096];
        int rc = sj_test_ptxas(code.ptx, sm, log, sizeof log);
        if (rc > 0) fail_msg("ptxas sm_%d: %s", sm, log);
        sj__gpu_code_free(ctx, &code);
    }
#endif
}

/* The CUDA device picks cubin or PTX by the arch in the cubin's header. */
static void test_cubin_arch_is_read(void **state) {
    sj_ctx *ctx = *state;
    for (int sm = 80; sm <= 90; sm += 10) {
        sj_gpu_code code;
        assert_int_equal(sj__nvrtc_compile(ctx, scale_kernel, "scale.cu", sm, &code), SJ_OK);
        int arch = 0;
        assert_int_equal(sj_cubin_arch(ctx, code.cubin, code.cubin_len, &arch), SJ_OK);
        assert_int_equal(arch, sm);
        assert_int_equal(sj_cubin_arch(ctx, code.ptx, code.ptx_len, &arch), SJ_E_PARSE);
        assert_int_equal(sj_cubin_arch(ctx, code.cubin, 10, &arch), SJ_E_PARSE);
        sj__gpu_code_free(ctx, &code);
    }
}

static void test_bad_ptx_carries_linker_log(void **state) {
#ifndef SJ_HAVE_NVJITLINK
    SJ_SKIP("built without nvJitLink");
#else
    sj_ctx *ctx = *state;
    const char *ptx = ".version 7.8\n.target sm_80\n.address_size 64\n"
                      ".visible .entry k() {\n  mov.u32 %r1, 1;\n  ret;\n}\n";
    void *cubin = (void *)1;
    size_t n = 1;
    assert_int_equal(sj__ptx_to_cubin(ctx, ptx, strlen(ptx), 80, &cubin, &n), SJ_E_COMPILE);
    assert_null(cubin);
    assert_int_equal(n, 0);
    const char *msg = sj_ctx_last_error(ctx);
    assert_non_null(strstr(msg, "sm_80"));
    assert_non_null(strstr(msg, "%r1"));
#endif
}
#endif

static void test_log_head(void **state) {
    (void)state;
    char buf[16];
    sj__gpu_log_head("\n short log\n\n", buf, sizeof buf);
    assert_string_equal(buf, "short log");
    char big[40];
    sj__gpu_log_head("0123456789012345678901234567890123456789012345678901234567890", big,
                    sizeof big);
    assert_int_equal(strlen(big), sizeof big - 1);
    assert_non_null(strstr(big, "[log truncated]"));
    assert_int_equal(strncmp(big, "0123456789", 10), 0);
}

#ifndef SJ_HAVE_CUDA
static void test_without_toolkit(void **state) {
    sj_ctx *ctx = *state;
    sj_gpu_code code;
    assert_int_equal(sj__nvrtc_compile(ctx, scale_kernel, "scale.cu", 80, &code), SJ_E_UNSUPPORTED);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "CUDA toolkit"));
}
#endif

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_head),
#ifdef SJ_HAVE_CUDA
        cmocka_unit_test(test_compile_both_arches),
        cmocka_unit_test(test_syntax_error_carries_log),
        cmocka_unit_test(test_huge_log_is_truncated),
        cmocka_unit_test(test_unsupported_arch),
        cmocka_unit_test(test_toolchain_names),
        cmocka_unit_test(test_ptx_links_to_cubin),
        cmocka_unit_test(test_bad_ptx_carries_linker_log),
        cmocka_unit_test(test_cubin_arch_is_read),
#else
        cmocka_unit_test(test_without_toolkit),
#endif
    };
    return sj_run_tests(tests, setup, teardown);
}
