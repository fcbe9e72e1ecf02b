/* Lowering: fusion decisions (kernels per graph for typical patterns), arena
 * reuse, and launch plans that are valid and never let two live buffers share
 * arena bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/graph_impl.h"
#include "compile/lower/lower.h"

#define S SJ_DIM_SYM

typedef struct fixture {
    sj_ctx *ctx;
    sj_graph *g;
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (sj_ctx_create(NULL, &f->ctx) != SJ_OK) return -1;
    if (sj_graph_create(f->ctx, "N", &f->g) != SJ_OK) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    sj_graph_destroy(f->g);
    sj_ctx_destroy(f->ctx);
    free(f);
    return 0;
}

static sj_value param(fixture *f, int rank, const int64_t *dims) {
    static const float zeros[4096];
    char name[16];
    snprintf(name, sizeof name, "p%d", sj_graph_num_values(f->g));
    sj_value v;
    assert_int_equal(sj_graph_param(f->g, name, rank, dims, zeros, &v), SJ_OK);
    return v;
}

static sj_value input(fixture *f, const char *name, int rank, const int64_t *dims) {
    sj_value v;
    assert_int_equal(sj_graph_input(f->g, name, rank, dims, &v), SJ_OK);
    return v;
}

/* Two arena slots whose bytes overlap must never be live at the same time. */
static void check_no_live_overlap(const sj_launch_plan *p) {
    int *first = malloc((size_t)p->n_slots * sizeof *first), *last = malloc((size_t)p->n_slots * sizeof *last);
    for (int s = 0; s < p->n_slots; s++) first[s] = last[s] = -1;
    for (int l = 0; l < p->n_launches; l++)
        for (int i = 0; i < p->launches[l].n_slots; i++) {
            int s = p->launch_slots[p->launches[l].first_slot + i];
            if (first[s] < 0) first[s] = l;
            last[s] = l;
        }
    for (int a = 0; a < p->n_slots; a++)
        for (int b = a + 1; b < p->n_slots; b++) {
            const sj_buffer_slot *x = &p->slots[a], *y = &p->slots[b];
            if (x->kind != SJ_SLOT_ARENA || y->kind != SJ_SLOT_ARENA) continue;
            bool bytes = x->offset < y->offset + y->bytes && y->offset < x->offset + x->bytes;
            bool live = first[a] <= last[b] && first[b] <= last[a];
            assert_false(bytes && live);
        }
    free(first);
    free(last);
}

/* Lowers with options o and returns the launch count (one per kernel
 * lowering made, before identical ones are shared); checks the plan on the
 * way. */
static int kernels_with(fixture *f, int64_t E, const sj_lower_options *o, sj_lowered **keep) {
    sj_lowered *l;
    assert_int_equal(sj__lower(f->g, E, o, &l), SJ_OK);
    assert_int_equal(sj__plan_validate(f->ctx, &l->plan), SJ_OK);
    /* The plan's kernel table is the distinct kernels, each used. */
    assert_int_equal(l->plan.n_kernels, l->n_kernels);
    assert_true(l->n_kernels <= l->plan.n_launches);
    for (int k = 0; k < l->n_kernels; k++) {
        assert_string_equal(l->plan.kernels[k].name, l->kernels[k].name);
        bool used = false;
        for (int i = 0; i < l->plan.n_launches; i++) used |= l->plan.launches[i].kernel == k;
        assert_true(used);
    }
    assert_int_equal(l->plan.extent, E);
    check_no_live_overlap(&l->plan);
    /* Every launch writes its first buffer, which is never an input or param. */
    for (int i = 0; i < l->plan.n_launches; i++) {
        const sj_buffer_slot *s = &l->plan.slots[l->plan.launch_slots[l->plan.launches[i].first_slot]];
        assert_true(s->kind == SJ_SLOT_ARENA || s->kind == SJ_SLOT_OUTPUT);
    }
    int n = l->plan.n_launches;
    if (keep) *keep = l;
    else sj__lowered_destroy(l);
    return n;
}

static int kernels(fixture *f, int64_t E, bool fusion, sj_lowered **keep) {
    sj_lower_options o = {.fusion = fusion, .prefix = "t_"};
    return kernels_with(f, E, &o, keep);
}

/* The graph lowers, fused, to one kernel of that kind with an empty arena. */
static void assert_one_kernel(fixture *f, int64_t E, sj_kernel_kind kind) {
    sj_lowered *l;
    assert_int_equal(kernels(f, E, true, &l), 1);
    assert_int_equal(l->kernels[0].kind, kind);
    assert_int_equal(l->plan.arena_bytes, 0);
    sj__lowered_destroy(l);
}

static void test_elementwise_chain_is_one_kernel(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 8}), b = param(f, 1, (int64_t[]){8}), y;
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_ADD, x, b, &y), SJ_OK);
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_GELU, y, &y), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_MUL, y, x, &y), SJ_OK);
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_TANH, y, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    assert_one_kernel(f, 32, SJ_KK_MAP);
    assert_int_equal(kernels(f, 32, false, NULL), 4);
}

static void test_matmul_bias_activation_epilogue(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 16}), w = param(f, 2, (int64_t[]){16, 32});
    sj_value b = param(f, 1, (int64_t[]){32}), y;
    assert_int_equal(sj_graph_matmul(f->g, x, w, &y), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_ADD, y, b, &y), SJ_OK);
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_RELU, y, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    sj_lowered *l;
    assert_int_equal(kernels(f, 64, true, &l), 1);
    assert_int_equal(l->kernels[0].kind, SJ_KK_MATMUL);
    sj__lowered_destroy(l);
    assert_int_equal(kernels(f, 64, false, NULL), 3);
}

static void test_ffn_block_kernels(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 16});
    sj_value ln, h, y, w1 = param(f, 2, (int64_t[]){16, 32}), w2 = param(f, 2, (int64_t[]){32, 16});
    assert_int_equal(sj_graph_layernorm(f->g, x, param(f, 1, (int64_t[]){16}),
                                        param(f, 1, (int64_t[]){16}), 1, 1e-5f, &ln), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, ln, w1, &h), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_ADD, h, param(f, 1, (int64_t[]){32}), &h), SJ_OK);
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_GELU, h, &h), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, h, w2, &y), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_ADD, y, x, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    /* layernorm | matmul+bias+gelu | matmul+residual */
    assert_int_equal(kernels(f, 128, true, NULL), 3);
    assert_int_equal(kernels(f, 128, false, NULL), 6);
}

static void test_attention_kernels(void **state) {
    fixture *f = *state;
    sj_value q = input(f, "q", 2, (int64_t[]){S, 16}), k = input(f, "k", 2, (int64_t[]){S, 16});
    sj_value v = input(f, "v", 2, (int64_t[]){S, 16}), kt, s, p, o;
    assert_int_equal(sj_graph_transpose(f->g, k, (int[]){1, 0}, &kt), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, q, kt, &s), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_MUL, s, param(f, 1, (int64_t[]){1}), &s), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, s, -1, &p), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, p, v, &o), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, o, "o"), SJ_OK);
    /* Few rows: the transpose is an index map: q@k^T*scale | softmax | p@v. */
    sj_lowered *l;
    assert_int_equal(kernels(f, 8, true, &l), 3);
    /* The scores kernel reads k with the transposed strides, space [b0, b1, m, n, k]. */
    const sj_kernel *k0 = &l->kernels[0];
    assert_int_equal(k0->kind, SJ_KK_MATMUL);
    assert_true(k0->sym[2] && k0->sym[3] && !k0->sym[4]);
    assert_int_equal(k0->loads[k0->b].strides[3], 16);
    assert_int_equal(k0->loads[k0->b].strides[4], 1);
    /* p @ v contracts over N: k is symbolic. */
    assert_true(l->kernels[2].sym[4]);
    sj__lowered_destroy(l);
    /* Many rows: k^T is copied once so the scores matmul reads n contiguously. */
    assert_int_equal(kernels(f, 64, true, &l), 4);
    k0 = &l->kernels[1];
    assert_int_equal(k0->kind, SJ_KK_MATMUL);
    assert_int_equal(k0->loads[k0->b].strides[3], 1);
    assert_int_equal(k0->loads[k0->b].strides[4], 64);
    sj__lowered_destroy(l);
    assert_int_equal(kernels(f, 64, false, NULL), 5);
}

/* A window: data [N, 6, 3] (positions, channels) gathered on axis 1 by a
 * constant [4 positions, 3 taps] table, times a weight, summed over the
 * taps: [N, 4, 3], a depthwise conv laid out channels last. */
static sj_value window_graph(fixture *f, sj_value *taps) {
    static const int32_t table[12] = {0, 1, 2, 1, 2, 3, 2, 3, 4, 3, 4, 5};
    sj_value x = input(f, "x", 3, (int64_t[]){S, 6, 3}), t, prod, y;
    assert_int_equal(sj_graph_param_typed(f->g, "table", SJ_I32, 2, (int64_t[]){4, 3}, table, &t),
                     SJ_OK);
    assert_int_equal(sj_graph_gather(f->g, x, t, 1, taps), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_MUL, *taps, param(f, 2, (int64_t[]){3, 3}), &prod),
                     SJ_OK);
    assert_int_equal(sj_graph_reduce(f->g, SJ_OP_REDUCE_SUM, prod, 1, (int[]){2}, false, &y), SJ_OK);
    return y;
}

static void test_window_taps_are_loads(void **state) {
    fixture *f = *state;
    sj_value taps, y = window_graph(f, &taps);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    sj_lower_options on = {.fusion = true, .windows = true, .prefix = "t_"};
    sj_lowered *l;
    /* the gather is read inside the sum: one kernel, no buffer of taps */
    assert_int_equal(kernels_with(f, 8, &on, &l), 1);
    assert_int_equal(l->kernels[0].kind, SJ_KK_REDUCE);
    bool gathers = false;
    for (int i = 0; i < l->kernels[0].n_exprs; i++) gathers |= l->kernels[0].exprs[i].kind == SJ_KX_GATHER;
    assert_true(gathers);
    assert_int_equal(l->plan.arena_bytes, 0);
    sj__lowered_destroy(l);
    /* without the option (the GPU targets) the taps are a buffer */
    assert_int_equal(kernels(f, 8, true, NULL), 2);
}

/* A padded window reads its data with a fill appended (a concat with a
 * one-element fill, the table's index 6 past the 6 positions): lowered
 * with windows on, the gather reads x in place and selects the fill for
 * that index, so no kernel copies x into a padded buffer. */
static void test_padded_window_reads_in_place(void **state) {
    fixture *f = *state;
    static const int32_t table[12] = {6, 0, 1, 0, 1, 2, 3, 4, 5, 4, 5, 6};
    sj_value x = input(f, "x", 3, (int64_t[]){S, 6, 3}), fill, xp, t, taps, prod, y;
    assert_int_equal(sj_graph_fill(f->g, SJ_F32, -0.5, 3, (int64_t[]){S, 1, 3}, &fill), SJ_OK);
    assert_int_equal(sj_graph_concat(f->g, x, fill, 1, &xp), SJ_OK);
    assert_int_equal(sj_graph_param_typed(f->g, "table", SJ_I32, 2, (int64_t[]){4, 3}, table, &t),
                     SJ_OK);
    assert_int_equal(sj_graph_gather(f->g, xp, t, 1, &taps), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_MUL, taps, param(f, 2, (int64_t[]){3, 3}), &prod),
                     SJ_OK);
    assert_int_equal(sj_graph_reduce(f->g, SJ_OP_REDUCE_SUM, prod, 1, (int[]){2}, false, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    sj_lower_options on = {.fusion = true, .windows = true, .prefix = "t_"};
    sj_lowered *l;
    assert_int_equal(kernels_with(f, 8, &on, &l), 1);
    const sj_kexpr *g = NULL;
    for (int i = 0; i < l->kernels[0].n_exprs; i++)
        if (l->kernels[0].exprs[i].kind == SJ_KX_GATHER) g = &l->kernels[0].exprs[i];
    assert_non_null(g);
    assert_true(g->gfill);
    assert_int_equal(g->glen, 6);
    assert_true(g->value == -0.5f);
    assert_int_equal(l->plan.arena_bytes, 0);
    sj__lowered_destroy(l);
    /* without the option the padded copy is made: the fill, a concat
     * kernel per operand, the taps, the sum */
    assert_int_equal(kernels(f, 8, true, NULL), 5);
}

/* Two table gathers of one padded concat, each a term of one sum (a
 * Winograd conv's input transform, formats/onnx/onnx_winograd.h): both
 * are loads inside the sum, both read the data in place past the padding,
 * so the sum is one kernel and there is no buffer in between. */
static void test_table_gathers_of_one_padded_concat_are_inlined(void **state) {
    fixture *f = *state;
    static const int32_t t1[8] = {6, 0, 1, 2, 3, 4, 5, 6}, t2[8] = {0, 1, 2, 3, 4, 5, 6, 6};
    sj_value x = input(f, "x", 3, (int64_t[]){S, 6, 3}), fill, xp, a, b, ga, gb, y;
    assert_int_equal(sj_graph_fill(f->g, SJ_F32, 0.0, 3, (int64_t[]){S, 1, 3}, &fill), SJ_OK);
    assert_int_equal(sj_graph_concat(f->g, x, fill, 1, &xp), SJ_OK);
    assert_int_equal(sj_graph_param_typed(f->g, "t1", SJ_I32, 2, (int64_t[]){2, 4}, t1, &a), SJ_OK);
    assert_int_equal(sj_graph_param_typed(f->g, "t2", SJ_I32, 2, (int64_t[]){2, 4}, t2, &b), SJ_OK);
    assert_int_equal(sj_graph_gather(f->g, xp, a, 1, &ga), SJ_OK);
    assert_int_equal(sj_graph_gather(f->g, xp, b, 1, &gb), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_SUB, ga, gb, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    sj_lower_options on = {.fusion = true, .windows = true, .prefix = "t_"};
    sj_lowered *l;
    assert_int_equal(kernels_with(f, 8, &on, &l), 1);
    int gathers = 0;
    for (int i = 0; i < l->kernels[0].n_exprs; i++) {
        const sj_kexpr *e = &l->kernels[0].exprs[i];
        if (e->kind != SJ_KX_GATHER) continue;
        gathers++;
        assert_true(e->gfill);
        assert_int_equal(e->glen, 6);
    }
    assert_int_equal(gathers, 2);
    assert_int_equal(l->plan.arena_bytes, 0);
    sj__lowered_destroy(l);
}

/* A chain of two-operand concats along one axis (how a concat of many
 * parts is built) writes every part straight into the one buffer: a
 * kernel per part, each at its offset, and no copy of an inner concat. */
static void test_concat_chain_writes_one_buffer(void **state) {
    fixture *f = *state;
    sj_value a = input(f, "a", 2, (int64_t[]){S, 2}), b = input(f, "b", 2, (int64_t[]){S, 3});
    sj_value c = input(f, "c", 2, (int64_t[]){S, 1}), pa, pc, y;
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_EXP, a, &pa), SJ_OK);
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_NEG, c, &pc), SJ_OK);
    assert_int_equal(sj_graph_concat(f->g, pa, b, 1, &y), SJ_OK);
    assert_int_equal(sj_graph_concat(f->g, y, pc, 1, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    sj_lowered *l;
    assert_int_equal(kernels(f, 8, true, &l), 3);
    assert_int_equal(l->plan.arena_bytes, 0);
    int64_t offsets = 0;
    for (int k = 0; k < l->plan.n_launches; k++) {
        const sj_kernel *kk = &l->kernels[l->plan.launches[k].kernel];
        assert_int_equal(kk->kind, SJ_KK_MAP);
        offsets |= (int64_t)1 << kk->out_offset;
    }
    assert_int_equal(offsets, (1 << 0) | (1 << 2) | (1 << 5)); /* parts at columns 0, 2 and 5 */
    sj__lowered_destroy(l);
    /* unfused: the inner concat is a buffer the outer one copies */
    assert_int_equal(kernels(f, 8, false, NULL), 6);
}

/* x = a @ w + b read twice by one expression (x * sigmoid(x), SiLU as
 * exporters write it) is evaluated twice inside the matmul's epilogue:
 * one kernel, no buffer for x. Read by two outputs instead, x is stored. */
static void test_value_read_twice_by_one_expression(void **state) {
    fixture *f = *state;
    sj_value a = input(f, "a", 2, (int64_t[]){S, 16}), x, s, y;
    assert_int_equal(sj_graph_matmul(f->g, a, param(f, 2, (int64_t[]){16, 32}), &x), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_ADD, x, param(f, 1, (int64_t[]){32}), &x), SJ_OK);
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_SIGMOID, x, &s), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_MUL, x, s, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    assert_one_kernel(f, 8, SJ_KK_MATMUL);
}

static void test_value_read_by_two_outputs_is_stored(void **state) {
    fixture *f = *state;
    sj_value a = input(f, "a", 2, (int64_t[]){S, 16}), x, s, y, z;
    assert_int_equal(sj_graph_matmul(f->g, a, param(f, 2, (int64_t[]){16, 32}), &x), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_ADD, x, param(f, 1, (int64_t[]){32}), &x), SJ_OK);
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_SIGMOID, x, &s), SJ_OK);
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_TANH, x, &z), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_MUL, x, s, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, z, "z"), SJ_OK);
    /* x's three uses do not meet: the matmul (+ bias) stores it, two maps read it */
    assert_int_equal(kernels(f, 8, true, NULL), 3);
}

static void test_window_taps_used_twice_stay_a_buffer(void **state) {
    fixture *f = *state;
    sj_value taps, y = window_graph(f, &taps);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, taps, "taps"), SJ_OK);
    sj_lower_options on = {.fusion = true, .windows = true, .prefix = "t_"};
    assert_int_equal(kernels_with(f, 8, &on, NULL), 2);
}

static void test_views_and_output_copies(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 8}), r, t, e;
    assert_int_equal(sj_graph_reshape(f->g, x, 3, (int64_t[]){S, 2, 4}, &r), SJ_OK);
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_EXP, r, &e), SJ_OK);
    assert_int_equal(sj_graph_transpose(f->g, e, (int[]){2, 0, 1}, &t), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, t, "t"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, x, "x"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, r, "r"), SJ_OK);
    /* exp fused into the transpose's kernel; x and its reshape copied out. */
    assert_int_equal(kernels(f, 16, true, NULL), 3);
}

static void test_arena_reuse(void **state) {
    fixture *f = *state;
    sj_value y = input(f, "x", 2, (int64_t[]){S, 64});
    for (int i = 0; i < 6; i++)
        assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, y, 1, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    sj_lowered *l;
    assert_int_equal(kernels(f, 256, true, &l), 6);
    /* Each softmax reads one buffer and writes another at the same layout:
     * one kernel serves all six launches. */
    assert_int_equal(l->n_kernels, 1);
    /* Five intermediates in a chain: two buffers suffice. */
    int64_t one = 256 * 64 * 4;
    assert_int_equal(l->arena_bytes_no_reuse, 5 * one);
    assert_int_equal(l->plan.arena_bytes, 2 * one);
    sj__lowered_destroy(l);
}

/* The plan's sub-batch (plan.h's sub_rows): rows whose share of the
 * largest intermediate fits lower.c's 4 MiB, a power of two, where the
 * rows are independent and the bucket holds more; 0 otherwise. */
static int64_t sub_rows_at(fixture *f, int64_t E) {
    sj_lowered *l;
    assert_int_equal(kernels(f, E, true, &l), 3);
    int64_t rows = l->plan.sub_rows;
    sj__lowered_destroy(l);
    return rows;
}

static void test_sub_batch_rows(void **state) {
    fixture *f = *state;
    /* 1 MiB a row in each of two intermediates */
    sj_value y = input(f, "x", 2, (int64_t[]){S, 1 << 18});
    for (int i = 0; i < 3; i++)
        assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, y, 1, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    assert_int_equal(sub_rows_at(f, 64), 4);
    assert_int_equal(sub_rows_at(f, 5), 4);
    assert_int_equal(sub_rows_at(f, 4), 0); /* the whole bucket fits */
    assert_int_equal(sub_rows_at(f, 1), 0);
    /* a softmax over the rows: they are not independent */
    sj_graph_destroy(f->g);
    assert_int_equal(sj_graph_create(f->ctx, "N", &f->g), SJ_OK);
    y = input(f, "x", 2, (int64_t[]){S, 1 << 18});
    for (int i = 0; i < 3; i++)
        assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, y, i == 1 ? 0 : 1, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    assert_int_equal(sub_rows_at(f, 64), 0);
}

static void test_words_and_bad_extent(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 3}), y;
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_NEG, x, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    sj_lowered *l;
    assert_int_equal(kernels(f, 8, true, &l), 1);
    const sj_launch *la = &l->plan.launches[0];
    assert_int_equal(la->n_words, 3);
    assert_int_equal(l->plan.words[la->first_word + 1], 8);
    assert_int_equal(l->plan.words[la->first_word + 2], 3);
    sj__lowered_destroy(l);
    sj_lower_options o = {.fusion = true};
    assert_int_equal(sj__lower(f->g, 0, &o, &l), SJ_E_OUT_OF_RANGE);
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "extent"));
}

static void test_plan_validate_rejects(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 3}), y;
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, x, 1, &y), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, y, 1, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    sj_lowered *l;
    kernels(f, 8, true, &l);
    sj_launch_plan *p = &l->plan;
    int32_t k1 = p->launches[1].kernel;
    p->launches[1].kernel = 7;
    assert_int_equal(sj__plan_validate(f->ctx, p), SJ_E_CORRUPT);
    p->launches[1].kernel = k1;
    p->launch_slots[0] = p->n_slots;
    assert_int_equal(sj__plan_validate(f->ctx, p), SJ_E_CORRUPT);
    p->launch_slots[0] = 0;
    int64_t arena = p->arena_bytes;
    p->arena_bytes = 8 * 3 * 4 - 1; /* one byte short of the intermediate */
    assert_int_equal(sj__plan_validate(f->ctx, p), SJ_E_CORRUPT);
    p->arena_bytes = arena;
    p->launches[0].n_words = INT32_MAX;
    assert_int_equal(sj__plan_validate(f->ctx, p), SJ_E_CORRUPT);
    p->launches[0].n_words = 3;
    assert_int_equal(sj__plan_validate(f->ctx, p), SJ_OK);
    sj__lowered_destroy(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_elementwise_chain_is_one_kernel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_matmul_bias_activation_epilogue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ffn_block_kernels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_window_taps_are_loads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_padded_window_reads_in_place, setup, teardown),
        cmocka_unit_test_setup_teardown(test_window_taps_used_twice_stay_a_buffer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_table_gathers_of_one_padded_concat_are_inlined, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concat_chain_writes_one_buffer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_value_read_twice_by_one_expression, setup, teardown),
        cmocka_unit_test_setup_teardown(test_value_read_by_two_outputs_is_stored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_attention_kernels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_views_and_output_copies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_arena_reuse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sub_batch_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_words_and_bad_extent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plan_validate_rejects, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
