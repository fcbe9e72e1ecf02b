/* The host emitter behind sj_compile: LLVM object code for this CPU (or the
 * CPU the options name). */
#include <string.h>

#include "compile/llvm/llvm_impl.h"
#include "compile/lower/emitter.h"

static sj_llvm_target target_of(const sj_compile_options *o) {
    return (sj_llvm_target){.cpu = o->cpu, .features = o->features, .opt_level = o->opt_level,
                            .blas_min_work = o->blas_min_work,
                            .few_rows_max = o->matmul == SJ_MATMUL_TILED ? 0 : SJ_MATMUL_ROWS_MAX,
                            .threads = o->threads, .objects = o->objects};
}

static sj_status host_build(const sj_lowered *l, const sj_compile_options *o, sj_artifact *a) {
    sj_ctx *ctx = a->ctx;
    sj_llvm_target t = target_of(o);
    uint8_t *obj;
    size_t len;
    sj_llvm_emitted emitted;
    SJ_TRY(sj__llvm_compile(ctx, l, &t, SJ_LLVM_OBJECT, &obj, &len, &emitted, &a->times));
    unsigned externs = emitted.externs;
    /* One object per lowered kernel, in the plan's kernel order. */
    for (int i = 0; emitted.code_keys && i < a->plan.n_kernels && i < l->n_kernels; i++)
        memcpy(a->plan.kernels[i].code, emitted.code_keys[i], sizeof a->plan.kernels[i].code);
    sj_status st = sj__host_plan_packs(ctx, &a->plan, &emitted);
    sj__llvm_emitted_free(ctx, &emitted);
    if (st != SJ_OK) {
        sj_free(ctx, obj);
        return st;
    }
    char *triple = NULL, *cpu = NULL, *features = NULL, *host_cpu = NULL, *host_features = NULL;
    st = sj__llvm_host_info(ctx, &triple, &host_cpu, &host_features);
    /* The artifact records the CPU and every feature the code may use
     * (implied ones and a level's included), which the load check asks the
     * host for. */
    if (st == SJ_OK) st = sj__llvm_host_target(ctx, o->cpu, o->features, &cpu, &features);
    if (st == SJ_OK) st = sj__artifact_set_string(a, &a->triple, triple);
    if (st == SJ_OK) st = sj__artifact_set_string(a, &a->cpu, cpu);
    if (st == SJ_OK) st = sj__artifact_set_string(a, &a->features, features);
    /* The externs the code calls, which the load check asks the process for. */
    char names[128] = "";
    static const struct { unsigned bit; const char *name; } ext[] = {
        {SJ_LLVM_EXTERN_BLAS, "cblas_sgemm"},
        {SJ_LLVM_EXTERN_ATTENTION, "sj__host_attention_rows"},
        {SJ_LLVM_EXTERN_GEMM, "sj__host_gemm"},
        {SJ_LLVM_EXTERN_GEMM_PACKED, "sj__host_gemm_packed"}};
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++)
        if (externs & ext[i].bit) {
            if (names[0]) strcat(names, ",");
            strcat(names, ext[i].name);
        }
    if (st == SJ_OK) st = sj__artifact_set_string(a, &a->externs, names);
    if (st == SJ_OK) st = sj__artifact_add_code(a, SJ_CODE_HOST_OBJECT, obj, len);
    sj_free(ctx, triple);
    sj_free(ctx, cpu);
    sj_free(ctx, features);
    sj_free(ctx, host_cpu);
    sj_free(ctx, host_features);
    sj_free(ctx, obj);
    return st;
}

static sj_status host_text(const sj_lowered *l, const sj_compile_options *o, sj_emit_kind kind,
                           char **out, size_t *len) {
    if (kind != SJ_EMIT_LLVM_IR && kind != SJ_EMIT_HOST_ASM)
        return sj_fail(l->ctx, SJ_E_UNSUPPORTED, "emit: target host writes LLVM IR or assembly");
    sj_llvm_target t = target_of(o);
    uint8_t *text;
    size_t n;
    sj_llvm_emitted emitted;
    SJ_TRY(sj__llvm_compile(l->ctx, l, &t, kind == SJ_EMIT_LLVM_IR ? SJ_LLVM_IR : SJ_LLVM_ASM, &text,
                           &n, &emitted, NULL));
    sj__llvm_emitted_free(l->ctx, &emitted); /* text shows the code; no plan to give slots */
    char *s = sj_realloc(l->ctx, text, n + 1);
    if (!s) {
        sj_free(l->ctx, text);
        return sj_fail(l->ctx, SJ_E_NOMEM, "emit: out of memory");
    }
    s[n] = 0;
    *out = s;
    *len = n;
    return SJ_OK;
}

/* At AUTO attention is fused where the code is AVX-512's: measured by
 * bench/bench_gemm on one Zen 4 core, head 64, fused against unfused (the
 * matmuls through the packed GEMM), at 1 x 1024 rows 3.5 against 6.6 ms at
 * x86-64-v4, but 8.3 against 6.8 ms at x86-64-v3, and unfused faster at
 * v3 at 64, 300 and 12 x 256 rows too. */
static sj_status host_fuses_attention(sj_ctx *ctx, const sj_compile_options *o, bool *out) {
    if (o->attention != SJ_ATTENTION_AUTO) {
        *out = o->attention == SJ_ATTENTION_FUSED;
        return SJ_OK;
    }
    char *cpu = NULL, *features = NULL;
    SJ_TRY(sj__llvm_host_target(ctx, o->cpu, o->features, &cpu, &features));
    *out = sj__llvm_gemm_level(features) >= 4;
    sj_free(ctx, cpu);
    sj_free(ctx, features);
    return SJ_OK;
}

/* bf16 and fp16 weights: loads widen them to float32 (host_emit.c). */
const sj_emitter sj__host_emitter = {"host", host_build, host_text,
                                    1u << SJ_PRECISION_BF16 | 1u << SJ_PRECISION_FP16,
                                    host_fuses_attention, true};
