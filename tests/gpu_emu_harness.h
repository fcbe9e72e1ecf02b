/* Runs a launch plan whose kernels execute on the host under a GPU
 * emulation (test_cuda_emu.c, test_nvptx_emu.c): buffers laid out at the
 * bucket extent with padding, arena and outputs poisoned with NaN, every
 * launch with the plan's grid and block, outputs compared with the
 * interpreter. Header-only, static; for tests. */
#ifndef SJ_TESTS_GPU_EMU_HARNESS_H
#define SJ_TESTS_GPU_EMU_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shapejit/ext/interp.h"
#include "ir/graph_impl.h"
#include "compile/lower/lower.h"
#include "tests/gpu_graphs.h"

#define EMU_TOL 1e-3

typedef void (*emu_kernel_fn)(void *const *buffers, const int64_t *info, int64_t n);

/* How an emulation finds a kernel and runs one launch (blocks one after
 * another, one host thread per GPU thread); launch returns 0 on success. */
typedef struct emu_backend {
    emu_kernel_fn (*resolve)(void *user, const char *name);
    int (*launch)(emu_kernel_fn fn, const uint32_t *grid, const uint32_t *block,
                  void *const *buffers, const int64_t *info, int64_t n);
    void *user;
} emu_backend;

static inline void emu_poison(float *p, int64_t n) {
    for (int64_t i = 0; i < n; i++) p[i] = NAN;
}

/* Dense tensor of shape s at n <-> its padded layout at E. */
static inline void emu_copy_padded(const sj_shape *s, int64_t n, int64_t E, float *padded, float *dense,
                        int to_padded) {
    int64_t dn[SJ_MAX_RANK], st[SJ_MAX_RANK], total = 1, acc = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        dn[i] = sj_dim_at(s->dims[i], n);
        st[i] = acc;
        acc *= sj_dim_at(s->dims[i], E);
        total *= dn[i];
    }
    for (int64_t flat = 0; flat < total; flat++) {
        int64_t rem = flat, off = 0;
        for (int i = s->rank - 1; i >= 0; i--) {
            off += (rem % dn[i]) * st[i];
            rem /= dn[i];
        }
        if (to_padded)
            padded[off] = dense[flat];
        else
            dense[flat] = padded[off];
    }
}

static inline int emu_close(float got, float want) {
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got)) return got == want;
    return fabs((double)got - want) <= EMU_TOL * (1.0 + fabs(want));
}

/* Runs the plan at active extent n with the emulated kernels and compares
 * every output with the interpreter; a plan with narrowed params (a
 * precision policy) against the interpreter on the policy's graph. */
static inline void emu_run_and_compare(sj_ctx *ctx, const sj_graph *g, const sj_lowered *l,
                                const emu_backend *be, int64_t n, uint64_t seed, const char *what) {
    const sj_launch_plan *p = &l->plan;
    int64_t E = p->extent;
    sj_tensor in[8] = {0}, want[8] = {0};
    assert_true(g->n_inputs <= 8 && g->n_outputs <= 8);
    for (int i = 0; i < g->n_inputs; i++) {
        sj_shape at = sj_shape_at(&g->nodes[g->inputs[i]].shape, n);
        assert_int_equal(sj_tensor_alloc(ctx, at.rank, at.dims, &in[i]), SJ_OK);
        for (int64_t j = 0; j < sj_tensor_numel(&in[i]); j++) in[i].data[j] = gg_uniform(&seed, -2, 2);
    }
    sj_precision policy = SJ_PRECISION_FP32;
    for (int i = 0; i < p->n_slots; i++)
        if (sj_slot_storage(&p->slots[i]) != SJ_PRECISION_FP32) policy = (sj_precision)sj_slot_storage(&p->slots[i]);
    sj_graph *rounded = NULL;
    if (policy != SJ_PRECISION_FP32)
        assert_int_equal(sj_graph_apply_precision(g, policy, &rounded), SJ_OK);
    assert_int_equal(sj_interp_run(rounded ? rounded : g, n, in, want), SJ_OK);
    sj_graph_destroy(rounded);
    float **slot = calloc((size_t)p->n_slots + 1, sizeof *slot);
    float *arena = malloc((size_t)p->arena_bytes + 4);
    emu_poison(arena, p->arena_bytes / 4);
    for (int i = 0; i < p->n_slots; i++) {
        const sj_buffer_slot *s = &p->slots[i];
        if (s->kind == SJ_SLOT_ARENA) {
            slot[i] = arena + s->offset / 4;
            continue;
        }
        slot[i] = malloc((size_t)s->bytes + 4);
        emu_poison(slot[i], s->bytes / 4);
        if (s->kind == SJ_SLOT_INPUT)
            emu_copy_padded(&g->nodes[g->inputs[s->index]].shape, n, E, slot[i], in[s->index].data, 1);
        else if (s->kind == SJ_SLOT_PARAM && sj_slot_storage(s) != SJ_PRECISION_FP32)
            sj__precision_round((sj_precision)sj_slot_storage(s), g->nodes[s->index].data, slot[i],
                               s->bytes / 2);
        else if (s->kind == SJ_SLOT_PARAM)
            memcpy(slot[i], g->nodes[s->index].data, (size_t)s->bytes);
    }
    void *bufs[256];
    for (int li = 0; li < p->n_launches; li++) {
        const sj_launch *la = &p->launches[li];
        for (int i = 0; i < la->n_slots; i++) bufs[i] = slot[p->launch_slots[la->first_slot + i]];
        emu_kernel_fn fn = be->resolve(be->user, p->kernels[la->kernel].name);
        if (!fn) fail_msg("%s: no kernel %s in the emulation", what, p->kernels[la->kernel].name);
        assert_int_equal(be->launch(fn, la->grid, la->block, bufs, p->words + la->first_word, n), 0);
    }
    for (int o = 0; o < g->n_outputs; o++) {
        const sj_shape *s = &g->nodes[g->outputs[o].value].shape;
        sj_tensor got;
        sj_shape at = sj_shape_at(s, n);
        assert_int_equal(sj_tensor_alloc(ctx, at.rank, at.dims, &got), SJ_OK);
        int found = 0;
        for (int i = 0; i < p->n_slots; i++)
            if (p->slots[i].kind == SJ_SLOT_OUTPUT && p->slots[i].index == o) {
                emu_copy_padded(s, n, E, slot[i], got.data, 0);
                found = 1;
            }
        assert_true(found);
        for (int64_t j = 0; j < sj_tensor_numel(&want[o]); j++)
            if (!emu_close(got.data[j], want[o].data[j]))
                fail_msg("%s at n=%lld: output %d [%lld]: emulated %.9g, interpreter %.9g", what,
                         (long long)n, o, (long long)j, got.data[j], want[o].data[j]);
        sj_tensor_free(ctx, &got);
    }
    for (int i = 0; i < p->n_slots; i++)
        if (p->slots[i].kind != SJ_SLOT_ARENA) free(slot[i]);
    free(slot);
    free(arena);
    for (int i = 0; i < g->n_inputs; i++) sj_tensor_free(ctx, &in[i]);
    for (int o = 0; o < g->n_outputs; o++) sj_tensor_free(ctx, &want[o]);
}

#endif
