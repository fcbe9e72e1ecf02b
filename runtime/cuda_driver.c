/* Opening the CUDA driver at run time and naming its errors. */
#include <dlfcn.h>
#include <string.h>

#include "runtime/cuda_impl.h"

#ifdef SJ_HAVE_CUDA

#define SJ_STR_(x) #x
#define SJ_SYM(x) SJ_STR_(x)

sj_status sj__cu_api_open(sj_ctx *ctx, const char *path, sj_cu_api *api) {
    memset(api, 0, sizeof *api);
    if (!path) path = "libcuda.so.1";
    /* NODELETE: the driver keeps threads of its own after cuInit; unmapping
     * its code under them at dlclose would crash the process later. */
    api->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!api->lib) {
        const char *why = dlerror();
        return sj_fail(ctx, SJ_E_NO_DEVICE,
                       "cuda: cannot open the driver library %s (%s): no NVIDIA driver here", path,
                       why ? why : "?");
    }
#define SJ_CU_RESOLVE(fn)                                                                          \
    {                                                                                              \
        void *sym = dlsym(api->lib, SJ_SYM(fn));                                                   \
        memcpy(&api->fn, &sym, sizeof sym);                                                        \
    }                                                                                              \
    if (!api->fn) {                                                                                \
        sj__cu_api_close(api);                                                                      \
        return sj_fail(ctx, SJ_E_NO_DEVICE, "cuda: driver %s lacks %s (driver too old for CUDA %d)", \
                       path, SJ_SYM(fn), CUDA_VERSION / 1000);                                     \
    }
    SJ_CU_FUNCS(SJ_CU_RESOLVE)
#undef SJ_CU_RESOLVE
    CUresult r = api->cuInit(0);
    if (r != CUDA_SUCCESS) {
        sj__cu_fail(ctx, api, r, "cuInit");
        sj__error_prefix(ctx, "no usable GPU");
        sj__cu_api_close(api);
        return SJ_E_NO_DEVICE;
    }
    return SJ_OK;
}

void sj__cu_api_close(sj_cu_api *api) {
    if (api->lib) dlclose(api->lib);
    memset(api, 0, sizeof *api);
}

bool sj__cu_sticky(CUresult r) {
    switch (r) {
    /* a kernel faulted: every later call on the context returns the error */
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:
    /* the hardware under the context failed */
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_NVLINK_UNCORRECTABLE:
    case CUDA_ERROR_CONTAINED:
    case CUDA_ERROR_EXTERNAL_DEVICE:
    /* what the context's calls return once it is gone */
    case CUDA_ERROR_CONTEXT_IS_DESTROYED: return true;
    default: return false;
    }
}

sj_status sj__cu_fail(sj_ctx *ctx, const sj_cu_api *api, CUresult r, const char *what) {
    const char *name = NULL, *text = NULL;
    if (api->cuGetErrorName) api->cuGetErrorName(r, &name);
    if (api->cuGetErrorString) api->cuGetErrorString(r, &text);
    if (sj__cu_sticky(r))
        return sj_fail(ctx, SJ_E_DEVICE_LOST, "cuda: %s: %s: %s (the CUDA context is lost)", what,
                       name ? name : "CUDA_ERROR_?", text ? text : "unknown error");
    sj_status st;
    switch (r) {
    case CUDA_ERROR_OUT_OF_MEMORY: st = SJ_E_NOMEM; break;
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION: st = SJ_E_MISMATCH; break;
    case CUDA_ERROR_NOT_FOUND: st = SJ_E_NOT_FOUND; break;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_NOT_INITIALIZED: st = SJ_E_NO_DEVICE; break;
    default: st = SJ_E_DEVICE; break;
    }
    return sj_fail(ctx, st, "cuda: %s: %s: %s", what, name ? name : "CUDA_ERROR_?",
                   text ? text : "unknown error");
}

#endif
