/* The fused attention kernel host code calls (SJ_KK_ATTENTION):
 * out = softmax(q kT * scale + mask) v, a tile of TILE query rows at a
 * time, over blocks of keys with an online softmax (running max, running
 * sum, accumulator rescaled when the max grows), so the [M, L] scores never
 * exist. Only the active part is visited: symbolic dims loop to n, so
 * padding keys never enter a sum and padding queries are never read or
 * written.
 *
 * The tile's rows lie across the vector lanes: a score vector is one key
 * against sixteen query rows. So the softmax is lane-wise (a row's max, sum
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
 * Built for AVX-512, AVX2+FMA and baseline x86-64 (target_clones picks at
 * load), so it is correct on any x86-64 CPU and fast where the host has
 * more. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "jit/llvm/llvm_impl.h"
#include "jit/lower/attention_fuse.h"

/* TILE query rows (RV vectors of 16) per tile; scores of KEY_BLOCK keys
 * at a time; JU keys and CU value columns per register block. */
enum { TILE = 32, RV = TILE / 16, KEY_BLOCK = 64, JU = 4, CU = 4 };

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define SJ_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SJ_CLONES
#endif

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
/* x as every lane (x - 0 is x, -0 included, so it compiles to a broadcast). */
#define SPLAT(x) ((x) - (vf16){0})

/* The scores of keys j .. j + NJ of the block into s[j] (TILE rows each):
 * NJ x RV accumulators in registers over the head dim, each key element a
 * broadcast shared by the RV row vectors. */
static inline void score_keys(float *restrict s, const float *restrict qt, const float *restrict kb,
                              int64_t kl, int64_t kc, int64_t dk, int64_t j, int NJ) {
    vf16 a[JU][RV];
    for (int jj = 0; jj < NJ; jj++)
        for (int rr = 0; rr < RV; rr++) a[jj][rr] = (vf16){0};
    for (int64_t c = 0; c < dk; c++) {
        vf16 qv[RV];
        for (int rr = 0; rr < RV; rr++) LOAD16(qv[rr], qt + c * TILE + 16 * rr);
        for (int jj = 0; jj < NJ; jj++) {
            vf16 kv = SPLAT(kb[(j + jj) * kl + c * kc]);
            for (int rr = 0; rr < RV; rr++) a[jj][rr] += qv[rr] * kv;
        }
    }
    for (int jj = 0; jj < NJ; jj++)
        for (int rr = 0; rr < RV; rr++) STORE16(s + (j + jj) * TILE + 16 * rr, a[jj][rr]);
}

/* Value columns c0 .. c0 + NC of the accumulators: scaled by corr, plus the
 * block's weights times v, NC x RV accumulators in registers over the
 * block's keys. */
static inline void weigh_values(float *restrict acc, const float *restrict p,
                                const float *restrict corr, const float *restrict vb, int64_t vl,
                                int64_t vc, int64_t nb, int64_t c0, int NC) {
    vf16 a[CU][RV], cv[RV];
    for (int rr = 0; rr < RV; rr++) LOAD16(cv[rr], corr + 16 * rr);
    for (int cc = 0; cc < NC; cc++)
        for (int rr = 0; rr < RV; rr++) {
            LOAD16(a[cc][rr], acc + (c0 + cc) * TILE + 16 * rr);
            a[cc][rr] *= cv[rr];
        }
    for (int64_t j = 0; j < nb; j++) {
        vf16 pv[RV];
        for (int rr = 0; rr < RV; rr++) LOAD16(pv[rr], p + j * TILE + 16 * rr);
        for (int cc = 0; cc < NC; cc++) {
            vf16 vv = SPLAT(vb[j * vl + (c0 + cc) * vc]);
            for (int rr = 0; rr < RV; rr++) a[cc][rr] += pv[rr] * vv;
        }
    }
    for (int cc = 0; cc < NC; cc++)
        for (int rr = 0; rr < RV; rr++) STORE16(acc + (c0 + cc) * TILE + 16 * rr, a[cc][rr]);
}

/* Up to TILE query rows against every key, KEY_BLOCK keys at a time:
 * scores, the online softmax step, then the weighted values. The tile's
 * queries (scaled, zero past the last row) and accumulators are stored
 * [head dim][TILE], the block's scores and then weights [key][TILE]. */
SJ_CLONES
static void attend_tile(const desc *d, const float *restrict q, const float *restrict kt,
                        const float *restrict v, const float *restrict mask, float *restrict out,
                        int64_t nq, int64_t n_keys) {
    const int64_t dk = d->dk, dv = d->dims[4];
    const int64_t qm = d->st[0][2], qc = d->st[0][4], kc = d->st[1][4], kl = d->st[1][3];
    const int64_t vl = d->st[2][3], vc = d->st[2][4], mm = d->st[3][2], ml = d->st[3][3];
    const int64_t om = d->st[4][2], oc = d->st[4][4];
    _Alignas(64) float qt[SJ_ATTENTION_MAX_HEAD * TILE], acc[SJ_ATTENTION_MAX_HEAD * TILE];
    _Alignas(64) float p[KEY_BLOCK * TILE];
    _Alignas(64) float m[TILE], l[TILE], mx[TILE], ms[TILE], corr[TILE];
    for (int64_t c = 0; c < dk; c++)
        for (int64_t r = 0; r < TILE; r++)
            qt[c * TILE + r] = r < nq ? q[r * qm + c * qc] * d->scale : 0.0f;
    for (int64_t i = 0; i < dv * TILE; i++) acc[i] = 0.0f;
    for (int r = 0; r < TILE; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    for (int64_t j0 = 0; j0 < n_keys; j0 += KEY_BLOCK) {
        int64_t nb = n_keys - j0 < KEY_BLOCK ? n_keys - j0 : KEY_BLOCK;
        const float *kb = kt + j0 * kl, *vb = v + j0 * vl;
        int64_t j = 0;
        for (; j + JU <= nb; j += JU) score_keys(p, qt, kb, kl, kc, dk, j, JU);
        for (; j < nb; j++) score_keys(p, qt, kb, kl, kc, dk, j, 1);
        if (mask) {
            const float *mb = mask + j0 * ml;
            for (j = 0; j < nb; j++) {
                float *pj = p + j * TILE;
                if (mm == 0) /* one mask row for every query row: a broadcast */
                    for (int r = 0; r < TILE; r++) pj[r] += mb[j * ml];
                else
                    for (int64_t r = 0; r < nq; r++) pj[r] += mb[r * mm + j * ml];
            }
        }
        /* The online softmax step, lane-wise. A NaN score never wins the
         * compare, so the max skips it and exp makes its row NaN. Where the
         * max is still -inf every score so far is -inf (or NaN): 0 stands in
         * for it, so those weights are 0 (or NaN), not exp(-inf + inf). */
        for (int r = 0; r < TILE; r++) mx[r] = m[r];
        for (j = 0; j < nb; j++)
            for (int r = 0; r < TILE; r++) mx[r] = p[j * TILE + r] > mx[r] ? p[j * TILE + r] : mx[r];
        for (int r = 0; r < TILE; r++) {
            ms[r] = mx[r] == -INFINITY ? 0.0f : mx[r];
            corr[r] = exp_nonpos(m[r] - ms[r]);
            l[r] *= corr[r];
            m[r] = mx[r];
        }
        for (j = 0; j < nb; j++)
            for (int r = 0; r < TILE; r++) {
                float e = exp_nonpos(p[j * TILE + r] - ms[r]);
                p[j * TILE + r] = e;
                l[r] += e;
            }
        int64_t c0 = 0;
        for (; c0 + CU <= dv; c0 += CU) weigh_values(acc, p, corr, vb, vl, vc, nb, c0, CU);
        for (; c0 < dv; c0++) weigh_values(acc, p, corr, vb, vl, vc, nb, c0, 1);
    }
    for (int64_t r = 0; r < nq; r++) {
        /* l == 0: all scores -inf, NaN like softmax's 0/0. */
        float inv = l[r] == 0.0f ? NAN : 1.0f / l[r];
        for (int64_t c = 0; c < dv; c++) out[r * om + c * oc] = acc[c * TILE + r] * inv;
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
            for (int64_t i = row_begin; i < nm; i += TILE) {
                int64_t at[3] = {b0, b1, i}, off[5] = {0};
                for (int j = 0; j < 5; j++)
                    for (int x = 0; x < 3; x++) off[j] += at[x] * d.st[j][x];
                attend_tile(&d, q + off[0], kt + off[1], v + off[2], mask ? mask + off[3] : NULL,
                            out + off[4], nm - i < TILE ? nm - i : TILE, nl);
            }
}
