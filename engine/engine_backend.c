/* The engine's backend: its config checked where the checks are the
 * engine's own, then opened by name through the backend registry. The
 * compile options live inside the compiler table, so the cache is keyed by
 * the options the code is compiled with and nothing else. */
#include "engine/engine_impl.h"

#include <string.h>

#define ENGINE_MAX_WORKERS 256

sj_status sj__engine_backend_open(sj_ctx *ctx, const sj_engine_config *cfg, sj__backend *b) {
    memset(b, 0, sizeof *b);
    if (!sj_precision_name(cfg->precision))
        return sj_fail(ctx, SJ_E_INVALID_ARG, "engine: precision %d is not fp32, bf16 or fp16",
                       (int)cfg->precision);
    if (cfg->native_after < 0)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "engine: native_after %d is negative (0 = never)",
                       cfg->native_after);
    if (cfg->workers < 0 || cfg->workers > ENGINE_MAX_WORKERS)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "engine: workers %d outside 0..%d", cfg->workers,
                       ENGINE_MAX_WORKERS);
    if (cfg->threads < 0 || cfg->threads > SJ_HOST_MAX_THREADS)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "engine: threads %d outside 0..%d (0 = 1)",
                       cfg->threads, SJ_HOST_MAX_THREADS);
    char weight_dir[4096];
    bool weight_files = cfg->weight_files && cfg->store_path &&
                        sj__engine_weight_dir(cfg->store_path, weight_dir, sizeof weight_dir);
    sj__backend_params p = {
        .workers = cfg->workers > 0 ? cfg->workers : 1,
        .threads = cfg->threads > 0 ? cfg->threads : 1,
        .precision = cfg->precision,
        .cpu = cfg->cpu,
        .tune = cfg->tune,
        .tune_budget_ms = cfg->tune_budget_ms,
        .native_after = cfg->native_after,
        .tiered = cfg->tiered,
        .gpu_emit = cfg->gpu_emit,
        .arch = cfg->arch,
        .cuda_driver = cfg->cuda_driver,
        .store_only = cfg->store_only,
        .weight_dir = weight_files ? weight_dir : NULL,
    };
    sj_status st = sj__backend_open(ctx, cfg->backend, &p, b);
    if (st != SJ_OK) sj__error_prefix(ctx, "engine");
    return st;
}

bool sj__engine_weight_dir(const char *store_path, char *out, size_t cap) {
    /* beside the store, as SQLite's -wal and -shm files are */
    int n = snprintf(out, cap, "%s-weights", store_path);
    return store_path[0] && n > 0 && (size_t)n < cap;
}
