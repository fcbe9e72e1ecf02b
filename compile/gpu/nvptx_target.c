/* LLVM NVPTX: target machine, kernel marking, GPU intrinsics, libdevice
 * linking and PTX emission. */
#include <stdio.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/BitReader.h>
#include <llvm-c/Linker.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "compile/llvm/llvm_impl.h"
#include "compile/gpu/nvptx_impl.h"

/* PTX ISA 7.8 is the first with sm_90 and is accepted by every ptxas from
 * CUDA 11.8 on (CUDA 13's included), so one ISA level serves both arches. */
#define SJ_NVPTX_FEATURES "+ptx78"

sj_status sj__nvptx_target_machine(sj_ctx *ctx, int sm, LLVMTargetMachineRef *out) {
    if (sm != 80 && sm != 90)
        return sj_fail(ctx, SJ_E_UNSUPPORTED, "nvptx: arch sm_%d not supported (sm_80, sm_90)", sm);
    sj__llvm_init();
    LLVMTargetRef target;
    char *err = NULL;
    if (LLVMGetTargetFromTriple(SJ_NVPTX_TRIPLE, &target, &err)) {
        sj_status st = sj_fail(ctx, SJ_E_UNSUPPORTED, "nvptx: LLVM has no NVPTX target: %s",
                               err ? err : "?");
        LLVMDisposeMessage(err);
        return st;
    }
    char cpu[16];
    snprintf(cpu, sizeof cpu, "sm_%d", sm);
    *out = LLVMCreateTargetMachine(target, SJ_NVPTX_TRIPLE, cpu, SJ_NVPTX_FEATURES,
                                   LLVMCodeGenLevelAggressive, LLVMRelocDefault,
                                   LLVMCodeModelDefault);
    if (!*out) return sj_fail(ctx, SJ_E_INTERNAL, "nvptx: cannot create a target machine for %s", cpu);
    return SJ_OK;
}

void sj__nvptx_prepare_module(LLVMModuleRef m, LLVMTargetMachineRef tm) {
    LLVMSetTarget(m, SJ_NVPTX_TRIPLE);
    LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(m, dl);
    LLVMDisposeTargetData(dl);
}

void sj__nvptx_annotate(LLVMModuleRef m, LLVMValueRef fn, const char *key, int value) {
    LLVMContextRef lc = LLVMGetModuleContext(m);
    LLVMValueRef v = LLVMConstInt(LLVMInt32TypeInContext(lc), (unsigned long long)value, 0);
    LLVMMetadataRef md[3] = {LLVMValueAsMetadata(fn), LLVMMDStringInContext2(lc, key, strlen(key)),
                             LLVMValueAsMetadata(v)};
    LLVMValueRef node = LLVMMetadataAsValue(lc, LLVMMDNodeInContext2(lc, md, 3));
    LLVMAddNamedMetadataOperand(m, "nvvm.annotations", node);
}

void sj__nvptx_mark_kernel(LLVMModuleRef m, LLVMValueRef fn) { sj__nvptx_annotate(m, fn, "kernel", 1); }

static LLVMValueRef get_or_declare(LLVMModuleRef m, const char *name, LLVMTypeRef fnty) {
    LLVMValueRef fn = LLVMGetNamedFunction(m, name);
    return fn ? fn : LLVMAddFunction(m, name, fnty);
}

LLVMValueRef sj__nvptx_sreg(LLVMModuleRef m, LLVMBuilderRef b, const char *reg) {
    LLVMContextRef lc = LLVMGetModuleContext(m);
    char name[64];
    snprintf(name, sizeof name, "llvm.nvvm.read.ptx.sreg.%s", reg);
    LLVMTypeRef fnty = LLVMFunctionType(LLVMInt32TypeInContext(lc), NULL, 0, 0);
    return LLVMBuildCall2(b, fnty, get_or_declare(m, name, fnty), NULL, 0, reg);
}

void sj__nvptx_barrier(LLVMModuleRef m, LLVMBuilderRef b) {
    LLVMContextRef lc = LLVMGetModuleContext(m);
    LLVMTypeRef fnty = LLVMFunctionType(LLVMVoidTypeInContext(lc), NULL, 0, 0);
    LLVMBuildCall2(b, fnty, get_or_declare(m, "llvm.nvvm.barrier0", fnty), NULL, 0, "");
}

LLVMValueRef sj__nvptx_shared_f32(LLVMModuleRef m, const char *name, unsigned n) {
    LLVMContextRef lc = LLVMGetModuleContext(m);
    LLVMTypeRef ty = LLVMArrayType2(LLVMFloatTypeInContext(lc), n);
    LLVMValueRef g = LLVMAddGlobalInAddressSpace(m, ty, name, SJ_NVPTX_AS_SHARED);
    LLVMSetLinkage(g, LLVMInternalLinkage);
    LLVMSetInitializer(g, LLVMGetUndef(ty));
    LLVMSetAlignment(g, 16);
    return g;
}

LLVMValueRef sj__nvptx_libdevice_f32(LLVMModuleRef m, LLVMBuilderRef b, const char *fn,
                                    LLVMValueRef *args, unsigned n_args) {
    LLVMContextRef lc = LLVMGetModuleContext(m);
    LLVMTypeRef f32 = LLVMFloatTypeInContext(lc);
    LLVMTypeRef params[3] = {f32, f32, f32};
    LLVMTypeRef fnty = LLVMFunctionType(f32, params, n_args, 0);
    return LLVMBuildCall2(b, fnty, get_or_declare(m, fn, fnty), args, n_args, "");
}

static int calls_libdevice(LLVMModuleRef m) {
    for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f)) {
        size_t len;
        const char *name = LLVMGetValueName2(f, &len);
        if (LLVMIsDeclaration(f) && len > 5 && strncmp(name, "__nv_", 5) == 0) return 1;
    }
    return 0;
}

/* Links libdevice so only the functions m calls come along: its definitions
 * become linkonce_odr first, which the linker pulls in on reference only. */
static sj_status link_libdevice(sj_ctx *ctx, LLVMModuleRef m, const char *path) {
    if (!path || !*path)
        return sj_fail(ctx, SJ_E_UNSUPPORTED,
                       "nvptx: kernels call libdevice math but no libdevice.10.bc is known "
                       "(CUDA toolkit not found at build time)");
    LLVMMemoryBufferRef buf;
    char *err = NULL;
    if (LLVMCreateMemoryBufferWithContentsOfFile(path, &buf, &err)) {
        sj_status st = sj_fail(ctx, SJ_E_IO, "nvptx: cannot read libdevice %s: %s", path,
                               err ? err : "?");
        LLVMDisposeMessage(err);
        return st;
    }
    /* Lazily: only the bodies the kernels call are ever read (libdevice has
     * some 500 functions; a full parse would dominate the compile). The
     * module owns buf from here on, also when the call fails. */
    LLVMModuleRef lib;
    if (LLVMGetBitcodeModuleInContext2(LLVMGetModuleContext(m), buf, &lib))
        return sj_fail(ctx, SJ_E_PARSE, "nvptx: libdevice %s is not valid bitcode", path);
    for (LLVMValueRef f = LLVMGetFirstFunction(lib); f; f = LLVMGetNextFunction(f))
        if (!LLVMIsDeclaration(f)) LLVMSetLinkage(f, LLVMLinkOnceODRLinkage);
    LLVMSetTarget(lib, LLVMGetTarget(m));
    LLVMSetDataLayout(lib, LLVMGetDataLayoutStr(m));
    if (LLVMLinkModules2(m, lib)) /* consumes lib */
        return sj_fail(ctx, SJ_E_COMPILE, "nvptx: linking libdevice %s failed", path);
    return SJ_OK;
}

static sj_status verify(sj_ctx *ctx, LLVMModuleRef m) {
    char *msg = NULL;
    if (!LLVMVerifyModule(m, LLVMReturnStatusAction, &msg)) {
        LLVMDisposeMessage(msg);
        return SJ_OK;
    }
    char head[640];
    snprintf(head, sizeof head, "%s", msg ? msg : "?");
    LLVMDisposeMessage(msg);
    return sj_fail(ctx, SJ_E_COMPILE, "nvptx: invalid kernel IR: %s", head);
}

static sj_status optimise(sj_ctx *ctx, LLVMModuleRef m, LLVMTargetMachineRef tm) {
    LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
    LLVMErrorRef e = LLVMRunPasses(m, "default<O3>", tm, opts);
    LLVMDisposePassBuilderOptions(opts);
    if (!e) return SJ_OK;
    char *msg = LLVMGetErrorMessage(e);
    sj_status st = sj_fail(ctx, SJ_E_INTERNAL, "nvptx: optimisation failed: %s", msg);
    LLVMDisposeErrorMessage(msg);
    return st;
}

static sj_status emit(sj_ctx *ctx, LLVMModuleRef m, LLVMTargetMachineRef tm, char **ptx,
                      size_t *ptx_len) {
    LLVMMemoryBufferRef buf;
    char *err = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, m, LLVMAssemblyFile, &err, &buf)) {
        sj_status st = sj_fail(ctx, SJ_E_COMPILE, "nvptx: PTX emission failed: %s",
                               err ? err : "?");
        LLVMDisposeMessage(err);
        return st;
    }
    size_t n = LLVMGetBufferSize(buf);
    char *out = sj_alloc(ctx, n + 1);
    if (!out) {
        LLVMDisposeMemoryBuffer(buf);
        return sj_fail(ctx, SJ_E_NOMEM, "nvptx: PTX of %zu bytes", n);
    }
    memcpy(out, LLVMGetBufferStart(buf), n);
    out[n] = '\0';
    LLVMDisposeMemoryBuffer(buf);
    *ptx = out;
    *ptx_len = strlen(out);
    return SJ_OK;
}

sj_status sj__nvptx_compile(sj_ctx *ctx, LLVMModuleRef m, int sm, const char *libdevice_path,
                           char **ptx, size_t *ptx_len) {
    if (!m || !ptx || !ptx_len) return sj_fail(ctx, SJ_E_INVALID_ARG, "nvptx: NULL module or output");
    *ptx = NULL;
    *ptx_len = 0;
#ifdef SJ_CUDA_LIBDEVICE
    if (!libdevice_path) libdevice_path = SJ_CUDA_LIBDEVICE;
#endif
    LLVMTargetMachineRef tm;
    SJ_TRY(sj__nvptx_target_machine(ctx, sm, &tm));
    sj__nvptx_prepare_module(m, tm);
    sj_status st = verify(ctx, m);
    if (st == SJ_OK && calls_libdevice(m)) st = link_libdevice(ctx, m, libdevice_path);
    if (st == SJ_OK) st = optimise(ctx, m, tm);
    if (st == SJ_OK) st = emit(ctx, m, tm, ptx, ptx_len);
    LLVMDisposeTargetMachine(tm);
    return st;
}
