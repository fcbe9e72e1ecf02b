/* float32 <-> bfloat16 / IEEE binary16 conversions, the one definition of
 * the rounding every part of the precision policy uses (the graph
 * transform the interpreter runs, the weight buffers the runtime narrows),
 * so a backend and its reference round the same value to the same bits.
 * Not installed.
 *
 *   uint16_t b = sj_f32_to_bf16(x);      // round to nearest, ties to even
 *   float y = sj_bf16_to_f32(b);         // exact
 *
 * NaN stays NaN (quiet, sign kept); overflow rounds to infinity as IEEE
 * round-to-nearest does; fp16 subnormals are kept, never flushed. */
#ifndef SJ_CORE_HALF_H
#define SJ_CORE_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t sj_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float sj_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The top 16 bits, rounded to nearest even on the 16 dropped ones. */
static inline uint16_t sj_f32_to_bf16(float f) {
    uint32_t u = sj_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float sj_bf16_to_f32(uint16_t b) { return sj_bits_f32((uint32_t)b << 16); }

static inline uint16_t sj_f32_to_f16(float f) {
    uint32_t x = sj_f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    /* 65520 is halfway between 65504 (odd mantissa) and 65536: ties go up. */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* normal in binary16: rebias 127 -> 15, round 13 bits */
        uint32_t r = ax - 0x38000000u;
        r += 0xfffu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    int e = (int)(ax >> 23);
    if (e < 101) return sign; /* below half the smallest subnormal, 2^-25 */
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    int shift = 126 - e; /* m * 2^(e-150) in units of 2^-24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

static inline float sj_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        float v = (float)m * 0x1p-24f;
        return sign ? -v : v;
    }
    if (e == 31) return sj_bits_f32(sign | 0x7f800000u | (m << 13));
    return sj_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

#endif
