/* The GPU compile pipeline for both paths (see gpu_compile.h). */
#include <stdio.h>
#include <string.h>

#include <llvm-c/Core.h>

#include "compile/gpu/nvptx_impl.h"
#include "compile/gpu/gpu_compile.h"
#include "compile/gpu/gpu_emit.h"

static sj_status nvrtc_path(sj_ctx *ctx, const sj_lowered *l, int sm, sj_gpu_code *out, char **source) {
    char *src;
    size_t len;
    SJ_TRY(sj__cuda_c_emit(ctx, l, &src, &len));
    sj_status st = sj__nvrtc_compile(ctx, src, "shapejit_kernels.cu", sm, out);
    if (st == SJ_OK && source)
        *source = src;
    else
        sj_free(ctx, src);
    return st;
}

static char *ir_text(sj_ctx *ctx, LLVMModuleRef m) {
    char *ir = LLVMPrintModuleToString(m);
    char *copy = sj_strdup(ctx, ir);
    LLVMDisposeMessage(ir);
    return copy;
}

static sj_status nvptx_path(sj_ctx *ctx, const sj_lowered *l, int sm, bool want_cubin,
                           sj_gpu_code *out, char **source) {
    LLVMTargetMachineRef tm;
    SJ_TRY(sj__nvptx_target_machine(ctx, sm, &tm));
    LLVMContextRef lc = LLVMContextCreate();
    LLVMModuleRef m = LLVMModuleCreateWithNameInContext("shapejit_kernels", lc);
    sj__nvptx_prepare_module(m, tm);
    LLVMDisposeTargetMachine(tm);
    sj_status st = sj__nvptx_emit_kernels(ctx, m, l);
    if (st == SJ_OK && source && !(*source = ir_text(ctx, m)))
        st = sj_fail(ctx, SJ_E_NOMEM, "nvptx: IR text");
    if (st == SJ_OK) st = sj__nvptx_compile(ctx, m, sm, NULL, &out->ptx, &out->ptx_len);
    LLVMDisposeModule(m);
    LLVMContextDispose(lc);
    if (st == SJ_OK) out->sm = sm;
    if (st == SJ_OK && want_cubin) {
        st = sj__ptx_to_cubin(ctx, out->ptx, out->ptx_len, sm, &out->cubin, &out->cubin_len);
        /* Without nvJitLink the artifact keeps PTX only; the driver JITs it. */
        if (st == SJ_E_UNSUPPORTED) st = SJ_OK;
    }
    if (st != SJ_OK) {
        sj__gpu_code_free(ctx, out);
        if (source) {
            sj_free(ctx, *source);
            *source = NULL;
        }
    }
    return st;
}

/* The GPU emitters lower float32 kernels; one that loads, computes or
 * stores int64, int32 or bool values (casts, comparisons, masks, gathers,
 * ranges) fails the compile naming the kernel and the op. */
static sj_status check_float_only(sj_ctx *ctx, sj_gpu_path path, const sj_lowered *l) {
    for (int i = 0; i < l->n_kernels; i++) {
        const sj_kernel *k = &l->kernels[i];
        const char *what = k->out_dtype != SJ_F32 ? sj_dtype_name(k->out_dtype) : NULL;
        const char *op = "store";
        for (int x = 0; !what && x < k->n_exprs; x++) {
            const sj_kexpr *ex = &k->exprs[x];
            bool typed = ex->dtype != SJ_F32 || ex->kind == SJ_KX_GATHER ||
                         ex->kind == SJ_KX_RANGE || ex->kind == SJ_KX_WHERE ||
                         (ex->kind == SJ_KX_BINARY && ex->op >= SJ_OP_CAST && ex->op <= SJ_OP_FILL) ||
                         (ex->kind == SJ_KX_UNARY && ex->op >= SJ_OP_CAST && ex->op <= SJ_OP_FILL);
            if (!typed) continue;
            what = sj_dtype_name(ex->dtype);
            op = ex->kind == SJ_KX_GATHER ? "gather"
                 : ex->kind == SJ_KX_RANGE ? "range"
                 : ex->kind == SJ_KX_WHERE ? "where"
                 : ex->kind == SJ_KX_LOAD  ? "load"
                 : ex->kind == SJ_KX_CONST ? "constant"
                                           : sj_op_name(ex->op);
        }
        if (what)
            return sj_fail(ctx, SJ_E_UNSUPPORTED,
                           "%s: kernel %s: op '%s' on %s values cannot be lowered for the GPU yet "
                           "(the GPU emitters take float32 kernels; use the host backend)",
                           path == SJ_GPU_PATH_NVRTC ? "nvrtc" : "nvptx", k->name, op, what);
    }
    return SJ_OK;
}

sj_status sj__gpu_compile_lowered(sj_ctx *ctx, const sj_lowered *l, sj_gpu_path path, int sm,
                                 bool want_cubin, sj_gpu_code *out, char **source) {
    memset(out, 0, sizeof *out);
    if (source) *source = NULL;
    if (!sj_gpu_arch_supported(sm))
        return sj_fail(ctx, SJ_E_UNSUPPORTED, "gpu: arch sm_%d not supported (sm_80, sm_90)", sm);
    /* every caller (compile, codegen tests, benchmarks) gets the refusal */
    SJ_TRY(check_float_only(ctx, path, l));
    return path == SJ_GPU_PATH_NVRTC ? nvrtc_path(ctx, l, sm, out, source)
                                     : nvptx_path(ctx, l, sm, want_cubin, out, source);
}

sj_status sj__gpu_toolchain(sj_ctx *ctx, sj_gpu_path path, char *buf, size_t len) {
    if (path == SJ_GPU_PATH_NVRTC) return sj__nvrtc_toolchain(ctx, buf, len);
    char link[48];
    if (sj__nvjitlink_toolchain(ctx, link, sizeof link) != SJ_OK) snprintf(link, sizeof link, "ptx-only");
    unsigned major, minor, patch;
    LLVMGetVersion(&major, &minor, &patch);
    snprintf(buf, len, "llvm-%u.%u.%u+%s", major, minor, patch, link);
    return SJ_OK;
}
