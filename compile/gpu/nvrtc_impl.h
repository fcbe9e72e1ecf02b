/* The GPU toolchain below the emitters: CUDA C -> PTX + cubin with NVRTC,
 * PTX -> cubin with nvJitLink. Shared by the CUDA C and NVPTX emitters, the
 * GPU compile entry and their tests. Not installed.
 *
 * Without the CUDA toolkit (no SJ_HAVE_CUDA) every function returns
 * SJ_E_UNSUPPORTED with a message saying so; callers need no #ifdefs. */
#ifndef SJ_NVRTC_IMPL_H
#define SJ_NVRTC_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "core/core_impl.h"
#include "runtime/gpu_arch.h"


/* Compiled GPU code for one arch. `ptx` is NUL-terminated (ptx_len excludes
 * the NUL); `cubin` may be NULL when no SASS could be made (no nvJitLink).
 * Both are owned, allocated through the context. */
typedef struct sj_gpu_code {
    int sm;
    char *ptx;
    size_t ptx_len;
    void *cubin;
    size_t cubin_len;
} sj_gpu_code;

void sj__gpu_code_free(sj_ctx *ctx, sj_gpu_code *code);

/* Compiles CUDA C `source` (file name `name` appears in the log) for sm_<sm>:
 * PTX and cubin from one NVRTC run. A rejected source is SJ_E_COMPILE whose
 * message carries the head of NVRTC's program log. */
sj_status sj__nvrtc_compile(sj_ctx *ctx, const char *source, const char *name, int sm,
                           sj_gpu_code *out);

/* Assembles and links PTX into a cubin for sm_<sm> with nvJitLink. Failure is
 * SJ_E_COMPILE with the head of the linker's error log. */
sj_status sj__ptx_to_cubin(sj_ctx *ctx, const char *ptx, size_t ptx_len, int sm, void **cubin,
                          size_t *cubin_len);

/* Toolchain names for artifact keys, e.g. "nvrtc-13.0" and
 * "nvjitlink-13.0"; SJ_E_UNSUPPORTED without the toolkit. */
sj_status sj__nvrtc_toolchain(sj_ctx *ctx, char *buf, size_t len);
sj_status sj__nvjitlink_toolchain(sj_ctx *ctx, char *buf, size_t len);

/* Copies the head of a compiler log into `buf` as one line-preserving chunk
 * short enough to sit inside an error message, marking a cut. */
void sj__gpu_log_head(const char *log, char *buf, size_t len);

#endif
