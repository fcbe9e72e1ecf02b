/* PTX -> cubin with nvJitLink, for the PTX LLVM's NVPTX backend writes, so an
 * artifact for a known arch carries SASS as well as the PTX. */
#include <stdio.h>
#include <string.h>

#include "compile/gpu/nvrtc_impl.h"

#if defined(SJ_HAVE_CUDA) && defined(SJ_HAVE_NVJITLINK)
#include <nvJitLink.h>

#define SJ_LOG_HEAD 720

static sj_status link_error(sj_ctx *ctx, nvJitLinkHandle h, nvJitLinkResult r, int sm) {
    size_t n = 0;
    char head[SJ_LOG_HEAD];
    head[0] = '\0';
    if (nvJitLinkGetErrorLogSize(h, &n) == NVJITLINK_SUCCESS && n > 0) {
        char *log = sj_alloc(ctx, n + 1);
        if (log) {
            if (nvJitLinkGetErrorLog(h, log) == NVJITLINK_SUCCESS) {
                log[n] = '\0';
                sj__gpu_log_head(log, head, sizeof head);
            }
            sj_free(ctx, log);
        }
    }
    return sj_fail(ctx, SJ_E_COMPILE, "nvjitlink: PTX for sm_%d rejected (error %d): %s", sm,
                   (int)r, head[0] ? head : "(no log)");
}

sj_status sj__ptx_to_cubin(sj_ctx *ctx, const char *ptx, size_t ptx_len, int sm, void **cubin,
                          size_t *cubin_len) {
    if (!ptx || !cubin || !cubin_len)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "nvjitlink: NULL PTX or output");
    if (!sj_gpu_arch_supported(sm))
        return sj_fail(ctx, SJ_E_UNSUPPORTED, "nvjitlink: arch sm_%d not supported (sm_80, sm_90)",
                       sm);
    *cubin = NULL;
    *cubin_len = 0;
    char arch[32];
    snprintf(arch, sizeof arch, "-arch=sm_%d", sm);
    const char *opts[] = {arch};
    nvJitLinkHandle h = NULL;
    nvJitLinkResult r = nvJitLinkCreate(&h, 1, opts);
    if (r != NVJITLINK_SUCCESS)
        return sj_fail(ctx, SJ_E_INTERNAL, "nvjitlink: create for sm_%d failed (error %d)", sm,
                       (int)r);
    sj_status st = SJ_OK;
    r = nvJitLinkAddData(h, NVJITLINK_INPUT_PTX, ptx, ptx_len, "kernels.ptx");
    if (r == NVJITLINK_SUCCESS) r = nvJitLinkComplete(h);
    size_t n = 0;
    if (r == NVJITLINK_SUCCESS) r = nvJitLinkGetLinkedCubinSize(h, &n);
    if (r != NVJITLINK_SUCCESS) {
        st = link_error(ctx, h, r, sm);
    } else {
        void *buf = sj_alloc(ctx, n);
        if (!buf) {
            st = sj_fail(ctx, SJ_E_NOMEM, "nvjitlink: cubin of %zu bytes", n);
        } else if ((r = nvJitLinkGetLinkedCubin(h, buf)) != NVJITLINK_SUCCESS) {
            sj_free(ctx, buf);
            st = link_error(ctx, h, r, sm);
        } else {
            *cubin = buf;
            *cubin_len = n;
        }
    }
    nvJitLinkDestroy(&h);
    return st;
}

sj_status sj__nvjitlink_toolchain(sj_ctx *ctx, char *buf, size_t len) {
    unsigned major = 0, minor = 0;
    nvJitLinkResult r = nvJitLinkVersion(&major, &minor);
    if (r != NVJITLINK_SUCCESS)
        return sj_fail(ctx, SJ_E_INTERNAL, "nvjitlink: version query failed (error %d)", (int)r);
    snprintf(buf, len, "nvjitlink-%u.%u", major, minor);
    return SJ_OK;
}

#else

sj_status sj__ptx_to_cubin(sj_ctx *ctx, const char *ptx, size_t ptx_len, int sm, void **cubin,
                          size_t *cubin_len) {
    if (cubin) *cubin = NULL;
    if (cubin_len) *cubin_len = 0;
    return sj_fail(ctx, SJ_E_UNSUPPORTED,
                   "nvjitlink: shapejit was built without libnvJitLink (CUDA toolkit absent)");
}

sj_status sj__nvjitlink_toolchain(sj_ctx *ctx, char *buf, size_t len) {
    return sj_fail(ctx, SJ_E_UNSUPPORTED,
                   "nvjitlink: shapejit was built without libnvJitLink (CUDA toolkit absent)");
}

#endif
