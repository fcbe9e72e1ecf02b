/* The fused attention kernel host code calls (SJ_KK_ATTENTION):
 * out = softmax(q kT * scale + mask) v, one query row at a time, over blocks
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

enum { KEY_BLOCK = 64 };

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define SJ_CLONES __attribute__((target_clones("avx512f", "arch=haswell", "default")))
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

SJ_CLONES
static void attend_row(const desc *d, const float *restrict q, const float *restrict kt,
                       const float *restrict v, const float *restrict mask, float *restrict out,
                       int64_t n_keys) {
    const int64_t dk = d->dk, dv = d->dims[4];
    const int64_t qc = d->st[0][4], kc = d->st[1][4], kl = d->st[1][3];
    const int64_t vl = d->st[2][3], vc = d->st[2][4], ml = d->st[3][3], oc = d->st[4][4];
    float qrow[SJ_ATTENTION_MAX_HEAD], acc[SJ_ATTENTION_MAX_HEAD], s[KEY_BLOCK];
    for (int64_t c = 0; c < dk; c++) qrow[c] = q[c * qc] * d->scale;
    for (int64_t c = 0; c < dv; c++) acc[c] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int64_t j0 = 0; j0 < n_keys; j0 += KEY_BLOCK) {
        int64_t nb = n_keys - j0 < KEY_BLOCK ? n_keys - j0 : KEY_BLOCK;
        const float *kb = kt + j0 * kl;
        if (kl == 1) { /* kT rows contiguous over keys: vectorise over the block */
            for (int64_t j = 0; j < nb; j++) s[j] = 0.0f;
            for (int64_t c = 0; c < dk; c++) {
                const float *kr = kb + c * kc;
                float qv = qrow[c];
                for (int64_t j = 0; j < nb; j++) s[j] += qv * kr[j];
            }
        } else if (kc == 1) { /* k rows contiguous over the head dim: dot products */
            for (int64_t j = 0; j < nb; j++) {
                const float *kr = kb + j * kl;
                float a = 0.0f;
                for (int64_t c = 0; c < dk; c++) a += qrow[c] * kr[c];
                s[j] = a;
            }
        } else {
            for (int64_t j = 0; j < nb; j++) {
                float a = 0.0f;
                for (int64_t c = 0; c < dk; c++) a += qrow[c] * kb[j * kl + c * kc];
                s[j] = a;
            }
        }
        if (mask) {
            const float *mb = mask + j0 * ml;
            for (int64_t j = 0; j < nb; j++) s[j] += mb[j * ml];
        }
        float mb = m;
        for (int64_t j = 0; j < nb; j++) mb = s[j] > mb ? s[j] : mb;
        if (mb == -INFINITY) { /* every score so far is -inf (or NaN) */
            int nan = 0;
            for (int64_t j = 0; j < nb; j++) nan |= s[j] != s[j];
            if (nan) l = NAN;
            continue;
        }
        float corr = exp_nonpos(m - mb);
        float bsum = 0.0f;
        for (int64_t j = 0; j < nb; j++) {
            s[j] = exp_nonpos(s[j] - mb);
            bsum += s[j];
        }
        l = l * corr + bsum;
        m = mb;
        for (int64_t c = 0; c < dv; c++) acc[c] *= corr;
        const float *vb = v + j0 * vl;
        if (vc == 1) {
            for (int64_t j = 0; j < nb; j++) {
                const float *vr = vb + j * vl;
                float p = s[j];
                for (int64_t c = 0; c < dv; c++) acc[c] += p * vr[c];
            }
        } else {
            for (int64_t j = 0; j < nb; j++)
                for (int64_t c = 0; c < dv; c++) acc[c] += s[j] * vb[j * vl + c * vc];
        }
    }
    /* l == 0: all scores -inf, NaN like softmax's 0/0. */
    float inv = l == 0.0f ? NAN : 1.0f / l;
    for (int64_t c = 0; c < dv; c++) out[c * oc] = acc[c] * inv;
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
            for (int64_t i = 0; i < nm; i++) {
                int64_t at[3] = {b0, b1, i}, off[5] = {0};
                for (int j = 0; j < 5; j++)
                    for (int x = 0; x < 3; x++) off[j] += at[x] * d.st[j][x];
                attend_row(&d, q + off[0], kt + off[1], v + off[2], mask ? mask + off[3] : NULL,
                           out + off[4], nl);
            }
}
