/* The two GPU emitters behind sj_compile (compile/lower/emitter.h): target
 * "nvptx" (LLVM NVPTX -> PTX -> cubin) and "nvrtc" (CUDA C -> NVRTC -> PTX +
 * cubin). Both record the arch as the artifact's CPU and their toolchain in
 * place of the LLVM version, and keep the PTX next to the cubin so a device
 * of another arch can still JIT it. */
#include <stdio.h>
#include <string.h>

#include "compile/gpu/nvptx_impl.h"
#include "compile/lower/emitter.h"
#include "compile/gpu/gpu_compile.h"
#include "compile/gpu/gpu_schedule.h"

static sj_status gpu_build(sj_gpu_path path, const sj_lowered *l, const sj_compile_options *o,
                           sj_artifact *a) {
    sj_ctx *ctx = a->ctx;
    int sm;
    SJ_TRY(sj__gpu_parse_arch(ctx, o->arch, &sm));
    SJ_TRY(sj__gpu_schedule_plan(ctx, l->kernels, l->n_kernels, &a->plan));
    char toolchain[96], cpu[16];
    SJ_TRY(sj__gpu_toolchain(ctx, path, toolchain, sizeof toolchain));
    snprintf(cpu, sizeof cpu, "sm_%d", sm);
    sj_gpu_code code;
    SJ_TRY(sj__gpu_compile_lowered(ctx, l, path, sm, true, &code, NULL));
    sj_status st = sj__artifact_set_string(a, &a->triple, SJ_NVPTX_TRIPLE);
    if (st == SJ_OK) st = sj__artifact_set_string(a, &a->cpu, cpu);
    if (st == SJ_OK) st = sj__artifact_set_string(a, &a->features, "");
    if (st == SJ_OK) st = sj__artifact_set_string(a, &a->externs, "");
    if (st == SJ_OK) st = sj__artifact_set_string(a, &a->llvm_version, toolchain);
    if (st == SJ_OK && code.cubin)
        st = sj__artifact_add_code(a, SJ_CODE_CUBIN, code.cubin, code.cubin_len);
    /* with the NUL: the driver reads PTX as a C string */
    if (st == SJ_OK) st = sj__artifact_add_code(a, SJ_CODE_PTX, code.ptx, code.ptx_len + 1);
    sj__gpu_code_free(ctx, &code);
    return st;
}

static sj_status gpu_text(sj_gpu_path path, const sj_lowered *l, const sj_compile_options *o,
                          sj_emit_kind kind, char **out, size_t *len) {
    sj_ctx *ctx = l->ctx;
    bool want_source = path == SJ_GPU_PATH_NVRTC ? kind == SJ_EMIT_CUDA_C : kind == SJ_EMIT_LLVM_IR;
    if (kind != SJ_EMIT_PTX && !want_source)
        return sj_fail(ctx, SJ_E_UNSUPPORTED, "emit: target %s writes %s or PTX text",
                       path == SJ_GPU_PATH_NVRTC ? "nvrtc" : "nvptx",
                       path == SJ_GPU_PATH_NVRTC ? "CUDA C" : "LLVM IR");
    int sm;
    SJ_TRY(sj__gpu_parse_arch(ctx, o->arch, &sm));
    sj_gpu_code code;
    char *source = NULL;
    SJ_TRY(sj__gpu_compile_lowered(ctx, l, path, sm, false, &code, want_source ? &source : NULL));
    if (want_source) {
        sj__gpu_code_free(ctx, &code);
        *out = source;
        *len = strlen(source);
    } else {
        *out = code.ptx;
        *len = code.ptx_len;
        code.ptx = NULL;
        sj__gpu_code_free(ctx, &code);
    }
    return SJ_OK;
}

static sj_status nvptx_build(const sj_lowered *l, const sj_compile_options *o, sj_artifact *a) {
    return gpu_build(SJ_GPU_PATH_NVPTX, l, o, a);
}
static sj_status nvptx_text(const sj_lowered *l, const sj_compile_options *o, sj_emit_kind kind,
                            char **out, size_t *len) {
    return gpu_text(SJ_GPU_PATH_NVPTX, l, o, kind, out, len);
}
static sj_status nvrtc_build(const sj_lowered *l, const sj_compile_options *o, sj_artifact *a) {
    return gpu_build(SJ_GPU_PATH_NVRTC, l, o, a);
}
static sj_status nvrtc_text(const sj_lowered *l, const sj_compile_options *o, sj_emit_kind kind,
                            char **out, size_t *len) {
    return gpu_text(SJ_GPU_PATH_NVRTC, l, o, kind, out, len);
}

/* NVPTX loads bf16 and fp16 weights and widens them (nvptx_emit.c). The
 * CUDA C emitter has no narrowed loads: compile refuses a bf16 or fp16
 * policy for it naming the op (compile.c), rather than store float32 code
 * under its key. */
/* No fused attention kernel on the GPU targets, and window gathers stay
 * buffers there (their emitters have not been measured or run on a GPU
 * reading them inside a reduction). */
const sj_emitter sj__nvptx_emitter = {"nvptx", nvptx_build, nvptx_text,
                                     1u << SJ_PRECISION_BF16 | 1u << SJ_PRECISION_FP16, NULL, false};
const sj_emitter sj__nvrtc_emitter = {"nvrtc", nvrtc_build, nvrtc_text, 0, NULL, false};
