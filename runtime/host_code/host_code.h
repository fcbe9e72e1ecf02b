/* Running host object code: LLVM's one-time set-up and the host's identity,
 * the ORC loader's extern symbols, and the C kernels host code calls (their
 * ABI, which the host emitter, compile/llvm/host_emit.c, writes calls to).
 * Not installed. */
#ifndef SJ_HOST_CODE_H
#define SJ_HOST_CODE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core_impl.h"
#include "shapejit/precision.h"

/* Registers the native and NVPTX targets once per process (llvm_init.c says
 * why); false when LLVM has no native target. Every LLVM user calls it first. */
bool sj__llvm_init(void);

/* The host's triple, CPU name and feature string, each allocated with sj_alloc. */
sj_status sj__llvm_host_info(sj_ctx *ctx, char **triple, char **cpu, char **features);

/* The extern kernels a module's code calls, as bits. */
enum {
    SJ_LLVM_EXTERN_BLAS = 1u << 0,      /* cblas_sgemm */
    SJ_LLVM_EXTERN_ATTENTION = 1u << 1, /* sj__host_attention_rows */
    SJ_LLVM_EXTERN_GEMM = 1u << 2,      /* sj__host_gemm */
    SJ_LLVM_EXTERN_GEMM_PACKED = 1u << 3 /* sj__host_gemm_packed */
};

/* Address of an extern kernel emitted code may call ("cblas_sgemm"), NULL
 * for a name this build does not provide. */
void *sj__host_extern_symbol(const char *name);

/* The fused attention kernel (host_attention.c) for query rows [row_begin,
 * row_end) at active extent n: w holds the kernel's words
 * (SJ_HOST_ATTENTION_WORDS: dims[5] (a symbolic dim's factor k, its bound
 * k * n), sym bits, dk, has_mask, scale's bits,
 * strides of q, kt, v, mask, out over the space, and last the code level
 * to run, as sj__host_gemm's); mask may be NULL. */
#define SJ_HOST_ATTENTION_WORDS 35
void sj__host_attention_rows(const int64_t *w, const float *q, const float *kt, const float *v,
                            const float *mask, float *out, int64_t n, int64_t row_begin,
                            int64_t row_end);
/* Its exp, for the accuracy test: x <= 0 or NaN. */
float sj__host_attention_exp(float x);

/* The packed GEMM (host_gemm.c): C = A B over one slice, m x n of C (row
 * stride ldc, unit column stride), contraction k; A(i, p) at a + i*a_rs +
 * p*a_cs in float32, B(p, j) at b + p*b_rs + j*b_cs in b_storage's elements
 * (sj_precision: float32, or 16-bit widened exactly). level: the code to
 * run, 4 AVX-512, 3 AVX2+FMA, anything lower the baseline x86-64 code, never
 * more than the running CPU has. scratch: the calling kernel's
 * (SJ_HOST_SCRATCH_BYTES, 64-byte aligned), where A and B are packed; the
 * stack holds only an edge tile (1.5 KiB). */
void sj__host_gemm(int64_t level, int64_t b_storage, int64_t m, int64_t n, int64_t k, const float *a,
                  int64_t a_rs, int64_t a_cs, const void *b, int64_t b_rs, int64_t b_cs, float *c,
                  int64_t ldc, void *scratch);
/* Weights packed once (a plan's SJ_SLOT_PACKED): B's [k, n] view as column
 * panels of SJ_HOST_GEMM_PANEL(level) elements, panel j (columns from
 * j * NR) at j * NR * k elements, row p of it at p * NR, columns past n
 * zero. An element is the storage precision's (sj_precision): float32, or
 * the float32 weight rounded to bf16 / fp16 as the precision policy rounds
 * it, which the microkernel widens exactly (a bf16 row holds its columns in
 * pairs, j then NR / 2 + j). The level is the one the GEMM
 * will run (sj__host_kernel_level of the artifact's, which a load checks
 * the CPU runs as it is), so a panel is the width its microkernel reads;
 * pack and pack_bytes take the level as given.
 * sj__host_gemm_packed is sj__host_gemm with B so packed, which then packs
 * nothing per call; sj__host_gemm_pack_bytes is the packed size, -1 when it
 * overflows. */
#define SJ_HOST_GEMM_PANEL(level) ((level) >= 4 ? 32 : (level) == 3 ? 16 : 8)
/* Bytes of one packed element of that storage precision. */
static inline int64_t sj__host_gemm_element_bytes(int64_t storage) {
    return storage == SJ_PRECISION_FP32 ? 4 : 2;
}
void sj__host_gemm_packed(int64_t level, int64_t storage, int64_t m, int64_t n, int64_t k,
                         const float *a, int64_t a_rs, int64_t a_cs, const void *b_packed, float *c,
                         int64_t ldc, void *scratch);
int64_t sj__host_gemm_pack_bytes(int64_t level, int64_t storage, int64_t k, int64_t n);
void sj__host_gemm_pack(int64_t level, int64_t storage, int64_t k, int64_t n, const float *b,
                       int64_t b_rs, int64_t b_cs, void *dst);
/* A packed slot's panels (plan.h's words w): its SJ_PACK_BATCH matrices of
 * param data `param`, each packed as sj__host_gemm_pack packs it, one after
 * another; and their size in bytes, -1 when it overflows. */
int64_t sj__host_gemm_pack_slot_bytes(const int64_t *w);
void sj__host_gemm_pack_slot(const int64_t *w, const float *param, void *dst);
/* The level (4, 3 or 2, as sj__host_gemm's) the CPU runs of `wanted`: the
 * highest it has, never more than wanted (host_level.c). */
int sj__host_kernel_level(int64_t wanted);
/* The level sj__host_gemm runs for code with LLVM feature string fs. */
int sj__llvm_gemm_level(const char *fs);
/* Matmuls of at least this much work (m * n * k at the bucket extent) take
 * the packed GEMM; host_emit.c says where else it applies. */
#define SJ_HOST_GEMM_MIN_WORK ((int64_t)64 * 64 * 64)

/* The fused kernel keeps a tile of 32 query rows, their accumulators and a
 * block of scores on the stack (40 KiB at this bound). */
#define SJ_ATTENTION_MAX_HEAD 128

#endif
