/* Launch plan ownership and validation. */
#include <stdint.h>
#include <string.h>

#include "core/core_impl.h"
#include "plan/plan.h"

void sj__plan_free(sj_ctx *ctx, sj_launch_plan *p) {
    if (!p) return;
    sj_free(ctx, p->kernels);
    sj_free(ctx, p->slots);
    sj_free(ctx, p->launches);
    sj_free(ctx, p->launch_slots);
    sj_free(ctx, p->words);
    memset(p, 0, sizeof *p);
}

/* a + b, held at INT64_MAX: a hostile plan's sizes must not overflow. */
static int64_t add_sat(int64_t a, int64_t b) { return b > INT64_MAX - a ? INT64_MAX : a + b; }

/* Lowering gives every value one slot, so a plan's slots sum to what an
 * executable of it holds (a plan that repeats a slot, which no compile
 * makes, is counted as it says). One pass: artifacts are read on every
 * load and list. */
void sj__plan_memory_get(const sj_launch_plan *p, sj_plan_memory *out) {
    memset(out, 0, sizeof *out);
    out->arena_bytes = p->arena_bytes;
    out->table_bytes = (int64_t)p->n_launch_slots * (int64_t)sizeof(void *);
    for (int i = 0; i < p->n_slots; i++) {
        const sj_buffer_slot *s = &p->slots[i];
        if (s->kind == SJ_SLOT_PARAM || s->kind == SJ_SLOT_PACKED)
            out->weight_bytes = add_sat(out->weight_bytes, s->bytes);
        else if (s->kind != SJ_SLOT_ARENA) out->io_bytes = add_sat(out->io_bytes, s->bytes);
    }
}

static bool range_ok(int64_t first, int64_t count, int64_t total) {
    return first >= 0 && count >= 0 && first <= total && count <= total - first;
}

sj_status sj__plan_validate(sj_ctx *ctx, const sj_launch_plan *p) {
    if (p->extent < 1 || p->extent > SJ_MAX_EXTENT)
        return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: extent %lld out of range",
                       (long long)p->extent);
    if (p->n_kernels < 0 || p->n_slots < 0 || p->n_launches < 0 || p->n_launch_slots < 0 ||
        p->n_words < 0 || p->arena_bytes < 0 || p->sub_rows < 0)
        return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: negative count");
    if ((p->n_kernels && !p->kernels) || (p->n_slots && !p->slots) ||
        (p->n_launches && !p->launches) || (p->n_launch_slots && !p->launch_slots) ||
        (p->n_words && !p->words))
        return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: missing table");
    for (int i = 0; i < p->n_kernels; i++) {
        const char *name = p->kernels[i].name;
        if (!memchr(name, 0, SJ_KERNEL_NAME_MAX) || !name[0])
            return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: kernel %d has no valid name", i);
    }
    for (int i = 0; i < p->n_slots; i++) {
        const sj_buffer_slot *s = &p->slots[i];
        if (s->bytes < 0 || s->index < 0)
            return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: slot %d has negative size or index", i);
        switch (s->kind) {
        case SJ_SLOT_INPUT:
        case SJ_SLOT_OUTPUT: break;
        case SJ_SLOT_PARAM:
            if (!sj_slot_storage_valid(sj_slot_storage(s)))
                return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: param slot %d has unknown storage %lld",
                               i, (long long)sj_slot_storage(s));
            break;
        case SJ_SLOT_PACKED: {
            if (!range_ok(s->offset, SJ_PACK_WORDS, p->n_words))
                return sj_fail(ctx, SJ_E_CORRUPT,
                               "launch plan: packed slot %d's words at %lld outside the %d words",
                               i, (long long)s->offset, p->n_words);
            const int64_t *w = p->words + s->offset;
            if (w[SJ_PACK_OFFSET] < 0 || w[SJ_PACK_K] < 1 || w[SJ_PACK_N] < 1 ||
                w[SJ_PACK_ROW_STRIDE] < 0 || w[SJ_PACK_COL_STRIDE] < 0 || w[SJ_PACK_LEVEL] < 2 ||
                w[SJ_PACK_LEVEL] > 4 || w[SJ_PACK_BATCH] < 1 || w[SJ_PACK_BATCH_STRIDE] < 0 ||
                !sj_slot_storage_valid(w[SJ_PACK_STORAGE]))
                return sj_fail(ctx, SJ_E_CORRUPT,
                               "launch plan: packed slot %d describes no valid layout (offset %lld, "
                               "%lld x %lld, strides %lld/%lld, level %lld, %lld matrices %lld apart, "
                               "storage %lld)",
                               i, (long long)w[SJ_PACK_OFFSET], (long long)w[SJ_PACK_K],
                               (long long)w[SJ_PACK_N], (long long)w[SJ_PACK_ROW_STRIDE],
                               (long long)w[SJ_PACK_COL_STRIDE], (long long)w[SJ_PACK_LEVEL],
                               (long long)w[SJ_PACK_BATCH], (long long)w[SJ_PACK_BATCH_STRIDE],
                               (long long)w[SJ_PACK_STORAGE]);
            break;
        }
        case SJ_SLOT_ARENA:
            if (!range_ok(s->offset, s->bytes, p->arena_bytes))
                return sj_fail(ctx, SJ_E_CORRUPT,
                               "launch plan: arena slot %d [%lld, +%lld) outside the arena of %lld bytes",
                               i, (long long)s->offset, (long long)s->bytes,
                               (long long)p->arena_bytes);
            break;
        default: return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: slot %d has unknown kind %d", i, (int)s->kind);
        }
    }
    for (int i = 0; i < p->n_launches; i++) {
        const sj_launch *l = &p->launches[i];
        if (l->kernel < 0 || l->kernel >= p->n_kernels)
            return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: launch %d names kernel %d of %d", i,
                           l->kernel, p->n_kernels);
        if (!range_ok(l->first_slot, l->n_slots, p->n_launch_slots))
            return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: launch %d slot range out of bounds", i);
        if (!range_ok(l->first_word, l->n_words, p->n_words))
            return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: launch %d word range out of bounds", i);
    }
    for (int i = 0; i < p->n_launch_slots; i++)
        if (p->launch_slots[i] < 0 || p->launch_slots[i] >= p->n_slots)
            return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: launch slot %d names slot %d of %d", i,
                           p->launch_slots[i], p->n_slots);
    return SJ_OK;
}
