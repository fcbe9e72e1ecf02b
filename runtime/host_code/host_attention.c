/* The fused attention kernel host code calls (SJ_KK_ATTENTION):
 * out = softmax(q kT * scale + mask) v, a tile of query rows at a
 * time, over blocks of keys with an online softmax (running max, running
 * sum, accumulator rescaled when the max grows), so the [M, L] scores never
 * exist. Only the active part is visited: symbolic dims loop to k * n, so
 * padding keys never enter a sum and padding queries are never read or
 * written.
 *
 * The tile's rows lie across the vector lanes: a score vector is one key
 * against a vector of query rows. So the softmax is lane-wise (a row's max, sum
 * and rescaling never need a horizontal reduction, and a head of 8 fills
 * every lane as well as a head of 128), and keys and values are read where
 * they lie, one broadcast element at a time, never packed.
 *
 * Rounding differs from the unfused softmax (the sum is rescaled as the max
 * grows; exp is the polynomial below, within 2 ulp of expf on [-88, 0]),
 * by a few float ulp of the result. A row's arithmetic does not depend on
 * its lane or tile, so any split of the rows gives the same bits. NaN in a
 * score makes its row NaN, and a row whose scores are all -inf is NaN, as
 * the unfused kernels have them.
 *
 * Built for AVX-512, AVX2+FMA and baseline x86-64; the code that runs is
 * the level the artifact was compiled for (its last word), never more than
 * the CPU has, so an x86-64-v3 artifact runs the AVX2 code on an AVX-512
 * machine too and every level can be timed and tested on one host. Each
 * level's vectors are its own registers (host_attention_tile.h): written
 * once with 16-float vectors for every level, the AVX2 code ran at a tenth
 * of the AVX-512 code's speed (38.7 against 3.3 ms at 1024 rows, head 64,
 * on one Zen 4 core), its vectors split through the stack. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "runtime/host_code/host_code.h"

/* At most TILE query rows per tile (the widest level's two vectors of 16);
 * scores of KEY_BLOCK keys at a time; JU keys and CU value columns per
 * register block. */
enum { TILE = 32, KEY_BLOCK = 64, JU = 4, CU = 4 };

/* exp(x) for x <= 0 (or NaN): Cephes' range reduction and polynomial,
 * branch-free so the block loops vectorise. Within 2 ulp of expf on
 * [-87.3, 0]. Below that the true value is under FLT_MIN and the result is
 * within FLT_MIN of it without a select: x is clamped at -88, and from
 * about -87.68 the power of two 2^n comes out as 0 (n = -127 gives zero
 * exponent bits). A NaN passes through every step as NaN. */
static inline float exp_nonpos(float x) {
    float xc = x < -88.0f ? -88.0f : x;
    float t = xc * 1.44269504088896341f + 12582912.0f; /* 1.5 * 2^23: rounds to an integer */
    float n = t - 12582912.0f;
    /* Unsigned throughout: for a NaN input these bits are garbage that
     * signed arithmetic would make undefined; the NaN in y wins anyway. */
    uint32_t ti;
    memcpy(&ti, &t, sizeof ti);
    uint32_t ni = ti - 0x4b400000u;
    float r = xc - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * r * r + r + 1.0f;
    uint32_t bits = (ni + 127u) << 23;
    float s;
    memcpy(&s, &bits, sizeof s);
    return y * s;
}

float sj__host_attention_exp(float x) { return exp_nonpos(x); }

typedef struct desc {
    int64_t dims[5], sym, dk, has_mask;
    float scale;
    const int64_t *st[5]; /* q, kt, v, mask, out: strides over the space */
} desc;

static int64_t bound(const desc *d, int i, int64_t n) {
    return (d->sym >> i) & 1 ? d->dims[i] * n : d->dims[i];
}

/* The tile code per level (host_attention_tile.h): the row vectors of a
 * tile are each level's own registers, at most two per tile, so a tile is
 * 32 rows on AVX-512, 16 on AVX2 and 8 on SSE. A remainder of at most one
 * vector of rows (the last tile of a range, or a thread's part) takes the
 * narrow width rather than leave half the lanes idle. A row's arithmetic
 * is the same in either width. */
typedef void tile_fn(const desc *d, const float *q, const float *kt, const float *v,
                     const float *mask, float *out, int64_t nq, int64_t n_keys);
#define SJ_AT_NR_MAX 2
#define SJ_ATT_TILES(SFX)                                                                        \
    SJ_AT_ATTR static void attend_wide_##SFX(const desc *d, const float *q, const float *kt,    \
                                             const float *v, const float *mask, float *out,      \
                                             int64_t nq, int64_t n_keys) {                       \
        SJ_AT_NAME(attend_tile)(d, q, kt, v, mask, out, nq, n_keys, 2);                          \
    }                                                                                            \
    SJ_AT_ATTR static void attend_narrow_##SFX(const desc *d, const float *q, const float *kt,  \
                                               const float *v, const float *mask, float *out,    \
                                               int64_t nq, int64_t n_keys) {                     \
        SJ_AT_NAME(attend_tile)(d, q, kt, v, mask, out, nq, n_keys, 1);                          \
    }

#if defined(__x86_64__) && defined(__GNUC__)
#define SJ_ATT_X86 1
typedef float vf16 __attribute__((vector_size(64)));
typedef float vf8 __attribute__((vector_size(32)));
#define SJ_AT_VT vf16
#define SJ_AT_VW 16
#define SJ_AT_ATTR __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")))
#define SJ_AT_NAME(f) f##_v4
#include "runtime/host_code/host_attention_tile.h"
SJ_ATT_TILES(v4)
#undef SJ_AT_VT
#undef SJ_AT_VW
#undef SJ_AT_ATTR
#undef SJ_AT_NAME
#define SJ_AT_VT vf8
#define SJ_AT_VW 8
#define SJ_AT_ATTR __attribute__((target("avx2,fma")))
#define SJ_AT_NAME(f) f##_v3
#include "runtime/host_code/host_attention_tile.h"
SJ_ATT_TILES(v3)
#undef SJ_AT_VT
#undef SJ_AT_VW
#undef SJ_AT_ATTR
#undef SJ_AT_NAME
#endif
typedef float vf4 __attribute__((vector_size(16)));
#define SJ_AT_VT vf4
#define SJ_AT_VW 4
#define SJ_AT_ATTR
#define SJ_AT_NAME(f) f##_base
#include "runtime/host_code/host_attention_tile.h"
SJ_ATT_TILES(base)
#undef SJ_AT_VT
#undef SJ_AT_VW
#undef SJ_AT_ATTR
#undef SJ_AT_NAME

/* The code for `level` (the artifact's, SJ_HOST_ATTENTION_WORDS' last),
 * lowered to what the CPU has: wide and narrow tiles and the lanes of a
 * vector (a tile is two vectors of rows, a narrow one one). */
static int pick_tiles(int64_t level, tile_fn **wide, tile_fn **narrow) {
    switch (sj__host_kernel_level(level)) {
#ifdef SJ_ATT_X86
    case 4: *wide = attend_wide_v4, *narrow = attend_narrow_v4; return 16;
    case 3: *wide = attend_wide_v3, *narrow = attend_narrow_v3; return 8;
#endif
    default: *wide = attend_wide_base, *narrow = attend_narrow_base; return 4;
    }
}

/* Query rows [row_begin, row_end) of every head: the host device splits
 * a launch's queries over its threads this way. A row's result does not
 * depend on the tile it shares (each row keeps its own scores, max, sum
 * and accumulator), so any split gives the same bits. */
void sj__host_attention_rows(const int64_t *w, const float *q, const float *kt, const float *v,
                            const float *mask, float *out, int64_t n, int64_t row_begin,
                            int64_t row_end) {
    desc d;
    memcpy(d.dims, w, sizeof d.dims);
    d.sym = w[5];
    d.dk = w[6];
    d.has_mask = w[7];
    int32_t sb = (int32_t)w[8];
    memcpy(&d.scale, &sb, sizeof d.scale);
    for (int j = 0; j < 5; j++) d.st[j] = w + 9 + 5 * j;
    if (!d.has_mask) mask = NULL;
    tile_fn *wide, *narrow;
    const int64_t lanes = pick_tiles(w[SJ_HOST_ATTENTION_WORDS - 1], &wide, &narrow);
    const int64_t tile = 2 * lanes;
    int64_t n0 = bound(&d, 0, n), n1 = bound(&d, 1, n), nm = row_end, nl = bound(&d, 3, n);
    for (int64_t b0 = 0; b0 < n0; b0++)
        for (int64_t b1 = 0; b1 < n1; b1++)
            for (int64_t i = row_begin; i < nm; i += tile) {
                int64_t at[3] = {b0, b1, i}, off[5] = {0};
                for (int j = 0; j < 5; j++)
                    for (int x = 0; x < 3; x++) off[j] += at[x] * d.st[j][x];
                int64_t rows = nm - i < tile ? nm - i : tile;
                (rows > lanes ? wide : narrow)(
                    &d, q + off[0], kt + off[1], v + off[2], mask ? mask + off[3] : NULL, out + off[4],
                    rows, nl);
            }
}
