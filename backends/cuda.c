/* The GPU backends behind the bucketed cache's compiler table: sj_compile
 * for NVPTX or NVRTC + the artifact format for bytes (no GPU needed), and
 * executables on one CUDA device, made at the first load, for runs. */
#include "shapejit/ext/backends.h"

#include "backends/artifact_exe.h"
#include "backends/backend_registry.h"
#include "core/core_impl.h"
#ifndef SJ_RUNTIME_ONLY
#include "compile/gpu/gpu_compile.h"
#endif
#include "runtime/gpu_arch.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* "SJGO" + the u64 sj_compile_options_hash, little-endian. */
#define GPU_OPTIONS_BYTES 12
#define GPU_LOAD_TRIES 8

struct sj_gpu_compiler {
    sj_ctx *ctx;
    sj_compile_options options; /* arch always spelled out: "sm_90", never NULL */
    sj_cuda_device_config device_cfg;
    char *driver_path;
    const sj_mdcache_policy *policy;
    bool replay;
    pthread_mutex_t mu; /* making the device */
    sj_device *device;  /* NULL until a load needs it */
    uint8_t options_bytes[GPU_OPTIONS_BYTES];
    char arch[16];
    char toolchain[96];
};

void sj_gpu_compiler_config_init(sj_gpu_compiler_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    sj_compile_options_init(&cfg->options);
    cfg->options.target = SJ_TARGET_NVPTX;
    sj_cuda_device_config_init(&cfg->device);
    cfg->replay = true;
}

void sj_gpu_compiler_destroy(sj_gpu_compiler *gc) {
    if (!gc) return;
    sj_device_destroy(gc->device);
    pthread_mutex_destroy(&gc->mu);
    sj_free(gc->ctx, gc->driver_path);
    sj_free(gc->ctx, gc);
}

/* The toolchain a store key names. A runtime-only build has none and looks
 * up the build machine's, recorded when it was configured
 * (cmake/runtime_only.cmake), so a store precompiled there is found here. */
static sj_status gpu_toolchain(sj_ctx *ctx, sj_target t, char *buf, size_t len) {
#ifdef SJ_RUNTIME_ONLY
    const char *name = t == SJ_TARGET_NVRTC ? SJ_RUNTIME_TOOLCHAIN_NVRTC : SJ_RUNTIME_TOOLCHAIN_NVPTX;
    if (snprintf(buf, len, "%s", name) >= (int)len)
        return sj_fail(ctx, SJ_E_INTERNAL, "gpu toolchain name '%s' too long", name);
    return SJ_OK;
#else
    return sj__gpu_toolchain(ctx, t == SJ_TARGET_NVRTC ? SJ_GPU_PATH_NVRTC : SJ_GPU_PATH_NVPTX, buf,
                             len);
#endif
}

sj_status sj_gpu_compiler_create(sj_ctx *ctx, const sj_gpu_compiler_config *cfg,
                                 sj_gpu_compiler **out) {
    if (!ctx || !out)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *out = NULL;
    sj_gpu_compiler_config defaults;
    if (!cfg) {
        sj_gpu_compiler_config_init(&defaults);
        cfg = &defaults;
    }
    sj_target t = cfg->options.target;
    if (t != SJ_TARGET_NVPTX && t != SJ_TARGET_NVRTC)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "gpu compiler: options target %d is not nvptx or nvrtc",
                       (int)t);
    int sm;
    SJ_TRY(sj__gpu_parse_arch(ctx, cfg->options.arch, &sm));
    sj_gpu_compiler *gc = sj_calloc(ctx, 1, sizeof *gc);
    if (!gc) return sj_fail(ctx, SJ_E_NOMEM, "gpu compiler: out of memory");
    gc->ctx = ctx;
    pthread_mutex_init(&gc->mu, NULL);
    gc->options = cfg->options;
    /* NULL and "sm_90" compile the same code: one spelling, one key. */
    snprintf(gc->arch, sizeof gc->arch, "sm_%d", sm);
    gc->options.arch = gc->arch;
    /* Host-only fields do not change GPU code (the options hash skips them). */
    gc->options.cpu = gc->options.features = NULL;
    gc->device_cfg = cfg->device;
    gc->policy = cfg->policy;
    gc->replay = cfg->replay;
    if (cfg->device.driver_path && !(gc->driver_path = sj_strdup(ctx, cfg->device.driver_path))) {
        sj_gpu_compiler_destroy(gc);
        return sj_fail(ctx, SJ_E_NOMEM, "gpu compiler: out of memory");
    }
    gc->device_cfg.driver_path = gc->driver_path;
    /* Fails where the target's toolchain is not built in (NVRTC without
     * the CUDA toolkit): better at creation than at every compile. */
    sj_status st = gpu_toolchain(ctx, t, gc->toolchain, sizeof gc->toolchain);
    if (st != SJ_OK) {
        sj_gpu_compiler_destroy(gc);
        return st;
    }
    uint64_t oh = sj_compile_options_hash(&gc->options);
    memcpy(gc->options_bytes, "SJGO", 4);
    for (int i = 0; i < 8; i++) gc->options_bytes[4 + i] = (uint8_t)(oh >> (8 * i));
    *out = gc;
    return SJ_OK;
}

sj_status sj_gpu_compiler_device(sj_gpu_compiler *gc, sj_device **out) {
    *out = NULL;
    pthread_mutex_lock(&gc->mu);
    sj_status st = SJ_OK;
    if (!gc->device) st = sj_cuda_device_create(gc->ctx, &gc->device_cfg, gc->policy, &gc->device);
    *out = gc->device;
    pthread_mutex_unlock(&gc->mu);
    return st;
}

static sj_status gpu_compile(void *self, const sj_graph *g, int64_t extent, void **artifact,
                             size_t *len) {
    sj_gpu_compiler *gc = self;
#ifdef SJ_RUNTIME_ONLY
    /* Reached on a store miss; a runtime-only build has nothing to compile with. */
    const char *path = gc->options.target == SJ_TARGET_NVRTC ? "nvrtc" : "nvptx";
    return sj_fail(sj_graph_ctx(g), SJ_E_NOT_FOUND,
                   "not precompiled for %s: bucket extent %lld (%s, toolchain %s) is not in the "
                   "store; run `shapejit precompile MODEL --ladder SPEC --target %s --arch %s` on "
                   "a build machine",
                   gc->arch, (long long)extent, path, gc->toolchain, path, gc->arch);
#else
    sj_artifact *a;
    SJ_TRY(sj_compile(g, extent, &gc->options, &a));
    uint8_t *bytes;
    sj_status st = sj_artifact_serialize(a, &bytes, len);
    sj_artifact_destroy(a);
    if (st == SJ_OK) *artifact = bytes;
    return st;
#endif
}

static sj_status gpu_load(void *self, const sj_graph *g, int64_t extent, const void *artifact,
                          size_t len, void **exe) {
    sj_gpu_compiler *gc = self;
    sj_ctx *ctx = sj_graph_ctx(g);
    sj_device *dev;
    SJ_TRY(sj_gpu_compiler_device(gc, &dev));
    sj_artifact *a;
    SJ_TRY(sj_artifact_deserialize(ctx, artifact, len, &a));
    sj_artifact_info info;
    sj_artifact_get_info(a, &info);
    sj_status st = SJ_OK;
    if (strcmp(info.triple, SJ_NVPTX_TRIPLE) != 0 || strcmp(info.cpu, gc->arch) != 0)
        st = sj_fail(ctx, SJ_E_MISMATCH, "gpu artifact: built for %s/%s, wanted %s/%s", info.triple,
                     info.cpu, SJ_NVPTX_TRIPLE, gc->arch);
    else if (sj_graph_symbol(g) && info.extent != extent)
        st = sj_fail(ctx, SJ_E_MISMATCH, "gpu artifact: compiled at extent %lld, wanted %lld",
                     (long long)info.extent, (long long)extent);
    sj_executable *e = NULL;
    /* The cubin when it fits the GPU, else the PTX, JIT-compiled by the driver. */
    /* Another bucket's fault may reset the device during the load, which
     * then fails or makes a stale executable: load again (a few times: each
     * retry means another reset). */
    for (int tries = 0; st == SJ_OK && tries < GPU_LOAD_TRIES; tries++) {
        uint64_t gen = sj_device_generation(dev);
        st = sj_artifact_load(a, dev, g, &e);
        if (st == SJ_OK && !sj_executable_stale(e)) break;
        if (sj_device_generation(dev) == gen) break; /* a failure of its own */
        sj_executable_destroy(e);
        e = NULL;
        st = SJ_OK;
    }
    if (st == SJ_OK && !e)
        st = sj_fail(ctx, SJ_E_STATE, "gpu artifact: the device was reset %d times during the load",
                     GPU_LOAD_TRIES);
    sj_artifact_destroy(a);
    if (st != SJ_OK) {
        sj_executable_destroy(e);
        return st;
    }
    *exe = e;
    return SJ_OK;
}

/* Captured by the first run, as on the host: the capture records the run
 * memory, made then. */
static sj_status gpu_run(void *self, void *exe, int64_t active, const sj_tensor *inputs,
                         sj_tensor *outputs) {
    sj_gpu_compiler *gc = self;
    if (gc->replay && !sj_executable_has_capture(exe)) SJ_TRY(sj_executable_capture(exe));
    return sj_executable_run_or_replay(exe, active, inputs, outputs);
}

static bool gpu_stale(void *self, void *exe) {
    (void)self;
    return sj_executable_stale(exe);
}

static sj_status gpu_run_stepwise(void *self, void *exe, int64_t active, const sj_tensor *inputs,
                                  sj_tensor *outputs) {
    (void)self;
    return sj_executable_run_stepwise(exe, active, inputs, outputs);
}

static uint64_t gpu_compiler_resets(sj_gpu_compiler *gc) {
    pthread_mutex_lock(&gc->mu);
    uint64_t n = gc->device ? sj_device_resets(gc->device) : 0;
    pthread_mutex_unlock(&gc->mu);
    return n;
}

void sj_gpu_compiler_table(sj_gpu_compiler *gc, sj_compiler *out) {
    memset(out, 0, sizeof *out);
    out->ctx = gc;
    out->target_triple = SJ_NVPTX_TRIPLE;
    out->target_cpu = gc->arch;
    out->target_features = "";
    out->artifact_version = SJ_ARTIFACT_FORMAT_VERSION;
    out->compiler_version = gc->toolchain;
    out->options = gc->options_bytes;
    out->options_len = GPU_OPTIONS_BYTES;
    out->compile = gpu_compile;
    out->load = gpu_load;
    out->run = gpu_run;
    sj__artifact_exe_ops(out);
    out->stale = gpu_stale;
    out->run_stepwise = gpu_run_stepwise;
}

const char *sj_gpu_compiler_arch(const sj_gpu_compiler *gc) { return gc->arch; }

static void cuda_close(void *owner) { sj_gpu_compiler_destroy(owner); }
static uint64_t cuda_resets(void *owner) { return gpu_compiler_resets(owner); }

static bool one_of(const char *s, const char *a, const char *b) {
    return !strcmp(s, a) || !strcmp(s, b);
}

/* The registry's cuda row: names first, so a typo is reported before
 * anything is made; then the compiler, and the GPU unless only a store is
 * being filled. */
sj_status sj__backend_cuda_open(sj_ctx *ctx, const sj__backend_params *p, sj__backend *out) {
    if (p->gpu_emit && !one_of(p->gpu_emit, "llvm", "nvrtc"))
        return sj_fail(ctx, SJ_E_INVALID_ARG, "gpu_emit '%s' is not llvm or nvrtc", p->gpu_emit);
    if (p->arch && !one_of(p->arch, "sm_80", "sm_90"))
        return sj_fail(ctx, SJ_E_INVALID_ARG, "arch '%s' is not sm_80 or sm_90", p->arch);
    sj_gpu_compiler_config gcfg;
    sj_gpu_compiler_config_init(&gcfg);
    bool nvrtc = p->gpu_emit && !strcmp(p->gpu_emit, "nvrtc");
    gcfg.options.target = nvrtc ? SJ_TARGET_NVRTC : SJ_TARGET_NVPTX;
    gcfg.options.arch = p->arch;
    gcfg.options.precision = p->precision;
    gcfg.device.driver_path = p->cuda_driver;
    sj_gpu_compiler *gc;
    sj_status st = sj_gpu_compiler_create(ctx, &gcfg, &gc);
    if (st != SJ_OK) {
        sj__error_prefix(ctx, "backend cuda (%s)", nvrtc ? "nvrtc" : "llvm");
        return st;
    }
    /* A server without its GPU fails here, before a compile is spent; a
     * build machine filling a store for a fleet needs none. */
    if (!p->store_only) {
        sj_device *dev;
        st = sj_gpu_compiler_device(gc, &dev);
        if (st != SJ_OK) {
            sj__error_prefix(ctx, "backend cuda needs a GPU (%s)", sj_status_str(st));
            sj_gpu_compiler_destroy(gc);
            return st;
        }
    }
    sj_gpu_compiler_table(gc, &out->comp);
    out->owner = gc;
    out->close = cuda_close;
    out->resets = cuda_resets;
    snprintf(out->target, sizeof out->target, "%s %s", nvrtc ? "nvrtc" : "nvptx",
             sj_gpu_compiler_arch(gc));
    return SJ_OK;
}
