/* exp, log, erf, tanh and pow as straight-line IR (no libm calls), so loops
 * that use them vectorise: Cephes-style range reduction and polynomials
 * (exp, log, tanh), a rational approximation (erf), and pow through log2
 * and exp2 in double. NaN, infinities, zeros and denormals come out as
 * libm has them (C's powf special cases included).
 *
 * Max error against the double libm result rounded to float, measured by
 * tests/test_host_math.c over 2^21 inputs (docs/host-math.md), the worst
 * of AVX-512 with FMA, SSE4 and AVX without FMA:
 *
 *   exp 1 ulp   log 1 ulp   erf 6 ulp   tanh 1 ulp   sigmoid 2 ulp   pow 1 ulp
 */
#include <math.h>
#include <string.h>

#include "compile/llvm/llvm_impl.h"

typedef struct mctx {
    LLVMBuilderRef B;
    LLVMModuleRef M;
    LLVMContextRef C;
    LLVMTypeRef f32, i32, f64;
} mctx;

static LLVMValueRef k(mctx *m, double v) { return LLVMConstReal(m->f32, v); }
static LLVMValueRef kd(mctx *m, double v) { return LLVMConstReal(m->f64, v); }
static LLVMValueRef ki(mctx *m, int32_t v) { return LLVMConstInt(m->i32, (uint32_t)v, 1); }

/* An overloaded llvm.* intrinsic on operands of x's type (float or double). */
static LLVMValueRef intrinsic(mctx *m, const char *name, LLVMValueRef *args, unsigned n) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMTypeRef t = LLVMTypeOf(args[0]);
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(m->M, id, &t, 1);
    return LLVMBuildCall2(m->B, LLVMIntrinsicGetType(m->C, id, &t, 1), f, args, n, "");
}

static LLVMValueRef intrinsic1(mctx *m, const char *name, LLVMValueRef x) {
    return intrinsic(m, name, &x, 1);
}

static LLVMValueRef intrinsic2(mctx *m, const char *name, LLVMValueRef x, LLVMValueRef y) {
    return intrinsic(m, name, (LLVMValueRef[]){x, y}, 2);
}

static LLVMValueRef fma3(mctx *m, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
    /* fmuladd: fused where the CPU has FMA, never a software fmaf call. */
    return intrinsic(m, "llvm.fmuladd", (LLVMValueRef[]){a, b, c}, 3);
}

/* c[0] + x * (c[1] + x * (...)), highest coefficient last, in x's type. */
static LLVMValueRef horner(mctx *m, LLVMValueRef x, const double *c, int n) {
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef p = LLVMConstReal(t, c[n - 1]);
    for (int i = n - 2; i >= 0; i--) p = fma3(m, p, x, LLVMConstReal(t, c[i]));
    return p;
}

static mctx make(LLVMBuilderRef B, LLVMModuleRef M) {
    LLVMContextRef C = LLVMGetModuleContext(M);
    return (mctx){B, M, C, LLVMFloatTypeInContext(C), LLVMInt32TypeInContext(C),
                  LLVMDoubleTypeInContext(C)};
}

static LLVMValueRef fcmp(mctx *m, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildFCmp(m->B, p, a, b, "");
}
static LLVMValueRef sel(mctx *m, LLVMValueRef c, LLVMValueRef t, LLVMValueRef f) {
    return LLVMBuildSelect(m->B, c, t, f, "");
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

LLVMValueRef sj__llvm_exp(LLVMBuilderRef B, LLVMModuleRef M, LLVMValueRef x) {
    mctx m = make(B, M);
    return exp_impl(&m, x);
}

/* A rational approximation on [-4, 4] (erf is +-1 in float beyond): odd
 * numerator over even denominator in x^2, one division and no exp. */
LLVMValueRef sj__llvm_erf(LLVMBuilderRef B, LLVMModuleRef M, LLVMValueRef x) {
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
LLVMValueRef sj__llvm_tanh(LLVMBuilderRef B, LLVMModuleRef M, LLVMValueRef x) {
    mctx m = make(B, M);
    LLVMValueRef ax = intrinsic1(&m, "llvm.fabs", x);
    LLVMValueRef z = LLVMBuildFMul(B, x, x, "");
    static const double c[] = {-3.33332819422E-1, 1.33314422036E-1, -5.37397155531E-2,
                               2.06390887954E-2, -5.70498872745E-3};
    LLVMValueRef small = fma3(&m, LLVMBuildFMul(B, horner(&m, z, c, 5), z, ""), x, x);
    /* x + x * (negative) rounds -0 to +0; tanh keeps x's sign. */
    small = intrinsic2(&m, "llvm.copysign", small, x);
    LLVMValueRef e = exp_impl(&m, LLVMBuildFMul(B, ax, k(&m, 2.0), ""));
    LLVMValueRef big = LLVMBuildFSub(B, k(&m, 1.0),
                                     LLVMBuildFDiv(B, k(&m, 2.0), LLVMBuildFAdd(B, e, k(&m, 1.0), ""), ""), "");
    big = intrinsic2(&m, "llvm.copysign", big, x);
    LLVMValueRef is_small = LLVMBuildFCmp(B, LLVMRealOLT, ax, k(&m, 0.625), "");
    return LLVMBuildSelect(B, is_small, small, big, "");
}

/* A positive float x (denormals too; not 0, inf or NaN) as mant * 2^e with
 * mant in [sqrt(1/2), sqrt(2)), by bit operations: denormals are scaled by
 * 2^23 first (exactly), and a mantissa above sqrt(2) is halved (exactly) so
 * that log's argument mant - 1 stays in [-0.29, 0.41]. */
static void split(mctx *m, LLVMValueRef x, LLVMValueRef *mant, LLVMValueRef *e) {
    LLVMBuilderRef B = m->B;
    LLVMValueRef tiny = fcmp(m, LLVMRealOLT, x, k(m, 0x1p-126));
    LLVMValueRef xs = sel(m, tiny, LLVMBuildFMul(B, x, k(m, 0x1p23), ""), x);
    LLVMValueRef bits = LLVMBuildBitCast(B, xs, m->i32, "");
    LLVMValueRef ex = LLVMBuildSub(B, LLVMBuildLShr(B, bits, ki(m, 23), ""),
                                   sel(m, tiny, ki(m, 127 + 23), ki(m, 127)), "");
    LLVMValueRef mb = LLVMBuildOr(B, LLVMBuildAnd(B, bits, ki(m, 0x7fffff), ""), ki(m, 0x3f800000), "");
    LLVMValueRef mf = LLVMBuildBitCast(B, mb, m->f32, "");
    LLVMValueRef big = fcmp(m, LLVMRealOGE, mf, k(m, 1.41421356237309505));
    *mant = sel(m, big, LLVMBuildFMul(B, mf, k(m, 0.5), ""), mf);
    *e = LLVMBuildAdd(B, ex, LLVMBuildZExt(B, big, m->i32, ""), "");
}

/* Cephes logf: log(1 + f) = f - f^2/2 + f^3 P(f), e * ln2 added in two parts
 * (0.693359375 is exact in 9 bits) so the sum loses nothing for large e. */
LLVMValueRef sj__llvm_log(LLVMBuilderRef B, LLVMModuleRef M, LLVMValueRef x) {
    mctx m = make(B, M);
    LLVMValueRef mant, e;
    split(&m, x, &mant, &e);
    LLVMValueRef f = LLVMBuildFSub(B, mant, k(&m, 1.0), "");
    LLVMValueRef z = LLVMBuildFMul(B, f, f, "");
    static const double c[] = {3.3333331174E-1,  -2.4999993993E-1, 2.0000714765E-1,
                               -1.6668057665E-1, 1.4249322787E-1,  -1.2420140846E-1,
                               1.1676998740E-1,  -1.1514610310E-1, 7.0376836292E-2};
    LLVMValueRef y = LLVMBuildFMul(B, LLVMBuildFMul(B, f, z, ""), horner(&m, f, c, 9), "");
    LLVMValueRef fe = LLVMBuildSIToFP(B, e, m.f32, "");
    y = fma3(&m, fe, k(&m, -2.12194440e-4), y);
    y = fma3(&m, z, k(&m, -0.5), y);
    LLVMValueRef r = fma3(&m, fe, k(&m, 0.693359375), LLVMBuildFAdd(B, f, y, ""));
    /* As logf: log(inf) = inf, log(+-0) = -inf, log(x < 0) = NaN, NaN stays. */
    r = sel(&m, fcmp(&m, LLVMRealOEQ, x, k(&m, INFINITY)), x, r);
    r = sel(&m, fcmp(&m, LLVMRealOEQ, x, k(&m, 0.0)), k(&m, -INFINITY), r);
    r = sel(&m, fcmp(&m, LLVMRealOLT, x, k(&m, 0.0)), k(&m, NAN), r);
    return sel(&m, fcmp(&m, LLVMRealUNO, x, x), x, r);
}

/* log2(ax) in double for a positive float ax (0, inf and NaN give garbage
 * the caller replaces): e + f g(f^2) with f = (m - 1) / (m + 1), |f| <=
 * 0.172, g(s) = 2 atanh(f) / (f ln2). The quotient comes from a float
 * reciprocal (one float division, twice the lanes of a double one) and one
 * correction step in double (relative error ~2^-46); g is a degree-5
 * Chebyshev fit (mpmath chebyfit on [0, 0.0295], relative error 2^-45), far
 * below what pow's float result needs (2^-37 at |y log2 x| = 150). */
static LLVMValueRef log2_wide(mctx *m, LLVMValueRef ax) {
    LLVMBuilderRef B = m->B;
    LLVMValueRef mant, e;
    split(m, ax, &mant, &e);
    LLVMValueRef rf = LLVMBuildFDiv(B, k(m, 1.0), LLVMBuildFAdd(B, mant, k(m, 1.0), ""), "");
    LLVMValueRef r = LLVMBuildFPExt(B, rf, m->f64, "");
    LLVMValueRef md = LLVMBuildFPExt(B, mant, m->f64, "");
    LLVMValueRef u = LLVMBuildFSub(B, md, kd(m, 1.0), ""), d = LLVMBuildFAdd(B, md, kd(m, 1.0), "");
    LLVMValueRef q = LLVMBuildFMul(B, u, r, "");
    LLVMValueRef res = fma3(m, LLVMBuildFNeg(B, d, ""), q, u); /* u - d q, exact with FMA */
    LLVMValueRef f = fma3(m, res, r, q);
    static const double c[] = {2.8853900817778505769, 0.96179669411235944842, 0.57707794263026179854,
                               0.41220922733052444177, 0.31990666088914740083, 0.28288718263073563972};
    LLVMValueRef p = horner(m, LLVMBuildFMul(B, f, f, ""), c, 6);
    return fma3(m, f, p, LLVMBuildSIToFP(B, e, m->f64, ""));
}

/* 2^t for a double t, rounded once to float: t = n + r with |r| <= 1/2
 * (n by the 1.5 * 2^52 shifter, whose low bits then hold n, so no
 * float-to-int conversion that older CPUs cannot vectorise), 2^r by a
 * degree-7 Chebyshev fit (mpmath chebyfit on [-1/2, 1/2], error 2^-34.5),
 * 2^n by bits. Beyond +-200 the float is inf or 0 anyway. */
static LLVMValueRef exp2_narrow(mctx *m, LLVMValueRef t) {
    LLVMBuilderRef B = m->B;
    LLVMTypeRef i64 = LLVMInt64TypeInContext(m->C);
    LLVMValueRef tc = intrinsic2(m, "llvm.maxnum", t, kd(m, -200.0));
    tc = intrinsic2(m, "llvm.minnum", tc, kd(m, 200.0));
    LLVMValueRef sh = kd(m, 0x1.8p52);
    LLVMValueRef kn = LLVMBuildFAdd(B, tc, sh, "");
    LLVMValueRef r = LLVMBuildFSub(B, tc, LLVMBuildFSub(B, kn, sh, ""), "");
    static const double c[] = {0.99999999995956175074,  0.69314718055683241353,
                               0.24022651213498092661,  0.055504109063258666119,
                               0.0096180256133180342494, 0.0013333478473685415281,
                               0.00015469729214118297093, 0.000015303700711365693939};
    LLVMValueRef p = horner(m, r, c, 8);
    LLVMValueRef nb = LLVMBuildAdd(B, LLVMBuildBitCast(B, kn, i64, ""), LLVMConstInt(i64, 1023, 0), "");
    LLVMValueRef scale = LLVMBuildBitCast(B, LLVMBuildShl(B, nb, LLVMConstInt(i64, 52, 0), ""), m->f64, "");
    return LLVMBuildFPTrunc(B, LLVMBuildFMul(B, p, scale, ""), m->f32, "");
}

/* powf as 2^(y log2|x|) in double (one rounding to float at the end), then
 * C's special cases: y = 0 or x = 1 give 1 (even with NaN), x = -1 with
 * y = +-inf gives 1, a negative finite x with a finite non-integral y gives
 * NaN, an odd integral y keeps x's sign (-0 and -inf included); 0 and inf
 * in x or y come out of the double arithmetic (log2 0 = -inf, log2 inf =
 * inf). */
LLVMValueRef sj__llvm_pow(LLVMBuilderRef B, LLVMModuleRef M, LLVMValueRef x, LLVMValueRef y) {
    mctx m = make(B, M);
    LLVMValueRef ax = intrinsic1(&m, "llvm.fabs", x);
    LLVMValueRef l = log2_wide(&m, ax);
    l = sel(&m, fcmp(&m, LLVMRealOEQ, ax, k(&m, 0.0)), kd(&m, -INFINITY), l);
    l = sel(&m, fcmp(&m, LLVMRealOEQ, ax, k(&m, INFINITY)), kd(&m, INFINITY), l);
    LLVMValueRef t = LLVMBuildFMul(B, LLVMBuildFPExt(B, y, m.f64, ""), l, "");
    LLVMValueRef r = exp2_narrow(&m, t);
    /* y integral: rint(y) == y (inf too); odd: y/2 is not (never past 2^24). */
    LLVMValueRef ry = intrinsic1(&m, "llvm.rint", y);
    LLVMValueRef hy = LLVMBuildFMul(B, y, k(&m, 0.5), "");
    LLVMValueRef odd = LLVMBuildAnd(B, fcmp(&m, LLVMRealOEQ, ry, y),
                                    fcmp(&m, LLVMRealONE, intrinsic1(&m, "llvm.rint", hy), hy), "");
    LLVMValueRef xneg = LLVMBuildICmp(B, LLVMIntSLT, LLVMBuildBitCast(B, x, m.i32, ""), ki(&m, 0), "");
    r = sel(&m, LLVMBuildAnd(B, odd, xneg, ""), LLVMBuildFNeg(B, r, ""), r);
    LLVMValueRef finite_neg = LLVMBuildAnd(B, fcmp(&m, LLVMRealOLT, x, k(&m, 0.0)),
                                           fcmp(&m, LLVMRealOGT, x, k(&m, -INFINITY)), "");
    LLVMValueRef fraction = fcmp(&m, LLVMRealONE, ry, y); /* false for inf and NaN */
    LLVMValueRef unordered = LLVMBuildOr(B, fcmp(&m, LLVMRealUNO, t, t), fcmp(&m, LLVMRealUNO, x, x), "");
    LLVMValueRef nan = LLVMBuildOr(B, LLVMBuildAnd(B, finite_neg, fraction, ""), unordered, "");
    r = sel(&m, nan, k(&m, NAN), r);
    LLVMValueRef one = LLVMBuildAnd(B, fcmp(&m, LLVMRealOEQ, ax, k(&m, 1.0)),
                                    fcmp(&m, LLVMRealOEQ, intrinsic1(&m, "llvm.fabs", y), k(&m, INFINITY)), "");
    one = LLVMBuildOr(B, one, LLVMBuildOr(B, fcmp(&m, LLVMRealOEQ, y, k(&m, 0.0)),
                                          fcmp(&m, LLVMRealOEQ, x, k(&m, 1.0)), ""), "");
    return sel(&m, one, k(&m, 1.0), r);
}
