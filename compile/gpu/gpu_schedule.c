/* Launch geometry for the GPU emitters (see gpu_schedule.h). */
#include <stdio.h>
#include <string.h>

#include "compile/gpu/gpu_schedule.h"

static uint32_t cap_u32(int64_t v, uint32_t cap) {
    if (v < 1) return 1;
    return v > (int64_t)cap ? cap : (uint32_t)v;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Product of the dims in mask at the bucket extent (saturating: it only
 * sizes a grid, which is capped anyway). */
static int64_t span(const sj_kernel *k, uint32_t mask) {
    int64_t p = 1;
    for (int d = 0; d < k->rank; d++)
        if ((mask >> d) & 1) {
            if (sj_mul_overflow_i64(p, k->dims[d], &p)) return INT64_MAX / 2;
        }
    return p;
}

sj_status sj__gpu_schedule_kernel(sj_ctx *ctx, const sj_kernel *k, sj_gpu_schedule *out) {
    memset(out, 0, sizeof *out);
    if (k->rank < 0 || k->rank > SJ_KSPACE_MAX)
        return sj_fail(ctx, SJ_E_INTERNAL, "gpu schedule: kernel %s has rank %d", k->name, k->rank);
    for (int d = 0; d < 3; d++) out->grid[d] = out->block[d] = 1;
    uint32_t all = k->rank ? (1u << k->rank) - 1 : 0, red = k->reduced & all;
    switch (k->kind) {
    case SJ_KK_MAP:
        out->kind = SJ_GPU_SCHED_MAP;
        out->block[0] = SJ_GPU_MAP_BLOCK;
        out->grid[0] = cap_u32(ceil_div(span(k, all), SJ_GPU_MAP_BLOCK), SJ_GPU_GRID_X_MAX);
        break;
    case SJ_KK_REDUCE:
    case SJ_KK_SOFTMAX:
    case SJ_KK_LOG_SOFTMAX:
    case SJ_KK_LAYERNORM: {
        out->kind = SJ_GPU_SCHED_ROW;
        int64_t row = span(k, red);
        uint32_t t = SJ_GPU_ROW_BLOCK_MIN;
        while (t < SJ_GPU_ROW_BLOCK_MAX && t < row) t *= 2;
        out->block[0] = t;
        out->grid[0] = cap_u32(span(k, all & ~red), SJ_GPU_GRID_X_MAX);
        break;
    }
    case SJ_KK_MATMUL:
        if (k->rank != 5 || k->reduced != (1u << 4))
            return sj_fail(ctx, SJ_E_INTERNAL,
                           "gpu schedule: matmul kernel %s is not [b0, b1, m, n, k] (rank %d)",
                           k->name, k->rank);
        out->kind = SJ_GPU_SCHED_MATMUL;
        out->block[0] = out->block[1] = SJ_GPU_TILE;
        out->grid[0] = cap_u32(ceil_div(k->dims[3], SJ_GPU_TILE), SJ_GPU_GRID_X_MAX);
        out->grid[1] = cap_u32(ceil_div(k->dims[2], SJ_GPU_TILE), SJ_GPU_GRID_YZ_MAX);
        out->grid[2] = cap_u32(k->dims[0] * k->dims[1], SJ_GPU_GRID_YZ_MAX);
        break;
    default:
        return sj_fail(ctx, SJ_E_UNSUPPORTED, "gpu schedule: kernel %s has unknown kind %d",
                       k->name, (int)k->kind);
    }
    out->threads = out->block[0] * out->block[1] * out->block[2];
    return SJ_OK;
}

sj_status sj__gpu_schedule_plan(sj_ctx *ctx, const sj_kernel *kernels, int n_kernels,
                               sj_launch_plan *plan) {
    for (int i = 0; i < plan->n_launches; i++) {
        sj_launch *la = &plan->launches[i];
        if (la->kernel < 0 || la->kernel >= n_kernels)
            return sj_fail(ctx, SJ_E_INTERNAL, "gpu schedule: launch %d names kernel %d of %d", i,
                           la->kernel, n_kernels);
        sj_gpu_schedule s;
        SJ_TRY(sj__gpu_schedule_kernel(ctx, &kernels[la->kernel], &s));
        memcpy(la->grid, s.grid, sizeof la->grid);
        memcpy(la->block, s.block, sizeof la->block);
        la->shared_bytes = 0;
    }
    return SJ_OK;
}

sj_status sj__gpu_named_kernels(sj_ctx *ctx, const sj_kernel *kernels, int n_kernels,
                               sj_kernel **out) {
    *out = NULL;
    sj_kernel *ks = sj_alloc(ctx, (size_t)(n_kernels > 0 ? n_kernels : 1) * sizeof *ks);
    if (!ks) return sj_fail(ctx, SJ_E_NOMEM, "gpu kernel names: out of memory");
    for (int i = 0; i < n_kernels; i++) {
        ks[i] = kernels[i];
        sj_gpu_schedule s;
        sj_status st = sj__gpu_schedule_kernel(ctx, &kernels[i], &s);
        if (st != SJ_OK) {
            sj_free(ctx, ks);
            return st;
        }
        bool reads_extent = false;
        for (int d = 0; d < ks[i].rank && d < SJ_KSPACE_MAX; d++)
            reads_extent |= s.kind == SJ_GPU_SCHED_ROW && ((ks[i].reduced >> d) & 1) && ks[i].sym[d];
        if (!reads_extent) continue;
        size_t n = strlen(ks[i].name);
        int w = snprintf(ks[i].name + n, sizeof ks[i].name - n, "_t%u", s.threads);
        if (w < 0 || (size_t)w >= sizeof ks[i].name - n) {
            sj_free(ctx, ks);
            return sj_fail(ctx, SJ_E_INTERNAL, "gpu kernel names: %s has no room for its block size",
                           kernels[i].name);
        }
    }
    *out = ks;
    return SJ_OK;
}
