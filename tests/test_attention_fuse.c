/* Fused attention (compile/lower/attention_fuse.c, runtime/host_code/host_attention.c)
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

#include "core/hash.h"
#include "tests/host_harness.h"
#include "compile/llvm/llvm_impl.h"
#include "compile/lower/lower.h"

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
    assert_int_equal(sj__lower(f->g, E, &o, &l), SJ_OK);
    int n = 0;
    for (int i = 0; i < l->n_kernels; i++) n += l->kernels[i].kind == SJ_KK_ATTENTION;
    sj__lowered_destroy(l);
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
        float got = sj__host_attention_exp(x), want = expf(x);
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
        assert_true(fabs((double)sj__host_attention_exp(x) - exp((double)x)) < FLT_MIN);
    assert_true(isnan(sj__host_attention_exp(NAN)));
    assert_true(sj__host_attention_exp(-INFINITY) == 0.0f);
    assert_true(sj__host_attention_exp(-100.0f) == 0.0f);
}

/* The kernel itself, called directly, against a double-precision reference:
 * causal, full and row-broadcast masks and none, heads of 8 to 128, tails
 * of both tile widths. Called with one row range and again split at 16 and
 * 48 rows, which must give the same bits. At every code level (the
 * artifact's word picks it; a level the CPU lacks runs the highest it
 * has). Cheap (no LLVM), so tests/cpu_portability.cmake also runs it under
 * qemu on CPUs without AVX-512 and without AVX. */
typedef struct kcase {
    int heads, n, d, mask; /* mask: 0 none, 1 causal, 2 full random, 3 one row for all */
} kcase;

static double kernel_case(const kcase *c, int level) {
    const int H = c->heads, N = c->n, D = c->d;
    const float scale = 0.35f;
    int64_t w[SJ_HOST_ATTENTION_WORDS] = {1, H, N, N, D, 0, D, c->mask != 0};
    int32_t sb;
    memcpy(&sb, &scale, 4);
    w[8] = sb;
    int64_t hs = (int64_t)N * D;
    const int64_t st[5][5] = {{0, hs, D, 0, 1}, {0, hs, 0, D, 1}, {0, hs, 0, D, 1},
                              {0, 0, c->mask == 3 ? 0 : N, 1, 0}, {0, hs, D, 0, 1}};
    memcpy(w + 9, st, sizeof st);
    w[SJ_HOST_ATTENTION_WORDS - 1] = level;
    size_t sz = (size_t)H * N * D;
    float *q = malloc(sz * 4), *k = malloc(sz * 4), *v = malloc(sz * 4), *o = malloc(sz * 4);
    float *o2 = malloc(sz * 4), *mask = malloc((size_t)N * N * 4);
    assert_non_null(q && k && v && o && o2 && mask);
    uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(H * 131 + N * 7 + D);
    for (size_t i = 0; i < sz; i++) {
        q[i] = (float)(sj__splitmix64(&seed) >> 40) / (1 << 24) * 4 - 2;
        k[i] = (float)(sj__splitmix64(&seed) >> 40) / (1 << 24) * 4 - 2;
        v[i] = (float)(sj__splitmix64(&seed) >> 40) / (1 << 24) - 0.5f;
    }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            mask[i * N + j] = c->mask == 1   ? (j > i ? -INFINITY : 0.0f)
                              : c->mask == 3 ? (j % 5 == 4 ? -INFINITY : 0.0f)
                                             : (float)(sj__splitmix64(&seed) >> 40) / (1 << 24) - 0.5f;
    const float *mk = c->mask ? mask : NULL;
    sj__host_attention_rows(w, q, k, v, mk, o, N, 0, N);
    int64_t cut[] = {0, 16 < N ? 16 : N, 48 < N ? 48 : N, N};
    for (int i = 0; i < 3; i++) sj__host_attention_rows(w, q, k, v, mk, o2, N, cut[i], cut[i + 1]);
    assert_memory_equal(o, o2, sz * 4);
    double worst = 0, *s = malloc((size_t)N * sizeof *s);
    assert_non_null(s);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < N; i++) {
            const float *mr = mask + (c->mask == 3 ? 0 : i) * N;
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j < N; j++) {
                double a = 0;
                for (int e = 0; e < D; e++) a += (double)q[h * hs + i * D + e] * k[h * hs + j * D + e];
                s[j] = a * scale + (c->mask ? mr[j] : 0.0);
                if (s[j] > mx) mx = s[j];
            }
            for (int j = 0; j < N; j++) sum += s[j] = exp(s[j] - mx);
            for (int e = 0; e < D; e++) {
                double a = 0;
                for (int j = 0; j < N; j++) a += s[j] * v[h * hs + j * D + e];
                double d = fabs(a / sum - o[h * hs + i * D + e]);
                if (!(d <= worst)) worst = d; /* NaN sticks */
            }
        }
    free(s), free(q), free(k), free(v), free(o), free(o2), free(mask);
    return worst;
}

static void test_kernel_reference(void **state) {
    (void)state;
    static const kcase cases[] = {{1, 300, 32, 1}, {4, 37, 8, 0}, {3, 50, 24, 2},
                                  {2, 17, 128, 3}, {1, 1, 16, 0}, {2, 70, 64, 1}};
    for (int level = 2; level <= 4; level++)
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            double worst = kernel_case(&cases[i], level);
            printf("kernel level %d, %d heads x %d rows, head %d, mask %d: max abs error %.2e\n", level,
                   cases[i].heads, cases[i].n, cases[i].d, cases[i].mask, worst);
            assert_true(worst < 2e-6);
        }
}

/* argv[1], when given, is a cmocka test filter (cpu_portability.cmake). */
int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_single_head, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_div_scale_full_mask, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_multi_head, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_packed_qkv_slices, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_symbolic_batch, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_causal, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_near_misses, setup, h_fixture_teardown),
        cmocka_unit_test(test_exp_ulp),
        cmocka_unit_test(test_kernel_reference),
    };
    if (argc > 1) cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
