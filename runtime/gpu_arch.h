/* GPU arch names, shared by the compile paths (compile/gpu) and the loaders
 * of both builds. Not installed. */
#ifndef SJ_GPU_ARCH_H
#define SJ_GPU_ARCH_H

#include <stdbool.h>

#include "core/core_impl.h"

/* The triple GPU artifacts and store keys name. */
#define SJ_NVPTX_TRIPLE "nvptx64-nvidia-cuda"

/* Architectures shapejit compiles for: 80 (A100) and 90 (H100/H200). */
static inline bool sj_gpu_arch_supported(int sm) { return sm == 80 || sm == 90; }

/* Parses "sm_80" / "sm_90" (NULL = 90); SJ_E_UNSUPPORTED names the others. */
sj_status sj__gpu_parse_arch(sj_ctx *ctx, const char *arch, int *sm);

#endif
