/* The fused attention kernel host code calls (SJ_KK_ATTENTION):
 * out = softmax(q kT * scale + mask) v, a tile of query rows at a time, over blocks
 * of keys with an online softmax (running max, running sum, accumulator
 * rescaled when the max grows), so the [M, L] scores never exist. Only the
 * active part is visited: symbolic dims loop to n, so padding keys never
 * enter a sum and padding queries are never computed or written.
 *
 * Rounding differs from the unfused softmax (the sum is rescaled as the max
 * grows; exp is the polynomial below, within 2 ulp of expf on [-87.3, 0]),
 * by a few float ulp of the result. NaN in a score makes its row NaN, and a
 * row whose scores are all -inf is NaN, as the unfused kernels have them.
 *
 * Built for AVX-512, AVX2+FMA and baseline x86-64 (target_clones picks at
 * load), so it is correct on any x86-64 CPU and fast where the host has
 * more. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "jit/llvm/llvm_impl.h"
#include "jit/lower/attention_fuse.h"

enum { KEY_BLOCK = 64, QUERY_TILE = 32, ROWS = 4, LANES = 16 };

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define SJ_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SJ_CLONES
#endif

/* exp(x) for x <= 0 (or NaN): Cephes' range reduction and polynomial,
 * branch-free so the block loops vectorise. Below -87.3 the true value is
 * denormal or 0 and 0 is returned. */
static inline float exp_nonpos(float x) {
    float xc = x < -87.3f ? -87.3f : x;
    float t = xc * 1.44269504088896341f + 12582912.0f; /* 1.5 * 2^23: rounds to an integer */
    float n = t - 12582912.0f;
    /* Unsigned throughout: for a NaN input these bits are garbage that the
     * selects below discard, and signed arithmetic on them would be undefined. */
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
    y *= s;
    y = x < -87.3f ? 0.0f : y;
    return x != x ? x : y;
}

float sj_host_attention_exp(float x) { return exp_nonpos(x); }

typedef struct desc {
    int64_t dims[5], sym, dk, has_mask;
    float scale;
    const int64_t *st[5]; /* q, kt, v, mask, out: strides over the space */
} desc;

static int64_t bound(const desc *d, int i, int64_t n) { return (d->sym >> i) & 1 ? n : d->dims[i]; }

/* Sixteen floats: a register on AVX-512, two on AVX2, four on SSE. */
typedef float vf16 __attribute__((vector_size(64)));

/* Unaligned; macros, as a function returning vf16 would have a different
 * ABI in each clone. */
#define LOAD16(v, p) memcpy(&(v), (p), sizeof(vf16))
#define STORE16(p, v) memcpy((p), &(v), sizeof(vf16))

/* The online softmax step of one row over a block: s holds KEY_BLOCK
 * scores (-inf past the last key) and becomes the block's weights; l holds
 * the row's running sum as LANES partial sums, reduced once at the end of
 * the row (a horizontal sum per block was a chain of LANES dependent adds
 * that cost as much as the block's exps). Returns the factor the row's
 * accumulator must be scaled by, or -1 when the row takes nothing from
 * this block (every score so far -inf). */
static inline float softmax_step(float *restrict s, float *m, float *restrict l) {
    float mb = *m;
    {
        float part[LANES];
        for (int t = 0; t < LANES; t++) part[t] = mb;
        for (int j = 0; j < KEY_BLOCK; j += LANES)
            for (int t = 0; t < LANES; t++) part[t] = s[j + t] > part[t] ? s[j + t] : part[t];
        /* A tree: max is exact, so the order changes nothing but the
         * length of the dependency chain. */
        for (int w = LANES / 2; w > 0; w /= 2)
            for (int t = 0; t < w; t++) part[t] = part[t + w] > part[t] ? part[t + w] : part[t];
        mb = part[0] > mb ? part[0] : mb;
    }
    if (mb == -INFINITY) { /* every score so far is -inf (or NaN) */
        int nan = 0;
        for (int j = 0; j < KEY_BLOCK; j++) nan |= s[j] != s[j];
        if (nan) l[0] = NAN;
        return -1.0f;
    }
    float corr = exp_nonpos(*m - mb);
    for (int j = 0; j < KEY_BLOCK; j++) s[j] = exp_nonpos(s[j] - mb);
    /* LANES partial sums in a fixed order: vector adds. */
    for (int t = 0; t < LANES; t++) l[t] *= corr;
    for (int j = 0; j < KEY_BLOCK; j += LANES)
        for (int t = 0; t < LANES; t++) l[t] += s[j + t];
    *m = mb;
    return corr;
}

/* Up to QUERY_TILE query rows against every key, a block of KEY_BLOCK keys
 * at a time. The block's kT ([dk][KEY_BLOCK]) and v ([KEY_BLOCK][dv
 * rounded up to 16]) are packed once per tile (on the stack, under 100
 * KiB), zero past the last key and the head dim, so the inner loops are register-blocked vector FMAs over
 * ROWS rows: scores over 16 keys, the v update over 16 of the head dim. */
SJ_CLONES
static void attend_tile(const desc *d, const float *restrict q, const float *restrict kt,
                        const float *restrict v, const float *restrict mask, float *restrict out,
                        int64_t nq, int64_t n_keys) {
    const int64_t dk = d->dk, dv = d->dims[4], dvp = (dv + 15) / 16 * 16;
    const int64_t qm = d->st[0][2], qc = d->st[0][4], kc = d->st[1][4], kl = d->st[1][3];
    const int64_t vl = d->st[2][3], vc = d->st[2][4], mm = d->st[3][2], ml = d->st[3][3];
    const int64_t om = d->st[4][2], oc = d->st[4][4];
    float qt[QUERY_TILE][SJ_ATTENTION_MAX_HEAD], acc[QUERY_TILE][SJ_ATTENTION_MAX_HEAD];
    float kp[SJ_ATTENTION_MAX_HEAD * KEY_BLOCK], vp[KEY_BLOCK * SJ_ATTENTION_MAX_HEAD];
    float s[ROWS][KEY_BLOCK], m[QUERY_TILE], l[QUERY_TILE][LANES], corr[ROWS];
    int64_t nq_r = (nq + ROWS - 1) / ROWS * ROWS;
    for (int64_t r = 0; r < nq_r; r++) {
        for (int64_t c = 0; c < dk; c++) qt[r][c] = r < nq ? q[r * qm + c * qc] * d->scale : 0.0f;
        for (int64_t c = 0; c < dvp; c++) acc[r][c] = 0.0f;
        m[r] = -INFINITY;
        for (int t = 0; t < LANES; t++) l[r][t] = 0.0f;
    }
    for (int64_t j0 = 0; j0 < n_keys; j0 += KEY_BLOCK) {
        int64_t nb = n_keys - j0 < KEY_BLOCK ? n_keys - j0 : KEY_BLOCK;
        const float *kb = kt + j0 * kl, *vb = v + j0 * vl;
        for (int64_t c = 0; c < dk; c++) {
            float *kr = kp + c * KEY_BLOCK;
            for (int64_t j = 0; j < nb; j++) kr[j] = kb[j * kl + c * kc];
            for (int64_t j = nb; j < KEY_BLOCK; j++) kr[j] = 0.0f;
        }
        for (int64_t j = 0; j < KEY_BLOCK; j++) {
            float *vr = vp + j * dvp;
            if (j < nb)
                for (int64_t c = 0; c < dv; c++) vr[c] = vb[j * vl + c * vc];
            for (int64_t c = j < nb ? dv : 0; c < dvp; c++) vr[c] = 0.0f;
        }
        for (int64_t r0 = 0; r0 < nq_r; r0 += ROWS) {
            vf16 sc[ROWS][KEY_BLOCK / 16];
            for (int r = 0; r < ROWS; r++)
                for (int i = 0; i < KEY_BLOCK / 16; i++) sc[r][i] = (vf16){0};
            for (int64_t c = 0; c < dk; c++) {
                vf16 kv[KEY_BLOCK / 16];
                for (int i = 0; i < KEY_BLOCK / 16; i++) LOAD16(kv[i], kp + c * KEY_BLOCK + 16 * i);
                for (int r = 0; r < ROWS; r++) {
                    vf16 qv = (vf16){0} + qt[r0 + r][c];
                    for (int i = 0; i < KEY_BLOCK / 16; i++) sc[r][i] += qv * kv[i];
                }
            }
            for (int r = 0; r < ROWS; r++) {
                for (int i = 0; i < KEY_BLOCK / 16; i++) STORE16(s[r] + 16 * i, sc[r][i]);
                for (int64_t j = nb; j < KEY_BLOCK; j++) s[r][j] = -INFINITY;
                if (mask && r0 + r < nq) {
                    const float *mr = mask + (r0 + r) * mm + j0 * ml;
                    for (int64_t j = 0; j < nb; j++) s[r][j] += mr[j * ml];
                }
                corr[r] = softmax_step(s[r], &m[r0 + r], l[r0 + r]);
                if (corr[r] < 0.0f) { /* contributes nothing: weights 0, accumulator kept */
                    corr[r] = 1.0f;
                    for (int j = 0; j < KEY_BLOCK; j++) s[r][j] = 0.0f;
                }
            }
            for (int64_t c0 = 0; c0 < dvp; c0 += 16) {
                vf16 a[ROWS];
                for (int r = 0; r < ROWS; r++) {
                    LOAD16(a[r], acc[r0 + r] + c0);
                    a[r] *= corr[r];
                }
                for (int64_t j = 0; j < nb; j++) {
                    vf16 vv;
                    LOAD16(vv, vp + j * dvp + c0);
                    for (int r = 0; r < ROWS; r++) a[r] += s[r][j] * vv;
                }
                for (int r = 0; r < ROWS; r++) STORE16(acc[r0 + r] + c0, a[r]);
            }
        }
    }
    for (int64_t r = 0; r < nq; r++) {
        /* l == 0: all scores -inf, NaN like softmax's 0/0. */
        float sum = 0.0f;
        for (int t = 0; t < LANES; t++) sum += l[r][t];
        float inv = sum == 0.0f ? NAN : 1.0f / sum;
        for (int64_t c = 0; c < dv; c++) out[r * om + c * oc] = acc[r][c] * inv;
    }
}

/* Query rows [row_begin, row_end) of every head: the host device splits
 * a launch's queries over its threads this way. A row's result does not
 * depend on the tile it shares (each row keeps its own scores, max, sum
 * and accumulator), so any split gives the same bits. */
void sj_host_attention_rows(const int64_t *w, const float *q, const float *kt, const float *v,
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
    int64_t n0 = bound(&d, 0, n), n1 = bound(&d, 1, n), nm = row_end, nl = bound(&d, 3, n);
    for (int64_t b0 = 0; b0 < n0; b0++)
        for (int64_t b1 = 0; b1 < n1; b1++)
            for (int64_t i = row_begin; i < nm; i += QUERY_TILE) {
                int64_t at[3] = {b0, b1, i}, off[5] = {0};
                for (int j = 0; j < 5; j++)
                    for (int x = 0; x < 3; x++) off[j] += at[x] * d.st[j][x];
                attend_tile(&d, q + off[0], kt + off[1], v + off[2], mask ? mask + off[3] : NULL,
                            out + off[4], nm - i < QUERY_TILE ? nm - i : QUERY_TILE, nl);
            }
}
