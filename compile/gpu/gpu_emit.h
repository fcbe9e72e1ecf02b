/* The two GPU emitters: the same kernels (gpu_schedule.h) from the same
 * lowering, with the kernel ABI of plan.h:
 *   extern "C" __global__ void name(void *const *buffers, const int64_t *info,
 *                                   int64_t active_extent)
 * Not installed. */
#ifndef SJ_GPU_EMIT_H
#define SJ_GPU_EMIT_H

#include <stddef.h>

#include <llvm-c/Core.h>

#include "compile/lower/lower.h"

/* CUDA C source for every kernel of l as one translation unit for NVRTC;
 * *out is NUL-terminated, allocated through ctx, *len excludes the NUL. */
sj_status sj__cuda_c_emit(sj_ctx *ctx, const sj_lowered *l, char **out, size_t *len);

/* One NVPTX kernel per kernel of l, added to m (prepared for NVPTX with
 * sj__nvptx_prepare_module); compile it with sj__nvptx_compile. */
sj_status sj__nvptx_emit_kernels(sj_ctx *ctx, LLVMModuleRef m, const sj_lowered *l);

#endif
