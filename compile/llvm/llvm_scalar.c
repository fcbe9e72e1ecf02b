/* Elementwise op semantics as LLVM IR (see llvm_scalar.h). */
#include "compile/llvm/llvm_scalar.h"

#include <math.h>
#include <string.h>

LLVMValueRef sj__llvm_intrinsic_f32(LLVMModuleRef M, LLVMBuilderRef B, const char *name,
                                   LLVMValueRef x, LLVMValueRef y) {
    LLVMContextRef C = LLVMGetModuleContext(M);
    LLVMTypeRef f32 = LLVMFloatTypeInContext(C);
    LLVMValueRef args[2] = {x, y};
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(M, id, &f32, 1);
    LLVMTypeRef ft = LLVMIntrinsicGetType(C, id, &f32, 1);
    return LLVMBuildCall2(B, ft, f, args, y ? 2 : 1, "");
}

static LLVMValueRef cf(const sj_llvm_scalar *s, double v) {
    return LLVMConstReal(LLVMFloatTypeInContext(LLVMGetModuleContext(s->M)), v);
}

static LLVMValueRef intrinsic(const sj_llvm_scalar *s, const char *name, LLVMValueRef x,
                              LLVMValueRef y) {
    return sj__llvm_intrinsic_f32(s->M, s->B, name, x, y);
}

/* select(a <p> b, t, f) */
static LLVMValueRef fsel(const sj_llvm_scalar *s, LLVMRealPredicate p, LLVMValueRef a,
                         LLVMValueRef b, LLVMValueRef t, LLVMValueRef f) {
    return LLVMBuildSelect(s->B, LLVMBuildFCmp(s->B, p, a, b, ""), t, f, "");
}

/* e / (1 + e) below 0 and 1 / (1 + e) above, e = exp(-|x|): exp never
 * overflows, so sigmoid(-100) is the denormal it should be, not 1 / inf. */
static LLVMValueRef sigmoid(const sj_llvm_scalar *s, LLVMValueRef x) {
    LLVMValueRef ex = s->math->exp(s->math_ctx, LLVMBuildFNeg(s->B, intrinsic(s, "llvm.fabs", x, NULL), ""));
    LLVMValueRef num = fsel(s, LLVMRealOLT, x, cf(s, 0.0), ex, cf(s, 1.0));
    return LLVMBuildFDiv(s->B, num, LLVMBuildFAdd(s->B, cf(s, 1.0), ex, ""), "");
}

LLVMValueRef sj__llvm_unary(const sj_llvm_scalar *s, sj_op op, LLVMValueRef x, float alpha) {
    LLVMBuilderRef B = s->B;
    const sj_llvm_math *m = s->math;
    switch (op) {
    case SJ_OP_NEG: return LLVMBuildFNeg(B, x, "");
    case SJ_OP_ABS: return intrinsic(s, "llvm.fabs", x, NULL);
    case SJ_OP_EXP: return m->exp(s->math_ctx, x);
    case SJ_OP_LOG: return m->log(s->math_ctx, x);
    case SJ_OP_SQRT: return intrinsic(s, "llvm.sqrt", x, NULL);
    case SJ_OP_RSQRT: return LLVMBuildFDiv(B, cf(s, 1.0), intrinsic(s, "llvm.sqrt", x, NULL), "");
    case SJ_OP_RECIPROCAL: return LLVMBuildFDiv(B, cf(s, 1.0), x, "");
    case SJ_OP_TANH: return m->tanh(s->math_ctx, x);
    case SJ_OP_SIGMOID: return sigmoid(s, x);
    case SJ_OP_RELU: return fsel(s, LLVMRealOLT, x, cf(s, 0.0), cf(s, 0.0), x);
    case SJ_OP_LEAKY_RELU:
        return fsel(s, LLVMRealOLT, x, cf(s, 0.0), LLVMBuildFMul(B, x, cf(s, alpha), ""), x);
    case SJ_OP_GELU: {
        LLVMValueRef er = m->erf(s->math_ctx, LLVMBuildFMul(B, x, cf(s, M_SQRT1_2), ""));
        LLVMValueRef h = LLVMBuildFMul(B, x, cf(s, 0.5), "");
        return LLVMBuildFMul(B, h, LLVMBuildFAdd(B, cf(s, 1.0), er, ""), "");
    }
    case SJ_OP_SILU: return LLVMBuildFMul(B, x, sigmoid(s, x), "");
    case SJ_OP_ERF: return m->erf(s->math_ctx, x);
    case SJ_OP_SIN: return m->libm(s->math_ctx, "sinf", x);
    case SJ_OP_COS: return m->libm(s->math_ctx, "cosf", x);
    case SJ_OP_TAN: return m->libm(s->math_ctx, "tanf", x);
    case SJ_OP_ASIN: return m->libm(s->math_ctx, "asinf", x);
    case SJ_OP_ACOS: return m->libm(s->math_ctx, "acosf", x);
    case SJ_OP_ATAN: return m->libm(s->math_ctx, "atanf", x);
    case SJ_OP_SINH: return m->libm(s->math_ctx, "sinhf", x);
    case SJ_OP_COSH: return m->libm(s->math_ctx, "coshf", x);
    case SJ_OP_ASINH: return m->libm(s->math_ctx, "asinhf", x);
    case SJ_OP_ACOSH: return m->libm(s->math_ctx, "acoshf", x);
    case SJ_OP_ATANH: return m->libm(s->math_ctx, "atanhf", x);
    case SJ_OP_FLOOR: return intrinsic(s, "llvm.floor", x, NULL);
    case SJ_OP_CEIL: return intrinsic(s, "llvm.ceil", x, NULL);
    case SJ_OP_ROUND: return intrinsic(s, "llvm.rint", x, NULL); /* half to even */
    case SJ_OP_SIGN: {
        /* 1 above 0, -1 below, x itself otherwise (0, -0, NaN) */
        LLVMValueRef neg = fsel(s, LLVMRealOLT, x, cf(s, 0.0), cf(s, -1.0), x);
        return fsel(s, LLVMRealOGT, x, cf(s, 0.0), cf(s, 1.0), neg);
    }
    default: return NULL;
    }
}

LLVMValueRef sj__llvm_binary(const sj_llvm_scalar *s, sj_op op, LLVMValueRef a, LLVMValueRef b) {
    LLVMBuilderRef B = s->B;
    switch (op) {
    case SJ_OP_ADD: return LLVMBuildFAdd(B, a, b, "");
    case SJ_OP_SUB: return LLVMBuildFSub(B, a, b, "");
    case SJ_OP_MUL: return LLVMBuildFMul(B, a, b, "");
    case SJ_OP_DIV: return LLVMBuildFDiv(B, a, b, "");
    case SJ_OP_POW: return s->math->pow(s->math_ctx, a, b);
    /* maximum/minimum propagate NaN, like numpy and the interpreter. */
    case SJ_OP_MAX: return intrinsic(s, "llvm.maximum", a, b);
    case SJ_OP_MIN: return intrinsic(s, "llvm.minimum", a, b);
    default: return NULL;
    }
}
