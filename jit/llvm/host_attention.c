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

enum { KEY_BLOCK = 64, QUERY_TILE = 8, LANES = 16 };

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define SJ_CLONES __attribute__((target_clones("arch=skylake-avx512", "arch=haswell", "default")))
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
    int32_t ti;
    memcpy(&ti, &t, sizeof ti);
    int32_t ni = ti - 0x4b400000;
    float r = xc - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * r * r + r + 1.0f;
    int32_t bits = (ni + 127) << 23;
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

/* Up to QUERY_TILE query rows at once, so each key block (packed with keys
 * contiguous when kT does not have them so) serves several rows; scores are
 * then vector FMAs over the block's keys, and the v update vector FMAs over
 * the head dim. */
SJ_CLONES
static void attend_tile(const desc *d, const float *restrict q, const float *restrict kt,
                        const float *restrict v, const float *restrict mask, float *restrict out,
                        int64_t nq, int64_t n_keys) {
    const int64_t dk = d->dk, dv = d->dims[4];
    const int64_t qm = d->st[0][2], qc = d->st[0][4], kc = d->st[1][4], kl = d->st[1][3];
    const int64_t vl = d->st[2][3], vc = d->st[2][4], mm = d->st[3][2], ml = d->st[3][3];
    const int64_t om = d->st[4][2], oc = d->st[4][4];
    float qt[QUERY_TILE][SJ_ATTENTION_MAX_HEAD], acc[QUERY_TILE][SJ_ATTENTION_MAX_HEAD];
    float kp[SJ_ATTENTION_MAX_HEAD * KEY_BLOCK], s[KEY_BLOCK], m[QUERY_TILE], l[QUERY_TILE];
    for (int64_t r = 0; r < nq; r++) {
        for (int64_t c = 0; c < dk; c++) qt[r][c] = q[r * qm + c * qc] * d->scale;
        for (int64_t c = 0; c < dv; c++) acc[r][c] = 0.0f;
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    for (int64_t j0 = 0; j0 < n_keys; j0 += KEY_BLOCK) {
        int64_t nb = n_keys - j0 < KEY_BLOCK ? n_keys - j0 : KEY_BLOCK;
        /* Pack kp[c][j], zeros past the last key, so the score loops run a
         * constant KEY_BLOCK (registers, no remainder); those lanes become
         * -inf before the softmax and never reach a sum. */
        const float *kb = kt + j0 * kl;
        for (int64_t c = 0; c < dk; c++) {
            float *kr = kp + c * KEY_BLOCK;
            for (int64_t j = 0; j < nb; j++) kr[j] = kb[j * kl + c * kc];
            for (int64_t j = nb; j < KEY_BLOCK; j++) kr[j] = 0.0f;
        }
        const float *vb = v + j0 * vl;
        for (int64_t r = 0; r < nq; r++) {
            float sc[KEY_BLOCK] = {0};
            for (int64_t c = 0; c < dk; c++) {
                const float *kr = kp + c * KEY_BLOCK;
                float qv = qt[r][c];
                for (int j = 0; j < KEY_BLOCK; j++) sc[j] += qv * kr[j];
            }
            for (int j = 0; j < KEY_BLOCK; j++) s[j] = j < nb ? sc[j] : -INFINITY;
            if (mask) {
                const float *mb = mask + r * mm + j0 * ml;
                for (int64_t j = 0; j < nb; j++) s[j] += mb[j * ml];
            }
            float mb = m[r];
            {
                float part[LANES];
                for (int t = 0; t < LANES; t++) part[t] = mb;
                for (int j = 0; j < KEY_BLOCK; j += LANES)
                    for (int t = 0; t < LANES; t++) part[t] = s[j + t] > part[t] ? s[j + t] : part[t];
                for (int t = 0; t < LANES; t++) mb = part[t] > mb ? part[t] : mb;
            }
            if (mb == -INFINITY) { /* every score so far is -inf (or NaN) */
                int nan = 0;
                for (int64_t j = 0; j < nb; j++) nan |= s[j] != s[j];
                if (nan) l[r] = NAN;
                continue;
            }
            float corr = exp_nonpos(m[r] - mb);
            float bsum = 0.0f, part[LANES] = {0};
            for (int j = 0; j < KEY_BLOCK; j++) s[j] = exp_nonpos(s[j] - mb);
            /* LANES partial sums in a fixed order: vector adds, and the same
             * result on every ISA. */
            for (int j = 0; j < KEY_BLOCK; j += LANES)
                for (int t = 0; t < LANES; t++) part[t] += s[j + t];
            for (int t = 0; t < LANES; t++) bsum += part[t];
            l[r] = l[r] * corr + bsum;
            m[r] = mb;
            float *ar = acc[r];
            for (int64_t c = 0; c < dv; c++) ar[c] *= corr;
            if (vc == 1) {
                for (int64_t j = 0; j < nb; j++) {
                    const float *vr = vb + j * vl;
                    float p = s[j];
                    for (int64_t c = 0; c < dv; c++) ar[c] += p * vr[c];
                }
            } else {
                for (int64_t j = 0; j < nb; j++)
                    for (int64_t c = 0; c < dv; c++) ar[c] += s[j] * vb[j * vl + c * vc];
            }
        }
    }
    for (int64_t r = 0; r < nq; r++) {
        /* l == 0: all scores -inf, NaN like softmax's 0/0. */
        float inv = l[r] == 0.0f ? NAN : 1.0f / l[r];
        for (int64_t c = 0; c < dv; c++) out[r * om + c * oc] = acc[r][c] * inv;
    }
}

void sj_host_attention(const int64_t *w, const float *q, const float *kt, const float *v,
                       const float *mask, float *out, int64_t n) {
    desc d;
    memcpy(d.dims, w, sizeof d.dims);
    d.sym = w[5];
    d.dk = w[6];
    d.has_mask = w[7];
    int32_t sb = (int32_t)w[8];
    memcpy(&d.scale, &sb, sizeof d.scale);
    for (int j = 0; j < 5; j++) d.st[j] = w + 9 + 5 * j;
    if (!d.has_mask) mask = NULL;
    int64_t n0 = bound(&d, 0, n), n1 = bound(&d, 1, n), nm = bound(&d, 2, n), nl = bound(&d, 3, n);
    for (int64_t b0 = 0; b0 < n0; b0++)
        for (int64_t b1 = 0; b1 < n1; b1++)
            for (int64_t i = 0; i < nm; i += QUERY_TILE) {
                int64_t at[3] = {b0, b1, i}, off[5] = {0};
                for (int j = 0; j < 5; j++)
                    for (int x = 0; x < 3; x++) off[j] += at[x] * d.st[j][x];
                attend_tile(&d, q + off[0], kt + off[1], v + off[2], mask ? mask + off[3] : NULL,
                            out + off[4], nm - i < QUERY_TILE ? nm - i : QUERY_TILE, nl);
            }
}
