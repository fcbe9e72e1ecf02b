/* Lowered kernels -> GPU code for one arch, by either path:
 *   NVPTX: kernels -> LLVM IR (NVPTX) -> PTX -> cubin (nvJitLink)
 *   NVRTC: kernels -> CUDA C -> NVRTC -> PTX + cubin
 * Not installed. */
#ifndef SJ_GPU_COMPILE_H
#define SJ_GPU_COMPILE_H

#include "compile/lower/lower.h"
#include "compile/gpu/nvrtc_impl.h"

typedef enum sj_gpu_path { SJ_GPU_PATH_NVPTX, SJ_GPU_PATH_NVRTC } sj_gpu_path;

/* Compiles every kernel of l for sm_<sm>. The launch geometry the code
 * expects comes from sj__gpu_schedule_plan (gpu_schedule.h).
 * want_cubin false: the NVPTX path stops at PTX (NVRTC makes both anyway).
 * Otherwise out->cubin is NULL only where nvJitLink is unavailable.
 * source (may be NULL): receives the CUDA C (NVRTC) or the unoptimised
 * LLVM IR (NVPTX) that was compiled, allocated through ctx. */
sj_status sj__gpu_compile_lowered(sj_ctx *ctx, const sj_lowered *l, sj_gpu_path path, int sm,
                                 bool want_cubin, sj_gpu_code *out, char **source);

/* The toolchain string recorded in artifacts and store keys, e.g.
 * "llvm-19.1.7+nvjitlink-13.0" or "nvrtc-13.0". */
sj_status sj__gpu_toolchain(sj_ctx *ctx, sj_gpu_path path, char *buf, size_t len);

#endif
