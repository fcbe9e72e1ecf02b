/* Reference interpreter against hand-computed values (worked out on paper
 * or once with Python's math module, written here as literals). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shapejit/ext/interp.h"
#include "tests/graph_fixture.h"
#include "tests/test_util.h"

#define F(...) ((const float[]){__VA_ARGS__})

static void ok(sj_graph *g, sj_status st) {
    if (st != SJ_OK) fail_msg("build: %s", sj_ctx_last_error(sj_graph_ctx(g)));
}

/* A borrowed tensor view of literal data. */
static sj_tensor view(int rank, const int64_t *dims, const float *data) {
    sj_tensor t = {.rank = rank, .data = (float *)data};
    if (rank > 0) memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    return t;
}
#define VIEW(data, ...) view(RANK(__VA_ARGS__), DIMS(__VA_ARGS__), (data))

static void expect_tensor(const sj_tensor *t, int rank, const int64_t *dims, const float *want) {
    assert_int_equal(t->rank, rank);
    for (int i = 0; i < rank; i++) assert_int_equal(t->dims[i], dims[i]);
    int64_t n = sj_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        float got = t->data[i], w = want[i];
        if (isnan(w) && isnan(got)) continue;
        if (isinf(w) && got == w) continue;
        double tol = 2e-6 * (fabs(w) > 1 ? fabs(w) : 1);
        if (!(fabs((double)got - w) <= tol))
            fail_msg("element %lld: got %.9g, want %.9g", (long long)i, got, w);
    }
}

/* Runs g (one output) at extent and compares the output with want. */
static void expect_run(sj_graph *g, int64_t extent, const sj_tensor *inputs, int rank,
                       const int64_t *dims, const float *want) {
    sj_tensor out;
    sj_status st = sj_interp_run(g, extent, inputs, &out);
    if (st != SJ_OK) fail_msg("run: %s", sj_ctx_last_error(sj_graph_ctx(g)));
    expect_tensor(&out, rank, dims, want);
    sj_tensor_free(sj_graph_ctx(g), &out);
}
#define EXPECT_RUN(g, extent, inputs, want, ...)                                                   \
    expect_run((g), (extent), (inputs), RANK(__VA_ARGS__), DIMS(__VA_ARGS__), (want))

/* A fresh graph for each op of a table-driven test. */
static sj_graph *fresh(graph_fixture *f) {
    sj_graph_destroy(f->g);
    assert_int_equal(sj_graph_create(f->ctx, "N", &f->g), SJ_OK);
    return f->g;
}

/* ---------------------------------------------------------------- unary */

static void test_unary(void **state) {
    graph_fixture *f = *state;
    const float x[] = {-1, 0, 0.5f, 2}, pos[] = {0.25f, 1, 4, 16};
    static const struct {
        sj_op op;
        bool positive;
        float want[4];
    } cases[] = {
        {SJ_OP_NEG, false, {1, 0, -0.5f, -2}},
        {SJ_OP_ABS, false, {1, 0, 0.5f, 2}},
        {SJ_OP_EXP, false, {0.36787945f, 1, 1.64872122f, 7.38905621f}},
        {SJ_OP_LOG, true, {-1.38629436f, 0, 1.38629436f, 2.77258873f}},
        {SJ_OP_SQRT, true, {0.5f, 1, 2, 4}},
        {SJ_OP_RSQRT, true, {2, 1, 0.5f, 0.25f}},
        {SJ_OP_RECIPROCAL, true, {4, 1, 0.25f, 0.0625f}},
        {SJ_OP_TANH, false, {-0.761594176f, 0, 0.462117165f, 0.964027584f}},
        {SJ_OP_SIGMOID, false, {0.268941432f, 0.5f, 0.622459352f, 0.880797088f}},
        {SJ_OP_RELU, false, {0, 0, 0.5f, 2}},
        {SJ_OP_GELU, false, {-0.158655256f, 0, 0.345731229f, 1.95449972f}},
        {SJ_OP_SILU, false, {-0.268941432f, 0, 0.311229676f, 1.76159418f}},
        {SJ_OP_ERF, false, {-0.842700779f, 0, 0.520499885f, 0.995322287f}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sj_graph *g = fresh(f);
        sj_value in = INPUT(g, "x", S, 2), y;
        ok(g, sj_graph_unary(g, cases[i].op, in, &y));
        assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
        sj_tensor t = VIEW(cases[i].positive ? pos : x, 2, 2);
        EXPECT_RUN(g, 2, &t, cases[i].want, 2, 2);
    }
    sj_graph *g = fresh(f);
    sj_value in = INPUT(g, "x", 4), y;
    ok(g, sj_graph_leaky_relu(g, in, 0.1f, &y));
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    sj_tensor t = VIEW(x, 4);
    EXPECT_RUN(g, 1, &t, F(-0.1f, 0, 0.5f, 2), 4);
}

/* ---------------------------------------------------------------- binary */

static void run_binary(graph_fixture *f, sj_op op, sj_tensor a, sj_tensor b, int rank,
                       const int64_t *dims, const float *want) {
    sj_graph *g = fresh(f);
    sj_value va = input_ok(g, "a", a.rank, a.dims), vb = input_ok(g, "b", b.rank, b.dims), y;
    ok(g, sj_graph_binary(g, op, va, vb, &y));
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    sj_tensor in[2] = {a, b};
    expect_run(g, 1, in, rank, dims, want);
}

static void test_binary(void **state) {
    graph_fixture *f = *state;
    const float a23[] = {1, 2, 3, 4, 5, 6}, b3[] = {10, 20, 30};
    sj_tensor a = VIEW(a23, 2, 3), b = VIEW(b3, 3);
    run_binary(f, SJ_OP_ADD, a, b, 2, DIMS(2, 3), F(11, 22, 33, 14, 25, 36));
    run_binary(f, SJ_OP_SUB, b, a, 2, DIMS(2, 3), F(9, 18, 27, 6, 15, 24));
    run_binary(f, SJ_OP_MUL, a, b, 2, DIMS(2, 3), F(10, 40, 90, 40, 100, 180));
    run_binary(f, SJ_OP_DIV, a, b, 2, DIMS(2, 3), F(0.1f, 0.1f, 0.1f, 0.4f, 0.25f, 0.2f));
    /* [2, 1] against [3]: both sides broadcast. */
    const float col[] = {2, 3}, row[] = {1, 2, 0.5f};
    run_binary(f, SJ_OP_POW, VIEW(col, 2, 1), VIEW(row, 3), 2, DIMS(2, 3),
               F(2, 4, 1.41421354f, 3, 9, 1.73205078f));
    run_binary(f, SJ_OP_MAX, VIEW(col, 2, 1), VIEW(row, 3), 2, DIMS(2, 3), F(2, 2, 2, 3, 3, 3));
    run_binary(f, SJ_OP_MIN, VIEW(col, 2, 1), VIEW(row, 3), 2, DIMS(2, 3),
               F(1, 2, 0.5f, 1, 2, 0.5f));
    /* A scalar operand, and rank 0 with rank 0. */
    const float two[] = {2};
    run_binary(f, SJ_OP_MUL, VIEW(two, 1), a, 2, DIMS(2, 3), F(2, 4, 6, 8, 10, 12));
    run_binary(f, SJ_OP_SUB, view(0, NULL, two), view(0, NULL, b3), 0, NULL, F(-8));
    /* [2, 1, 2] against [3, 1]: middle and leading dims broadcast. */
    const float a212[] = {1, 2, 3, 4}, b31[] = {10, 20, 30};
    run_binary(f, SJ_OP_ADD, VIEW(a212, 2, 1, 2), VIEW(b31, 3, 1), 3, DIMS(2, 3, 2),
               F(11, 12, 21, 22, 31, 32, 13, 14, 23, 24, 33, 34));
}

static void test_nan_propagation(void **state) {
    graph_fixture *f = *state;
    const float a[] = {NAN, 1, 2, NAN}, b[] = {0, NAN, 3, 4};
    run_binary(f, SJ_OP_MAX, VIEW(a, 4), VIEW(b, 4), 1, DIMS(4), F(NAN, NAN, 3, NAN));
    run_binary(f, SJ_OP_MIN, VIEW(a, 4), VIEW(b, 4), 1, DIMS(4), F(NAN, NAN, 2, NAN));
    run_binary(f, SJ_OP_ADD, VIEW(a, 4), VIEW(b, 4), 1, DIMS(4), F(NAN, NAN, 5, NAN));

    sj_graph *g = fresh(f);
    sj_value x = INPUT(g, "x", 2, 2), r, m, s;
    ok(g, sj_graph_unary(g, SJ_OP_RELU, x, &r));
    ok(g, sj_graph_reduce(g, SJ_OP_REDUCE_MAX, x, 1, (int[]){1}, false, &m));
    ok(g, sj_graph_softmax(g, SJ_OP_SOFTMAX, x, 1, &s));
    assert_int_equal(sj_graph_output(g, r, "r"), SJ_OK);
    assert_int_equal(sj_graph_output(g, m, "m"), SJ_OK);
    assert_int_equal(sj_graph_output(g, s, "s"), SJ_OK);
    sj_tensor in = VIEW(F(NAN, -1, 1, INFINITY), 2, 2), out[3];
    assert_int_equal(sj_interp_run(g, 1, &in, out), SJ_OK);
    expect_tensor(&out[0], 2, DIMS(2, 2), F(NAN, 0, 1, INFINITY));
    expect_tensor(&out[1], 1, DIMS(2), F(NAN, INFINITY));
    /* Row [1, inf]: inf - inf is NaN, which then spreads through the sum. */
    expect_tensor(&out[2], 2, DIMS(2, 2), F(NAN, NAN, NAN, NAN));
    for (int i = 0; i < 3; i++) sj_tensor_free(f->ctx, &out[i]);
}

/* ------------------------------------------------------------ reductions */

static void run_reduce(graph_fixture *f, sj_op op, sj_tensor x, int n_axes, const int *axes,
                       bool keepdims, int rank, const int64_t *dims, const float *want) {
    sj_graph *g = fresh(f);
    sj_value vx = input_ok(g, "x", x.rank, x.dims), y;
    ok(g, sj_graph_reduce(g, op, vx, n_axes, axes, keepdims, &y));
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    expect_run(g, 1, &x, rank, dims, want);
}

static void test_reduce(void **state) {
    graph_fixture *f = *state;
    sj_tensor x = VIEW(F(1, 5, 3, 4, 2, 6), 2, 3);
    run_reduce(f, SJ_OP_REDUCE_SUM, x, 1, (int[]){0}, false, 1, DIMS(3), F(5, 7, 9));
    run_reduce(f, SJ_OP_REDUCE_SUM, x, 1, (int[]){-1}, false, 1, DIMS(2), F(9, 12));
    run_reduce(f, SJ_OP_REDUCE_MEAN, x, 0, NULL, false, 0, NULL, F(3.5f));
    run_reduce(f, SJ_OP_REDUCE_MEAN, x, 1, (int[]){1}, true, 2, DIMS(2, 1), F(3, 4));
    run_reduce(f, SJ_OP_REDUCE_MAX, x, 1, (int[]){-1}, true, 2, DIMS(2, 1), F(5, 6));
    run_reduce(f, SJ_OP_REDUCE_MAX, x, 1, (int[]){0}, false, 1, DIMS(3), F(4, 5, 6));
    run_reduce(f, SJ_OP_REDUCE_MAX, VIEW(F(-3, -1, -2), 3), 0, NULL, true, 1, DIMS(1), F(-1));
    /* Non-adjacent axes of [2, 2, 2] holding 0..7. */
    sj_tensor c = VIEW(F(0, 1, 2, 3, 4, 5, 6, 7), 2, 2, 2);
    run_reduce(f, SJ_OP_REDUCE_SUM, c, 2, (int[]){0, 2}, false, 1, DIMS(2), F(10, 18));
    run_reduce(f, SJ_OP_REDUCE_SUM, c, 2, (int[]){2, 0}, true, 3, DIMS(1, 2, 1), F(10, 18));
    run_reduce(f, SJ_OP_REDUCE_MEAN, c, 1, (int[]){1}, false, 2, DIMS(2, 2), F(1, 2, 5, 6));
}

/* Reductions over the symbolic axis see exactly `extent` rows. */
static void test_reduce_symbolic_axis(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = f->g;
    sj_value x = INPUT(g, "x", S, 2), s, m, mx;
    ok(g, sj_graph_reduce(g, SJ_OP_REDUCE_SUM, x, 1, (int[]){0}, false, &s));
    ok(g, sj_graph_reduce(g, SJ_OP_REDUCE_MEAN, x, 1, (int[]){0}, true, &m));
    ok(g, sj_graph_reduce(g, SJ_OP_REDUCE_MAX, x, 0, NULL, false, &mx));
    assert_int_equal(sj_graph_output(g, s, "sum"), SJ_OK);
    assert_int_equal(sj_graph_output(g, m, "mean"), SJ_OK);
    assert_int_equal(sj_graph_output(g, mx, "max"), SJ_OK);
    const float data[] = {1, 10, 2, 20, 3, 30};
    const float sums[3][2] = {{1, 10}, {3, 30}, {6, 60}};
    const float means[3][2] = {{1, 10}, {1.5f, 15}, {2, 20}};
    for (int n = 1; n <= 3; n++) {
        sj_tensor in = VIEW(data, n, 2), out[3];
        assert_int_equal(sj_interp_run(g, n, &in, out), SJ_OK);
        expect_tensor(&out[0], 1, DIMS(2), sums[n - 1]);
        expect_tensor(&out[1], 2, DIMS(1, 2), means[n - 1]);
        expect_tensor(&out[2], 0, NULL, F((float)(10 * n)));
        for (int i = 0; i < 3; i++) sj_tensor_free(f->ctx, &out[i]);
    }
}

/* ---------------------------------------------------------- contractions */

static void run_matmul(graph_fixture *f, sj_tensor a, sj_tensor b, int rank, const int64_t *dims,
                       const float *want) {
    sj_graph *g = fresh(f);
    sj_value va = input_ok(g, "a", a.rank, a.dims), vb = input_ok(g, "b", b.rank, b.dims), y;
    ok(g, sj_graph_matmul(g, va, vb, &y));
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    sj_tensor in[2] = {a, b};
    expect_run(g, 1, in, rank, dims, want);
}

static void test_matmul(void **state) {
    graph_fixture *f = *state;
    const float m23[] = {1, 2, 3, 4, 5, 6}, v2[] = {1, 2}, v3[] = {1, 0, -1};
    run_matmul(f, VIEW(m23, 2, 3), VIEW(F(1, 0, 0, 1, 1, 1), 3, 2), 2, DIMS(2, 2),
               F(4, 5, 10, 11));
    run_matmul(f, VIEW(v2, 2), VIEW(m23, 2, 3), 1, DIMS(3), F(9, 12, 15));
    run_matmul(f, VIEW(m23, 2, 3), VIEW(v3, 3), 1, DIMS(2), F(-2, -2));
    run_matmul(f, VIEW(v2, 2), VIEW(v2, 2), 0, NULL, F(5));
    /* Batched: [2, 2, 2] (identity, swap) @ [2, 2]. */
    run_matmul(f, VIEW(F(1, 0, 0, 1, 0, 1, 1, 0), 2, 2, 2), VIEW(F(1, 2, 3, 4), 2, 2), 3,
               DIMS(2, 2, 2), F(1, 2, 3, 4, 3, 4, 1, 2));
    /* Batch dims broadcast both ways: [2, 1, 1, 2] @ [3, 2, 1] -> [2, 3, 1, 1];
     * a_i = (1, 2) and (3, 4), b_j = (j, 1). */
    run_matmul(f, VIEW(F(1, 2, 3, 4), 2, 1, 1, 2), VIEW(F(0, 1, 1, 1, 2, 1), 3, 2, 1), 4,
               DIMS(2, 3, 1, 1), F(2, 3, 4, 4, 7, 10));
    /* A vector against a batch: [2] @ [2, 2, 1] -> [2, 1]. */
    run_matmul(f, VIEW(v2, 2), VIEW(F(1, 1, 2, 3), 2, 2, 1), 2, DIMS(2, 1), F(3, 8));
}

/* Contracting over the symbolic dim sums exactly `extent` terms. */
static void test_matmul_symbolic(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = f->g;
    sj_value q = INPUT(g, "q", S, 2), k = INPUT(g, "k", 2, S), scores, gram;
    ok(g, sj_graph_matmul(g, q, k, &scores)); /* [N, N] */
    sj_value qt;
    ok(g, sj_graph_transpose(g, q, (int[]){1, 0}, &qt));
    ok(g, sj_graph_matmul(g, qt, q, &gram)); /* [2, 2], sums over N */
    assert_int_equal(sj_graph_output(g, scores, "scores"), SJ_OK);
    assert_int_equal(sj_graph_output(g, gram, "gram"), SJ_OK);
    const float qd[] = {1, 2, 3, 4, 5, 6};
    sj_tensor in[2] = {VIEW(qd, 2, 2), VIEW(F(1, 0, 0, 1), 2, 2)}, out[2];
    assert_int_equal(sj_interp_run(g, 2, in, out), SJ_OK);
    expect_tensor(&out[0], 2, DIMS(2, 2), F(1, 2, 3, 4));
    expect_tensor(&out[1], 2, DIMS(2, 2), F(10, 14, 14, 20));
    for (int i = 0; i < 2; i++) sj_tensor_free(f->ctx, &out[i]);
    in[0] = VIEW(qd, 3, 2);
    in[1] = VIEW(F(1, 0, 1, 0, 1, 1), 2, 3);
    assert_int_equal(sj_interp_run(g, 3, in, out), SJ_OK);
    expect_tensor(&out[0], 2, DIMS(3, 3), F(1, 2, 3, 3, 4, 7, 5, 6, 11));
    expect_tensor(&out[1], 2, DIMS(2, 2), F(35, 44, 44, 56));
    for (int i = 0; i < 2; i++) sj_tensor_free(f->ctx, &out[i]);
}

static void run_gemm(graph_fixture *f, sj_tensor a, sj_tensor b, const sj_tensor *c, float alpha,
                     float beta, bool ta, bool tb, const float *want) {
    sj_graph *g = fresh(f);
    sj_value va = input_ok(g, "a", a.rank, a.dims), vb = input_ok(g, "b", b.rank, b.dims), y;
    sj_value vc = c ? input_ok(g, "c", c->rank, c->dims) : SJ_NO_VALUE;
    ok(g, sj_graph_gemm(g, va, vb, vc, alpha, beta, ta, tb, &y));
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    sj_tensor in[3] = {a, b, c ? *c : a};
    expect_run(g, 1, in, 2, DIMS(2, 2), want);
}

static void test_gemm(void **state) {
    graph_fixture *f = *state;
    /* A = [[1, 2], [3, 4]], B = [[5, 6], [7, 8]]. */
    sj_tensor a = VIEW(F(1, 2, 3, 4), 2, 2), b = VIEW(F(5, 6, 7, 8), 2, 2);
    run_gemm(f, a, b, NULL, 1, 0, false, false, F(19, 22, 43, 50));
    run_gemm(f, a, b, NULL, 1, 0, true, false, F(26, 30, 38, 44));
    run_gemm(f, a, b, NULL, 1, 0, false, true, F(17, 23, 39, 53));
    run_gemm(f, a, b, NULL, 1, 0, true, true, F(23, 31, 34, 46));
    sj_tensor c_row = VIEW(F(10, 20), 2), c_col = VIEW(F(10, 20), 2, 1),
              c_full = VIEW(F(1, 2, 3, 4), 2, 2), c_scalar = view(0, NULL, F(4));
    run_gemm(f, a, b, &c_row, 2, 0.5f, false, false, F(43, 54, 91, 110));
    run_gemm(f, a, b, &c_col, 2, 0.5f, false, false, F(43, 49, 96, 110));
    run_gemm(f, a, b, &c_scalar, 2, 1, false, false, F(42, 48, 90, 104));
    run_gemm(f, a, b, &c_full, 1, -1, false, true, F(16, 21, 36, 49));
    /* Non-square with trans: A^T stored [3, 2], B stored [3, 2]: A^T^T B. */
    sj_graph *g = fresh(f);
    sj_value va = INPUT(g, "a", 3, S), vb = INPUT(g, "b", 3, 2), y;
    ok(g, sj_graph_gemm(g, va, vb, SJ_NO_VALUE, 1, 0, true, false, &y));
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    sj_tensor in[2] = {VIEW(F(1, 2, 3, 4, 5, 6), 3, 2), VIEW(F(1, 0, 0, 1, 1, 1), 3, 2)};
    EXPECT_RUN(g, 2, in, F(6, 8, 8, 10), 2, 2);
    in[0] = VIEW(F(1, 0, 2, 0, 3, 0), 3, 2);
    EXPECT_RUN(g, 2, in, F(4, 5, 0, 0), 2, 2);
}

/* ---------------------------------------------------------------- row ops */

/* Softmax over the symbolic axis at several extents; large inputs check
 * that the max is subtracted first. */
static void test_softmax_symbolic(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = f->g;
    sj_value x = INPUT(g, "x", S), big = INPUT(g, "big", S), cols = INPUT(g, "cols", S, 2), s, ls,
             sb, sc;
    ok(g, sj_graph_softmax(g, SJ_OP_SOFTMAX, x, 0, &s));
    ok(g, sj_graph_softmax(g, SJ_OP_LOG_SOFTMAX, x, -1, &ls));
    ok(g, sj_graph_softmax(g, SJ_OP_SOFTMAX, big, 0, &sb));
    ok(g, sj_graph_softmax(g, SJ_OP_SOFTMAX, cols, 0, &sc)); /* strided: inner dim 2 */
    assert_int_equal(sj_graph_output(g, s, "s"), SJ_OK);
    assert_int_equal(sj_graph_output(g, ls, "ls"), SJ_OK);
    assert_int_equal(sj_graph_output(g, sb, "sb"), SJ_OK);
    assert_int_equal(sj_graph_output(g, sc, "sc"), SJ_OK);
    const float want_s[3][3] = {{1}, {0.268941432f, 0.731058598f},
                                {0.0900305733f, 0.244728476f, 0.665240943f}};
    const float want_ls[3][3] = {{0}, {-1.31326163f, -0.313261688f},
                                 {-2.40760589f, -1.40760601f, -0.407605976f}};
    for (int n = 1; n <= 3; n++) {
        sj_tensor in[3] = {VIEW(F(1, 2, 3), n), VIEW(F(1000, 1001, 1002), n),
                           VIEW(F(0, 5, 1, 5, 2, 5), n, 2)},
                  out[4];
        assert_int_equal(sj_interp_run(g, n, in, out), SJ_OK);
        expect_tensor(&out[0], 1, DIMS(n), want_s[n - 1]);
        expect_tensor(&out[1], 1, DIMS(n), want_ls[n - 1]);
        expect_tensor(&out[2], 1, DIMS(n), want_s[n - 1]);
        float cols_want[6];
        for (int i = 0; i < n; i++) {
            cols_want[2 * i] = want_s[n - 1][i];
            cols_want[2 * i + 1] = 1.0f / (float)n;
        }
        expect_tensor(&out[3], 2, DIMS(n, 2), cols_want);
        for (int i = 0; i < 4; i++) sj_tensor_free(f->ctx, &out[i]);
    }
}

static void test_layernorm(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = f->g;
    const float scale_d[] = {1, 2, 1, 2}, bias_d[] = {0.5f};
    sj_value x = INPUT(g, "x", S, 4), scale = param_ok(g, "scale", 1, DIMS(4), scale_d),
             bias = param_ok(g, "bias", 1, DIMS(1), bias_d), plain, affine;
    ok(g, sj_graph_layernorm(g, x, SJ_NO_VALUE, SJ_NO_VALUE, 1, 1e-5f, &plain));
    ok(g, sj_graph_layernorm(g, x, scale, bias, -1, 1e-5f, &affine));
    assert_int_equal(sj_graph_output(g, plain, "plain"), SJ_OK);
    assert_int_equal(sj_graph_output(g, affine, "affine"), SJ_OK);
    /* Row 1: mean 2.5, population variance 1.25. Row 2 is constant: 0. */
    sj_tensor in = VIEW(F(1, 2, 3, 4, 2, 2, 2, 2), 2, 4), out[2];
    assert_int_equal(sj_interp_run(g, 2, &in, out), SJ_OK);
    expect_tensor(&out[0], 2, DIMS(2, 4),
                  F(-1.34163547f, -0.447211802f, 0.447211802f, 1.34163547f, 0, 0, 0, 0));
    expect_tensor(&out[1], 2, DIMS(2, 4),
                  F(-0.841635406f, -0.394423604f, 0.947211802f, 3.18327093f, 0.5f, 0.5f, 0.5f,
                    0.5f));
    for (int i = 0; i < 2; i++) sj_tensor_free(f->ctx, &out[i]);

    /* Normalising over several axes, including the symbolic one: [N, 2]
     * from axis 0 with epsilon 0, scale broadcast from [2]. */
    g = fresh(f);
    x = INPUT(g, "x", S, 2);
    sj_value sc = param_ok(g, "s", 1, DIMS(2), F(1, 10)), y;
    ok(g, sj_graph_layernorm(g, x, sc, SJ_NO_VALUE, 0, 0, &y));
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    sj_tensor x2 = VIEW(F(1, 2, 3, 4), 2, 2);
    EXPECT_RUN(g, 2, &x2, F(-1.34164083f, -4.4721359f, 0.44721359f, 13.4164083f), 2, 2);
}

/* ----------------------------------------------------------------- layout */

static void test_transpose_reshape(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = f->g;
    sj_value x = INPUT(g, "x", S, 3), t, r;
    ok(g, sj_graph_transpose(g, x, (int[]){1, 0}, &t));
    ok(g, sj_graph_reshape(g, x, 3, DIMS(S, 3, 1), &r));
    assert_int_equal(sj_graph_output(g, t, "t"), SJ_OK);
    assert_int_equal(sj_graph_output(g, r, "r"), SJ_OK);
    const float d[] = {1, 2, 3, 4, 5, 6};
    sj_tensor in = VIEW(d, 2, 3), out[2];
    assert_int_equal(sj_interp_run(g, 2, &in, out), SJ_OK);
    expect_tensor(&out[0], 2, DIMS(3, 2), F(1, 4, 2, 5, 3, 6));
    expect_tensor(&out[1], 3, DIMS(2, 3, 1), d);
    for (int i = 0; i < 2; i++) sj_tensor_free(f->ctx, &out[i]);

    /* Rank 3, perm (2, 0, 1): y[k][i][j] = x[i][j][k] over [2, 2, 3] = 0..11. */
    g = fresh(f);
    x = INPUT(g, "x", 2, 2, 3);
    ok(g, sj_graph_transpose(g, x, (int[]){2, 0, 1}, &t));
    assert_int_equal(sj_graph_output(g, t, "t"), SJ_OK);
    sj_tensor c = VIEW(F(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11), 2, 2, 3);
    EXPECT_RUN(g, 1, &c, F(0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11), 3, 2, 2);
}

/* ------------------------------------------------- graph-level behaviour */

/* Outputs may be inputs, params, the same value twice, or depend on values
 * other outputs also use; dead nodes are evaluated and freed harmlessly. */
static void test_output_kinds(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = f->g;
    sj_value x = INPUT(g, "x", S), p = param_ok(g, "p", 1, DIMS(1), F(7)), e, dead, y;
    ok(g, sj_graph_unary(g, SJ_OP_NEG, x, &e));
    ok(g, sj_graph_unary(g, SJ_OP_EXP, e, &dead));
    ok(g, sj_graph_binary(g, SJ_OP_MUL, e, e, &y));
    assert_int_equal(sj_graph_output(g, x, "x"), SJ_OK);
    assert_int_equal(sj_graph_output(g, p, "p"), SJ_OK);
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    assert_int_equal(sj_graph_output(g, y, "y_again"), SJ_OK);
    assert_int_equal(sj_graph_output(g, e, "e"), SJ_OK);
    sj_tensor in = VIEW(F(1, -2), 2), out[5];
    assert_int_equal(sj_interp_run(g, 2, &in, out), SJ_OK);
    expect_tensor(&out[0], 1, DIMS(2), F(1, -2));
    assert_ptr_not_equal(out[0].data, in.data);
    expect_tensor(&out[1], 1, DIMS(1), F(7));
    expect_tensor(&out[2], 1, DIMS(2), F(1, 4));
    expect_tensor(&out[3], 1, DIMS(2), F(1, 4));
    assert_ptr_not_equal(out[2].data, out[3].data);
    expect_tensor(&out[4], 1, DIMS(2), F(-1, 2));
    for (int i = 0; i < 5; i++) sj_tensor_free(f->ctx, &out[i]);
}

static void test_no_symbol_graph(void **state) {
    graph_fixture *f = *state;
    sj_graph *g;
    assert_int_equal(sj_graph_create(f->ctx, NULL, &g), SJ_OK);
    sj_value x = INPUT(g, "x", 2), y;
    ok(g, sj_graph_unary(g, SJ_OP_ABS, x, &y));
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    sj_tensor in = VIEW(F(-1, 2), 2);
    EXPECT_RUN(g, 0, &in, F(1, 2), 2); /* the extent is ignored */
    EXPECT_RUN(g, -5, &in, F(1, 2), 2);
    sj_graph_destroy(g);
}

static void test_request_errors(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = f->g;
    sj_value x = INPUT(g, "x", S, 4), w = INPUT(g, "w", 4), y;
    ok(g, sj_graph_binary(g, SJ_OP_ADD, x, w, &y));
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    float zeros[32] = {0};
    sj_tensor in[2] = {VIEW(zeros, 3, 4), VIEW(zeros, 4)}, out = {.data = (float *)1};
    assert_int_equal(sj_interp_run(g, 5, in, &out), SJ_E_SHAPE);
    assert_error_has(f->ctx, "input x", "[3, 4]", "[5, 4]");
    assert_null(out.data);
    in[0] = VIEW(zeros, 3, 4, 1);
    assert_int_equal(sj_interp_run(g, 3, in, &out), SJ_E_SHAPE);
    assert_error_has(f->ctx, "input x", "[3, 4, 1]", "[3, 4]");
    in[0] = VIEW(zeros, 3, 4);
    in[1] = VIEW(zeros, 5);
    assert_int_equal(sj_interp_run(g, 3, in, &out), SJ_E_SHAPE);
    assert_error_has(f->ctx, "input w", "[5]", "[4]");
    in[1] = VIEW(zeros, 4);
    in[1].rank = 9;
    assert_int_equal(sj_interp_run(g, 3, in, &out), SJ_E_SHAPE);
    assert_error_has(f->ctx, "input w", "rank 9", NULL);
    in[1] = VIEW(zeros, 4);
    in[1].data = NULL;
    assert_int_equal(sj_interp_run(g, 3, in, &out), SJ_E_INVALID_ARG);
    assert_error_has(f->ctx, "input w", "NULL", NULL);
    in[1] = VIEW(zeros, 4);
    assert_int_equal(sj_interp_run(g, 0, in, &out), SJ_E_OUT_OF_RANGE);
    assert_error_has(f->ctx, "extent", NULL, NULL);
    assert_int_equal(sj_interp_run(g, SJ_MAX_EXTENT + 1, in, &out), SJ_E_OUT_OF_RANGE);
    assert_int_equal(sj_interp_run(g, 3, NULL, &out), SJ_E_INVALID_ARG);
    assert_int_equal(sj_interp_run(g, 3, in, NULL), SJ_E_INVALID_ARG);
    assert_int_equal(sj_interp_run(NULL, 3, in, &out), SJ_E_INVALID_ARG);
    assert_int_equal(sj_interp_run(g, 3, in, &out), SJ_OK);
    sj_tensor_free(f->ctx, &out);
}

/* [N, N] is fine at build time but has no room at a huge extent. */
static void test_extent_too_large_for_values(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = f->g;
    sj_value x = INPUT(g, "x", S, 1), xt, y;
    ok(g, sj_graph_transpose(g, x, (int[]){1, 0}, &xt));
    ok(g, sj_graph_matmul(g, x, xt, &y));
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    sj_tensor in = {.rank = 2, .dims = {(int64_t)1 << 21, 1}, .data = (float *)F(0)};
    sj_tensor out = {0};
    assert_int_equal(sj_interp_run(g, (int64_t)1 << 21, &in, &out), SJ_E_OUT_OF_RANGE);
    assert_error_has(f->ctx, "[N, N]", "2^40", NULL);
    assert_null(out.data);
}

/* ------------------------------------------------------------- tensors */

static void test_tensor_alloc(void **state) {
    graph_fixture *f = *state;
    sj_tensor t;
    assert_int_equal(sj_tensor_alloc(f->ctx, 2, DIMS(3, 5), &t), SJ_OK);
    assert_int_equal(sj_tensor_numel(&t), 15);
    for (int i = 0; i < 15; i++) assert_float_equal(t.data[i], 0, 0);
    sj_tensor_free(f->ctx, &t);
    assert_null(t.data);
    sj_tensor_free(f->ctx, &t); /* twice is harmless */
    assert_int_equal(sj_tensor_alloc(f->ctx, 0, NULL, &t), SJ_OK);
    assert_int_equal(sj_tensor_numel(&t), 1);
    sj_tensor_free(f->ctx, &t);
    assert_int_equal(sj_tensor_alloc(f->ctx, 1, DIMS(0), &t), SJ_OK);
    assert_int_equal(sj_tensor_numel(&t), 0);
    sj_tensor_free(f->ctx, &t);
    assert_int_equal(sj_tensor_alloc(f->ctx, 7, DIMS(1, 1, 1, 1, 1, 1, 1), &t), SJ_E_INVALID_ARG);
    assert_null(t.data);
    assert_int_equal(sj_tensor_alloc(f->ctx, 1, DIMS(-1), &t), SJ_E_INVALID_ARG);
    assert_int_equal(sj_tensor_alloc(f->ctx, 2, DIMS(INT64_MAX, 2), &t), SJ_E_INVALID_ARG);
    sj_tensor bad = {.rank = 1, .dims = {-3}};
    assert_int_equal(sj_tensor_numel(&bad), -1);
}

/* ------------------------------------------------------ allocation failure */

/* Runs a graph with intermediates, two outputs and a dead node while the
 * k-th allocation of the run fails. Returns whether the run succeeded. */
static bool run_with_failure(long k) {
    alloc_counter a;
    sj_ctx *ctx = ctx_with_counter(&a);
    sj_graph *g;
    assert_int_equal(sj_graph_create(ctx, "N", &g), SJ_OK);
    sj_value x = INPUT(g, "x", S, 2), w = param_ok(g, "w", 2, DIMS(2, 2), F(1, 2, 3, 4)), h, dead,
             s, y;
    ok(g, sj_graph_matmul(g, x, w, &h));
    ok(g, sj_graph_unary(g, SJ_OP_EXP, h, &dead));
    ok(g, sj_graph_softmax(g, SJ_OP_SOFTMAX, h, 0, &s));
    ok(g, sj_graph_binary(g, SJ_OP_ADD, s, x, &y));
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    assert_int_equal(sj_graph_output(g, h, "h"), SJ_OK);
    a.fail_at = a.calls + k;
    sj_tensor in = VIEW(F(1, 0, 0, 1, 1, 1), 3, 2), out[2];
    sj_status st = sj_interp_run(g, 3, &in, out);
    if (st == SJ_OK) {
        expect_tensor(&out[1], 2, DIMS(3, 2), F(1, 2, 3, 4, 4, 6));
        for (int i = 0; i < 2; i++) sj_tensor_free(ctx, &out[i]);
    } else {
        assert_int_equal(st, SJ_E_NOMEM);
        assert_null(out[0].data);
        assert_null(out[1].data);
    }
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
    assert_int_equal(a.live, 0);
    return st == SJ_OK;
}

static void test_allocation_failures(void **state) {
    (void)state;
    long k = 0;
    while (!run_with_failure(k)) k++;
    /* Three state arrays, four intermediates, two outputs. */
    assert_true(k >= 9);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, graph_fixture_setup, graph_fixture_teardown)
    const struct CMUnitTest tests[] = {
        T(test_unary),
        T(test_binary),
        T(test_nan_propagation),
        T(test_reduce),
        T(test_reduce_symbolic_axis),
        T(test_matmul),
        T(test_matmul_symbolic),
        T(test_gemm),
        T(test_softmax_symbolic),
        T(test_layernorm),
        T(test_transpose_reshape),
        T(test_output_kinds),
        T(test_no_symbol_graph),
        T(test_request_errors),
        T(test_extent_too_large_for_values),
        T(test_tensor_alloc),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
