/* LLVM NVPTX target: turns an LLVM IR module holding GPU kernels into PTX for
 * sm_80 / sm_90, plus the IR helpers GPU kernels are written with (special
 * registers, barrier, kernel marking, shared memory). Used by the NVPTX
 * emitter and its tests. Not installed.
 *
 *   LLVMContextRef lc = LLVMContextCreate();
 *   LLVMModuleRef m = LLVMModuleCreateWithNameInContext("k", lc);
 *   ... build a kernel fn, sj__nvptx_mark_kernel(m, fn) ...
 *   char *ptx; size_t n;
 *   sj__nvptx_compile(ctx, m, 90, NULL, &ptx, &n);   // consumes nothing; m is optimised in place
 *   sj_free(ctx, ptx);
 */
#ifndef SJ_NVPTX_IMPL_H
#define SJ_NVPTX_IMPL_H

#include <stddef.h>

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "core/core_impl.h"
#include "compile/gpu/nvrtc_impl.h" /* SJ_NVPTX_TRIPLE */

/* Address spaces of the NVPTX backend. */
#define SJ_NVPTX_AS_GLOBAL 1
#define SJ_NVPTX_AS_SHARED 3

/* A target machine for sm_<sm> (80 or 90) at -O3; caller disposes it. */
sj_status sj__nvptx_target_machine(sj_ctx *ctx, int sm, LLVMTargetMachineRef *out);

/* Sets m's triple and data layout for NVPTX (call before building code that
 * depends on pointer sizes). */
void sj__nvptx_prepare_module(LLVMModuleRef m, LLVMTargetMachineRef tm);

/* Marks fn as a kernel entry (nvvm.annotations "kernel", 1). */
void sj__nvptx_mark_kernel(LLVMModuleRef m, LLVMValueRef fn);

/* Adds an nvvm.annotations entry for fn, e.g. ("maxntidx", 256): the
 * launch bound that lets ptxas budget registers like __launch_bounds__. */
void sj__nvptx_annotate(LLVMModuleRef m, LLVMValueRef fn, const char *key, int value);

/* Reads a PTX special register: "tid.x", "ntid.x", "ctaid.x", "nctaid.x"
 * (and .y/.z); i32. */
LLVMValueRef sj__nvptx_sreg(LLVMModuleRef m, LLVMBuilderRef b, const char *reg);

/* __syncthreads(). */
void sj__nvptx_barrier(LLVMModuleRef m, LLVMBuilderRef b);

/* A shared-memory array of n floats, internal to the module. */
LLVMValueRef sj__nvptx_shared_f32(LLVMModuleRef m, const char *name, unsigned n);

/* A call to a libdevice function (e.g. "__nv_expf") taking and returning
 * float; declared on first use and linked from libdevice by compile. */
LLVMValueRef sj__nvptx_libdevice_f32(LLVMModuleRef m, LLVMBuilderRef b, const char *fn,
                                    LLVMValueRef *args, unsigned n_args);

/* Verifies m, links the libdevice functions it calls (from libdevice_path;
 * NULL = the toolkit's, found at build time), optimises at O3 and emits PTX
 * for sm_<sm>. *ptx is NUL-terminated, allocated through ctx. An invalid
 * module is SJ_E_COMPILE with the verifier's message. */
sj_status sj__nvptx_compile(sj_ctx *ctx, LLVMModuleRef m, int sm, const char *libdevice_path,
                           char **ptx, size_t *ptx_len);

#endif
