/* exp, erf and tanh as straight-line IR (no libm calls), so loops that use
 * them vectorise: Cephes-style range reduction and polynomials (exp, tanh)
 * and a rational approximation (erf), accurate to a few float ulp; NaN and
 * infinities come out as libm has them. */
#include <string.h>

#include "jit/llvm/llvm_impl.h"

typedef struct mctx {
    LLVMBuilderRef B;
    LLVMModuleRef M;
    LLVMContextRef C;
    LLVMTypeRef f32, i32;
} mctx;

static LLVMValueRef k(mctx *m, double v) { return LLVMConstReal(m->f32, v); }

static LLVMValueRef intrinsic1(mctx *m, const char *name, LLVMValueRef x) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(m->M, id, &m->f32, 1);
    return LLVMBuildCall2(m->B, LLVMIntrinsicGetType(m->C, id, &m->f32, 1), f, &x, 1, "");
}

static LLVMValueRef intrinsic2(mctx *m, const char *name, LLVMValueRef x, LLVMValueRef y) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(m->M, id, &m->f32, 1);
    LLVMValueRef args[2] = {x, y};
    return LLVMBuildCall2(m->B, LLVMIntrinsicGetType(m->C, id, &m->f32, 1), f, args, 2, "");
}

static LLVMValueRef fma3(mctx *m, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
    /* fmuladd: fused where the CPU has FMA, never a software fmaf call. */
    unsigned id = LLVMLookupIntrinsicID("llvm.fmuladd", 12);
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(m->M, id, &m->f32, 1);
    LLVMValueRef args[3] = {a, b, c};
    return LLVMBuildCall2(m->B, LLVMIntrinsicGetType(m->C, id, &m->f32, 1), f, args, 3, "");
}

/* c[0] + x * (c[1] + x * (...)), highest coefficient last. */
static LLVMValueRef horner(mctx *m, LLVMValueRef x, const double *c, int n) {
    LLVMValueRef p = k(m, c[n - 1]);
    for (int i = n - 2; i >= 0; i--) p = fma3(m, p, x, k(m, c[i]));
    return p;
}

static mctx make(LLVMBuilderRef B, LLVMModuleRef M) {
    LLVMContextRef C = LLVMGetModuleContext(M);
    return (mctx){B, M, C, LLVMFloatTypeInContext(C), LLVMInt32TypeInContext(C)};
}

/* 2^n for an integral float n in [-150, 128], as two in-range powers so
 * neither overflows the exponent field; the product rounds to denormals, 0 or
 * inf exactly as the true power does. */
static LLVMValueRef scale_pow2(mctx *m, LLVMValueRef y, LLVMValueRef n) {
    LLVMBuilderRef B = m->B;
    LLVMValueRef ni = LLVMBuildFPToSI(B, n, m->i32, "");
    LLVMValueRef n1 = LLVMBuildAShr(B, ni, LLVMConstInt(m->i32, 1, 0), "");
    LLVMValueRef n2 = LLVMBuildSub(B, ni, n1, "");
    LLVMValueRef bias = LLVMConstInt(m->i32, 127, 0), sh = LLVMConstInt(m->i32, 23, 0);
    LLVMValueRef p1 = LLVMBuildBitCast(B, LLVMBuildShl(B, LLVMBuildAdd(B, n1, bias, ""), sh, ""), m->f32, "");
    LLVMValueRef p2 = LLVMBuildBitCast(B, LLVMBuildShl(B, LLVMBuildAdd(B, n2, bias, ""), sh, ""), m->f32, "");
    return LLVMBuildFMul(B, LLVMBuildFMul(B, y, p1, ""), p2, "");
}

static LLVMValueRef exp_impl(mctx *m, LLVMValueRef x) {
    LLVMBuilderRef B = m->B;
    /* Beyond these, expf is 0 or inf anyway; clamping keeps n in range. */
    LLVMValueRef xc = intrinsic2(m, "llvm.minnum", intrinsic2(m, "llvm.maxnum", x, k(m, -104.0)), k(m, 89.0));
    LLVMValueRef n = intrinsic1(m, "llvm.rint", LLVMBuildFMul(B, xc, k(m, 1.44269504088896341), ""));
    LLVMValueRef r = fma3(m, n, k(m, -0.693359375), xc);
    r = fma3(m, n, k(m, 2.12194440e-4), r);
    static const double c[] = {5.0000001201E-1, 1.6666665459E-1, 4.1665795894E-2,
                               8.3334519073E-3, 1.3981999507E-3, 1.9875691500E-4};
    LLVMValueRef p = horner(m, r, c, 6);
    LLVMValueRef y = fma3(m, LLVMBuildFMul(B, p, r, ""), r, r);
    y = LLVMBuildFAdd(B, y, k(m, 1.0), "");
    LLVMValueRef res = scale_pow2(m, y, n);
    LLVMValueRef nan = LLVMBuildFCmp(B, LLVMRealUNO, x, x, "");
    return LLVMBuildSelect(B, nan, x, res, "");
}

LLVMValueRef sj_llvm_exp(LLVMBuilderRef B, LLVMModuleRef M, LLVMValueRef x) {
    mctx m = make(B, M);
    return exp_impl(&m, x);
}

/* A rational approximation on [-4, 4] (erf is +-1 in float beyond): odd
 * numerator over even denominator in x^2, one division and no exp. */
LLVMValueRef sj_llvm_erf(LLVMBuilderRef B, LLVMModuleRef M, LLVMValueRef x) {
    mctx m = make(B, M);
    LLVMValueRef xc = intrinsic2(&m, "llvm.minnum", intrinsic2(&m, "llvm.maxnum", x, k(&m, -4.0)), k(&m, 4.0));
    LLVMValueRef x2 = LLVMBuildFMul(B, xc, xc, "");
    static const double num[] = {1.128379143519084, 0.18520832239976145, 0.050955695062380861,
                                 0.0034082910107109506, 0.00022905065861350646};
    static const double den[] = {1.0, 0.49746925110067538, 0.11098505178285362,
                                 0.014070470171167667, 0.0010179625278914885,
                                 0.000023547966471313185, -1.1791602954361697e-7};
    LLVMValueRef p = LLVMBuildFMul(B, xc, horner(&m, x2, num, 5), "");
    LLVMValueRef q = horner(&m, x2, den, 7);
    LLVMValueRef y = LLVMBuildFDiv(B, p, q, "");
    /* From 3.92 on erf rounds to exactly +-1 in float; so must this (gelu(-inf)
     * is -inf * 0 = NaN only if erf(-inf) is exactly -1). */
    LLVMValueRef sat = LLVMBuildFCmp(B, LLVMRealOGE, intrinsic1(&m, "llvm.fabs", x), k(&m, 3.92), "");
    y = LLVMBuildSelect(B, sat, intrinsic2(&m, "llvm.copysign", k(&m, 1.0), x), y, "");
    LLVMValueRef nan = LLVMBuildFCmp(B, LLVMRealUNO, x, x, "");
    return LLVMBuildSelect(B, nan, x, y, "");
}

/* Cephes tanhf: a polynomial near 0, 1 - 2 / (exp(2|x|) + 1) elsewhere. */
LLVMValueRef sj_llvm_tanh(LLVMBuilderRef B, LLVMModuleRef M, LLVMValueRef x) {
    mctx m = make(B, M);
    LLVMValueRef ax = intrinsic1(&m, "llvm.fabs", x);
    LLVMValueRef z = LLVMBuildFMul(B, x, x, "");
    static const double c[] = {-3.33332819422E-1, 1.33314422036E-1, -5.37397155531E-2,
                               2.06390887954E-2, -5.70498872745E-3};
    LLVMValueRef small = fma3(&m, LLVMBuildFMul(B, horner(&m, z, c, 5), z, ""), x, x);
    LLVMValueRef e = exp_impl(&m, LLVMBuildFMul(B, ax, k(&m, 2.0), ""));
    LLVMValueRef big = LLVMBuildFSub(B, k(&m, 1.0),
                                     LLVMBuildFDiv(B, k(&m, 2.0), LLVMBuildFAdd(B, e, k(&m, 1.0), ""), ""), "");
    big = intrinsic2(&m, "llvm.copysign", big, x);
    LLVMValueRef is_small = LLVMBuildFCmp(B, LLVMRealOLT, ax, k(&m, 0.625), "");
    return LLVMBuildSelect(B, is_small, small, big, "");
}
