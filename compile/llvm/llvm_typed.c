/* Elementwise semantics of the int64, int32 and bool values (and of the
 * typed ops on float32) as LLVM IR, for every LLVM emitter; they follow the
 * interpreter (interp/interp_ops.c) exactly. */
#include "compile/llvm/llvm_scalar.h"

#include <math.h>

LLVMTypeRef sj__llvm_dtype_type(LLVMContextRef C, sj_dtype t) {
    switch (t) {
    case SJ_I64: return LLVMInt64TypeInContext(C);
    case SJ_I32: return LLVMInt32TypeInContext(C);
    case SJ_BOOL: return LLVMInt1TypeInContext(C);
    default: return LLVMFloatTypeInContext(C);
    }
}

LLVMTypeRef sj__llvm_dtype_mem_type(LLVMContextRef C, sj_dtype t) {
    return t == SJ_BOOL ? LLVMInt8TypeInContext(C) : sj__llvm_dtype_type(C, t);
}

static LLVMContextRef ctx_of(LLVMValueRef v) { return LLVMGetTypeContext(LLVMTypeOf(v)); }

LLVMValueRef sj__llvm_from_mem(LLVMBuilderRef B, sj_dtype t, LLVMValueRef v) {
    if (t != SJ_BOOL) return v;
    return LLVMBuildICmp(B, LLVMIntNE, v, LLVMConstInt(LLVMTypeOf(v), 0, 0), "");
}

LLVMValueRef sj__llvm_to_mem(LLVMBuilderRef B, sj_dtype t, LLVMValueRef v) {
    if (t != SJ_BOOL) return v;
    return LLVMBuildZExt(B, v, LLVMInt8TypeInContext(ctx_of(v)), "");
}

static bool is_int(sj_dtype t) { return t == SJ_I64 || t == SJ_I32; }

/* float -> int as cvttss2si: in range truncates, anything else (NaN too)
 * gives the minimum, so the result never depends on LLVM's poison. */
static LLVMValueRef float_to_int(LLVMBuilderRef B, LLVMValueRef x, LLVMTypeRef it, bool wide) {
    LLVMTypeRef f = LLVMTypeOf(x);
    double lo = wide ? -9223372036854775808.0 : -2147483649.0;
    double hi = wide ? 9223372036854775808.0 : 2147483648.0;
    LLVMValueRef in = LLVMBuildAnd(B, LLVMBuildFCmp(B, LLVMRealOGT, x, LLVMConstReal(f, lo), ""),
                                   LLVMBuildFCmp(B, LLVMRealOLT, x, LLVMConstReal(f, hi), ""), "");
    LLVMValueRef safe = LLVMBuildSelect(B, in, x, LLVMConstReal(f, 0), "");
    LLVMValueRef t = LLVMBuildFPToSI(B, safe, it, "");
    unsigned long long min = wide ? 0x8000000000000000ull : 0x80000000ull;
    return LLVMBuildSelect(B, in, t, LLVMConstInt(it, min, 0), "");
}

LLVMValueRef sj__llvm_cast(LLVMBuilderRef B, sj_dtype from, sj_dtype to, LLVMValueRef x) {
    LLVMContextRef C = ctx_of(x);
    LLVMTypeRef tt = sj__llvm_dtype_type(C, to);
    if (from == to) return x;
    if (to == SJ_BOOL) {
        if (from == SJ_F32) return LLVMBuildFCmp(B, LLVMRealUNE, x, LLVMConstReal(LLVMTypeOf(x), 0), "");
        return LLVMBuildICmp(B, LLVMIntNE, x, LLVMConstInt(LLVMTypeOf(x), 0, 0), "");
    }
    if (from == SJ_BOOL) {
        if (to == SJ_F32) return LLVMBuildUIToFP(B, x, tt, "");
        return LLVMBuildZExt(B, x, tt, "");
    }
    if (from == SJ_F32) return float_to_int(B, x, tt, to == SJ_I64);
    if (to == SJ_F32) return LLVMBuildSIToFP(B, x, tt, "");
    return to == SJ_I64 ? LLVMBuildSExt(B, x, tt, "") : LLVMBuildTrunc(B, x, tt, "");
}

LLVMValueRef sj__llvm_typed_unary(const sj_llvm_scalar *s, sj_op op, sj_dtype t, LLVMValueRef x,
                                 float alpha) {
    LLVMBuilderRef B = s->B;
    LLVMTypeRef ty = LLVMTypeOf(x);
    switch (op) {
    case SJ_OP_NOT: return LLVMBuildXor(B, x, LLVMConstInt(ty, 1, 0), "");
    case SJ_OP_ISNAN: return LLVMBuildFCmp(B, LLVMRealUNO, x, x, "");
    case SJ_OP_ISINF: {
        LLVMValueRef ax = sj__llvm_intrinsic_f32(s->M, B, "llvm.fabs", x, NULL);
        return LLVMBuildFCmp(B, LLVMRealOEQ, ax, LLVMConstReal(ty, INFINITY), "");
    }
    case SJ_OP_NEG:
    case SJ_OP_ABS:
        if (is_int(t)) {
            LLVMValueRef neg = LLVMBuildSub(B, LLVMConstInt(ty, 0, 0), x, "");
            if (op == SJ_OP_NEG) return neg;
            return LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, x, LLVMConstInt(ty, 0, 0), ""),
                                   neg, x, "");
        }
        break;
    default: break;
    }
    return sj__llvm_unary(s, op, x, alpha);
}

/* a / b and a mod b (sign of the divisor) with b = 0 giving 0 and
 * MIN / -1 giving MIN, as the interpreter. */
static LLVMValueRef int_div(LLVMBuilderRef B, bool mod, LLVMValueRef a, LLVMValueRef b) {
    LLVMTypeRef ty = LLVMTypeOf(a);
    LLVMValueRef zero = LLVMConstInt(ty, 0, 0), one = LLVMConstInt(ty, 1, 0);
    LLVMValueRef minus1 = LLVMConstAllOnes(ty);
    LLVMValueRef bz = LLVMBuildICmp(B, LLVMIntEQ, b, zero, "");
    LLVMValueRef bm1 = LLVMBuildICmp(B, LLVMIntEQ, b, minus1, "");
    LLVMValueRef safe = LLVMBuildSelect(B, LLVMBuildOr(B, bz, bm1, ""), one, b, "");
    if (!mod) {
        /* b == -1: -a (wrapping, so MIN stays MIN) */
        LLVMValueRef q = LLVMBuildSDiv(B, a, safe, "");
        q = LLVMBuildSelect(B, bm1, LLVMBuildSub(B, zero, a, ""), q, "");
        return LLVMBuildSelect(B, bz, zero, q, "");
    }
    LLVMValueRef r = LLVMBuildSRem(B, a, safe, "");
    LLVMValueRef fix = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntNE, r, zero, ""),
                                    LLVMBuildXor(B, LLVMBuildICmp(B, LLVMIntSLT, r, zero, ""),
                                                 LLVMBuildICmp(B, LLVMIntSLT, b, zero, ""), ""),
                                    "");
    r = LLVMBuildSelect(B, fix, LLVMBuildAdd(B, r, b, ""), r, "");
    return LLVMBuildSelect(B, LLVMBuildOr(B, bz, bm1, ""), zero, r, "");
}

LLVMValueRef sj__llvm_typed_binary(const sj_llvm_scalar *s, sj_op op, sj_dtype t, LLVMValueRef a,
                                  LLVMValueRef b) {
    LLVMBuilderRef B = s->B;
    if (t == SJ_F32) {
        switch (op) {
        case SJ_OP_EQUAL: return LLVMBuildFCmp(B, LLVMRealOEQ, a, b, "");
        case SJ_OP_LESS: return LLVMBuildFCmp(B, LLVMRealOLT, a, b, "");
        case SJ_OP_LESS_EQUAL: return LLVMBuildFCmp(B, LLVMRealOLE, a, b, "");
        case SJ_OP_GREATER: return LLVMBuildFCmp(B, LLVMRealOGT, a, b, "");
        case SJ_OP_GREATER_EQUAL: return LLVMBuildFCmp(B, LLVMRealOGE, a, b, "");
        case SJ_OP_MOD: return LLVMBuildFRem(B, a, b, "");
        default: return sj__llvm_binary(s, op, a, b);
        }
    }
    switch (op) {
    case SJ_OP_ADD: return LLVMBuildAdd(B, a, b, "");
    case SJ_OP_SUB: return LLVMBuildSub(B, a, b, "");
    case SJ_OP_MUL: return LLVMBuildMul(B, a, b, "");
    case SJ_OP_DIV: return int_div(B, false, a, b);
    case SJ_OP_MOD: return int_div(B, true, a, b);
    case SJ_OP_MAX: return LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSGT, a, b, ""), a, b, "");
    case SJ_OP_MIN: return LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, a, b, ""), a, b, "");
    case SJ_OP_EQUAL: return LLVMBuildICmp(B, LLVMIntEQ, a, b, "");
    case SJ_OP_LESS: return LLVMBuildICmp(B, LLVMIntSLT, a, b, "");
    case SJ_OP_LESS_EQUAL: return LLVMBuildICmp(B, LLVMIntSLE, a, b, "");
    case SJ_OP_GREATER: return LLVMBuildICmp(B, LLVMIntSGT, a, b, "");
    case SJ_OP_GREATER_EQUAL: return LLVMBuildICmp(B, LLVMIntSGE, a, b, "");
    case SJ_OP_AND: return LLVMBuildAnd(B, a, b, "");
    case SJ_OP_OR: return LLVMBuildOr(B, a, b, "");
    case SJ_OP_XOR: return LLVMBuildXor(B, a, b, "");
    default: return NULL;
    }
}

/* A constant of v's shape: a splat for a vector. */
static LLVMValueRef like(LLVMTypeRef shape_of, LLVMValueRef c) {
    if (LLVMGetTypeKind(shape_of) != LLVMVectorTypeKind) return c;
    enum { MAX_LANES = 64 };
    unsigned n = LLVMGetVectorSize(shape_of);
    LLVMValueRef parts[MAX_LANES];
    if (n > MAX_LANES) n = MAX_LANES; /* emitters use at most 16 lanes */
    for (unsigned i = 0; i < n; i++) parts[i] = c;
    return LLVMConstVector(parts, n);
}

static LLVMTypeRef same_shape(LLVMTypeRef elt, LLVMTypeRef shape_of) {
    return LLVMGetTypeKind(shape_of) == LLVMVectorTypeKind ? LLVMVectorType(elt, LLVMGetVectorSize(shape_of))
                                                           : elt;
}

LLVMValueRef sj__llvm_widen_16(LLVMBuilderRef B, sj_precision storage, LLVMValueRef v) {
    LLVMTypeRef vt = LLVMTypeOf(v);
    LLVMContextRef C = LLVMGetTypeContext(vt);
    LLVMTypeRef i32 = LLVMInt32TypeInContext(C), f32 = LLVMFloatTypeInContext(C);
    LLVMTypeRef it = same_shape(i32, vt), ft = same_shape(f32, vt);
#define K32(x) like(vt, LLVMConstInt(i32, (x), 0))
    LLVMValueRef x = LLVMBuildZExt(B, v, it, "");
    if (storage == SJ_PRECISION_BF16) /* bf16 is the top half of a float32 */
        return LLVMBuildBitCast(B, LLVMBuildShl(B, x, K32(16), ""), ft, "");
    /* binary16: exponent and mantissa moved into float32's places, then one
     * multiply by 2^112 rebias the exponent (15 -> 127) and normalise
     * subnormals exactly; inf and NaN (exponent 31) get float32's all-ones
     * exponent; the sign goes back last. */
    LLVMValueRef sign = LLVMBuildShl(B, LLVMBuildAnd(B, x, K32(0x8000), ""), K32(16), "");
    LLVMValueRef em = LLVMBuildAnd(B, x, K32(0x7fff), "");
    LLVMValueRef f = LLVMBuildBitCast(B, LLVMBuildShl(B, em, K32(13), ""), ft, "");
    f = LLVMBuildFMul(B, f, like(vt, LLVMConstReal(f32, 0x1p112)), "");
    LLVMValueRef bits = LLVMBuildBitCast(B, f, it, "");
    LLVMValueRef special = LLVMBuildICmp(B, LLVMIntUGE, em, K32(0x7c00), "");
    bits = LLVMBuildSelect(B, special, LLVMBuildOr(B, bits, K32(0x7f800000), ""), bits, "");
    return LLVMBuildBitCast(B, LLVMBuildOr(B, bits, sign, ""), ft, "");
#undef K32
}
