/* The engine's compiler, by name: the interpreter, the host (LLVM, this
 * CPU) or cuda (NVPTX or NVRTC code for one arch). The compile options
 * live inside the compiler table, so the cache is keyed by the options the
 * code is compiled with and nothing else. */
#include "engine/engine_impl.h"

#include <stdio.h>
#include <string.h>

#define ENGINE_MAX_WORKERS 256

static bool one_of(const char *s, const char *a, const char *b) {
    return !strcmp(s, a) || !strcmp(s, b);
}

/* Names first: a typo is reported before anything is made. */
static sj_status check_names(sj_ctx *ctx, const sj_engine_config *cfg, const char *name) {
    if (strcmp(name, "host") != 0 && strcmp(name, "interp") != 0 && strcmp(name, "cuda") != 0)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "engine: backend '%s' is not host, interp or cuda",
                       name);
    bool cuda = !strcmp(name, "cuda");
    if ((cfg->gpu_emit || cfg->arch || cfg->cuda_driver) && !cuda)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "engine: %s '%s' is for backend cuda, not %s",
                       cfg->gpu_emit ? "gpu_emit" : cfg->arch ? "arch" : "cuda_driver",
                       cfg->gpu_emit ? cfg->gpu_emit : cfg->arch ? cfg->arch : cfg->cuda_driver,
                       name);
    if (cfg->gpu_emit && !one_of(cfg->gpu_emit, "llvm", "nvrtc"))
        return sj_fail(ctx, SJ_E_INVALID_ARG, "engine: gpu_emit '%s' is not llvm or nvrtc",
                       cfg->gpu_emit);
    if (cfg->arch && !one_of(cfg->arch, "sm_80", "sm_90"))
        return sj_fail(ctx, SJ_E_INVALID_ARG, "engine: arch '%s' is not sm_80 or sm_90", cfg->arch);
    if (cfg->cpu && strcmp(name, "host") != 0)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "engine: cpu '%s' is for backend host, not %s",
                       cfg->cpu, name);
    if (!sj_precision_name(cfg->precision))
        return sj_fail(ctx, SJ_E_INVALID_ARG, "engine: precision %d is not fp32, bf16 or fp16",
                       (int)cfg->precision);
    /* Recompiling for this CPU is what a native host compiler does on a
     * miss; a chosen CPU (a level) compiles every bucket for that one. */
    if (cfg->native_after < 0)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "engine: native_after %d is negative (0 = never)",
                       cfg->native_after);
    if (cfg->native_after > 0 && strcmp(name, "host") != 0)
        return sj_fail(ctx, SJ_E_INVALID_ARG,
                       "engine: native_after %d is for backend host, not %s", cfg->native_after, name);
    if (cfg->native_after > 0 && cfg->cpu && strcmp(cfg->cpu, "native") != 0)
        return sj_fail(ctx, SJ_E_INVALID_ARG,
                       "engine: native_after %d recompiles for this CPU, but cpu '%s' compiles for that "
                       "one; leave cpu native (it loads stored levels first)",
                       cfg->native_after, cfg->cpu);
    if (cfg->tune && strcmp(name, "host") != 0)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "engine: tune is for backend host, not %s", name);
    if (cfg->workers < 0 || cfg->workers > ENGINE_MAX_WORKERS)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "engine: workers %d outside 0..%d", cfg->workers,
                       ENGINE_MAX_WORKERS);
    if (cfg->threads < 0 || cfg->threads > SJ_HOST_MAX_THREADS)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "engine: threads %d outside 0..%d (0 = 1)",
                       cfg->threads, SJ_HOST_MAX_THREADS);
    /* Only the host device splits kernels over threads; more elsewhere would
     * be a promise the backend does not keep. */
    if (cfg->threads > 1 && strcmp(name, "host") != 0)
        return sj_fail(ctx, SJ_E_UNSUPPORTED, "engine: threads %d is for backend host, not %s",
                       cfg->threads, name);
    return SJ_OK;
}

static sj_status gpu_open(sj_ctx *ctx, const sj_engine_config *cfg, sj_engine_backend *b) {
    sj_gpu_compiler_config gcfg;
    sj_gpu_compiler_config_init(&gcfg);
    bool nvrtc = cfg->gpu_emit && !strcmp(cfg->gpu_emit, "nvrtc");
    gcfg.options.target = nvrtc ? SJ_TARGET_NVRTC : SJ_TARGET_NVPTX;
    gcfg.options.arch = cfg->arch;
    gcfg.device.driver_path = cfg->cuda_driver;
    gcfg.options.precision = cfg->precision;
    sj_status st = sj_gpu_compiler_create(ctx, &gcfg, &b->gpu);
    if (st != SJ_OK) {
        sj__error_prefix(ctx, "engine: backend cuda (%s)", nvrtc ? "nvrtc" : "llvm");
        return st;
    }
    sj_gpu_compiler_table(b->gpu, &b->comp);
    snprintf(b->target, sizeof b->target, "%s %s", nvrtc ? "nvrtc" : "nvptx",
             sj_gpu_compiler_arch(b->gpu));
    /* A server without its GPU fails here, before a compile is spent; a
     * build machine filling a store for a fleet needs none. */
    if (!cfg->store_only) {
        sj_device *dev;
        st = sj_gpu_compiler_device(b->gpu, &dev);
        if (st != SJ_OK)
            sj__error_prefix(ctx, "engine: backend cuda needs a GPU (%s)", sj_status_str(st));
    }
    return st;
}

sj_status sj__engine_backend_open(sj_ctx *ctx, const sj_engine_config *cfg, sj_engine_backend *b) {
    memset(b, 0, sizeof *b);
    const char *name = cfg->backend ? cfg->backend : "host";
    SJ_TRY(check_names(ctx, cfg, name));
    snprintf(b->target, sizeof b->target, "%s", name);
    sj_precision precision = cfg->precision; /* checked above */
    if (!strcmp(name, "interp")) return sj_interp_compiler_precision(precision, &b->comp);
    sj_status st;
    if (!strcmp(name, "cuda")) {
        st = gpu_open(ctx, cfg, b);
    } else {
        sj_host_compiler_config hcfg;
        sj_host_compiler_config_init(&hcfg);
        hcfg.devices = cfg->workers > 0 ? cfg->workers : 1;
        hcfg.threads = cfg->threads > 0 ? cfg->threads : 1;
        hcfg.options.cpu = cfg->cpu;
        hcfg.options.precision = precision;
        hcfg.tune = cfg->tune;
        hcfg.tune_budget_ms = cfg->tune_budget_ms;
        st = sj_host_compiler_create(ctx, &hcfg, &b->host);
        if (st == SJ_OK) {
            sj_host_compiler_table(b->host, &b->comp);
            /* A chosen CPU (a level a fleet shares) is part of what messages
             * and summaries call the target. */
            if (cfg->cpu && strcmp(cfg->cpu, "native") != 0)
                snprintf(b->target, sizeof b->target, "host %s", b->comp.target_cpu);
        } else
            sj__error_prefix(ctx, "engine: backend host");
    }
    if (st != SJ_OK) sj__engine_backend_close(b);
    return st;
}

void sj__engine_backend_close(sj_engine_backend *b) {
    sj_host_compiler_destroy(b->host);
    sj_gpu_compiler_destroy(b->gpu);
    memset(b, 0, sizeof *b);
}
