/* Weights read packed: the emitter notes each kernel whose GEMM reads a
 * weight in panels (sj_llvm_pack), and every launch of that kernel then
 * gets an SJ_SLOT_PACKED of its own weight in place of the param slot. A
 * param slot no launch reads any more is dropped, so a bucket holds the
 * packed copy alone, not the weight beside it. */
#include <string.h>

#include "compile/llvm/llvm_impl.h"

/* The packed slot of (param, words), appended when the plan has none. */
static sj_status packed_slot(sj_ctx *ctx, sj_launch_plan *p, int32_t param, const int64_t *words,
                             int32_t *out) {
    for (int32_t i = 0; i < p->n_slots; i++) {
        const sj_buffer_slot *s = &p->slots[i];
        if (s->kind == SJ_SLOT_PACKED && s->index == param &&
            !memcmp(p->words + s->offset, words, SJ_PACK_WORDS * sizeof *words)) {
            *out = i;
            return SJ_OK;
        }
    }
    int64_t bytes = sj__host_gemm_pack_slot_bytes(words);
    if (bytes < 0)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "host emitter: a packed %lld x %lld weight overflows",
                       (long long)words[SJ_PACK_K], (long long)words[SJ_PACK_N]);
    int64_t *w = sj_realloc(ctx, p->words, (size_t)(p->n_words + SJ_PACK_WORDS) * sizeof *w);
    if (!w) return sj_fail(ctx, SJ_E_NOMEM, "host emitter: out of memory");
    p->words = w;
    sj_buffer_slot *sl = sj_realloc(ctx, p->slots, (size_t)(p->n_slots + 1) * sizeof *sl);
    if (!sl) return sj_fail(ctx, SJ_E_NOMEM, "host emitter: out of memory");
    p->slots = sl;
    memcpy(p->words + p->n_words, words, SJ_PACK_WORDS * sizeof *words);
    p->slots[p->n_slots] = (sj_buffer_slot){SJ_SLOT_PACKED, param, p->n_words, bytes};
    p->n_words += SJ_PACK_WORDS;
    *out = p->n_slots++;
    return SJ_OK;
}

/* Drops the param slots in `orphan` (of the first n_orphan slots: those
 * the plan had before packed ones were appended) that no launch reads,
 * renumbering the launches' slot ids. */
static sj_status drop_orphans(sj_ctx *ctx, sj_launch_plan *p, const bool *orphan, int32_t n_orphan) {
    int32_t *refs = sj_calloc(ctx, (size_t)p->n_slots + 1, sizeof *refs);
    int32_t *remap = sj_alloc(ctx, ((size_t)p->n_slots + 1) * sizeof *remap);
    if (!refs || !remap) {
        sj_free(ctx, refs);
        sj_free(ctx, remap);
        return sj_fail(ctx, SJ_E_NOMEM, "host emitter: out of memory");
    }
    for (int32_t i = 0; i < p->n_launch_slots; i++) refs[p->launch_slots[i]]++;
    int32_t kept = 0;
    for (int32_t i = 0; i < p->n_slots; i++) {
        if (i < n_orphan && orphan[i] && refs[i] == 0) {
            remap[i] = -1;
            continue;
        }
        remap[i] = kept;
        p->slots[kept++] = p->slots[i];
    }
    p->n_slots = kept;
    for (int32_t i = 0; i < p->n_launch_slots; i++) p->launch_slots[i] = remap[p->launch_slots[i]];
    sj_free(ctx, refs);
    sj_free(ctx, remap);
    return SJ_OK;
}

sj_status sj__host_plan_packs(sj_ctx *ctx, sj_launch_plan *p, const sj_llvm_emitted *em) {
    if (em->n_packs == 0) return SJ_OK;
    int32_t n_before = p->n_slots;
    bool *orphan = sj_calloc(ctx, (size_t)n_before + 1, sizeof *orphan);
    if (!orphan) return sj_fail(ctx, SJ_E_NOMEM, "host emitter: out of memory");
    sj_status st = SJ_OK;
    for (int i = 0; i < em->n_packs && st == SJ_OK; i++) {
        const sj_llvm_pack *pk = &em->packs[i];
        for (int32_t l = 0; l < p->n_launches && st == SJ_OK; l++) {
            const sj_launch *ln = &p->launches[l];
            if (ln->kernel != pk->kernel) continue;
            if (pk->buffer >= ln->n_slots) {
                st = sj_fail(ctx, SJ_E_INTERNAL, "host emitter: kernel %d packs buffer %d of %d",
                             pk->kernel, pk->buffer, ln->n_slots);
                break;
            }
            int32_t *ref = &p->launch_slots[ln->first_slot + pk->buffer];
            const sj_buffer_slot *s = &p->slots[*ref];
            /* the panels hold the weight as the param slot stores it */
            if (s->kind != SJ_SLOT_PARAM || sj_slot_storage(s) != pk->words[SJ_PACK_STORAGE]) {
                st = sj_fail(ctx, SJ_E_INTERNAL,
                             "host emitter: launch %d's packed weight is not a param slot of its "
                             "storage",
                             l);
                break;
            }
            int32_t param_slot = *ref, packed;
            st = packed_slot(ctx, p, s->index, pk->words, &packed);
            if (st != SJ_OK) break;
            ref = &p->launch_slots[ln->first_slot + pk->buffer]; /* slots may have moved */
            *ref = packed;
            orphan[param_slot] = true;
        }
    }
    if (st == SJ_OK) st = drop_orphans(ctx, p, orphan, n_before);
    sj_free(ctx, orphan);
    return st;
}
