/* The backends of this build, by name, in the manner of ggml's backend
 * registry: one row per backend saying which options it takes and how to
 * open it, so the engine names no backend and holds no backend's type.
 * A backend a build leaves out (the host in a runtime-only build, which has
 * no LLVM) keeps its row with the reason, so asking for it says what to do
 * instead, and an option meant for it still names it. Not installed.
 *
 *   sj__backend_params p = {.workers = 1, .threads = 1, .precision = SJ_PRECISION_FP32};
 *   sj__backend b;
 *   if (sj__backend_open(ctx, "host", &p, &b) != SJ_OK) return ...;  // message says why
 *   sj_bucketed_cache_create(g, ladder, &b.comp, store, NULL, &c);
 *   ...
 *   sj__backend_close(&b);                                  // after every cache on b.comp
 */
#ifndef SJ_BACKEND_REGISTRY_H
#define SJ_BACKEND_REGISTRY_H

#include "shapejit/ext/bucketed_cache.h"
#include "shapejit/precision.h"

/* What a backend is opened with, in one backend-neutral struct; NULL and 0
 * fields are unset. */
typedef struct sj__backend_params {
    int workers;          /* devices to spread executables over (>= 1) */
    int threads;          /* threads per device (>= 1) */
    sj_precision precision;
    const char *cpu;      /* host: a CPU or level, NULL = native */
    bool tune;            /* host: time schedules per bucket */
    int tune_budget_ms;
    int native_after;     /* host: recompile for this CPU after N loads of a level */
    bool tiered;          /* host: quick code first (sj__backend.quick) */
    const char *gpu_emit; /* cuda: "llvm" or "nvrtc" */
    const char *arch;     /* cuda: "sm_80", "sm_90" */
    const char *cuda_driver;
    bool store_only;      /* fill a store: no device is needed */
    const char *weight_dir; /* host: derived weights kept as files there */
} sj__backend_params;

/* The options a backend takes beyond workers and precision; an option set
 * for a backend that does not take it is refused, naming the one that does. */
enum {
    SJ__BACKEND_TAKES_CPU = 1u << 0,
    SJ__BACKEND_TAKES_THREADS = 1u << 1,
    SJ__BACKEND_TAKES_TUNE = 1u << 2,
    SJ__BACKEND_TAKES_NATIVE_AFTER = 1u << 3,
    SJ__BACKEND_TAKES_GPU = 1u << 4, /* gpu_emit, arch, cuda_driver */
    SJ__BACKEND_TAKES_TIERED = 1u << 5,
};

/* An open backend: its compiler table and whatever object owns it. */
typedef struct sj__backend {
    sj_compiler comp;
    /* With tiered: the same compiler at SJ_ENGINE_TIER_OPT_LEVEL, whose
     * artifacts comp loads (sj_bucketed_cache_config.quick); else zeroed. */
    sj_compiler quick;
    char target[48]; /* "host", "interp", "nvptx sm_90", "host x86-64-v3" ... */
    void *owner;     /* NULL for a backend with no state (interp) */
    void (*close)(void *owner);
    /* Device context resets so far; NULL for a backend whose devices never
     * reset (host, interp). */
    uint64_t (*resets)(void *owner);
} sj__backend;

typedef struct sj__backend_row {
    const char *name;
    unsigned takes;
    /* Fills out (memset to 0 before), or fails with a message and leaves
     * nothing open. NULL where this build lacks the backend. */
    sj_status (*open)(sj_ctx *ctx, const sj__backend_params *p, sj__backend *out);
    const char *absent; /* why this build lacks it; NULL when open is set */
} sj__backend_row;

/* Looks name up (NULL = "host"), checks p against the row and opens it.
 * Errors name the backend and the option; out is zeroed on failure. */
sj_status sj__backend_open(sj_ctx *ctx, const char *name, const sj__backend_params *p,
                           sj__backend *out);
void sj__backend_close(sj__backend *b); /* a zeroed b is a no-op */

/* The rows' openers, one per backend file. */
sj_status sj__backend_interp_open(sj_ctx *ctx, const sj__backend_params *p, sj__backend *out);
sj_status sj__backend_cuda_open(sj_ctx *ctx, const sj__backend_params *p, sj__backend *out);
sj_status sj__backend_host_open(sj_ctx *ctx, const sj__backend_params *p, sj__backend *out);

#endif
