/* Host code generation through the LLVM C API: kernels (jit/lower/kernel.h)
 * -> LLVM IR -> O-level pipeline -> object file, assembly or IR text.
 * Not installed. */
#ifndef SJ_LLVM_IMPL_H
#define SJ_LLVM_IMPL_H

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "core/core_impl.h"
#include "jit/artifact/artifact_impl.h"
#include "jit/lower/lower.h"

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
 * every launch of it (jit/lower/kernel_share.h). */
#define SJ_HOST_CODEGEN_REVISION 4

/* What the code is built for; NULL fields mean "this host". */
typedef struct sj_llvm_target {
    const char *triple, *cpu, *features;
    int opt_level; /* 0..3 */
    /* Matmuls with k*n at least this large call cblas_sgemm (0 = never). */
    int64_t blas_min_work;
    /* Matmuls in a bucket of at most this many rows hold every row in
     * registers (the few-rows schedule); 0 = register tiles at every size. */
    int few_rows_max;
} sj_llvm_target;

/* Registers the native and NVPTX targets once per process (llvm_init.c says
 * why); false when LLVM has no native target. Every LLVM user calls it first. */
bool sj_llvm_init(void);

/* The host's triple, CPU name and feature string, each allocated with sj_alloc. */
sj_status sj_llvm_host_info(sj_ctx *ctx, char **triple, char **cpu, char **features);

/* A user's host feature string ("+avx2,-fma") checked against the features
 * the linked LLVM knows, with the features LLVM needs implied added
 * (+evex512 beside AVX-512 ones): *out, sj_alloc'ed, is what LLVM, the
 * artifact and the store key get. SJ_E_INVALID_ARG names a bad item. */
sj_status sj_llvm_host_features(sj_ctx *ctx, const char *features, char **out);
/* SJ_E_INVALID_ARG unless the linked LLVM knows cpu for this host. */
sj_status sj_llvm_host_cpu_check(sj_ctx *ctx, const char *cpu);

/* The CPU and full feature string code is built for, from a user's cpu and
 * features (either NULL): cpu NULL or "native" is this machine, with its
 * features unless features names a full set instead; a psABI level
 * ("x86-64-v3") is that level's features, plus any features given; another
 * LLVM CPU name is its own features ("" recorded), plus any given. Both
 * results are sj_alloc'ed; every name is checked first. */
sj_status sj_llvm_host_target(sj_ctx *ctx, const char *cpu, const char *features, char **cpu_out,
                              char **features_out);
bool sj_llvm_host_is_native(const char *cpu);
/* The x86-64 levels, lowest first: name of level i and its features; NULL
 * past the last. */
int sj_llvm_host_num_levels(void);
const char *sj_llvm_host_level(int i, const char **features);

/* The extern kernels a module's code calls, as bits. */
enum {
    SJ_LLVM_EXTERN_BLAS = 1u << 0,      /* cblas_sgemm */
    SJ_LLVM_EXTERN_ATTENTION = 1u << 1, /* sj_host_attention_rows */
    SJ_LLVM_EXTERN_GEMM = 1u << 2       /* sj_host_gemm */
};

/* Adds one function per kernel (named kernel->name, kernel ABI of plan.h) to
 * module m, and for a row-parallel one (jit/lower/row_split.h) its row entry
 * `name_rows` (sj_host_rows_fn) with its row work, the uint64 `name_rows_work`.
 * vector_floats: the target's vector register width in floats; gemm_level:
 * the sj_host_gemm level its features run (sj_llvm_gemm_level). *externs
 * gets the SJ_LLVM_EXTERN_* bits of the extern kernels the code calls. */
sj_status sj_llvm_emit_kernels(sj_ctx *ctx, LLVMModuleRef m, const sj_lowered *l,
                               const sj_llvm_target *t, int vector_floats, int gemm_level,
                               unsigned *externs);

/* Address of an extern kernel emitted code may call ("cblas_sgemm"), NULL
 * for a name this build does not provide. */
void *sj_host_extern_symbol(const char *name);

/* The fused attention kernel (host_attention.c) for query rows [row_begin,
 * row_end) at active extent n: w holds the kernel's words
 * (SJ_HOST_ATTENTION_WORDS: dims[5], sym bits, dk, has_mask, scale's bits,
 * strides of q, kt, v, mask, out over the space, and last the code level
 * to run, as sj_host_gemm's); mask may be NULL. */
#define SJ_HOST_ATTENTION_WORDS 35
void sj_host_attention_rows(const int64_t *w, const float *q, const float *kt, const float *v,
                            const float *mask, float *out, int64_t n, int64_t row_begin,
                            int64_t row_end);
/* Its exp, for the accuracy test: x <= 0 or NaN. */
float sj_host_attention_exp(float x);

/* The packed GEMM (host_gemm.c): C = A B over one slice, m x n of C (row
 * stride ldc, unit column stride), contraction k; A(i, p) at a + i*a_rs +
 * p*a_cs in float32, B(p, j) at b + p*b_rs + j*b_cs in b_storage's elements
 * (sj_precision: float32, or 16-bit widened exactly). level: the code to
 * run, 4 AVX-512, 3 AVX2+FMA, anything lower the baseline x86-64 code, never
 * more than the running CPU has. Uses about 420 KiB of stack. */
void sj_host_gemm(int64_t level, int64_t b_storage, int64_t m, int64_t n, int64_t k, const float *a,
                  int64_t a_rs, int64_t a_cs, const void *b, int64_t b_rs, int64_t b_cs, float *c,
                  int64_t ldc);
/* The level (4, 3 or 2, as sj_host_gemm's) the CPU runs of `wanted`: the
 * highest it has, never more than wanted (host_level.c). */
int sj_host_kernel_level(int64_t wanted);
/* The level sj_host_gemm runs for code with LLVM feature string fs. */
int sj_llvm_gemm_level(const char *fs);
/* Matmuls of at least this much work (m * n * k at the bucket extent) take
 * the packed GEMM; host_emit.c says where else it applies. */
#define SJ_HOST_GEMM_MIN_WORK ((int64_t)64 * 64 * 64)

/* Vectorisable float math emitted inline at the builder's position. */
LLVMValueRef sj_llvm_exp(LLVMBuilderRef b, LLVMModuleRef m, LLVMValueRef x);
LLVMValueRef sj_llvm_erf(LLVMBuilderRef b, LLVMModuleRef m, LLVMValueRef x);
LLVMValueRef sj_llvm_tanh(LLVMBuilderRef b, LLVMModuleRef m, LLVMValueRef x);
LLVMValueRef sj_llvm_log(LLVMBuilderRef b, LLVMModuleRef m, LLVMValueRef x);
LLVMValueRef sj_llvm_pow(LLVMBuilderRef b, LLVMModuleRef m, LLVMValueRef x, LLVMValueRef y);

/* Builds, optimises and prints the module for l. *out is sj_alloc'ed.
 * times (NULL: not wanted) gets the emit, optimise and codegen ns (the
 * last is printing, for IR text). */
sj_status sj_llvm_compile(sj_ctx *ctx, const sj_lowered *l, const sj_llvm_target *t,
                          sj_llvm_output what, uint8_t **out, size_t *len, unsigned *externs,
                          sj_compile_times *times);

#endif
