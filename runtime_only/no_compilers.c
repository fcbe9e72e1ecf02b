/* What a runtime-only build (cmake -DSJ_COMPILERS=OFF) has in place of LLVM,
 * NVRTC and nvJitLink: the same internal entry points, each refusing with a
 * message that says what this build is for, so the rest of the library (the
 * store, the bucketed cache, the CUDA device, the interpreter) links
 * unchanged. GPU artifacts precompiled on a build machine load and run;
 * nothing is compiled here, and host object code is not loaded (that needs
 * LLVM's ORC). Compiled only into runtime-only builds. */
#include <stdio.h>
#include <string.h>

#include "compile/llvm/llvm_impl.h"
#include "compile/lower/emitter.h"
#include "compile/gpu/gpu_compile.h"
#include "runtime/host_code/host_jit_impl.h"

#define RUNTIME_ONLY "this runtime-only build (SJ_COMPILERS=OFF) "

static sj_status refuse_host(sj_ctx *ctx) {
    return sj_fail(ctx, SJ_E_UNSUPPORTED,
                   "host: " RUNTIME_ONLY "has no LLVM, so it neither compiles nor loads host "
                   "code; host artifacts run on a full build. Use --backend cuda (GPU artifacts "
                   "precompiled into the store) or --backend interp");
}

bool sj__llvm_init(void) {
    return false;
}

sj_status sj__llvm_host_info(sj_ctx *ctx, char **triple, char **cpu, char **features) {
    *triple = *cpu = *features = NULL;
    return refuse_host(ctx);
}

sj_status sj__llvm_host_features(sj_ctx *ctx, const char *features, char **out) {
    (void)features;
    *out = NULL;
    return refuse_host(ctx);
}

sj_status sj__llvm_host_cpu_check(sj_ctx *ctx, const char *cpu) {
    (void)cpu;
    return refuse_host(ctx);
}

bool sj__llvm_host_is_native(const char *cpu) {
    return !cpu || !strcmp(cpu, "native");
}

sj_status sj__llvm_host_target(sj_ctx *ctx, const char *cpu, const char *features, char **cpu_out,
                              char **features_out) {
    (void)cpu;
    (void)features;
    *cpu_out = *features_out = NULL;
    return refuse_host(ctx);
}

/* No host code is compiled or loaded here, so no CPU level is either. */
int sj__llvm_host_num_levels(void) {
    return 0;
}

const char *sj__llvm_host_level(int i, const char **features) {
    (void)i;
    if (features) *features = NULL;
    return NULL;
}

/* No host code runs here, so no extern is provided to it. */
void *sj__host_extern_symbol(const char *name) {
    (void)name;
    return NULL;
}

struct sj_host_jit {
    char unused;
};

sj_status sj__host_jit_create(sj_ctx *ctx, sj_host_jit **out) {
    *out = NULL;
    return refuse_host(ctx);
}

/* The calls below only ever see a JIT that sj__host_jit_create made, and it
 * makes none here; they keep the host device's contract all the same. */
void sj__host_jit_destroy(sj_host_jit *j) {
    (void)j;
}

sj_status sj__host_jit_add_object(sj_host_jit *j, const void *obj, size_t len,
                                 sj_host_jit_module **out) {
    (void)j, (void)obj, (void)len;
    *out = NULL;
    return SJ_E_UNSUPPORTED;
}

void sj__host_jit_remove(sj_host_jit *j, sj_host_jit_module *m) {
    (void)j, (void)m;
}

sj_status sj__host_jit_lookup(sj_host_jit *j, sj_host_jit_module *m, const char *name, int required,
                             uint64_t *addr) {
    (void)j, (void)m, (void)name, (void)required;
    *addr = 0;
    return SJ_E_UNSUPPORTED;
}

/* ---- emitters: sj_compile and sj_emit_text for every target refuse. */

static sj_status refuse_compile(sj_ctx *ctx, const char *target, const sj_compile_options *o) {
    const char *flag = o->target == SJ_TARGET_HOST ? "host" : target;
    return sj_fail(ctx, SJ_E_UNSUPPORTED,
                   "compile (%s%s%s): " RUNTIME_ONLY "compiles nothing; run `shapejit precompile "
                   "MODEL --ladder SPEC --target %s%s%s` on a build machine and load its store",
                   target, o->arch ? " " : "", o->arch ? o->arch : "", flag,
                   o->target == SJ_TARGET_HOST || !o->arch ? "" : " --arch ",
                   o->target == SJ_TARGET_HOST || !o->arch ? "" : o->arch);
}

#define REFUSING_EMITTER(var, name)                                                                \
    static sj_status var##_build(const sj_lowered *l, const sj_compile_options *o,                 \
                                 sj_artifact *a) {                                                 \
        (void)l;                                                                                   \
        return refuse_compile(a->ctx, name, o);                                                    \
    }                                                                                              \
    static sj_status var##_text(const sj_lowered *l, const sj_compile_options *o,                  \
                                sj_emit_kind kind, char **out, size_t *len) {                      \
        (void)kind, (void)len;                                                                     \
        *out = NULL;                                                                               \
        return refuse_compile(l->ctx, name, o);                                                    \
    }                                                                                              \
    const sj_emitter var = {name, var##_build, var##_text, 0, NULL};

REFUSING_EMITTER(sj__host_emitter, "host")
REFUSING_EMITTER(sj__nvptx_emitter, "nvptx")
REFUSING_EMITTER(sj__nvrtc_emitter, "nvrtc")

/* The toolchains whose artifacts this build looks up: the build machine's,
 * recorded when it was configured (see cmake/runtime_only.cmake), so a
 * store precompiled there is found here. */
sj_status sj__gpu_toolchain(sj_ctx *ctx, sj_gpu_path path, char *buf, size_t len) {
    const char *t =
        path == SJ_GPU_PATH_NVRTC ? SJ_RUNTIME_TOOLCHAIN_NVRTC : SJ_RUNTIME_TOOLCHAIN_NVPTX;
    if (snprintf(buf, len, "%s", t) >= (int)len)
        return sj_fail(ctx, SJ_E_INTERNAL, "gpu toolchain name '%s' too long", t);
    return SJ_OK;
}
