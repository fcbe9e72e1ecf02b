/* The packed GEMM host code calls for matmuls at real sizes (host_emit.c's
 * GEMM path): C = A B over one [m, k] x [k, n] slice, the way BLIS-style
 * libraries reach a core's FMA peak, with the blocking sized per ISA level.
 *
 *   for each block of MC rows, each block of KC of the contraction:
 *     pack the A block into MR-row tiles ([p][r]: one tile is a contiguous
 *       MR x kc strip, read in order by the microkernel), unless n is a few
 *       panels wide (A_DIRECT_PANELS): then A's rows are read in place
 *     for each NR-wide column panel: pack the B panel ([p][j], widened to
 *       float32 from 16-bit weights; read in place instead for a call of at
 *       most two tiles of rows; a weight packed once at load,
 *       sj__host_gemm_pack, is read as it lies), then run the MR x NR
 *       microkernel over every tile of the A block against it (the panel
 *       stays in L1, the A block in L2)
 *
 * A weight packed at load keeps the precision it is stored in: float32, or
 * 16-bit panels (bf16, fp16) that the microkernel widens as it loads them,
 * so a few-rows call streams half the bytes. A bf16 panel row holds its
 * columns in pairs (j, NR / 2 + j): one 32-bit lane shifted and masked
 * gives both, two plain integer operations per row of B where a zero
 * extension would take cross-lane shuffles (at four rows and more the
 * shuffles were the bottleneck). Widening is exact, so the product is
 * bitwise the one a per-call packing of the same 16-bit weight gives.
 *
 * The microkernel keeps an MR x NR block of C in registers across the whole
 * kc loop: AVX-512 12 x 32 (24 of 32 zmm registers), AVX2+FMA 6 x 16 (12 of
 * 16 ymm), baseline SSE 4 x 8 (8 of 16 xmm). Which one runs is the level
 * the artifact was compiled for (an x86-64-v3 artifact runs the AVX2 code on
 * an AVX-512 machine too, so every level can be timed and tested on one
 * host), lowered to what the CPU running it has.
 *
 * Arithmetic: element (i, j) is summed over k in order, KC at a time, each
 * block added onto the previous blocks' sum in C. That order depends on
 * nothing but k and the level (not on the rows a call is given nor where
 * they sit in a block), so any split of the rows over threads gives the
 * same bits. A last panel's vector past column n is loaded from and stored
 * to C under a mask (the panel's own columns past n are zeros), and a tile
 * of fewer than MR rows runs a kernel of exactly its rows, so no element
 * outside [0, m) x [0, n) of C is read or written and no element of A or B
 * outside the slice is read: padding rows and columns of a bucket are never
 * touched.
 *
 * The A block and a B panel (about 416 KiB) are packed into the calling
 * kernel's scratch (shapejit/ext/device.h: the host device gives each of
 * its threads one, made with the device), so a launch allocates nothing and
 * a caller's thread needs no more than a few KiB of stack for it: a thread
 * with musl's 128 KiB default stack overflowed when they were stack
 * arrays. */
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "core/half.h"
#include "plan/plan.h"
#include "runtime/host_code/host_code.h"
#include "shapejit/ext/device.h"
#include "shapejit/precision.h"

/* KC x NR floats of a B panel fit L1 beside an A tile; MC x KC of an A
 * block fit L2. Measured on [512, 768] x [768, 3072] and [512, 4096] x
 * [4096, 11008] (Zen 4, AVX-512 level): KC 128..384 x MC 96..384, best at
 * 256 x 384 (82 GFLOP/s of CPU time, single-thread OpenBLAS 89-91); MC 192
 * lost 5-9% to B panels packed twice as often. */
enum { KC = 256, MC = 384 };
/* The scratch holds an A block and the widest level's B panel (NR 32). */
_Static_assert((MC * KC + KC * 32) * sizeof(float) <= SJ_HOST_SCRATCH_BYTES,
               "the GEMM's packed tiles must fit a kernel's scratch");

/* Up to this many NR-wide panels, the blocked loop reads A's rows where
 * they lie (unit column stride) instead of packing an A block that so few
 * panels would read: a packed element costs a load and a store, and each
 * panel then spends only NV multiply-adds on it. Measured on a Zen 3 core
 * (x86-64-v3, one thread, best of 3) on conv-shaped GEMMs: [3136, 576] x
 * [576, 64] 55.6 -> 64.3 GFLOP/s, [12544, 147] x [147, 64] 63.5 -> 70.3,
 * [784, 1152] x [1152, 128] 75.4 -> 86.1; x86-64-v2 level within noise. */
enum { A_DIRECT_PANELS = 8 };

/* The microkernel prefetches B this far ahead of the row it reads: a
 * few-rows call streams its weight from DRAM, and the hardware prefetchers
 * alone left [8, 4096] x [4096, 11008] latency-bound (Zen 4, bf16 panels,
 * AVX-512 level: 10.9 -> 7.1 ms with 128 rows ahead; x86-64-v3 13.8 ->
 * 10.7). A panel already in L1 (the blocked loop's) costs a prefetch
 * instruction a row. */
enum { PREFETCH_BYTES = 8192 };

/* Vector types: the width is the type's, the registers the target's. */
typedef float vf16 __attribute__((vector_size(64)));
typedef float vf8 __attribute__((vector_size(32)));
typedef float vf4 __attribute__((vector_size(16)));

typedef struct gemm_args {
    int64_t m, n, k;
    const float *a;
    int64_t a_rs, a_cs;
    const void *b;
    int64_t b_rs, b_cs;
    sj_precision b_storage;
    /* B already in panels (sj__host_gemm_pack, at this call's level) of
     * b_packed_storage elements, or NULL: each call packs the panels it
     * needs (as float32). */
    const void *b_packed;
    sj_precision b_packed_storage;
    float *c;
    int64_t ldc;
    float *scratch; /* the A block (MC x KC), then a B panel (KC x NR) */
} gemm_args;

static inline int64_t min64(int64_t x, int64_t y) { return x < y ? x : y; }

/* B(p, j) for the slice: float32, or a 16-bit weight widened exactly. */
static inline float b_at(const gemm_args *g, int64_t p, int64_t j) {
    int64_t off = p * g->b_rs + j * g->b_cs;
    if (g->b_storage == SJ_PRECISION_BF16) return sj_bf16_to_f32(((const uint16_t *)g->b)[off]);
    if (g->b_storage == SJ_PRECISION_FP16) return sj_f16_to_f32(((const uint16_t *)g->b)[off]);
    return ((const float *)g->b)[off];
}

/* dst[p][0, NR) = B(pc + p, jr + j) for j < nr, zeros past nr. */
static inline void pack_b(float *restrict dst, int NR, const gemm_args *g, int64_t pc, int64_t kc,
                          int64_t jr, int64_t nr) {
    for (int64_t p = 0; p < kc; p++) {
        float *row = dst + p * NR;
        if (g->b_storage == SJ_PRECISION_FP32 && g->b_cs == 1 && nr == NR) {
            /* a whole panel row: a copy of constant size, inlined */
            memcpy(row, (const float *)g->b + (pc + p) * g->b_rs + jr, (size_t)NR * sizeof(float));
            continue;
        }
        if (g->b_storage == SJ_PRECISION_FP32 && g->b_cs == 1) {
            memcpy(row, (const float *)g->b + (pc + p) * g->b_rs + jr, (size_t)nr * sizeof(float));
        } else {
            for (int64_t j = 0; j < nr; j++) row[j] = b_at(g, pc + p, jr + j);
        }
        for (int64_t j = nr; j < NR; j++) row[j] = 0.0f;
    }
}

/* The A block's rows [ic, ic + mc) x [pc, pc + kc) as MR-row tiles: tile t
 * at dst + t * MR * kc holds A(ic + t*MR + r, pc + p) at [p * MR + r], rows
 * past mc as zeros. A full tile of rows with unit column stride is copied p
 * outermost: MR read streams and one write stream in order, instead of a
 * store every MR floats per element (at ResNet-18's [3136, 576] x [576, 64]
 * the row-at-a-time copy was a fifth of the GEMM's time). */
static inline void pack_a(float *restrict dst, int MR, const gemm_args *g, int64_t ic, int64_t mc,
                          int64_t pc, int64_t kc) {
    for (int64_t t = 0; t * MR < mc; t++) {
        float *tile = dst + t * MR * kc;
        const float *base = g->a + (ic + t * MR) * g->a_rs + pc * g->a_cs;
        if (g->a_cs == 1 && (t + 1) * MR <= mc) {
            for (int64_t p = 0; p < kc; p++)
                _Pragma("GCC unroll 16") for (int r = 0; r < MR; r++)
                    tile[p * MR + r] = base[r * g->a_rs + p];
            continue;
        }
        for (int r = 0; r < MR; r++) {
            int64_t i = t * MR + r;
            if (i >= mc) {
                for (int64_t p = 0; p < kc; p++) tile[p * MR + r] = 0.0f;
                continue;
            }
            const float *src = base + r * g->a_rs;
            for (int64_t p = 0; p < kc; p++) tile[p * MR + r] = src[p * g->a_cs];
        }
    }
}

/* VW fp16 weights from p as float32, exactly: the F16C / AVX-512
 * conversion where the level has it, else one element at a time. One per
 * level, named as the level's kernels are (wide_##SFX). (A bf16 panel is
 * widened in the kernel itself: its rows are laid out in pairs for it.) */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma,f16c"))) static inline vf16
wide_v4(const uint16_t *p) {
    __m256i h;
    memcpy(&h, p, sizeof h);
    return (vf16)_mm512_cvtph_ps(h);
}
__attribute__((target("avx2,fma,f16c"))) static inline vf8 wide_v3(const uint16_t *p) {
    __m128i h;
    memcpy(&h, p, sizeof h);
    return (vf8)_mm256_cvtph_ps(h);
}
#endif
static inline vf4 wide_base(const uint16_t *p) {
    return (vf4){sj_f16_to_f32(p[0]), sj_f16_to_f32(p[1]), sj_f16_to_f32(p[2]), sj_f16_to_f32(p[3])};
}

/* The first `lanes` floats at p (0 < lanes <= the width) as a vector, the
 * lanes past them zero, and the store of a vector's first `lanes` lanes:
 * the last vector of a panel that ends past C's last column, nothing read
 * or written past it. AVX-512 and AVX2 mask the access; the baseline copies
 * the lanes. One pair per level, named as its kernels are (SFX). */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma,f16c"))) static inline vf16
part_v4_load(const float *p, int64_t lanes) {
    return (vf16)_mm512_maskz_loadu_ps((__mmask16)((1u << lanes) - 1), p);
}
__attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma,f16c"))) static inline void
part_v4_store(float *p, vf16 v, int64_t lanes) {
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << lanes) - 1), (__m512)v);
}
__attribute__((target("avx2,fma,f16c"))) static inline __m256i lanes_v3(int64_t lanes) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)lanes), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
__attribute__((target("avx2,fma,f16c"))) static inline vf8 part_v3_load(const float *p, int64_t lanes) {
    return (vf8)_mm256_maskload_ps(p, lanes_v3(lanes));
}
__attribute__((target("avx2,fma,f16c"))) static inline void part_v3_store(float *p, vf8 v,
                                                                          int64_t lanes) {
    _mm256_maskstore_ps(p, lanes_v3(lanes), (__m256)v);
}
#endif
static inline vf4 part_base_load(const float *p, int64_t lanes) {
    vf4 v = {0};
    memcpy(&v, p, (size_t)lanes * sizeof(float));
    return v;
}
static inline void part_base_store(float *p, vf4 v, int64_t lanes) {
    memcpy(p, &v, (size_t)lanes * sizeof(float));
}

/* Whether the microkernel can read A's rows where they lie: unit column
 * stride, and rows apart (the kernel takes a row stride of 0 for a packed
 * tile) unless there is one row, whose stride nothing reads (a pooled
 * image's [1, C] row, broadcast along its size-1 dim, has stride 0). */
static inline int a_reads_in_place(const gemm_args *g) {
    return g->a_cs == 1 && (g->a_rs != 0 || g->m == 1);
}
static inline int64_t a_row_stride(const gemm_args *g) { return g->a_rs ? g->a_rs : 1; }

/* One instance of the kernel per ISA level: VT vectors of VW floats, an
 * MR x (NV * VW) register block.
 *
 * ukr_rows computes the first mx rows of a tile (the A tile is MR rows
 * wide either way); always inlined with mx a constant, it is one fully
 * unrolled kernel per row count. A tile of rows past the last whole one
 * (the few rows of a decode step or a small batch, the rest of 37 rows)
 * then runs exactly its rows: with the padded tile alone, 8 rows on the
 * AVX-512 level did 12 rows of multiply-adds. Each element is summed the
 * same way in either (k in order, the block added onto C), so the bits do
 * not depend on which kernel a row met.
 *
 * A call of at most two tiles of rows whose A fits the A block whole reads
 * each B panel from end to end (gemm_few_tiles): panel by panel, its
 * blocks of k in order, so the weight streams past once in address order
 * (a packed weight's panels lie one after the other), where the blocked
 * order reads a KC-row piece of every panel in turn. */
#define SJ_GEMM_UKR(SFX, ATTR, VT, VW, MR, NV, WIDE, PART)                                            \
    ATTR static inline __attribute__((always_inline)) void ukr_rows_##SFX(                            \
        int mx, int64_t kc, const float *restrict ap, int64_t a_ps, int64_t a_rs,                     \
        const void *restrict bp, int64_t ldb, sj_precision st, float *restrict c, int64_t ldc,        \
        int first, int64_t lanes) {                                                                   \
        VT acc[MR][NV];                                                                               \
        const int64_t size = sj__host_gemm_element_bytes(st), row_bytes = NV * VW * size;             \
        _Pragma("GCC unroll 16") for (int r = 0; r < mx; r++)                                         \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                                    \
            if (first) acc[r][v] = (VT){0};                                                           \
            else if (v == NV - 1 && lanes < VW)                                                       \
                acc[r][v] = PART##_load(c + r * ldc + v * VW, lanes);                                   \
            else memcpy(&acc[r][v], c + r * ldc + v * VW, sizeof(VT));                                \
        }                                                                                             \
        for (int64_t p = 0; p < kc; p++) {                                                            \
            VT bv[NV];                                                                                \
            /* B's row PREFETCH_BYTES of panel ahead, every line of it (an                          \
             * address, possibly past B's end: a prefetch never faults) */                          \
            uintptr_t ahead = (uintptr_t)bp + (uintptr_t)((p + PREFETCH_BYTES / row_bytes) * ldb * size); \
            _Pragma("GCC unroll 4") for (int64_t l = 0; l < row_bytes; l += 64)                       \
                __builtin_prefetch((const void *)(ahead + (uintptr_t)l));                             \
            if (st == SJ_PRECISION_BF16) {                                                            \
                _Static_assert(NV <= 2, "a bf16 panel row is two vectors of pairs");                  \
                /* a row of bf16 pairs (column j, column VW + j): each 32-bit                        \
                 * lane's low half shifted up and its high half masked are                           \
                 * the two vectors, with no shuffle */                                               \
                typedef uint32_t vpairs __attribute__((vector_size(sizeof(VT))));                     \
                vpairs pairs, lo, hi;                                                                 \
                memcpy(&pairs, (const uint16_t *)bp + p * ldb, sizeof pairs);                         \
                lo = pairs << 16;                                                                     \
                memcpy(&bv[0], &lo, sizeof(VT));                                                      \
                if (NV > 1) {                                                                         \
                    hi = pairs & 0xFFFF0000u;                                                         \
                    memcpy(&bv[NV - 1], &hi, sizeof(VT));                                             \
                }                                                                                     \
            } else {                                                                                  \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                                \
                    if (st == SJ_PRECISION_FP32)                                                      \
                        memcpy(&bv[v], (const float *)bp + p * ldb + v * VW, sizeof(VT));             \
                    else                                                                              \
                        bv[v] = WIDE((const uint16_t *)bp + p * ldb + v * VW);                        \
                }                                                                                     \
            }                                                                                         \
            _Pragma("GCC unroll 16") for (int r = 0; r < mx; r++) {                                   \
                VT av = ap[p * a_ps + r * a_rs] - (VT){0};                                            \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[r][v] += av * bv[v];         \
            }                                                                                         \
        }                                                                                             \
        _Pragma("GCC unroll 16") for (int r = 0; r < mx; r++)                                         \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                                    \
            if (v == NV - 1 && lanes < VW) PART##_store(c + r * ldc + v * VW, acc[r][v], lanes);        \
            else memcpy(c + r * ldc + v * VW, &acc[r][v], sizeof(VT));                                \
        }                                                                                             \
    }                                                                                                 \
    /* rows [0, mr) of a tile, 1 <= mr <= MR: the kernel of exactly mr rows,                          \
     * B's panel of st elements (a constant once inlined).                                            \
     * a_rs 0: the tile is packed ([p][r]); else A's rows read in place, a_rs                         \
     * apart with unit column stride (the two cases are separate loops, so                            \
     * the packed one keeps its constant offsets) */                                                  \
    ATTR static inline __attribute__((always_inline)) void ukr_st_##SFX(                              \
        int64_t mr, int64_t kc, const float *restrict ap, int64_t a_rs, const void *restrict bp,      \
        int64_t ldb, sj_precision st, float *restrict c, int64_t ldc, int first, int64_t lanes) {     \
        if (a_rs) {                                                                                   \
            switch (mr) {                                                                             \
            SJ_GEMM_ROW_CASES_##MR(SFX, 1, a_rs)                                                      \
            default:                                                                                  \
                ukr_rows_##SFX(SJ_GEMM_LAST_ROWS(MR), kc, ap, 1, a_rs, bp, ldb, st, c, ldc, first,    \
                               lanes);                                                                \
            }                                                                                         \
            return;                                                                                   \
        }                                                                                             \
        switch (mr) {                                                                                 \
        SJ_GEMM_ROW_CASES_##MR(SFX, MR, 1)                                                            \
        default:                                                                                      \
            ukr_rows_##SFX(SJ_GEMM_LAST_ROWS(MR), kc, ap, MR, 1, bp, ldb, st, c, ldc, first, lanes);  \
        }                                                                                             \
    }                                                                                                 \
    /* lanes: C's columns in the last vector, VW for all of them (a                                  \
     * constant then, for the whole panels' code) */                                                  \
    ATTR static inline __attribute__((always_inline)) void ukr_lanes_##SFX(                           \
        int64_t mr, int64_t kc, const float *restrict ap, int64_t a_rs, const void *restrict bp,      \
        int64_t ldb, sj_precision st, float *restrict c, int64_t ldc, int first, int64_t lanes) {     \
        if (SJ_GEMM_SPECIALIZE && lanes == VW)                                                        \
            ukr_st_##SFX(mr, kc, ap, a_rs, bp, ldb, st, c, ldc, first, VW);                           \
        else ukr_st_##SFX(mr, kc, ap, a_rs, bp, ldb, st, c, ldc, first, lanes);                       \
    }                                                                                                 \
    ATTR static void ukr_##SFX(int64_t mr, int64_t kc, const float *restrict ap, int64_t a_rs,        \
                               const void *restrict bp, int64_t ldb, sj_precision st,                 \
                               float *restrict c, int64_t ldc, int first, int64_t lanes) {            \
        switch (st) {                                                                                 \
        case SJ_PRECISION_BF16:                                                                       \
            ukr_lanes_##SFX(mr, kc, ap, a_rs, bp, ldb, SJ_PRECISION_BF16, c, ldc, first, lanes);      \
            return;                                                                                   \
        case SJ_PRECISION_FP16:                                                                       \
            ukr_lanes_##SFX(mr, kc, ap, a_rs, bp, ldb, SJ_PRECISION_FP16, c, ldc, first, lanes);      \
            return;                                                                                   \
        default: ukr_lanes_##SFX(mr, kc, ap, a_rs, bp, ldb, SJ_PRECISION_FP32, c, ldc, first, lanes); \
        }                                                                                             \
    }

/* A level's kernels: the MR x (NV * VW) microkernel, and the same at one
 * vector wide (the _half instance, NV 1) for a last panel of at most VW
 * columns, which reads the first VW columns of the same packed panel
 * (a bf16 row's low halves): MobileNetV3's pointwise convs to 16, 40, 48
 * and 72 channels spent up to half their multiply-adds on the zero
 * columns of a full-width last panel at the AVX-512 level. */
#define SJ_GEMM_LEVEL(SFX, ATTR, VT, VW, MR, NV)                                                      \
    SJ_GEMM_UKR(SFX, ATTR, VT, VW, MR, NV, wide_##SFX, part_##SFX)                                    \
    SJ_GEMM_UKR(SFX##_half, ATTR, VT, VW, MR, 1, wide_##SFX, part_##SFX)                              \
    /* C's rows [0, mr) x columns [jr, jr + nr) of the block k [pc, pc + kc):                         \
     * whole vectors, the last one masked past nr (the panel's columns past n                         \
     * are zeros), so nothing past column n is read or written. A panel of                            \
     * 8 or 24 columns went through a zero-padded tile instead, copied in                             \
     * and out a row at a time: MobileNetV3's [25088, 16] x [16, 72] at                               \
     * AVX-512 spent more on its 8-column panel than on its two whole ones */                         \
    ATTR static void block_##SFX(const gemm_args *g, int64_t mr, int64_t nr, int64_t kc,              \
                                 const float *at, int64_t a_rs, const void *panel, int64_t ldb,       \
                                 sj_precision st, float *cc, int first) {                             \
        if (nr <= VW)                                                                                 \
            ukr_##SFX##_half(mr, kc, at, a_rs, panel, ldb, st, cc, g->ldc, first, nr);                \
        else                                                                                          \
            ukr_##SFX(mr, kc, at, a_rs, panel, ldb, st, cc, g->ldc, first, nr - (NV - 1) * VW);       \
    }                                                                                                 \
    /* B's panel jr, k [pc, pc + kc), as the microkernel reads it (ldb: its row                       \
     * stride, st: its elements): packed at load, read in place, or packed                            \
     * now into bp */                                                                                 \
    ATTR static const void *panel_##SFX(const gemm_args *g, int direct, float *bp, int64_t pc,        \
                                        int64_t kc, int64_t jr, int64_t nr, int64_t *ldb,             \
                                        sj_precision *st) {                                           \
        enum { NR = NV * VW };                                                                        \
        *ldb = NR;                                                                                    \
        *st = SJ_PRECISION_FP32;                                                                      \
        if (g->b_packed) {                                                                            \
            *st = g->b_packed_storage;                                                                \
            return (const char *)g->b_packed +                                                        \
                   (jr * g->k + pc * NR) * sj__host_gemm_element_bytes(*st);                         \
        }                                                                                             \
        if (direct && nr == NR) {                                                                     \
            *ldb = g->b_rs;                                                                           \
            return (const float *)g->b + pc * g->b_rs + jr;                                           \
        }                                                                                             \
        pack_b(bp, NR, g, pc, kc, jr, nr);                                                            \
        return bp;                                                                                    \
    }                                                                                                 \
    ATTR static void gemm_##SFX(const gemm_args *g) {                                                 \
        enum { NR = NV * VW };                                                                        \
        float *ap = g->scratch, *bp = g->scratch + MC * KC;                                           \
        /* At most two tiles of rows, a packed panel is read too few times to                        \
         * repay its packing: float32 B with unit column stride is read in                           \
         * place (measured at [16, 4096] x [4096, 11008], AVX-512: 42.6 ->                           \
         * 35.4 ms; no gain from 40 rows up). */                                                     \
        const int two_tiles = g->m <= 2 * MR;                                                         \
        const int direct = !g->b_packed && g->b_storage == SJ_PRECISION_FP32 && g->b_cs == 1 && two_tiles; \
        int64_t tiles = (g->m + MR - 1) / MR;                                                         \
        if (two_tiles && tiles * MR * g->k <= MC * KC) { /* gemm_few_tiles */                         \
            /* A's rows read in place when they have unit column stride:                             \
             * every panel reads all of A again, and a packed tile of MR rows                        \
             * puts each k's few values on a line of their own (one row of                           \
             * 4096 takes 192 KiB packed at AVX-512, 16 KiB in place); at one                        \
             * row A's lines were as many as the bf16 weight's. [1, 4096] x                          \
             * [4096, 11008], Zen 4: bf16 5.2 -> 3.3 ms, fp32 8.1 -> 7.0 ms at                       \
             * AVX-512; bf16 5.8 -> 3.6 ms at x86-64-v3; no size slower. */                          \
            const int a_in_place = a_reads_in_place(g);                                               \
            if (!a_in_place) pack_a(ap, MR, g, 0, g->m, 0, g->k);                                     \
            for (int64_t jr = 0; jr < g->n; jr += NR) {                                               \
                int64_t nr = min64(NR, g->n - jr);                                                    \
                for (int64_t pc = 0; pc < g->k; pc += KC) {                                           \
                    int64_t kc = min64(KC, g->k - pc), ldb;                                           \
                    sj_precision st;                                                                  \
                    const void *panel = panel_##SFX(g, direct, bp, pc, kc, jr, nr, &ldb, &st);        \
                    for (int64_t t = 0; t < tiles; t++)                                               \
                        block_##SFX(g, min64(MR, g->m - t * MR), nr, kc,                              \
                                    a_in_place ? g->a + t * MR * g->a_rs + pc                         \
                                               : ap + t * MR * g->k + pc * MR,                        \
                                    a_in_place ? a_row_stride(g) : 0, panel, ldb, st,                 \
                                    g->c + t * MR * g->ldc + jr, pc == 0);                            \
                }                                                                                     \
            }                                                                                         \
            return;                                                                                   \
        }                                                                                             \
        /* A read in place where too few panels would repay its packing */                          \
        const int a_direct = a_reads_in_place(g) && g->n <= A_DIRECT_PANELS * NR;                     \
        for (int64_t ic = 0; ic < g->m; ic += MC) {                                                   \
            int64_t mc = min64(MC, g->m - ic);                                                        \
            for (int64_t pc = 0; pc < g->k; pc += KC) {                                               \
                int64_t kc = min64(KC, g->k - pc);                                                    \
                if (!a_direct) pack_a(ap, MR, g, ic, mc, pc, kc);                                     \
                for (int64_t jr = 0; jr < g->n; jr += NR) {                                           \
                    int64_t nr = min64(NR, g->n - jr), ldb;                                           \
                    sj_precision st;                                                                  \
                    const void *panel = panel_##SFX(g, direct, bp, pc, kc, jr, nr, &ldb, &st);        \
                    for (int64_t ir = 0; ir < mc; ir += MR)                                           \
                        block_##SFX(g, min64(MR, mc - ir), nr, kc,                                    \
                                    a_direct ? g->a + (ic + ir) * g->a_rs + pc : ap + ir * kc,        \
                                    a_direct ? a_row_stride(g) : 0, panel, ldb, st,                   \
                                    g->c + (ic + ir) * g->ldc + jr, pc == 0);                         \
                }                                                                                     \
            }                                                                                         \
        }                                                                                             \
    }

/* SJ_HOST_GEMM_GENERIC (CMake sets it for the sanitized and fuzzing
 * builds): one kernel per precision, its row and lane counts variables.
 * The copies per row count and per full last vector are that same code
 * with constants folded in (same accesses, same sums), and instrumenting a
 * few hundred unrolled copies took clang over ten minutes and gcc 2.5
 * minutes for this file alone, against 19 s unsanitized. */
#ifdef SJ_HOST_GEMM_GENERIC
#define SJ_GEMM_SPECIALIZE 0
#define SJ_GEMM_LAST_ROWS(MR) ((int)mr)
#define SJ_GEMM_ROW_CASE(SFX, R, PS, RS)
#else
#define SJ_GEMM_SPECIALIZE 1
#define SJ_GEMM_LAST_ROWS(MR) (MR) /* the switch's default: a whole tile */
/* The switch cases of ukr_##SFX for the row counts below MR. */
#define SJ_GEMM_ROW_CASE(SFX, R, PS, RS)                                                           \
    case R: ukr_rows_##SFX(R, kc, ap, PS, RS, bp, ldb, st, c, ldc, first, lanes); return;
#endif
#define SJ_GEMM_ROW_CASES_4(SFX, PS, RS)                                                           \
    SJ_GEMM_ROW_CASE(SFX, 1, PS, RS) SJ_GEMM_ROW_CASE(SFX, 2, PS, RS) SJ_GEMM_ROW_CASE(SFX, 3, PS, RS)
#define SJ_GEMM_ROW_CASES_6(SFX, PS, RS)                                                           \
    SJ_GEMM_ROW_CASES_4(SFX, PS, RS) SJ_GEMM_ROW_CASE(SFX, 4, PS, RS) SJ_GEMM_ROW_CASE(SFX, 5, PS, RS)
#define SJ_GEMM_ROW_CASES_12(SFX, PS, RS)                                                          \
    SJ_GEMM_ROW_CASES_6(SFX, PS, RS) SJ_GEMM_ROW_CASE(SFX, 6, PS, RS)                               \
    SJ_GEMM_ROW_CASE(SFX, 7, PS, RS) SJ_GEMM_ROW_CASE(SFX, 8, PS, RS)                               \
    SJ_GEMM_ROW_CASE(SFX, 9, PS, RS) SJ_GEMM_ROW_CASE(SFX, 10, PS, RS)                              \
    SJ_GEMM_ROW_CASE(SFX, 11, PS, RS)

#if defined(__x86_64__) && defined(__GNUC__)
#define SJ_GEMM_X86 1
SJ_GEMM_LEVEL(v4, __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma,f16c"))), vf16, 16, 12, 2)
SJ_GEMM_LEVEL(v3, __attribute__((target("avx2,fma,f16c"))), vf8, 8, 6, 2)
#endif
SJ_GEMM_LEVEL(base, , vf4, 4, 4, 2)

/* The level's panel width: the NR of its instance above. */
_Static_assert(SJ_HOST_GEMM_PANEL(4) == 2 * 16 && SJ_HOST_GEMM_PANEL(3) == 2 * 8 &&
                   SJ_HOST_GEMM_PANEL(2) == 2 * 4,
               "sj__host_gemm_pack's panels must be the microkernels' NR");

static void run(int64_t level, gemm_args *g) {
    if (g->m <= 0 || g->n <= 0) return;
    if (g->k <= 0) { /* an empty contraction: the sums are zero */
        for (int64_t i = 0; i < g->m; i++) memset(g->c + i * g->ldc, 0, (size_t)g->n * sizeof(float));
        return;
    }
    /* The artifact's level, never more than this CPU has (a load check
     * refuses code built for more; this keeps the extern safe alone). */
    switch (sj__host_kernel_level(level)) {
#ifdef SJ_GEMM_X86
    case 4: gemm_v4(g); return;
    case 3: gemm_v3(g); return;
#endif
    default: gemm_base(g);
    }
}

void sj__host_gemm(int64_t level, int64_t b_storage, int64_t m, int64_t n, int64_t k, const float *a,
                  int64_t a_rs, int64_t a_cs, const void *b, int64_t b_rs, int64_t b_cs, float *c,
                  int64_t ldc, void *scratch) {
    gemm_args g = {m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, (sj_precision)b_storage, NULL, 0, c, ldc, scratch};
    run(level, &g);
}

void sj__host_gemm_packed(int64_t level, int64_t storage, int64_t m, int64_t n, int64_t k,
                         const float *a, int64_t a_rs, int64_t a_cs, const void *b_packed, float *c,
                         int64_t ldc, void *scratch) {
    gemm_args g = {m, n, k, a, a_rs, a_cs, NULL, 0, 0, SJ_PRECISION_FP32, b_packed, (sj_precision)storage,
                   c, ldc, scratch};
    run(level, &g);
}

int64_t sj__host_gemm_pack_bytes(int64_t level, int64_t storage, int64_t k, int64_t n) {
    int64_t nr = SJ_HOST_GEMM_PANEL(level), size = sj__host_gemm_element_bytes(storage);
    if (k < 1 || n < 1 || n > INT64_MAX - nr) return -1;
    int64_t cols = (n + nr - 1) / nr * nr;
    if (cols > INT64_MAX / size / k) return -1;
    return cols * k * size;
}

int64_t sj__host_gemm_pack_slot_bytes(const int64_t *w) {
    int64_t one = sj__host_gemm_pack_bytes(w[SJ_PACK_LEVEL], w[SJ_PACK_STORAGE], w[SJ_PACK_K], w[SJ_PACK_N]);
    int64_t batch = w[SJ_PACK_BATCH];
    if (one < 0 || batch < 1 || batch > INT64_MAX / one) return -1;
    return one * batch;
}

void sj__host_gemm_pack_slot(const int64_t *w, const float *param, void *dst) {
    int64_t one = sj__host_gemm_pack_bytes(w[SJ_PACK_LEVEL], w[SJ_PACK_STORAGE], w[SJ_PACK_K], w[SJ_PACK_N]);
    for (int64_t b = 0; b < w[SJ_PACK_BATCH]; b++)
        sj__host_gemm_pack(w[SJ_PACK_LEVEL], w[SJ_PACK_STORAGE], w[SJ_PACK_K], w[SJ_PACK_N],
                           param + w[SJ_PACK_OFFSET] + b * w[SJ_PACK_BATCH_STRIDE], w[SJ_PACK_ROW_STRIDE],
                           w[SJ_PACK_COL_STRIDE], (char *)dst + b * one);
}

void sj__host_gemm_pack(int64_t level, int64_t storage, int64_t k, int64_t n, const float *b,
                       int64_t b_rs, int64_t b_cs, void *dst) {
    int64_t nr = SJ_HOST_GEMM_PANEL(level);
    for (int64_t jr = 0; jr < n; jr += nr) {
        int64_t w = min64(nr, n - jr);
        for (int64_t p = 0; p < k; p++) {
            int64_t at = jr * k + p * nr; /* the element offset of panel row p */
            const float *src = b + p * b_rs + jr * b_cs;
            if (storage == SJ_PRECISION_FP32) {
                float *row = (float *)dst + at;
                if (b_cs == 1)
                    memcpy(row, src, (size_t)w * sizeof(float));
                else
                    for (int64_t j = 0; j < w; j++) row[j] = src[j * b_cs];
                for (int64_t j = w; j < nr; j++) row[j] = 0.0f;
                continue;
            }
            /* rounded as the precision policy stores the weight
             * (sj__precision_round), zeros past n; bf16 in pairs of
             * columns (j, nr / 2 + j), as the microkernel widens them */
            uint16_t *row = (uint16_t *)dst + at;
            for (int64_t j = 0; j < nr; j++) {
                float v = j < w ? src[j * b_cs] : 0.0f;
                if (storage == SJ_PRECISION_BF16)
                    row[j < nr / 2 ? 2 * j : 2 * (j - nr / 2) + 1] = sj_f32_to_bf16(v);
                else
                    row[j] = sj_f32_to_f16(v);
            }
        }
    }
}
