/* Fused attention (jit/lower/attention_fuse.c, jit/llvm/host_attention.c)
 * against the interpreter, with padding, arena and outputs NaN-poisoned by
 * the harness: single- and multi-head, scale by mul and div, additive masks
 * (full, key-padding broadcast, causal with -inf), the symbolic dim on the
 * sequence or on the batch, at extents 1, bucket-min, bucket-max and in
 * between, over more keys than one block. Each pattern is also checked to
 * have been fused (or, for the near misses, not fused and still right). */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/host_harness.h"
#include "jit/llvm/llvm_impl.h"
#include "jit/lower/lower.h"

#define S SJ_DIM_SYM
#define TOL 2e-5

static int setup(void **state) { return h_fixture_setup(state, 0x2545f4914f6cdd1dull); }

static sj_value scalar(fixture *f, const char *name, float value) {
    sj_value v;
    assert_int_equal(sj_graph_param(f->g, name, 1, (int64_t[]){1}, &value, &v), SJ_OK);
    return v;
}

/* How many SJ_KK_ATTENTION kernels the host lowering makes at extent E. */
static int fused(fixture *f, int64_t E) {
    sj_lowered *l;
    sj_lower_options o = {.fusion = true, .attention = true, .prefix = "t_"};
    assert_int_equal(sj_lower(f->g, E, &o, &l), SJ_OK);
    int n = 0;
    for (int i = 0; i < l->n_kernels; i++) n += l->kernels[i].kind == SJ_KK_ATTENTION;
    sj_lowered_destroy(l);
    return n;
}

/* Host vs interpreter at 1, bucket-min, bucket-max and between, for the
 * bucket 1024 (fused: many key blocks and query tiles), 64 both fused and
 * unfused, and the one-row bucket (below SJ_ATTENTION_MIN_SCORES:
 * unfused). */
static void check(fixture *f, const char *what) {
    sj_compile_options o, fused, unfused;
    sj_compile_options_init(&o);
    fused = unfused = o;
    fused.attention = SJ_ATTENTION_FUSED;
    unfused.attention = SJ_ATTENTION_UNFUSED;
    static const int64_t ns64[] = {1, 33, 64, 47}, ns1024[] = {1, 513, 1024, 700};
    assert_true(h_check(f->dev, f->g, 1024, ns1024, 4, &o, f->seed, TOL, what));
    assert_true(h_check(f->dev, f->g, 64, ns64, 4, &fused, f->seed + 1, TOL, what));
    assert_true(h_check(f->dev, f->g, 64, ns64, 4, &unfused, f->seed + 3, TOL, what));
    assert_true(h_check(f->dev, f->g, 1, ns64, 1, &o, f->seed + 2, TOL, what));
}

/* q [S, 16] @ k^T * s -> softmax -> @ v [S, 24] (head dims differ). */
static sj_value single_head(fixture *f, sj_op scale_op, sj_value mask) {
    sj_value q = input(f, "q", 2, (int64_t[]){S, 16}), k = input(f, "k", 2, (int64_t[]){S, 16});
    sj_value v = input(f, "v", 2, (int64_t[]){S, 24}), kt, s, p, o;
    assert_int_equal(sj_graph_transpose(f->g, k, (int[]){1, 0}, &kt), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, q, kt, &s), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, scale_op, s, scalar(f, "s", 0.25f), &s), SJ_OK);
    if (mask != SJ_NO_VALUE) assert_int_equal(sj_graph_binary(f->g, SJ_OP_ADD, s, mask, &s), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, s, -1, &p), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, p, v, &o), SJ_OK);
    return o;
}

static void test_single_head(void **state) {
    fixture *f = *state;
    assert_int_equal(sj_graph_output(f->g, single_head(f, SJ_OP_MUL, SJ_NO_VALUE), "out"), SJ_OK);
    assert_int_equal(fused(f, 1024), 1);
    assert_int_equal(fused(f, 64), 1);
    assert_int_equal(fused(f, 8), 0);
    check(f, "single head");
}

static void test_div_scale_full_mask(void **state) {
    fixture *f = *state;
    sj_value m = input(f, "mask", 2, (int64_t[]){S, S});
    assert_int_equal(sj_graph_output(f->g, single_head(f, SJ_OP_DIV, m), "out"), SJ_OK);
    assert_int_equal(fused(f, 1024), 1);
    assert_int_equal(fused(f, 64), 1);
    assert_int_equal(fused(f, 8), 0);
    check(f, "div scale, [S, S] mask");
}

/* Heads split from [S, 32] by reshape + transpose, a key-padding mask
 * [1, 1, S] broadcast over heads and queries, merged back after. */
static void test_multi_head(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 32}), m = input(f, "mask", 3, (int64_t[]){1, 1, S});
    sj_value q, k, v, kt, s, p, o, y;
    assert_int_equal(sj_graph_reshape(f->g, x, 3, (int64_t[]){S, 4, 8}, &q), SJ_OK);
    assert_int_equal(sj_graph_transpose(f->g, q, (int[]){1, 0, 2}, &q), SJ_OK);  /* [4, S, 8] */
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_TANH, x, &k), SJ_OK);
    assert_int_equal(sj_graph_reshape(f->g, k, 3, (int64_t[]){S, 4, 8}, &k), SJ_OK);
    assert_int_equal(sj_graph_transpose(f->g, k, (int[]){1, 2, 0}, &kt), SJ_OK); /* [4, 8, S] */
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_SIGMOID, x, &v), SJ_OK);
    assert_int_equal(sj_graph_reshape(f->g, v, 3, (int64_t[]){S, 4, 8}, &v), SJ_OK);
    assert_int_equal(sj_graph_transpose(f->g, v, (int[]){1, 0, 2}, &v), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, q, kt, &s), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_MUL, scalar(f, "s", 0.35355339f), s, &s), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_ADD, m, s, &s), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, s, 2, &p), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, p, v, &o), SJ_OK);
    assert_int_equal(sj_graph_transpose(f->g, o, (int[]){1, 0, 2}, &o), SJ_OK);
    assert_int_equal(sj_graph_reshape(f->g, o, 2, (int64_t[]){S, 32}, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    assert_int_equal(fused(f, 1024), 1);
    assert_int_equal(fused(f, 64), 1);
    assert_int_equal(fused(f, 8), 0);
    check(f, "multi head, key mask");
}

/* q, k and v sliced out of one packed [S, 48] projection, as exporters
 * write them: each operand is a view at an offset into the same buffer,
 * which the fused kernel must read from there. */
static void test_packed_qkv_slices(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "qkv", 2, (int64_t[]){S, 48}), w[3], kt, s, p, o;
    for (int i = 0; i < 3; i++) {
        sj_slice_axis ax[2] = {{0, 0, 1, S}, {16 * i, 0, 1, 16}};
        assert_int_equal(sj_graph_slice(f->g, x, ax, &w[i]), SJ_OK);
    }
    assert_int_equal(sj_graph_transpose(f->g, w[1], (int[]){1, 0}, &kt), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, w[0], kt, &s), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_MUL, s, scalar(f, "s", 0.25f), &s), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, s, -1, &p), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, p, w[2], &o), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, o, "out"), SJ_OK);
    assert_int_equal(fused(f, 1024), 1);
    assert_int_equal(fused(f, 64), 1);
    assert_int_equal(fused(f, 8), 0);
    check(f, "packed qkv slices");
}

/* The symbolic dim is a batch of fixed-length sequences, in rank 4. */
static void test_symbolic_batch(void **state) {
    fixture *f = *state;
    sj_value q = input(f, "q", 4, (int64_t[]){S, 2, 48, 8}), k = input(f, "k", 4, (int64_t[]){S, 2, 48, 8});
    sj_value v = input(f, "v", 4, (int64_t[]){S, 2, 48, 8}), kt, s, p, o;
    assert_int_equal(sj_graph_transpose(f->g, k, (int[]){0, 1, 3, 2}, &kt), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, q, kt, &s), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, s, -1, &p), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, p, v, &o), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, o, "out"), SJ_OK);
    /* 2 x 48 x 48 scores per batch row: fused at every extent. */
    assert_int_equal(fused(f, 1024), 1);
    assert_int_equal(fused(f, 1), 1);
    check(f, "symbolic batch");
}

/* Causal (the mask is the first input): mask[i][j] = -inf above the diagonal (so every row has at least
 * one finite score), and a row of all -inf (NaN, as the unfused softmax). */
static void run_causal(fixture *f, int64_t E, const int64_t *ns, int n_ns, int all_inf_row) {
    sj_compile_options o;
    sj_compile_options_init(&o);
    sj_artifact *a;
    assert_int_equal(sj_compile(f->g, E, &o, &a), SJ_OK);
    sj_executable *exe;
    assert_int_equal(sj_artifact_load(a, f->dev, f->g, &exe), SJ_OK);
    for (int t = 0; t < n_ns; t++) {
        int64_t n = ns[t];
        sj_tensor in[4] = {0}, got[1] = {0}, want[1] = {0}, ran[1] = {0};
        h_inputs(f->g, n, &f->seed, in);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++)
                in[0].data[i * n + j] = j > i || (all_inf_row && i == n / 2) ? -INFINITY : 0.0f;
        char label[64];
        snprintf(label, sizeof label, "causal (E=%lld, n=%lld)", (long long)E, (long long)n);
        assert_int_equal(sj_interp_run(f->g, n, in, want), SJ_OK);
        assert_int_equal(h_run(f->dev, a, f->g, n, in, got), SJ_OK);
        assert_int_equal(sj_executable_run(exe, n, in, ran), SJ_OK);
        assert_true(h_compare(f->g, got, want, TOL, label));
        assert_true(h_compare(f->g, ran, want, TOL, label));
        if (all_inf_row) assert_true(isnan(got[0].data[(n / 2) * 24]));
        h_free_tensors(f->ctx, in, 4);
        h_free_tensors(f->ctx, got, 1);
        h_free_tensors(f->ctx, ran, 1);
        h_free_tensors(f->ctx, want, 1);
    }
    sj_executable_destroy(exe);
    sj_artifact_destroy(a);
}

static void test_causal(void **state) {
    fixture *f = *state;
    sj_value m = input(f, "mask", 2, (int64_t[]){S, S});
    assert_int_equal(sj_graph_output(f->g, single_head(f, SJ_OP_MUL, m), "out"), SJ_OK);
    assert_int_equal(fused(f, 1024), 1);
    static const int64_t ns[] = {1, 513, 1024, 700};
    run_causal(f, 1024, ns, 4, 0);
    run_causal(f, 1024, ns + 1, 3, 1);
}

/* Near misses stay unfused and right: softmax over the queries,
 * probabilities that are also an output, a scalar subtracted (neither a
 * scale nor a mask). */
static void test_near_misses(void **state) {
    fixture *f = *state;
    sj_value q = input(f, "q", 2, (int64_t[]){S, 8}), k = input(f, "k", 2, (int64_t[]){S, 8});
    sj_value v = input(f, "v", 2, (int64_t[]){S, 8}), kt, s, p, o, s2, p2, o2, s3, p3, o3, c;
    float w = 0.3f;
    assert_int_equal(sj_graph_param(f->g, "c", 2, (int64_t[]){1, 1}, &w, &c), SJ_OK);
    assert_int_equal(sj_graph_transpose(f->g, k, (int[]){1, 0}, &kt), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, q, kt, &s), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, s, 0, &p), SJ_OK); /* over queries */
    assert_int_equal(sj_graph_matmul(f->g, p, v, &o), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, o, "over_queries"), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, q, kt, &s2), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, s2, 1, &p2), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, p2, v, &o2), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, o2, "out"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, p2, "probs"), SJ_OK); /* p is used twice */
    assert_int_equal(sj_graph_matmul(f->g, q, kt, &s3), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_SUB, s3, c, &s3), SJ_OK); /* not a mask add */
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, s3, 1, &p3), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, p3, v, &o3), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, o3, "sub"), SJ_OK);
    assert_int_equal(fused(f, 1024), 0);
    check(f, "near misses");
}

/* The kernel's exp against expf over [-87.3, 0]: every 97th float. */
static void test_exp_ulp(void **state) {
    (void)state;
    uint32_t hi;
    float a = -87.3f;
    memcpy(&hi, &a, 4);
    int64_t worst = 0;
    for (uint32_t u = 0x80000000u; u <= hi; u += 97) {
        float x;
        memcpy(&x, &u, 4);
        float got = sj_host_attention_exp(x), want = expf(x);
        int32_t gi, wi;
        memcpy(&gi, &got, 4);
        memcpy(&wi, &want, 4);
        int64_t d = gi > wi ? (int64_t)gi - wi : (int64_t)wi - gi;
        if (d > worst) worst = d;
    }
    printf("attention exp: max %lld ulp from expf over [-87.3, 0]\n", (long long)worst);
    assert_true(worst <= 2);
    /* Below -87.3 the true value is under FLT_MIN: within FLT_MIN of it. */
    for (float x = -87.3f; x > -100.0f; x -= 0.001f)
        assert_true(fabs((double)sj_host_attention_exp(x) - exp((double)x)) < FLT_MIN);
    assert_true(isnan(sj_host_attention_exp(NAN)));
    assert_true(sj_host_attention_exp(-INFINITY) == 0.0f);
    assert_true(sj_host_attention_exp(-100.0f) == 0.0f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_single_head, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_div_scale_full_mask, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_multi_head, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_packed_qkv_slices, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_symbolic_batch, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_causal, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_near_misses, setup, h_fixture_teardown),
        cmocka_unit_test(test_exp_ulp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
