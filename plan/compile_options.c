/* Compile options: their defaults and the hash a store key carries. Both
 * builds need them: a runtime-only build compiles nothing but looks up the
 * artifacts a full build keyed by the same hash. */
#include "shapejit/ext/compile.h"

#include "core/hash.h"

#include <string.h>

void sj_compile_options_init(sj_compile_options *o) {
    *o = (sj_compile_options){.target = SJ_TARGET_HOST, .opt_level = 3, .fusion = true,
                              .blas_min_work = SJ_COMPILE_BLAS_DEFAULT};
}

static uint64_t mix_i64(uint64_t h, int64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)v >> (8 * i));
    return sj__fnv1a(h, b, 8);
}

/* Strings hash with their length so adjacent fields cannot run together. */
static uint64_t mix_str(uint64_t h, const char *s) {
    if (!s) return mix_i64(h, -1);
    size_t n = strlen(s);
    return sj__fnv1a(mix_i64(h, (int64_t)n), s, n);
}

uint64_t sj_compile_options_hash(const sj_compile_options *o) {
    uint64_t h = SJ_FNV_OFFSET;
    h = mix_str(h, "shapejit-compile-options-v1");
    h = mix_i64(h, o->target);
    h = mix_i64(h, o->opt_level);
    h = mix_i64(h, o->fusion);
    h = mix_i64(h, o->target == SJ_TARGET_HOST ? o->blas_min_work : 0);
    h = mix_str(h, o->target == SJ_TARGET_HOST ? o->cpu : NULL);
    h = mix_str(h, o->target == SJ_TARGET_HOST ? o->features : NULL);
    h = mix_str(h, o->target == SJ_TARGET_HOST ? NULL : o->arch);
    /* Mixed in only when narrowing: fp32 keys stay what they were before
     * the policy existed, so stores filled then still hit. */
    if (o->precision != SJ_PRECISION_FP32) h = mix_str(h, sj_precision_name(o->precision));
    /* Mixed in only when not AUTO, so the keys of untuned code stay as
     * they were before schedules could be chosen. */
    if (o->target == SJ_TARGET_HOST && o->attention != SJ_ATTENTION_AUTO)
        h = mix_str(h, o->attention == SJ_ATTENTION_FUSED ? "attention=fused" : "attention=unfused");
    if (o->target == SJ_TARGET_HOST && o->matmul != SJ_MATMUL_AUTO) h = mix_str(h, "matmul=tiled");
    return h;
}
