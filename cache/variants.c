/* Options per call: a cache answers for its own compiler, and for any other
 * compiler table a caller passes, through a sibling cache over the same
 * graph, ladder, store and configuration. Siblings are few (one per option
 * set a caller uses) and live as long as the cache, so a list under a
 * mutex taken only to find one is enough; the sibling's own hit path stays
 * lock-free. */
#include "cache/bucketed_cache_impl.h"

#include <string.h>

typedef struct sj_cache_variant {
    struct sj_cache_variant *next;
    sj_bucketed_cache *cache;
} sj_cache_variant;

static bool same_str(const char *a, const char *b) {
    return a == b || (a && b && !strcmp(a, b));
}

/* Whether two tables compile and load the same way: same code, same
 * compiler object, same key strings and option bytes. */
static bool same_compiler(const sj_compiler *a, const sj_compiler *b) {
    return a->ctx == b->ctx && a->compile == b->compile && a->load == b->load && a->run == b->run &&
           a->destroy == b->destroy && a->artifact_version == b->artifact_version &&
           same_str(a->target_triple, b->target_triple) && same_str(a->target_cpu, b->target_cpu) &&
           same_str(a->target_features, b->target_features) &&
           same_str(a->compiler_version, b->compiler_version) && a->options_len == b->options_len &&
           (a->options_len == 0 || !memcmp(a->options, b->options, a->options_len));
}

static sj_status variant_for(sj_bucketed_cache *c, const sj_compiler *comp, sj_bucketed_cache **out) {
    if (same_compiler(comp, &c->comp)) {
        *out = c;
        return SJ_OK;
    }
    pthread_mutex_lock(&c->variants_mu);
    for (sj_cache_variant *v = c->variants; v; v = v->next)
        if (same_compiler(comp, &v->cache->comp)) {
            *out = v->cache;
            pthread_mutex_unlock(&c->variants_mu);
            return SJ_OK;
        }
    sj_status st = SJ_OK;
    sj_cache_variant *v = sj_calloc(c->ctx, 1, sizeof *v);
    if (!v) st = sj_fail(c->ctx, SJ_E_NOMEM, "bucketed cache: out of memory");
    /* A sibling's executables are handed out to be run directly: never swapped. */
    sj_bucketed_cache_config vc = c->cfg;
    vc.native_after = 0;
    vc.quick = NULL;
    if (st == SJ_OK) st = sj_bucketed_cache_create(c->g, c->ladder, comp, c->store, &vc, &v->cache);
    if (st == SJ_OK) {
        v->next = c->variants;
        c->variants = v;
        *out = v->cache;
    } else {
        sj_free(c->ctx, v);
        sj__error_prefix(c->ctx, "bucketed cache: a call's compiler");
    }
    pthread_mutex_unlock(&c->variants_mu);
    return st;
}

sj_status sj_bucketed_cache_get_or_compile_with(sj_bucketed_cache *c, int64_t key, const sj_compiler *comp,
                                                int64_t *extent, void **exe) {
    if (!c) return SJ_E_INVALID_ARG;
    if (!comp || !extent || !exe)
        return sj_fail(c->ctx, SJ_E_INVALID_ARG, "bucketed cache: get_or_compile_with needs a compiler, "
                                                 "extent and exe");
    sj_bucketed_cache *v;
    SJ_TRY(variant_for(c, comp, &v));
    return sj_bucketed_cache_get_or_compile(v, key, extent, exe);
}

void sj__cache_variants_destroy(sj_bucketed_cache *c) {
    for (sj_cache_variant *v = c->variants, *next; v; v = next) {
        next = v->next;
        sj_bucketed_cache_destroy(v->cache);
        sj_free(c->ctx, v);
    }
    pthread_mutex_destroy(&c->variants_mu);
}
