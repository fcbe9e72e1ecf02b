/* The CUDA driver API as the CUDA device uses it: a table of entry points
 * resolved with dlsym from the driver library, so nothing links against
 * libcuda. Private to runtime/cuda_*.c. Requires the toolkit's cuda.h. */
#ifndef SJ_CUDA_IMPL_H
#define SJ_CUDA_IMPL_H

#ifdef SJ_HAVE_CUDA
#include <cuda.h>

#include "core/core_impl.h"

/* Every driver entry point the device calls. cuda.h maps the plain names to
 * their current ABI versions with macros (cuMemAlloc -> cuMemAlloc_v2,
 * cuGraphInstantiate -> cuGraphInstantiateWithFlags, ...); the table is
 * declared through the same macros, so both the member types and the
 * symbol names looked up are those versions. */
#define SJ_CU_FUNCS(X)                                                                             \
    X(cuInit)                                                                                      \
    X(cuDriverGetVersion)                                                                          \
    X(cuDeviceGetCount)                                                                            \
    X(cuDeviceGet)                                                                                 \
    X(cuDeviceGetName)                                                                             \
    X(cuDeviceGetAttribute)                                                                        \
    X(cuDeviceTotalMem)                                                                            \
    X(cuDevicePrimaryCtxRetain)                                                                    \
    X(cuDevicePrimaryCtxRelease)                                                                   \
    X(cuDevicePrimaryCtxReset)                                                                     \
    X(cuCtxPushCurrent)                                                                            \
    X(cuCtxPopCurrent)                                                                             \
    X(cuStreamCreate)                                                                              \
    X(cuStreamDestroy)                                                                             \
    X(cuStreamSynchronize)                                                                         \
    X(cuModuleLoadDataEx)                                                                          \
    X(cuModuleUnload)                                                                              \
    X(cuModuleGetFunction)                                                                         \
    X(cuModuleGetGlobal)                                                                           \
    X(cuFuncGetAttribute)                                                                          \
    X(cuMemAlloc)                                                                                  \
    X(cuMemFree)                                                                                   \
    X(cuMemsetD8)                                                                                  \
    X(cuMemsetD8Async)                                                                             \
    X(cuMemcpyHtoD)                                                                                \
    X(cuMemcpyDtoH)                                                                                \
    X(cuMemcpyDtoD)                                                                                \
    X(cuMemcpyHtoDAsync)                                                                           \
    X(cuMemcpyDtoHAsync)                                                                           \
    X(cuMemcpyDtoDAsync)                                                                           \
    X(cuLaunchKernel)                                                                              \
    X(cuStreamBeginCapture)                                                                        \
    X(cuStreamEndCapture)                                                                          \
    X(cuGraphInstantiate)                                                                          \
    X(cuGraphLaunch)                                                                               \
    X(cuGraphExecDestroy)                                                                          \
    X(cuGraphDestroy)                                                                              \
    X(cuGraphGetNodes)                                                                             \
    X(cuGraphNodeGetType)                                                                          \
    X(cuGraphKernelNodeGetParams)                                                                  \
    X(cuGraphExecKernelNodeSetParams)                                                              \
    X(cuEventCreate)                                                                               \
    X(cuEventRecord)                                                                               \
    X(cuEventElapsedTime)                                                                          \
    X(cuEventDestroy)                                                                              \
    X(cuGetErrorName)                                                                              \
    X(cuGetErrorString)

#define SJ_CU_MEMBER(fn) __typeof__(fn) *fn;
typedef struct sj_cu_api {
    void *lib; /* dlopen handle */
    SJ_CU_FUNCS(SJ_CU_MEMBER)
} sj_cu_api;
#undef SJ_CU_MEMBER

/* Opens `path` (NULL = "libcuda.so.1") and resolves every entry point, then
 * cuInit. SJ_E_NO_DEVICE naming the library, the missing symbol or the
 * driver's error. On failure nothing stays open. */
sj_status sj__cu_api_open(sj_ctx *ctx, const char *path, sj_cu_api *api);
void sj__cu_api_close(sj_cu_api *api);

/* Whether `r` poisons the context: a kernel fault (illegal address, trap,
 * timeout, ...) or a hardware error, after which every call on the context
 * returns it until the context is reset. Launch errors the driver reports
 * at the launch itself (bad geometry, out of resources) are not sticky. */
bool sj__cu_sticky(CUresult r);

/* Records "cuda: <what>: <error name>: <error text>" and returns the status
 * matching `r` (sticky -> SJ_E_DEVICE_LOST, out of memory -> SJ_E_NOMEM, no
 * binary for the GPU -> SJ_E_MISMATCH, not found -> SJ_E_NOT_FOUND, else
 * SJ_E_DEVICE). */
sj_status sj__cu_fail(sj_ctx *ctx, const sj_cu_api *api, CUresult r, const char *what);

#endif
#endif
