/* Addressing at a kernel's point, for both LLVM emitters (llvm_point.h). */
#include "compile/llvm/llvm_point.h"

static LLVMValueRef ci(const sj_llvm_point *p, int64_t v) {
    return LLVMConstInt(p->i64, (unsigned long long)v, 1);
}

LLVMValueRef sj__llvm_point_address(const sj_llvm_point *p, LLVMValueRef base,
                                    const int64_t *strides, LLVMTypeRef elt) {
    LLVMValueRef off = NULL;
    for (int d = 0; d < p->rank; d++) {
        if (!strides[d]) continue;
        LLVMValueRef term =
            strides[d] == 1 ? p->idx[d] : LLVMBuildNSWMul(p->B, p->idx[d], ci(p, strides[d]), "");
        off = off ? LLVMBuildNSWAdd(p->B, off, term, "") : term;
    }
    if (!off) return base;
    return LLVMBuildInBoundsGEP2(p->B, elt, base, &off, 1, "");
}

LLVMValueRef sj__llvm_offset_base(const sj_llvm_point *p, LLVMValueRef base, int64_t offset,
                                  int64_t offset_n, LLVMTypeRef elt) {
    if (!offset && !offset_n) return base;
    LLVMValueRef off = ci(p, offset);
    if (offset_n)
        off = LLVMBuildNSWAdd(p->B, off, LLVMBuildNSWMul(p->B, p->n, ci(p, offset_n), ""), "");
    return LLVMBuildInBoundsGEP2(p->B, elt, base, &off, 1, "");
}

LLVMValueRef sj__llvm_point_test(const sj_llvm_point *p, const sj_kexpr *ex) {
    LLVMValueRef v = ci(p, ex->bias);
    for (int d = 0; d < p->rank; d++)
        if (ex->coef[d])
            v = LLVMBuildNSWAdd(p->B, v, LLVMBuildNSWMul(p->B, p->idx[d], ci(p, ex->coef[d]), ""),
                                "");
    return LLVMBuildICmp(p->B, LLVMIntSGE, v, ci(p, 0), "");
}

LLVMValueRef sj__llvm_entry_alloca(LLVMContextRef C, LLVMValueRef point, LLVMTypeRef t,
                                   const char *name) {
    LLVMBuilderRef b = LLVMCreateBuilderInContext(C);
    LLVMPositionBuilderBefore(b, point);
    LLVMValueRef a = LLVMBuildAlloca(b, t, name);
    LLVMDisposeBuilder(b);
    return a;
}
