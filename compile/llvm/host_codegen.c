/* Target machine, new-pass-manager pipeline and output for the host emitter. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "core/clock.h"
#include "compile/llvm/llvm_impl.h"

static sj_status make_target_machine(sj_ctx *ctx, const sj_llvm_target *t, LLVMTargetMachineRef *tm) {
    char *triple, *host_cpu, *host_features, *cpu = NULL, *features = NULL;
    SJ_TRY(sj__llvm_host_info(ctx, &triple, &host_cpu, &host_features));
    const char *tr = t->triple ? t->triple : triple;
    LLVMTargetRef target;
    char *err = NULL;
    sj_status st = sj__llvm_host_target(ctx, t->cpu, t->features, &cpu, &features);
    if (st == SJ_OK && LLVMGetTargetFromTriple(tr, &target, &err)) {
        st = sj_fail(ctx, SJ_E_UNSUPPORTED, "host target: triple %s: %s", tr, err ? err : "unknown");
        LLVMDisposeMessage(err);
    } else if (st == SJ_OK) {
        static const LLVMCodeGenOptLevel levels[] = {LLVMCodeGenLevelNone, LLVMCodeGenLevelLess,
                                                     LLVMCodeGenLevelDefault, LLVMCodeGenLevelAggressive};
        *tm = LLVMCreateTargetMachine(target, tr, cpu, features, levels[t->opt_level], LLVMRelocPIC,
                                      LLVMCodeModelDefault);
        if (!*tm) st = sj_fail(ctx, SJ_E_UNSUPPORTED, "host target: no target machine for %s", tr);
    }
    sj_free(ctx, cpu);
    sj_free(ctx, features);
    sj_free(ctx, triple);
    sj_free(ctx, host_cpu);
    sj_free(ctx, host_features);
    return st;
}

/* Whether the pipeline unrolls loops. LLVM's unrollers copy out every short
 * loop of constant trip count, and a graph of small dims is made of them:
 * in a hidden-32 BERT bucket, a matmul kernel became 4,000 lines of IR and
 * the bucket's optimise + codegen 1.4-1.9 s. With 16-float vectors
 * (AVX-512) the loops are a few iterations already: without the unrollers
 * the test models' buckets compile in 0.13-0.52x the time and their
 * requests run as fast or faster (bench/compile_levels.py: a hidden-32
 * encoder layer at 64 rows 82 -> 44 us, a reduced ResNet-18 at batch 4 815 -> 683 us).
 * The one kernel that needed the copies, emit_ikj's narrow columns, asks
 * for them itself (host_emit.c, rloop_close_unrolled). With 8- or 4-float
 * vectors the unrolled copies are the register blocking more kernels rely
 * on (attention + layernorm at 64 rows 44 -> 64 us on x86-64-v3, an FFN at
 * 8 rows 21 -> 30 us on x86-64-v2 without them), so those targets keep
 * them. */
static bool unrolls_loops(int vector_floats) { return vector_floats < 16; }

static sj_status optimise(sj_ctx *ctx, LLVMModuleRef m, LLVMTargetMachineRef tm, int level, bool unroll) {
    char *msg = NULL;
    if (LLVMVerifyModule(m, LLVMReturnStatusAction, &msg)) {
        sj_status st = sj_fail(ctx, SJ_E_COMPILE, "host emitter produced invalid IR: %s", msg);
        LLVMDisposeMessage(msg);
        return st;
    }
    LLVMDisposeMessage(msg);
    char pipeline[32];
    snprintf(pipeline, sizeof pipeline, "default<O%d>", level);
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(po, level >= 2);
    LLVMPassBuilderOptionsSetSLPVectorization(po, level >= 2);
    LLVMPassBuilderOptionsSetLoopUnrolling(po, unroll);
    LLVMErrorRef err = LLVMRunPasses(m, pipeline, tm, po);
    LLVMDisposePassBuilderOptions(po);
    if (err) {
        char *em = LLVMGetErrorMessage(err);
        sj_status st = sj_fail(ctx, SJ_E_COMPILE, "LLVM pipeline %s: %s", pipeline, em);
        LLVMDisposeErrorMessage(em);
        return st;
    }
    return SJ_OK;
}

static sj_status copy_out(sj_ctx *ctx, const char *p, size_t n, uint8_t **out, size_t *len) {
    *out = sj_alloc(ctx, n ? n : 1);
    if (!*out) return sj_fail(ctx, SJ_E_NOMEM, "host emitter: out of memory for %zu bytes", n);
    memcpy(*out, p, n);
    *len = n;
    return SJ_OK;
}

static sj_status print_module(sj_ctx *ctx, LLVMModuleRef m, LLVMTargetMachineRef tm,
                              sj_llvm_output what, uint8_t **out, size_t *len) {
    if (what == SJ_LLVM_IR) {
        char *s = LLVMPrintModuleToString(m);
        sj_status st = copy_out(ctx, s, strlen(s), out, len);
        LLVMDisposeMessage(s);
        return st;
    }
    LLVMMemoryBufferRef mb = NULL;
    char *err = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, m, what == SJ_LLVM_OBJECT ? LLVMObjectFile : LLVMAssemblyFile,
                                            &err, &mb)) {
        sj_status st = sj_fail(ctx, SJ_E_COMPILE, "LLVM code generation: %s", err ? err : "failed");
        LLVMDisposeMessage(err);
        return st;
    }
    sj_status st = copy_out(ctx, LLVMGetBufferStart(mb), LLVMGetBufferSize(mb), out, len);
    LLVMDisposeMemoryBuffer(mb);
    return st;
}

/* Whether the comma-separated feature list has "+name". */
static bool enables(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; (p = strchr(p, '+')); p++)
        if (!strncmp(p + 1, name, n) && (p[n + 1] == ',' || !p[n + 1])) return true;
    return false;
}

int sj__llvm_gemm_level(const char *fs) {
    if (enables(fs, "avx512f") && enables(fs, "avx512vl") && enables(fs, "avx512dq") &&
        enables(fs, "avx512bw"))
        return 4;
    return enables(fs, "avx2") && enables(fs, "fma") ? 3 : 2;
}

sj_status sj__llvm_compile(sj_ctx *ctx, const sj_lowered *l, const sj_llvm_target *t,
                          sj_llvm_output what, uint8_t **out, size_t *len, sj_llvm_emitted *emitted,
                          sj_compile_times *times) {
    memset(emitted, 0, sizeof *emitted);
    if (t->opt_level < 0 || t->opt_level > 3)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "host emitter: opt level %d not in 0..3", t->opt_level);
    LLVMTargetMachineRef tm = NULL;
    SJ_TRY(make_target_machine(ctx, t, &tm));
    LLVMContextRef C = LLVMContextCreate();
    LLVMModuleRef m = LLVMModuleCreateWithNameInContext("shapejit", C);
    char *triple = LLVMGetTargetMachineTriple(tm);
    LLVMSetTarget(m, triple);
    LLVMDisposeMessage(triple);
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
    char *dl = LLVMCopyStringRepOfTargetData(td);
    LLVMSetDataLayout(m, dl);
    LLVMDisposeMessage(dl);
    LLVMDisposeTargetData(td);
    char *fs = LLVMGetTargetMachineFeatureString(tm);
    int vector_floats = enables(fs, "avx512f") ? 16 : enables(fs, "avx") ? 8 : 4;
    int gemm_level = sj__llvm_gemm_level(fs);
    LLVMDisposeMessage(fs);
    uint64_t t0 = sj__now_ns();
    sj_status st = sj__llvm_emit_kernels(ctx, m, l, t, vector_floats, gemm_level, emitted);
    uint64_t t1 = sj__now_ns();
    if (st == SJ_OK) st = optimise(ctx, m, tm, t->opt_level, unrolls_loops(vector_floats));
    uint64_t t2 = sj__now_ns();
    if (st == SJ_OK) st = print_module(ctx, m, tm, what, out, len);
    if (times) {
        times->emit_ns = t1 - t0;
        times->optimise_ns = t2 - t1;
        times->codegen_ns = sj__now_ns() - t2;
    }
    LLVMDisposeModule(m);
    LLVMContextDispose(C);
    LLVMDisposeTargetMachine(tm);
    if (st != SJ_OK) sj__llvm_emitted_free(ctx, emitted);
    return st;
}
