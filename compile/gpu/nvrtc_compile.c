/* CUDA C -> PTX + cubin with NVRTC. One compile for the real arch sm_XX gives
 * both: the cubin (SASS, loads without driver JIT) and its PTX (kept so a
 * newer driver or arch can still JIT it). */
#include <stdio.h>
#include <string.h>

#include "compile/gpu/nvrtc_impl.h"

#ifdef SJ_HAVE_CUDA
#include <nvrtc.h>

#define SJ_LOG_HEAD 720

static sj_status nvrtc_failed(sj_ctx *ctx, nvrtcResult r, const char *what) {
    return sj_fail(ctx, r == NVRTC_ERROR_OUT_OF_MEMORY ? SJ_E_NOMEM : SJ_E_INTERNAL,
                   "nvrtc: %s: %s", what, nvrtcGetErrorString(r));
}

static sj_status compile_log_error(sj_ctx *ctx, nvrtcProgram prog, const char *name, int sm) {
    size_t n = 0;
    char head[SJ_LOG_HEAD];
    head[0] = '\0';
    if (nvrtcGetProgramLogSize(prog, &n) == NVRTC_SUCCESS && n > 0) {
        char *log = sj_alloc(ctx, n + 1);
        if (log) {
            if (nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS) {
                log[n] = '\0';
                sj__gpu_log_head(log, head, sizeof head);
            }
            sj_free(ctx, log);
        }
    }
    return sj_fail(ctx, SJ_E_COMPILE, "nvrtc: %s for sm_%d rejected: %s", name, sm,
                   head[0] ? head : "(no log)");
}

static sj_status fetch_outputs(sj_ctx *ctx, nvrtcProgram prog, sj_gpu_code *out) {
    size_t ptx_len = 0, cubin_len = 0;
    nvrtcResult r = nvrtcGetPTXSize(prog, &ptx_len);
    if (r != NVRTC_SUCCESS) return nvrtc_failed(ctx, r, "PTX size");
    r = nvrtcGetCUBINSize(prog, &cubin_len);
    if (r != NVRTC_SUCCESS) return nvrtc_failed(ctx, r, "cubin size");
    if (ptx_len == 0 || cubin_len == 0)
        return sj_fail(ctx, SJ_E_INTERNAL, "nvrtc: empty output (PTX %zu bytes, cubin %zu bytes)",
                       ptx_len, cubin_len);
    out->ptx = sj_alloc(ctx, ptx_len + 1);
    out->cubin = sj_alloc(ctx, cubin_len);
    if (!out->ptx || !out->cubin) return sj_fail(ctx, SJ_E_NOMEM, "nvrtc: output buffers");
    r = nvrtcGetPTX(prog, out->ptx);
    if (r != NVRTC_SUCCESS) return nvrtc_failed(ctx, r, "get PTX");
    out->ptx[ptx_len] = '\0';
    out->ptx_len = strlen(out->ptx); /* the reported size counts the NUL */
    r = nvrtcGetCUBIN(prog, out->cubin);
    if (r != NVRTC_SUCCESS) return nvrtc_failed(ctx, r, "get cubin");
    out->cubin_len = cubin_len;
    return SJ_OK;
}

sj_status sj__nvrtc_compile(sj_ctx *ctx, const char *source, const char *name, int sm,
                           sj_gpu_code *out) {
    if (!source || !out) return sj_fail(ctx, SJ_E_INVALID_ARG, "nvrtc: NULL source or output");
    if (!sj_gpu_arch_supported(sm))
        return sj_fail(ctx, SJ_E_UNSUPPORTED, "nvrtc: arch sm_%d not supported (sm_80, sm_90)", sm);
    memset(out, 0, sizeof *out);
    if (!name) name = "kernel.cu";
    nvrtcProgram prog;
    nvrtcResult r = nvrtcCreateProgram(&prog, source, name, 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) return nvrtc_failed(ctx, r, "create program");
    char arch[40];
    snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d", sm);
    /* Kernels use the exact libm forms the interpreter is compared against;
     * no fast-math, so results stay within the differential tests' bounds. */
    const char *opts[] = {arch, "--std=c++17", "-default-device"};
    sj_status st;
    r = nvrtcCompileProgram(prog, (int)(sizeof opts / sizeof opts[0]), opts);
    if (r == NVRTC_ERROR_COMPILATION)
        st = compile_log_error(ctx, prog, name, sm);
    else if (r != NVRTC_SUCCESS)
        st = nvrtc_failed(ctx, r, "compile");
    else
        st = fetch_outputs(ctx, prog, out);
    nvrtcDestroyProgram(&prog);
    if (st != SJ_OK) {
        sj__gpu_code_free(ctx, out);
        return st;
    }
    out->sm = sm;
    return SJ_OK;
}

sj_status sj__nvrtc_toolchain(sj_ctx *ctx, char *buf, size_t len) {
    int major = 0, minor = 0;
    nvrtcResult r = nvrtcVersion(&major, &minor);
    if (r != NVRTC_SUCCESS) return nvrtc_failed(ctx, r, "version");
    snprintf(buf, len, "nvrtc-%d.%d", major, minor);
    return SJ_OK;
}

#else

sj_status sj__nvrtc_compile(sj_ctx *ctx, const char *source, const char *name, int sm,
                           sj_gpu_code *out) {
    if (out) memset(out, 0, sizeof *out);
    return sj_fail(ctx, SJ_E_UNSUPPORTED,
                   "nvrtc: shapejit was built without the CUDA toolkit (SJ_HAVE_CUDA off)");
}

sj_status sj__nvrtc_toolchain(sj_ctx *ctx, char *buf, size_t len) {
    return sj_fail(ctx, SJ_E_UNSUPPORTED,
                   "nvrtc: shapejit was built without the CUDA toolkit (SJ_HAVE_CUDA off)");
}

#endif
