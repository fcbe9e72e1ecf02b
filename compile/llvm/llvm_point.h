/* The point a kernel's body stands at, and the addressing both LLVM
 * emitters (host and NVPTX) build from it: one loop index per dim of the
 * kernel's index space, and the active extent n for symbolic offsets.
 * Shared so the two emitters address buffers, and test index predicates,
 * with the same instructions. Not installed.
 *
 *   sj_llvm_point p = {e->B, e->i64, e->k->rank, e->idx, e->n};
 *   LLVMValueRef base = sj__llvm_offset_base(&p, buf, ld->offset, ld->offset_n, elt);
 *   LLVMValueRef addr = sj__llvm_point_address(&p, base, ld->strides, elt);
 */
#ifndef SJ_LLVM_POINT_H
#define SJ_LLVM_POINT_H

#include <llvm-c/Core.h>

#include "compile/lower/kernel.h"

typedef struct sj_llvm_point {
    LLVMBuilderRef B; /* positioned where the code goes */
    LLVMTypeRef i64;
    int rank;
    const LLVMValueRef *idx; /* rank indices, read at each call */
    LLVMValueRef n;          /* the active extent */
} sj_llvm_point;

/* base + sum_d strides[d] * idx[d] elements of elt (in-bounds, nsw). */
LLVMValueRef sj__llvm_point_address(const sj_llvm_point *p, LLVMValueRef base,
                                    const int64_t *strides, LLVMTypeRef elt);
/* base + offset + offset_n * n elements of elt. */
LLVMValueRef sj__llvm_offset_base(const sj_llvm_point *p, LLVMValueRef base, int64_t offset,
                                  int64_t offset_n, LLVMTypeRef elt);
/* bias + sum_d coef[d] * idx[d] >= 0, as an i1. */
LLVMValueRef sj__llvm_point_test(const sj_llvm_point *p, const sj_kexpr *ex);

/* An alloca of t placed before `point` (an instruction in the entry block),
 * so every alloca sits in the entry block, where LLVM promotes them. */
LLVMValueRef sj__llvm_entry_alloca(LLVMContextRef C, LLVMValueRef point, LLVMTypeRef t,
                                   const char *name);

#endif
