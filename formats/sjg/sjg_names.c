/* String -> int map for the .sjg parser and printer (names are looked up
 * once per operand, so a linear scan would make big graphs quadratic): the
 * owned keys and their values in arrays, found through core's name index,
 * the library's one name map. */
#include "formats/sjg/sjg_impl.h"
#include "core/array.h"

#include <string.h>

static const char *key_of(const void *owner, int32_t id) {
    return ((const sjg_names *)owner)->items[id].key;
}

void sjg_names_init(sjg_names *m, sj_ctx *ctx) {
    memset(m, 0, sizeof *m);
    m->ctx = ctx;
    sj__name_index_init(&m->ix, key_of, m);
}

void sjg_names_free(sjg_names *m) {
    for (size_t i = 0; i < m->count; i++) sj_free(m->ctx, m->items[i].key);
    sj_free(m->ctx, m->items);
    sj__name_index_free(m->ctx, &m->ix);
    memset(m, 0, sizeof *m);
}

int sjg_names_get(const sjg_names *m, const char *key) {
    int32_t id = sj__name_index_find(&m->ix, key);
    return id < 0 ? -1 : m->items[id].val;
}

sj_status sjg_names_put(sjg_names *m, const char *key, int val) {
    if (m->count >= INT32_MAX) return sj_fail(m->ctx, SJ_E_OUT_OF_RANGE, "too many names");
    char *k = sj_strdup(m->ctx, key);
    if (!k || !sj__array_reserve(m->ctx, (void **)&m->items, &m->cap, m->count + 1, sizeof *m->items) ||
        !sj__name_index_reserve(m->ctx, &m->ix, 1)) {
        sj_free(m->ctx, k);
        return sj_fail(m->ctx, SJ_E_NOMEM, "out of memory in the name table");
    }
    m->items[m->count] = (sjg_name){k, val};
    sj__name_index_add(&m->ix, (int32_t)m->count);
    m->count++;
    return SJ_OK;
}
