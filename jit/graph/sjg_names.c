/* String -> int map for the .sjg parser and printer (names are looked up
 * once per operand, so a linear scan would make big graphs quadratic). */
#include "sjg_impl.h"
#include "core/hash.h"

#include <string.h>

void sjg_names_init(sjg_names *m, sj_ctx *ctx) {
    memset(m, 0, sizeof *m);
    m->ctx = ctx;
}

void sjg_names_free(sjg_names *m) {
    for (size_t i = 0; i < m->cap; i++) sj_free(m->ctx, m->keys[i]);
    sj_free(m->ctx, m->keys);
    sj_free(m->ctx, m->vals);
    memset(m, 0, sizeof *m);
}

static size_t slot_of(char *const *keys, size_t cap, const char *key) {
    size_t i = (size_t)sj_hash_str(key) & (cap - 1);
    while (keys[i] && strcmp(keys[i], key) != 0) i = (i + 1) & (cap - 1);
    return i;
}

int sjg_names_get(const sjg_names *m, const char *key) {
    if (!m->cap) return -1;
    size_t i = slot_of(m->keys, m->cap, key);
    return m->keys[i] ? m->vals[i] : -1;
}

static sj_status grow(sjg_names *m) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    char **keys = sj_calloc(m->ctx, cap, sizeof *keys);
    int *vals = sj_calloc(m->ctx, cap, sizeof *vals);
    if (!keys || !vals) {
        sj_free(m->ctx, keys);
        sj_free(m->ctx, vals);
        return sj_fail(m->ctx, SJ_E_NOMEM, "out of memory in the name table");
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        size_t j = slot_of(keys, cap, m->keys[i]);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    sj_free(m->ctx, m->keys);
    sj_free(m->ctx, m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return SJ_OK;
}

sj_status sjg_names_put(sjg_names *m, const char *key, int val) {
    if ((m->count + 1) * 2 > m->cap) SJ_TRY(grow(m));
    size_t i = slot_of(m->keys, m->cap, key);
    char *k = sj_strdup(m->ctx, key);
    if (!k) return sj_fail(m->ctx, SJ_E_NOMEM, "out of memory in the name table");
    m->keys[i] = k;
    m->vals[i] = val;
    m->count++;
    return SJ_OK;
}
