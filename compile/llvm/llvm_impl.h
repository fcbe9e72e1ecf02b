/* Host code generation through the LLVM C API: kernels (compile/lower/kernel.h)
 * -> LLVM IR -> O-level pipeline -> object file, assembly or IR text.
 * Not installed. */
#ifndef SJ_LLVM_IMPL_H
#define SJ_LLVM_IMPL_H

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "core/core_impl.h"
#include "plan/artifact_impl.h"
#include "compile/lower/lower.h"
#include "shapejit/ext/compile.h"
#include "runtime/host_code/host_code.h"

typedef enum sj_llvm_output { SJ_LLVM_OBJECT, SJ_LLVM_ASM, SJ_LLVM_IR } sj_llvm_output;

/* The host code generator's revision, part of every host artifact's store
 * key (its compiler version, "llvm-V codegen-R"): raised whenever the code
 * emitted for the same graph, options and LLVM changes, so that a store an
 * older emitter filled misses, and recompiles, instead of serving that
 * emitter's code under the newer library's key. The library version alone
 * does not tell: it stays the same between releases. 2: few-row matmuls
 * take narrow column tails as a masked vector; matmul schedules. 3: large
 * matmuls call the packed GEMM (host_gemm.c); the attention kernel runs
 * the artifact's level. 4: one function per distinct kernel, shared by
 * every launch of it (compile/lower/kernel_share.h). 5: the kernels host
 * code calls are named as internals (sj__host_gemm, sj__host_attention_rows),
 * so an older artifact's extern names are not this library's. 6: GEMMs
 * read float32 weights packed once at load (SJ_SLOT_PACKED,
 * sj__host_gemm_packed). 7: packed GEMMs whose symbolic dim is a batch dim
 * (convs over images) split their columns over threads. 8: matmuls of few
 * rows against a large float32 weight read it packed too, from x86-64-v3
 * (host_emit.c's few_rows_packed). 9: one object file per kernel, named by
 * its code (plan/code_bundle.h, kernel_share.h's sj__lowered_name_kernels).
 * 10: window gathers are loads inside the reduction that folds their taps
 * (pools, depthwise convs; compile/lower/window_fuse.h) instead of a
 * buffer of taps. 11: matmuls whose symbolic dim is a batch dim split
 * their slices over threads in buckets of two or more (row_split.h), and
 * kernels whose split rows are whole slices say so (`K_rows_step` 1), so
 * a batch of fewer than 32 images splits too. 12: a padded window's
 * gather reads its data in place, the fill selected for the index one past
 * it (kernel.h gfill), instead of a padded copy. 13: a batched matmul's
 * weight, one matrix per index of a constant batch dim, is read packed; a
 * reduction keeping a constant innermost dim of whole vectors sums tiles
 * of them in registers. 14: 16-bit (bf16, fp16) weights are packed too,
 * as 16-bit panels the GEMM widens (SJ_PACK_STORAGE), so few rows against
 * them, or against a weight stored transposed, take the packed GEMM;
 * register-tile reductions take a last vector narrower
 * than the level's (72 channels at AVX-512); innermost loops of fewer than
 * four steps are unrolled whole, not made masked vector gathers. 15: every
 * kernel entry takes the calling thread's scratch (sj_host_kernel_fn), which
 * the GEMM packs into instead of its stack. 16: a symbolic dim may be k
 * times the symbol (bound k * n, row splits in units of the extent); the
 * attention kernel's words hold such a dim's factor where they held its
 * padded size. */
#define SJ_HOST_CODEGEN_REVISION 16

/* What the code is built for; NULL fields mean "this host". */
typedef struct sj_llvm_target {
    const char *triple, *cpu, *features;
    int opt_level; /* 0..3 */
    /* Matmuls with k*n at least this large call cblas_sgemm (0 = never). */
    int64_t blas_min_work;
    /* Matmuls in a bucket of at most this many rows take the few-rows
     * schedule (every row's outputs in registers while the weight streams
     * past once: in place, or its packed panels for a large float32 weight
     * from x86-64-v3); 0 = register tiles at every size. */
    int few_rows_max;
    /* Object code: kernels compiled at once (0 = one per CPU, at most 8). */
    int threads;
    /* Object code: objects compiled before, taken instead (NULL: none). */
    const sj_kernel_objects *objects;
} sj_llvm_target;


/* A user's host feature string ("+avx2,-fma") checked against the features
 * the linked LLVM knows, with the features LLVM needs implied added
 * (+evex512 beside AVX-512 ones): *out, sj_alloc'ed, is what LLVM, the
 * artifact and the store key get. SJ_E_INVALID_ARG names a bad item. */
sj_status sj__llvm_host_features(sj_ctx *ctx, const char *features, char **out);
/* SJ_E_INVALID_ARG unless the linked LLVM knows cpu for this host. */
sj_status sj__llvm_host_cpu_check(sj_ctx *ctx, const char *cpu);

/* The CPU and full feature string code is built for, from a user's cpu and
 * features (either NULL): cpu NULL or "native" is this machine, with its
 * features unless features names a full set instead; a psABI level
 * ("x86-64-v3") is that level's features, plus any features given; another
 * LLVM CPU name is its own features ("" recorded), plus any given. Both
 * results are sj_alloc'ed; every name is checked first. */
sj_status sj__llvm_host_target(sj_ctx *ctx, const char *cpu, const char *features, char **cpu_out,
                              char **features_out);
bool sj__llvm_host_is_native(const char *cpu);
/* The x86-64 levels, lowest first: name of level i and its features; NULL
 * past the last. */
int sj__llvm_host_num_levels(void);
const char *sj__llvm_host_level(int i, const char **features);


/* A weight one kernel's GEMM reads packed: the kernel (an index into the
 * lowered kernels), the launch buffer it reads it from, and the packed
 * slot's words (plan.h, SJ_PACK_WORDS). Every launch of the kernel then
 * needs that buffer as an SJ_SLOT_PACKED of its param. */
typedef struct sj_llvm_pack {
    int32_t kernel, buffer;
    int64_t words[SJ_PACK_WORDS];
} sj_llvm_pack;

/* What emitting a module reports besides its code. */
typedef struct sj_llvm_emitted {
    unsigned externs; /* SJ_LLVM_EXTERN_* bits of the extern kernels the code calls */
    int n_packs, cap_packs;
    sj_llvm_pack *packs; /* sj_alloc'ed; sj__llvm_emitted_free */
    /* Object builds: kernel i's code key (sj_kernel_desc.code), one per
     * lowered kernel; NULL otherwise. sj_alloc'ed. */
    uint8_t (*code_keys)[32];
} sj_llvm_emitted;
void sj__llvm_emitted_free(sj_ctx *ctx, sj_llvm_emitted *em);
/* Gives every launch of a kernel in em's packs an SJ_SLOT_PACKED of its
 * weight instead of the param slot, and drops param slots no launch reads
 * any more (host_packs.c). */
sj_status sj__host_plan_packs(sj_ctx *ctx, sj_launch_plan *p, const sj_llvm_emitted *em);

/* Adds one function per kernel first..last-1 of l (named kernel->name,
 * kernel ABI of plan.h) to module m, and for a row-parallel one
 * (compile/lower/row_split.h) its row entry `name_rows` (sj_host_rows_fn)
 * with its row work, the uint64 `name_rows_work`. vector_floats: the
 * target's vector register width in floats; gemm_level: the sj__host_gemm
 * level its features run (sj__llvm_gemm_level). *out (which the caller
 * zeroes once, and frees with sj__llvm_emitted_free) gains the externs
 * called and the weights read packed. */
sj_status sj__llvm_emit_kernels(sj_ctx *ctx, LLVMModuleRef m, const sj_lowered *l, int first, int last,
                               const sj_llvm_target *t, int vector_floats, int gemm_level,
                               sj_llvm_emitted *out);


/* Vectorisable float math emitted inline at the builder's position. */
LLVMValueRef sj__llvm_exp(LLVMBuilderRef b, LLVMModuleRef m, LLVMValueRef x);
LLVMValueRef sj__llvm_erf(LLVMBuilderRef b, LLVMModuleRef m, LLVMValueRef x);
LLVMValueRef sj__llvm_tanh(LLVMBuilderRef b, LLVMModuleRef m, LLVMValueRef x);
LLVMValueRef sj__llvm_log(LLVMBuilderRef b, LLVMModuleRef m, LLVMValueRef x);
LLVMValueRef sj__llvm_pow(LLVMBuilderRef b, LLVMModuleRef m, LLVMValueRef x, LLVMValueRef y);

/* Builds, optimises and prints l's code. *out is sj_alloc'ed: for
 * SJ_LLVM_OBJECT a bundle of one object file per kernel (plan/code_bundle.h),
 * so a kernel's bytes do not depend on the others it was compiled with;
 * for text, one module of every kernel. times (NULL: not wanted) gets the
 * emit, optimise and codegen ns (the last is printing, for IR text). */
sj_status sj__llvm_compile(sj_ctx *ctx, const sj_lowered *l, const sj_llvm_target *t,
                          sj_llvm_output what, uint8_t **out, size_t *len, sj_llvm_emitted *emitted,
                          sj_compile_times *times);

#endif
