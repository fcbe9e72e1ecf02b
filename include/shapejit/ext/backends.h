/* shapejit/ext/backends.h — compilers for the bucketed cache beyond the
 * interpreter: the host backend (LLVM, this CPU) and the GPU backends
 * (NVPTX, NVRTC; CUDA devices), declared after the host's.
 *
 *   sj_host_compiler_config hcfg;
 *   sj_host_compiler_config_init(&hcfg);                 // O3, fusion, replay, one device
 *   sj_host_compiler *hc;
 *   if (sj_host_compiler_create(ctx, &hcfg, &hc) != SJ_OK) return 1;
 *   sj_compiler comp;
 *   sj_host_compiler_table(hc, &comp);                   // carries the options for the key
 *   sj_bucketed_cache *c;
 *   sj_bucketed_cache_create(g, ladder, &comp, store, NULL, &c);
 *   ...                                                  // get_or_compile, run_padded
 *   sj_bucketed_cache_destroy(c);
 *   sj_host_compiler_destroy(hc);                        // after every cache that uses it
 *
 * compile = sj_compile for the host + sj_artifact_serialize; load =
 * sj_artifact_deserialize + the CPU-feature check + an executable on one of
 * the compiler's host devices, params uploaded once; run = a replay of the
 * executable's captured launches (captured by its first run when `replay` is on),
 * else eager launches. The store key's target strings are this machine's
 * triple, CPU and enabled CPU features (or the ones the options name) and
 * the toolchain is the LLVM version the library was built with.
 *
 * CPU levels: options.cpu "x86-64-v2", "x86-64-v3" or "x86-64-v4" compiles
 * for that psABI level's features only, and the key records the level, so
 * a store a build machine fills serves every machine that has the level.
 * A native compiler (cpu NULL or "native", no features named) loads, when
 * the store holds nothing for its own CPU, the highest stored level whose
 * features this host has, before it compiles (sj_compiler.fallbacks).
 *
 * Runs on one device are serialised by the device, so a server with several
 * workers gives the compiler as many devices: executables are spread over
 * them round robin, and runs of different buckets then overlap.
 *
 * Ownership: the compiler owns its devices; it must outlive every cache
 * (and so every executable) made with its table. Any number of threads may
 * use the table at once.
 *
 * Extension tier (include/shapejit/ext/): for backends, tools and tests
 * that work below sj_engine; it may change between minor versions.
 */
#ifndef SHAPEJIT_BACKENDS_H
#define SHAPEJIT_BACKENDS_H

#include "shapejit/ext/bucketed_cache.h"
#include "shapejit/ext/compile.h"
#include "shapejit/ext/cuda_device.h"
#include "shapejit/ext/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sj_host_compiler_config {
    sj_compile_options options;      /* target must be SJ_TARGET_HOST */
    int devices;                     /* host devices to spread executables over; default 1 */
    /* Threads each device splits a row-parallel kernel's rows over, the
     * caller's included (sj_host_device_config); default 1. */
    int threads;
    bool replay;                     /* capture at the first run, replay after; default true */
    const sj_mdcache_policy *policy; /* the devices' metadata cache policy; NULL = defaults */
    /* The host's features ("+avx2,+fma,...") as the choice of stored levels
     * sees them; NULL = this machine's, as LLVM reads them. Another value
     * plans for another machine (and lets tests model a CPU they lack);
     * artifacts are still checked against this machine's at load. */
    const char *host_features;
    /* Time the schedules that differ for each bucket it compiles and keep
     * the fastest (backends/host_tune.h), within tune_budget_ms per bucket
     * (default 200). Tuned artifacts have keys of their own, record their
     * timings, and load like any other: a warm process tunes nothing. */
    bool tune;
    int tune_budget_ms;
    /* The devices' folder for weights derived at load, kept as files for
     * the next process (sj_host_device_config.weight_dir); NULL = none.
     * The engine sets STORE-weights beside a persistent store. */
    const char *weight_dir;
} sj_host_compiler_config;

SJ_API void sj_host_compiler_config_init(sj_host_compiler_config *cfg);

typedef struct sj_host_compiler sj_host_compiler;

/* cfg may be NULL for defaults. SJ_E_INVALID_ARG for a non-host target,
 * devices outside 1..256 or threads outside 1..SJ_HOST_MAX_THREADS. */
SJ_API sj_status sj_host_compiler_create(sj_ctx *ctx, const sj_host_compiler_config *cfg,
                                         sj_host_compiler **out);
SJ_API void sj_host_compiler_destroy(sj_host_compiler *hc); /* NULL is a no-op */

/* The compiler table; its strings, options and ctx are owned by hc. Its
        * options are the canonical form of hc's compile options, so two option
        * sets never share a key. */
SJ_API void sj_host_compiler_table(sj_host_compiler *hc, sj_compiler *out);

SJ_API int sj_host_compiler_num_devices(const sj_host_compiler *hc);
SJ_API sj_device *sj_host_compiler_device(sj_host_compiler *hc, int i);

/* ---- GPU: compile anywhere, run on a CUDA device.
 *
 *   sj_gpu_compiler_config gcfg;
 *   sj_gpu_compiler_config_init(&gcfg);                  // nvptx, sm_90, GPU 0, replay
 *   gcfg.options.target = SJ_TARGET_NVRTC;
 *   gcfg.options.arch = "sm_80";
 *   sj_gpu_compiler *gc;
 *   if (sj_gpu_compiler_create(ctx, &gcfg, &gc) != SJ_OK) return 1;  // no GPU needed
 *   sj_compiler comp;
 *   sj_gpu_compiler_table(gc, &comp);
 *   sj_bucketed_cache_create(g, ladder, &comp, store, NULL, &c);
 *   sj_bucketed_cache_precompile_stored(c, 4, NULL, NULL); // a CPU build machine: bytes only
 *   ...
 *   sj_gpu_compiler_destroy(gc);                         // after every cache that uses it
 *
 * compile = sj_compile for the target (NVPTX: LLVM -> PTX -> cubin; NVRTC:
 * CUDA C -> PTX + cubin) + sj_artifact_serialize, and needs no GPU, so a
 * deploy pipeline fills a store for a GPU fleet on CPU machines. The store
 * key's target is (nvptx64-nvidia-cuda, arch, "") and its toolchain the
 * compile path's ("llvm-19.1.7+nvjitlink-13.0", "nvrtc-13.0"): the two
 * targets never share rows, nor two arches. load = sj_artifact_deserialize +
 * the arch and extent checks + an executable on the compiler's CUDA device
 * (the cubin when it fits the GPU, else the PTX), captured as a CUDA graph
 * when `replay` is on. The device is made at the first load; where there is
 * no driver or GPU, loads fail with SJ_E_NO_DEVICE naming what is missing.
 *
 * Ownership and threads as for the host compiler: it owns its device and
 * must outlive every cache made with its table.
 */
typedef struct sj_gpu_compiler_config {
    sj_compile_options options;      /* target SJ_TARGET_NVPTX (default) or _NVRTC; arch NULL = sm_90 */
    sj_cuda_device_config device;    /* the GPU loads go to; copied */
    bool replay;                     /* capture at the first run, replay after; default true */
    const sj_mdcache_policy *policy; /* the device's metadata cache policy; NULL = defaults */
} sj_gpu_compiler_config;

SJ_API void sj_gpu_compiler_config_init(sj_gpu_compiler_config *cfg);

typedef struct sj_gpu_compiler sj_gpu_compiler;

/* cfg may be NULL for defaults. SJ_E_INVALID_ARG for a host target;
 * SJ_E_UNSUPPORTED for an arch other than sm_80/sm_90 or a target whose
 * toolchain this build lacks (NVRTC without the CUDA toolkit). */
SJ_API sj_status sj_gpu_compiler_create(sj_ctx *ctx, const sj_gpu_compiler_config *cfg,
                                        sj_gpu_compiler **out);
SJ_API void sj_gpu_compiler_destroy(sj_gpu_compiler *gc); /* NULL is a no-op */

/* The compiler table; its strings, options and ctx are owned by gc. */
SJ_API void sj_gpu_compiler_table(sj_gpu_compiler *gc, sj_compiler *out);
/* The arch compiled for, spelled "sm_90". */
SJ_API const char *sj_gpu_compiler_arch(const sj_gpu_compiler *gc);

/* The CUDA device loads use (owned by gc), made now if it is not yet:
 * SJ_E_NO_DEVICE (message naming the missing driver or GPU) where there
 * is none. What a server calls at start to fail before any compile. */
SJ_API sj_status sj_gpu_compiler_device(sj_gpu_compiler *gc, sj_device **out);

#ifdef __cplusplus
}
#endif
#endif
