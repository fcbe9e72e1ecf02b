/* Elementwise op semantics as LLVM IR, shared by every LLVM emitter (host
 * and NVPTX) so both follow the interpreter (ir/interp*.c) the same
 * way. Targets differ only in how they compute the transcendental
 * functions, which they pass as a table. Not installed. */
#ifndef SJ_LLVM_SCALAR_H
#define SJ_LLVM_SCALAR_H

#include <llvm-c/Core.h>

#include "shapejit/graph.h"
#include "shapejit/precision.h"

typedef struct sj_llvm_math {
    LLVMValueRef (*exp)(void *ctx, LLVMValueRef x);
    LLVMValueRef (*log)(void *ctx, LLVMValueRef x);
    LLVMValueRef (*tanh)(void *ctx, LLVMValueRef x);
    LLVMValueRef (*erf)(void *ctx, LLVMValueRef x);
    LLVMValueRef (*pow)(void *ctx, LLVMValueRef x, LLVMValueRef y);
    /* Any other one-operand libm function, by its C99 float name ("sinf"). */
    LLVMValueRef (*libm)(void *ctx, const char *name, LLVMValueRef x);
} sj_llvm_math;

/* Where scalar code is built: module, builder (positioned), the target's
 * math and the context its functions receive. */
typedef struct sj_llvm_scalar {
    LLVMModuleRef M;
    LLVMBuilderRef B;
    const sj_llvm_math *math;
    void *math_ctx;
} sj_llvm_scalar;

/* An llvm.* float intrinsic with one operand (y NULL) or two. */
LLVMValueRef sj__llvm_intrinsic_f32(LLVMModuleRef M, LLVMBuilderRef B, const char *name,
                                   LLVMValueRef x, LLVMValueRef y);

/* One unary (alpha: leaky_relu's slope) or binary elementwise op on f32
 * scalars; NULL for an op that is not elementwise. */
LLVMValueRef sj__llvm_unary(const sj_llvm_scalar *s, sj_op op, LLVMValueRef x, float alpha);
LLVMValueRef sj__llvm_binary(const sj_llvm_scalar *s, sj_op op, LLVMValueRef a, LLVMValueRef b);

/* ---- typed values (llvm_typed.c): float32 as float, int64 / int32 as i64 /
 * i32, bool as i1 (i8 in memory). Semantics as the interpreter's
 * (interp/interp_ops.c): integer ops wrap, division by zero gives 0,
 * float->int truncates with NaN and out-of-range values giving the minimum. */

/* The register type of t. */
LLVMTypeRef sj__llvm_dtype_type(LLVMContextRef C, sj_dtype t);
/* The in-memory type of t (bool: i8). */
LLVMTypeRef sj__llvm_dtype_mem_type(LLVMContextRef C, sj_dtype t);
/* A value of register type from memory type, and back. */
LLVMValueRef sj__llvm_from_mem(LLVMBuilderRef B, sj_dtype t, LLVMValueRef v);
LLVMValueRef sj__llvm_to_mem(LLVMBuilderRef B, sj_dtype t, LLVMValueRef v);
/* v: i16 or a vector of i16 holding weights the precision policy stored
 * as `storage` (bf16 or fp16), widened exactly to float32 (or a vector of
 * them) with integer ops and one exact multiply, so no target needs a
 * half-precision unit or a conversion library call. */
LLVMValueRef sj__llvm_widen_16(LLVMBuilderRef B, sj_precision storage, LLVMValueRef v);
/* x (of type from) converted to `to`. */
LLVMValueRef sj__llvm_cast(LLVMBuilderRef B, sj_dtype from, sj_dtype to, LLVMValueRef x);
/* A unary op on an operand of type t: cast excluded; neg/abs on ints, not,
 * isnan, isinf; float ops go to sj__llvm_unary. */
LLVMValueRef sj__llvm_typed_unary(const sj_llvm_scalar *s, sj_op op, sj_dtype t, LLVMValueRef x,
                                 float alpha);
/* A binary op on operands of type t (comparisons give i1). */
LLVMValueRef sj__llvm_typed_binary(const sj_llvm_scalar *s, sj_op op, sj_dtype t, LLVMValueRef a,
                                  LLVMValueRef b);

#endif
