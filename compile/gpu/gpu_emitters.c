/* The two GPU emitters behind sj_compile (compile/lower/emitter.h): target
 * "nvptx" (LLVM NVPTX -> PTX -> cubin) and "nvrtc" (CUDA C -> NVRTC -> PTX +
 * cubin). Both record the arch as the artifact's CPU and their toolchain in
 * place of the LLVM version, and keep the PTX next to the cubin so a device
 * of another arch can still JIT it. An artifact's code is one module per
 * kernel, bundled (emit's text stays one module, for reading). */
#include <stdio.h>
#include <string.h>

#include "compile/gpu/nvptx_impl.h"
#include "compile/lower/emitter.h"
#include "compile/gpu/gpu_compile.h"
#include "compile/gpu/gpu_schedule.h"
#include "plan/code_bundle.h"

/* Per-kernel code, packed as bundles (plan/code_bundle.h): piece i of each
 * blob is kernel i of the plan, compiled alone, so a kernel whose code is
 * the same in several buckets is the same bytes in each artifact (the store
 * keeps it once) and a device loads it once (runtime/code_registry.h). */
typedef struct gpu_pieces {
    int n;
    sj_gpu_code *code;
} gpu_pieces;

static void pieces_free(sj_ctx *ctx, gpu_pieces *p) {
    for (int i = 0; p->code && i < p->n; i++) sj__gpu_code_free(ctx, &p->code[i]);
    sj_free(ctx, p->code);
}

/* A plan without kernels (outputs that are inputs or weights) keeps one
 * empty module, whole, as before. */
static sj_status compile_pieces(sj_gpu_path path, const sj_lowered *l, const sj_kernel *ks, int sm,
                                gpu_pieces *out) {
    sj_ctx *ctx = l->ctx;
    out->n = l->n_kernels > 0 ? l->n_kernels : 1;
    out->code = sj_calloc(ctx, (size_t)out->n, sizeof *out->code);
    if (!out->code) return sj_fail(ctx, SJ_E_NOMEM, "gpu: out of memory for %d kernels", out->n);
    for (int i = 0; i < out->n; i++) {
        sj_lowered one = *l;
        one.n_kernels = l->n_kernels > 0;
        one.kernels = (sj_kernel *)&ks[i];
        SJ_TRY(sj__gpu_compile_lowered(ctx, &one, path, sm, true, &out->code[i], NULL));
    }
    return SJ_OK;
}

/* One blob of the pieces' cubins (when every piece has one) or PTX (each
 * with its NUL: the driver reads PTX as a C string); bundled false: the
 * one piece whole. */
static sj_status add_bundle(sj_artifact *a, const gpu_pieces *p, sj_code_format fmt,
                            bool bundled) {
    sj_ctx *ctx = a->ctx;
    const uint8_t **bytes = sj_calloc(ctx, (size_t)p->n, sizeof *bytes);
    size_t *lens = sj_calloc(ctx, (size_t)p->n, sizeof *lens);
    sj_status st = bytes && lens ? SJ_OK : sj_fail(ctx, SJ_E_NOMEM, "gpu: out of memory");
    bool all = true; /* without nvJitLink there are no cubins: the artifact keeps PTX only */
    for (int i = 0; i < p->n && st == SJ_OK; i++) {
        bytes[i] = fmt == SJ_CODE_CUBIN ? p->code[i].cubin : (const uint8_t *)p->code[i].ptx;
        lens[i] = fmt == SJ_CODE_CUBIN ? p->code[i].cubin_len : p->code[i].ptx_len + 1;
        all &= bytes[i] != NULL;
    }
    uint8_t *blob = NULL;
    size_t len = 0;
    if (st == SJ_OK && all && bundled) st = sj__code_bundle_pack(ctx, bytes, lens, p->n, &blob, &len);
    if (st == SJ_OK && all)
        st = bundled ? sj__artifact_add_code(a, fmt, blob, len)
                     : sj__artifact_add_code(a, fmt, bytes[0], lens[0]);
    sj_free(ctx, blob);
    sj_free(ctx, bytes);
    sj_free(ctx, lens);
    return st;
}

static sj_status gpu_build(sj_gpu_path path, const sj_lowered *l, const sj_compile_options *o,
                           sj_artifact *a) {
    sj_ctx *ctx = a->ctx;
    int sm;
    SJ_TRY(sj__gpu_parse_arch(ctx, o->arch, &sm));
    if (a->plan.n_kernels != l->n_kernels)
        return sj_fail(ctx, SJ_E_INTERNAL, "gpu: %d kernels lowered, %d in the plan", l->n_kernels,
                       (int)a->plan.n_kernels);
    SJ_TRY(sj__gpu_schedule_plan(ctx, l->kernels, l->n_kernels, &a->plan));
    char toolchain[96], cpu[16];
    SJ_TRY(sj__gpu_toolchain(ctx, path, toolchain, sizeof toolchain));
    snprintf(cpu, sizeof cpu, "sm_%d", sm);
    sj_kernel *ks; /* at least one entry, so an empty plan's module has one to point at */
    SJ_TRY(sj__gpu_named_kernels(ctx, l->kernels, l->n_kernels, &ks));
    for (int i = 0; i < l->n_kernels; i++)
        memcpy(a->plan.kernels[i].name, ks[i].name, sizeof ks[i].name);
    gpu_pieces pieces = {0, NULL};
    sj_status st = compile_pieces(path, l, ks, sm, &pieces);
    if (st == SJ_OK) st = sj__artifact_set_string(a, &a->triple, SJ_NVPTX_TRIPLE);
    if (st == SJ_OK) st = sj__artifact_set_string(a, &a->cpu, cpu);
    if (st == SJ_OK) st = sj__artifact_set_string(a, &a->features, "");
    if (st == SJ_OK) st = sj__artifact_set_string(a, &a->externs, "");
    if (st == SJ_OK) st = sj__artifact_set_string(a, &a->llvm_version, toolchain);
    if (st == SJ_OK) st = add_bundle(a, &pieces, SJ_CODE_CUBIN, l->n_kernels > 0);
    if (st == SJ_OK) st = add_bundle(a, &pieces, SJ_CODE_PTX, l->n_kernels > 0);
    pieces_free(ctx, &pieces);
    sj_free(ctx, ks);
    return st;
}

static sj_status gpu_text(sj_gpu_path path, const sj_lowered *l, const sj_compile_options *o,
                          sj_emit_kind kind, char **out, size_t *len) {
    sj_ctx *ctx = l->ctx;
    bool want_source = path == SJ_GPU_PATH_NVRTC ? kind == SJ_EMIT_CUDA_C : kind == SJ_EMIT_LLVM_IR;
    if (kind != SJ_EMIT_PTX && kind != SJ_EMIT_CUBIN && !want_source)
        return sj_fail(ctx, SJ_E_UNSUPPORTED, "emit: target %s writes %s, PTX or a cubin",
                       path == SJ_GPU_PATH_NVRTC ? "nvrtc" : "nvptx",
                       path == SJ_GPU_PATH_NVRTC ? "CUDA C" : "LLVM IR");
    int sm;
    SJ_TRY(sj__gpu_parse_arch(ctx, o->arch, &sm));
    /* the names an artifact's code has (sj__gpu_named_kernels), in one module */
    sj_lowered named = *l;
    SJ_TRY(sj__gpu_named_kernels(ctx, l->kernels, l->n_kernels, &named.kernels));
    sj_gpu_code code;
    char *source = NULL;
    sj_status st = sj__gpu_compile_lowered(ctx, &named, path, sm, kind == SJ_EMIT_CUBIN, &code,
                                          want_source ? &source : NULL);
    sj_free(ctx, named.kernels);
    SJ_TRY(st);
    if (want_source) {
        *out = source;
        *len = strlen(source);
    } else if (kind == SJ_EMIT_CUBIN) {
        *out = code.cubin; /* binary: the caller reads *len bytes */
        *len = code.cubin_len;
        code.cubin = NULL;
    } else {
        *out = code.ptx;
        *len = code.ptx_len;
        code.ptx = NULL;
    }
    sj__gpu_code_free(ctx, &code);
    if (*out) return SJ_OK;
    return sj_fail(ctx, SJ_E_UNSUPPORTED,
                   "emit: no cubin for sm_%d: this build's toolchain made PTX only (no nvJitLink)", sm);
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
