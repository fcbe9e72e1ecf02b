/* The GPU schedule of a lowered kernel, shared by the NVPTX and CUDA C
 * emitters so both emit the same kernels for the same launch geometry:
 *
 *   MAP     one thread per active output point, grid-stride over the
 *           flattened active space (SJ_GPU_MAP_BLOCK threads per block).
 *   ROW     REDUCE, SOFTMAX, LOG_SOFTMAX, LAYERNORM: one block per outer
 *           (non-reduced) point, grid-stride over rows; the block's threads
 *           stride over the row and combine through a shared-memory tree.
 *   MATMUL  SJ_GPU_TILE x SJ_GPU_TILE output tiles per block, a and b staged
 *           through shared memory one k-tile at a time; grid x over n tiles,
 *           y over m tiles, z over the batch, each grid-strided.
 *
 * Geometry is sized at the bucket extent E; every kernel bounds its loops by
 * the active extent it receives, so any 1 <= n <= E is correct with it.
 * Not installed. */
#ifndef SJ_GPU_SCHEDULE_H
#define SJ_GPU_SCHEDULE_H

#include <stdint.h>

#include "compile/lower/kernel.h"
#include "core/core_impl.h"

#define SJ_GPU_MAP_BLOCK 256u
#define SJ_GPU_ROW_BLOCK_MAX 256u
#define SJ_GPU_ROW_BLOCK_MIN 32u
#define SJ_GPU_TILE 16u
/* Grid dims are capped so launches stay within every arch's limits; the
 * kernels grid-stride over whatever lies beyond. */
#define SJ_GPU_GRID_X_MAX 65535u
#define SJ_GPU_GRID_YZ_MAX 65535u

typedef enum sj_gpu_sched_kind {
    SJ_GPU_SCHED_MAP,
    SJ_GPU_SCHED_ROW,
    SJ_GPU_SCHED_MATMUL
} sj_gpu_sched_kind;

typedef struct sj_gpu_schedule {
    sj_gpu_sched_kind kind;
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t threads; /* block[0] * block[1] * block[2]; ROW: a power of two */
} sj_gpu_schedule;

/* The schedule of kernel k (its dims at the bucket extent). */
sj_status sj__gpu_schedule_kernel(sj_ctx *ctx, const sj_kernel *k, sj_gpu_schedule *out);

/* Writes every launch's grid and block into the plan, from the kernel the
 * launch names (launches may share one); the kernels use static shared
 * memory only, so shared_bytes is 0. */
sj_status sj__gpu_schedule_plan(sj_ctx *ctx, const sj_kernel *kernels, int n_kernels,
                               sj_launch_plan *plan);

/* The GPU name of each kernel of l (*out: a copy of l->kernels, renamed;
 * sj_free it, the arrays it points to stay l's). Lowering names a kernel by
 * its description without the bucket extent (kernel_share.h), which is
 * the GPU code's too except where the schedule reads the extent: a ROW
 * kernel reducing over a symbolic dim sizes its block (and so its
 * __launch_bounds__ and tree) from the reduced span at the bucket extent,
 * so it gets "_t<threads>" after its name. Equal GPU names therefore mean
 * equal code in every bucket. */
sj_status sj__gpu_named_kernels(sj_ctx *ctx, const sj_kernel *kernels, int n_kernels,
                               sj_kernel **out);

#endif
