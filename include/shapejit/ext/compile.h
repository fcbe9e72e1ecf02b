/* shapejit/ext/compile.h — compile a graph for one bucket extent.
 *
 *   sj_compile_options o;
 *   sj_compile_options_init(&o);          // host, O3, fusion on
 *   sj_artifact *a;
 *   if (sj_compile(g, 64, &o, &a) != SJ_OK)
 *       fprintf(stderr, "%s\n", sj_ctx_last_error(ctx));
 *   uint64_t key = sj_compile_options_hash(&o);   // part of the store key
 *   char *ir; size_t n;
 *   sj_emit_text(g, 64, &o, SJ_EMIT_LLVM_IR, &ir, &n);   // shapejit emit --target llvm-ir
 *   sj_free(ctx, ir); sj_artifact_destroy(a);
 *
 * The graph is specialised at `extent` (the bucket extent E: every buffer is
 * laid out for E) and the code runs at any active extent 1..E. A graph
 * without a symbolic dim ignores `extent`.
 *
 * A runtime-only library (built with -DSJ_COMPILERS=OFF) has no compiler:
 * sj_compile, sj_emit_text and sj_compile_kernel_count(s) are not in it;
 * sj_compile_options_init and sj_compile_options_hash are, since store keys
 * carry the hash.
 *
 * Extension tier (include/shapejit/ext/): for backends, tools and tests
 * that work below sj_engine; it may change between minor versions.
 */
#ifndef SHAPEJIT_COMPILE_H
#define SHAPEJIT_COMPILE_H

#include "shapejit/ext/artifact.h"
#include "shapejit/graph.h"
#include "shapejit/precision.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sj_target {
    SJ_TARGET_HOST, /* LLVM, this CPU (or `cpu`/`features`) */
    SJ_TARGET_NVPTX,
    SJ_TARGET_NVRTC
} sj_target;

/* Host: how softmax(q kT * scale + mask) v is run where lowering finds it.
 * AUTO fuses it into one kernel (online softmax over key blocks, the
 * scores never stored) when the scores would have at least 2^10 elements
 * at the bucket extent, where the fused kernel stops losing to the unfused
 * kernels; FUSED and UNFUSED decide at every extent. These are the
 * schedules `precompile --tune` times per bucket. */
typedef enum sj_attention_schedule {
    SJ_ATTENTION_AUTO,
    SJ_ATTENTION_FUSED,
    SJ_ATTENTION_UNFUSED
} sj_attention_schedule;

/* Host: how a matmul runs in a bucket of at most SJ_MATMUL_ROWS_MAX rows.
 * AUTO holds every row's outputs in registers while the weights stream
 * past once (the few-rows schedule: weight-bound sizes read each weight
 * once; a float32 weight of 256 Ki elements or more, from x86-64-v3, as
 * the panels the GEMM packs at load, one stream in address order); TILED uses the register tiles of larger buckets (4 rows at a time,
 * more multiply-adds per load: better once the rows fill a tile and the
 * weights sit in cache). Buckets above SJ_MATMUL_ROWS_MAX rows are tiled
 * either way. `precompile --tune` times both where they differ. */
typedef enum sj_matmul_schedule {
    SJ_MATMUL_AUTO,
    SJ_MATMUL_TILED
} sj_matmul_schedule;

#define SJ_MATMUL_ROWS_MAX 8

/* Compiled kernel objects a compile may take instead of compiling them (a
 * store's parts, from other buckets or models). find gives the object file
 * compiled before, for the same target and options, from the kernel module
 * whose code key is `code`: BLAKE3 of the module as emitted, before any
 * optimisation, which is everything LLVM compiles it from (the plan keeps
 * it, sj_kernel_desc.code). So a kernel emitted alike at two bucket
 * extents, or in two models, is compiled once, and one that differs
 * anywhere is never taken for another. *bytes sj_alloc'ed on the graph's
 * context, freed by the compile. Any other status than SJ_OK (its message
 * unused) compiles the kernel. */
typedef struct sj_kernel_objects {
    void *user;
    sj_status (*find)(void *user, const uint8_t code[32], void **bytes, size_t *len);
} sj_kernel_objects;

typedef struct sj_compile_options {
    sj_target target;
    int opt_level;     /* 0..3; default 3 */
    bool fusion;       /* default true; false = one kernel per op */
    /* Host matmuls whose k*n and m*k*n reach this call OpenBLAS's
     * cblas_sgemm (an extern kernel named in the artifact's externs);
     * 0 = never. Default SJ_COMPILE_BLAS_DEFAULT = 0: bench_host measures
     * the generated register-tiled kernel above single-thread OpenBLAS. */
    int64_t blas_min_work;
    const char *cpu;      /* host target CPU; NULL = this machine's */
    const char *features; /* LLVM feature string; NULL = this machine's */
    const char *arch;     /* GPU targets: "sm_80", "sm_90"; NULL = default */
    /* The precision policy (shapejit/precision.h); default fp32. Part of
     * the options hash, so of every store key. */
    sj_precision precision;
    sj_attention_schedule attention; /* host; default AUTO */
    sj_matmul_schedule matmul;       /* host; default AUTO */
    /* Host: kernels of one bucket compiled at once, each on its own thread
     * and LLVM context (0, the default: one per CPU, at most 8). Not part of
     * the key: each kernel is its own module, the same bytes on any number
     * of threads. */
    int threads;
    /* Host: kernel objects to take instead of compiling (NULL: compile
     * each). Not part of the key: an object found is the bytes compiling
     * would give. */
    const sj_kernel_objects *objects;
} sj_compile_options;

#define SJ_COMPILE_BLAS_DEFAULT ((int64_t)0)

SJ_API void sj_compile_options_init(sj_compile_options *o);

/* A hash of the canonical form of every option that changes the code (for
 * store keys). NULL cpu/features hash as "this machine's"; the resolved CPU
 * is recorded in the artifact and keyed separately. */
SJ_API uint64_t sj_compile_options_hash(const sj_compile_options *o);

/* o may be NULL for defaults. */
SJ_API sj_status sj_compile(const sj_graph *g, int64_t extent, const sj_compile_options *o,
                            sj_artifact **out);

typedef enum sj_emit_kind {
    SJ_EMIT_LLVM_IR, /* optimised LLVM IR of the host kernels (nvptx: the kernels' IR) */
    SJ_EMIT_HOST_ASM, /* host assembly */
    SJ_EMIT_PTX,      /* targets nvptx, nvrtc: PTX for o->arch */
    SJ_EMIT_CUDA_C,   /* target nvrtc: the CUDA C source NVRTC compiles */
    SJ_EMIT_CUBIN     /* targets nvptx, nvrtc: the kernels as one cubin for o->arch (binary;
                         SJ_E_UNSUPPORTED where the toolchain makes PTX only) */
} sj_emit_kind;

/* The code of one bucket as text, all its kernels in one module (an
 * artifact holds one module per kernel, bundled); *out is NUL-terminated,
 * allocated with sj_alloc, *len excludes the NUL; a cubin is binary, not
 * NUL-terminated: read *len bytes. */
SJ_API sj_status sj_emit_text(const sj_graph *g, int64_t extent, const sj_compile_options *o,
                              sj_emit_kind kind, char **out, size_t *len);

/* Kernel launches the plan for this bucket has after fusion (a figure for
 * reports): launches that share one kernel's code (repeated layers) count
 * each. */
SJ_API sj_status sj_compile_kernel_count(const sj_graph *g, int64_t extent, const sj_compile_options *o,
                                         int *out);
/* The same, and of those the matmul launches (where there are none, the
 * matmul schedules give the same code), from one lowering. */
SJ_API sj_status sj_compile_kernel_counts(const sj_graph *g, int64_t extent, const sj_compile_options *o,
                                          int *kernels, int *matmuls);

#ifdef __cplusplus
}
#endif
#endif
