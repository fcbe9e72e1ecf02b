/* Name index: linear probing with backward-shift deletion, so a removal
 * leaves no tombstones and lookups stay short after many renames. */
#include "core/name_index.h"

#include <string.h>

#include "core/core_impl.h"
#include "core/hash.h"

#define EMPTY (-1)

void sj__name_index_init(sj_name_index *ix, sj_name_of_fn name_of, const void *owner) {
    memset(ix, 0, sizeof *ix);
    ix->name_of = name_of;
    ix->owner = owner;
}

void sj__name_index_free(sj_ctx *ctx, sj_name_index *ix) {
    sj_free(ctx, ix->slots);
    ix->slots = NULL;
    ix->cap = ix->count = 0;
}

static size_t home_slot(size_t cap, const char *name) { return (size_t)sj__hash_str(name) & (cap - 1); }

/* The slot holding `name`, or the empty slot where it would go. */
static size_t probe(const sj_name_index *ix, const char *name) {
    size_t mask = ix->cap - 1, i = home_slot(ix->cap, name);
    while (ix->slots[i] != EMPTY && strcmp(ix->name_of(ix->owner, ix->slots[i]), name) != 0)
        i = (i + 1) & mask;
    return i;
}

bool sj__name_index_reserve(sj_ctx *ctx, sj_name_index *ix, size_t extra) {
    size_t need = ix->count + extra;
    if (need <= ix->cap / 2) return true;
    size_t cap = ix->cap ? ix->cap : 16;
    while (cap / 2 < need) {
        if (cap > SIZE_MAX / 2 / sizeof *ix->slots) return false;
        cap *= 2;
    }
    int32_t *slots = sj_alloc(ctx, cap * sizeof *slots);
    if (!slots) return false;
    memset(slots, 0xff, cap * sizeof *slots); /* every slot EMPTY */
    sj_name_index grown = *ix;
    grown.slots = slots;
    grown.cap = cap;
    grown.count = 0;
    for (size_t i = 0; i < ix->cap; i++)
        if (ix->slots[i] != EMPTY) sj__name_index_add(&grown, ix->slots[i]);
    sj_free(ctx, ix->slots);
    *ix = grown;
    return true;
}

int32_t sj__name_index_find(const sj_name_index *ix, const char *name) {
    return ix->cap ? ix->slots[probe(ix, name)] : EMPTY;
}

void sj__name_index_add(sj_name_index *ix, int32_t id) {
    size_t i = probe(ix, ix->name_of(ix->owner, id));
    ix->slots[i] = id;
    ix->count++;
}

void sj__name_index_remove(sj_name_index *ix, int32_t id) {
    size_t mask = ix->cap - 1, hole = probe(ix, ix->name_of(ix->owner, id));
    /* Pull back every later entry of the run that may no longer be reached
     * from its home slot across the hole. */
    for (size_t j = (hole + 1) & mask; ix->slots[j] != EMPTY; j = (j + 1) & mask) {
        size_t home = home_slot(ix->cap, ix->name_of(ix->owner, ix->slots[j]));
        bool reachable = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (reachable) continue;
        ix->slots[hole] = ix->slots[j];
        hole = j;
    }
    ix->slots[hole] = EMPTY;
    ix->count--;
}

bool sj__name_index_copy(sj_ctx *ctx, sj_name_index *dst, const sj_name_index *src) {
    if (!src->cap) return true;
    int32_t *slots = sj_alloc(ctx, src->cap * sizeof *slots);
    if (!slots) return false;
    memcpy(slots, src->slots, src->cap * sizeof *slots);
    sj_free(ctx, dst->slots);
    dst->slots = slots;
    dst->cap = src->cap;
    dst->count = src->count;
    return true;
}
