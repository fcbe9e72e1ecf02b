/* Content-addressed kernels (compile/lower/kernel_share.h): identical layers
 * lower to one kernel per distinct computation, launched once per layer,
 * and compute what the interpreter computes; kernels that differ in any
 * field that decides their code (a constant, a stride, a dtype, ...) are
 * never merged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/host_harness.h"
#include "shapejit/ext/backends.h"
#include "shapejit/ext/bucketed_cache.h"
#include "compile/lower/kernel_share.h"

#define S SJ_DIM_SYM
#define TOL 2e-4
#define HID 16
#define FFN 32

static int setup(void **state) { return h_fixture_setup(state, 0x5a17e33u); }

static sj_lowered *lower(fixture *f, int64_t E) {
    sj_lowered *l;
    sj_lower_options o = {.fusion = true, .prefix = "t_"};
    assert_int_equal(sj__lower(f->g, E, &o, &l), SJ_OK);
    assert_int_equal(sj__plan_validate(f->ctx, &l->plan), SJ_OK);
    assert_int_equal(l->plan.n_kernels, l->n_kernels);
    return l;
}

/* One post-norm FFN layer with its own weights: layernorm(x + W2 gelu(W1 x + b1) + b2). */
static sj_value layer(fixture *f, int i, sj_value x) {
    char n[6][16];
    const char *names[6] = {"w1", "b1", "w2", "b2", "gamma", "beta"};
    for (int j = 0; j < 6; j++) snprintf(n[j], sizeof n[j], "%s_%d", names[j], i);
    sj_value w1 = param(f, n[0], 2, (int64_t[]){HID, FFN}), b1 = param(f, n[1], 1, (int64_t[]){FFN});
    sj_value w2 = param(f, n[2], 2, (int64_t[]){FFN, HID}), b2 = param(f, n[3], 1, (int64_t[]){HID});
    sj_value gamma = param(f, n[4], 1, (int64_t[]){HID}), beta = param(f, n[5], 1, (int64_t[]){HID});
    sj_value h, y;
    assert_int_equal(sj_graph_matmul(f->g, x, w1, &h), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_ADD, h, b1, &h), SJ_OK);
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_GELU, h, &h), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, h, w2, &y), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_ADD, y, b2, &y), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_ADD, x, y, &y), SJ_OK);
    assert_int_equal(sj_graph_layernorm(f->g, y, gamma, beta, -1, 1e-5f, &y), SJ_OK);
    return y;
}

static void test_identical_layers_share_kernels(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, HID});
    sj_value y = layer(f, 0, x);
    assert_int_equal(sj_graph_output(f->g, y, "one"), SJ_OK);
    sj_lowered *l = lower(f, 64);
    int one_kernels = l->n_kernels, one_launches = l->plan.n_launches;
    sj__lowered_destroy(l);
    sj_graph_destroy(f->g);
    assert_int_equal(sj_graph_create(f->ctx, "N", &f->g), SJ_OK);
    x = input(f, "x", 2, (int64_t[]){S, HID});
    y = layer(f, 2, layer(f, 1, layer(f, 0, x)));
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    l = lower(f, 64);
    /* Three layers launch three times the kernels of one, and need no more
     * distinct ones: the weights reach them as launch buffers. */
    assert_int_equal(l->plan.n_launches, 3 * one_launches);
    assert_int_equal(l->n_kernels, one_kernels);
    for (int i = 0; i < l->plan.n_launches; i++)
        assert_int_equal(l->plan.launches[i].kernel, l->plan.launches[i % one_launches].kernel);
    sj__lowered_destroy(l);
    /* The kernel count reports (and the tuner compares) is launches. */
    int counted, matmuls;
    assert_int_equal(sj_compile_kernel_counts(f->g, 64, NULL, &counted, &matmuls), SJ_OK);
    assert_int_equal(counted, 3 * one_launches);
    assert_int_equal(matmuls, 6);
    /* The shared module computes what the interpreter does, at full and
     * partial extents (padding poisoned), through the harness and the
     * runtime's executable. */
    const int64_t ns[] = {1, 7, 33, 64};
    sj_compile_options o;
    sj_compile_options_init(&o);
    assert_true(h_check(f->dev, f->g, 64, ns, 4, &o, f->seed, TOL, "three layers"));
    o.opt_level = 0;
    assert_true(h_check(f->dev, f->g, 64, ns, 4, &o, f->seed + 1, TOL, "three layers O0"));
    /* The artifact keeps the distinct kernels and every launch through
     * serialisation (what the store keeps). */
    sj_artifact *a, *b;
    sj_compile_options_init(&o);
    assert_int_equal(sj_compile(f->g, 64, &o, &a), SJ_OK);
    uint8_t *bytes;
    size_t len;
    assert_int_equal(sj_artifact_serialize(a, &bytes, &len), SJ_OK);
    assert_int_equal(sj_artifact_deserialize(f->ctx, bytes, len, &b), SJ_OK);
    sj_artifact_info ia, ib;
    sj_artifact_get_info(a, &ia);
    sj_artifact_get_info(b, &ib);
    assert_int_equal(ia.n_kernels, one_kernels);
    assert_int_equal(ia.n_launches, 3 * one_launches);
    assert_int_equal(ib.n_kernels, ia.n_kernels);
    assert_int_equal(ib.n_launches, ia.n_launches);
    sj_free(f->ctx, bytes);
    sj_artifact_destroy(b);
    sj_artifact_destroy(a);
}

/* The graph's two launches lower to want_kernels distinct kernels, and the
 * compiled module computes what the interpreter does. */
static void check_pair(fixture *f, int want_kernels, const char *what) {
    sj_lowered *l = lower(f, 32);
    assert_int_equal(l->plan.n_launches, 2);
    assert_int_equal(l->n_kernels, want_kernels);
    sj__lowered_destroy(l);
    const int64_t ns[] = {1, 5, 32};
    sj_compile_options o;
    sj_compile_options_init(&o);
    assert_true(h_check(f->dev, f->g, 32, ns, 3, &o, f->seed, TOL, what));
}

/* Outputs y = leaky_relu(a, alpha_a) and z = leaky_relu(b, alpha_b), a and
 * b inputs of one shape. */
static void leaky_pair(fixture *f, float alpha_a, float alpha_b) {
    sj_value a = input(f, "a", 2, (int64_t[]){S, 8}), b = input(f, "b", 2, (int64_t[]){S, 8}), y, z;
    assert_int_equal(sj_graph_leaky_relu(f->g, a, alpha_a, &y), SJ_OK);
    assert_int_equal(sj_graph_leaky_relu(f->g, b, alpha_b, &z), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, z, "z"), SJ_OK);
}

static void test_same_code_is_shared(void **state) {
    fixture *f = *state;
    leaky_pair(f, 0.25f, 0.25f);
    check_pair(f, 1, "same constant");
}

static void test_constant_not_merged(void **state) {
    fixture *f = *state;
    leaky_pair(f, 0.25f, 0.5f);
    check_pair(f, 2, "constants 0.25 and 0.5");
}

static void test_stride_not_merged(void **state) {
    fixture *f = *state;
    /* b is read transposed: the same op over the same output shape, loaded
     * with other strides. */
    sj_value a = input(f, "a", 2, (int64_t[]){S, 8}), b = input(f, "b", 2, (int64_t[]){8, S}), bt, y, z;
    assert_int_equal(sj_graph_transpose(f->g, b, (int[]){1, 0}, &bt), SJ_OK);
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_NEG, a, &y), SJ_OK);
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_NEG, bt, &z), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, z, "z"), SJ_OK);
    check_pair(f, 2, "strides");
}

static void test_dtype_not_merged(void **state) {
    fixture *f = *state;
    sj_value a = input(f, "a", 2, (int64_t[]){S, 8}), b = input(f, "b", 2, (int64_t[]){S, 8}), y, z;
    assert_int_equal(sj_graph_cast(f->g, a, SJ_I32, &y), SJ_OK);
    assert_int_equal(sj_graph_cast(f->g, b, SJ_I64, &z), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, z, "z"), SJ_OK);
    check_pair(f, 2, "dtypes");
}

/* A lowering of two copies of one kernel (k and its deep copy, each with
 * its own launch), the second changed by `mutate`, then shared: how many
 * kernels remain. */
static int share_mutated(fixture *f, void (*mutate)(sj_kernel *)) {
    sj_lowered *l = lower(f, 16);
    assert_int_equal(l->n_kernels, 1);
    assert_int_equal(l->plan.n_launches, 2);
    sj_kernel *ks = sj_realloc(f->ctx, l->kernels, 2 * sizeof *ks);
    assert_non_null(ks);
    l->kernels = ks;
    ks[1] = ks[0];
    ks[1].exprs = sj_alloc(f->ctx, (size_t)ks[0].n_exprs * sizeof *ks[0].exprs);
    ks[1].loads = sj_alloc(f->ctx, (size_t)ks[0].n_loads * sizeof *ks[0].loads);
    memcpy(ks[1].exprs, ks[0].exprs, (size_t)ks[0].n_exprs * sizeof *ks[0].exprs);
    memcpy(ks[1].loads, ks[0].loads, (size_t)ks[0].n_loads * sizeof *ks[0].loads);
    ks[1].cap_exprs = (size_t)ks[0].n_exprs;
    ks[1].cap_loads = (size_t)ks[0].n_loads;
    snprintf(ks[1].name, sizeof ks[1].name, "t_copy");
    l->n_kernels = 2;
    sj_kernel_desc *kd = sj_realloc(f->ctx, l->plan.kernels, 2 * sizeof *kd);
    assert_non_null(kd);
    l->plan.kernels = kd;
    memcpy(kd[1].name, ks[1].name, sizeof kd[1].name);
    l->plan.n_kernels = 2;
    l->plan.launches[1].kernel = 1;
    if (mutate) mutate(&ks[1]);
    assert_int_equal(sj__lowered_share_kernels(l), SJ_OK);
    assert_int_equal(sj__plan_validate(f->ctx, &l->plan), SJ_OK);
    int n = l->n_kernels;
    /* Launch 0 keeps the first kernel; launch 1 names the copy iff kept. */
    assert_int_equal(l->plan.launches[0].kernel, 0);
    assert_int_equal(l->plan.launches[1].kernel, n - 1);
    assert_string_equal(l->plan.kernels[0].name, l->kernels[0].name);
    sj__lowered_destroy(l);
    return n;
}

static int find_const(const sj_kernel *k) {
    for (int i = 0; i < k->n_exprs; i++)
        if (k->exprs[i].kind == SJ_KX_UNARY && k->exprs[i].op == SJ_OP_LEAKY_RELU) return i;
    fail_msg("no leaky_relu expression");
    return -1;
}
static void m_expr_value(sj_kernel *k) { k->exprs[find_const(k)].value = 0.5f; }
static void m_negated_constant(sj_kernel *k) { k->exprs[find_const(k)].value = -k->exprs[find_const(k)].value; }
static void m_load_stride(sj_kernel *k) { k->loads[0].strides[1] = 2; }
static void m_load_offset(sj_kernel *k) { k->loads[0].offset = 8; }
static void m_load_offset_n(sj_kernel *k) { k->loads[0].offset_n = 1; }
static void m_load_dtype(sj_kernel *k) { k->loads[0].dtype = SJ_I32; }
static void m_load_storage(sj_kernel *k) { k->loads[0].storage = SJ_PRECISION_BF16; }
static void m_load_buffer(sj_kernel *k) { k->loads[0].buffer = 2; }
static void m_out_dtype(sj_kernel *k) { k->out_dtype = SJ_I64; }
static void m_out_stride(sj_kernel *k) { k->out_strides[0] = 16; }
static void m_out_offset(sj_kernel *k) { k->out_offset = 4; }
static void m_dim(sj_kernel *k) { k->dims[1] = 4; }
static void m_sym(sj_kernel *k) { k->sym[0] = !k->sym[0]; }
static void m_kind(sj_kernel *k) { k->kind = SJ_KK_REDUCE; }
static void m_reduced(sj_kernel *k) { k->reduced = 2; }
static void m_alpha(sj_kernel *k) { k->alpha = 2.0f; }
static void m_epsilon(sj_kernel *k) { k->epsilon = 1e-3f; }
static void m_n_buffers(sj_kernel *k) { k->n_buffers++; }
static void m_expr_op(sj_kernel *k) { k->exprs[find_const(k)].op = SJ_OP_RELU; }

static void test_every_field_decides(void **state) {
    fixture *f = *state;
    leaky_pair(f, 0.25f, 0.25f);
    /* The unchanged copy merges, so each case below fails if the
     * description left its field out. */
    assert_int_equal(share_mutated(f, NULL), 1);
    static void (*const cases[])(sj_kernel *) = {
        m_expr_value, m_negated_constant, m_load_stride, m_load_offset, m_load_offset_n, m_load_dtype,
        m_load_storage, m_load_buffer, m_out_dtype, m_out_stride, m_out_offset, m_dim, m_sym,
        m_kind, m_reduced, m_alpha, m_epsilon, m_n_buffers, m_expr_op};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        print_message("mutation %zu\n", i);
        assert_int_equal(share_mutated(f, cases[i]), 2);
    }
}

static void test_describe_ignores_name(void **state) {
    fixture *f = *state;
    sj_value a = input(f, "a", 2, (int64_t[]){S, 8}), y;
    assert_int_equal(sj_graph_leaky_relu(f->g, a, 0.25f, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    sj_lowered *l = lower(f, 16);
    sj_kernel k = l->kernels[0];
    uint8_t *d0, *d1;
    size_t n0, n1;
    assert_int_equal(sj__kernel_describe(f->ctx, &k, &d0, &n0), SJ_OK);
    snprintf(k.name, sizeof k.name, "another_name");
    assert_int_equal(sj__kernel_describe(f->ctx, &k, &d1, &n1), SJ_OK);
    assert_int_equal(n0, n1);
    assert_memory_equal(d0, d1, n0);
    sj_free(f->ctx, d0);
    sj_free(f->ctx, d1);
    sj__lowered_destroy(l);
}

/* The host compiler's stage figures: distinct kernels and launches per
 * compile, time in each stage, load time once an artifact loads, reported
 * through the bucketed cache's stats. */
static void test_compile_stages_reported(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, HID});
    sj_value y = layer(f, 1, layer(f, 0, x));
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    sj_lowered *l = lower(f, 16);
    int kernels = l->n_kernels, launches = l->plan.n_launches;
    sj__lowered_destroy(l);
    assert_true(kernels < launches);
    /* One compile thread: with more, emit, optimise and codegen sum the
     * threads' times, which may exceed the compile's wall time. */
    sj_host_compiler_config hcfg;
    sj_host_compiler_config_init(&hcfg);
    hcfg.options.threads = 1;
    sj_host_compiler *hc;
    assert_int_equal(sj_host_compiler_create(f->ctx, &hcfg, &hc), SJ_OK);
    sj_compiler comp;
    sj_host_compiler_table(hc, &comp);
    assert_non_null(comp.stages);
    sj_compile_stages st;
    comp.stages(comp.ctx, &st);
    assert_int_equal(st.kernels, 0);
    assert_int_equal(st.launches, 0);
    assert_true(st.optimise_ms == 0 && st.load_ms == 0);
    sj_ladder *ladder;
    assert_int_equal(sj_ladder_parse(f->ctx, "list:16", &ladder), SJ_OK);
    sj_bucketed_cache *c;
    assert_int_equal(sj_bucketed_cache_create(f->g, ladder, &comp, NULL, NULL, &c), SJ_OK);
    assert_int_equal(sj_bucketed_cache_precompile(c, 1, NULL, NULL), SJ_OK);
    sj_bucketed_cache_stats cs;
    sj_bucketed_cache_stats_get(c, &cs);
    assert_int_equal(cs.compiles, 1);
    assert_int_equal(cs.stages.kernels, (uint64_t)kernels);
    assert_int_equal(cs.stages.launches, (uint64_t)launches);
    assert_true(cs.stages.lower_ms > 0 && cs.stages.emit_ms > 0);
    assert_true(cs.stages.optimise_ms > 0 && cs.stages.codegen_ms > 0 && cs.stages.load_ms > 0);
    /* The stages are parts of the compile the cache timed whole. */
    assert_true(cs.stages.lower_ms + cs.stages.emit_ms + cs.stages.optimise_ms + cs.stages.codegen_ms <=
                cs.compile_ms);
    sj_bucketed_cache_destroy(c);
    sj_ladder_destroy(ladder);
    sj_host_compiler_destroy(hc);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_identical_layers_share_kernels, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_same_code_is_shared, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_constant_not_merged, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_stride_not_merged, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_dtype_not_merged, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_every_field_decides, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_describe_ignores_name, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_compile_stages_reported, setup, h_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
