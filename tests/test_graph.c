/* Graph builder: shape inference, errors, inspection, hashing, cloning. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shapejit/graph.h"
#include "ir/graph_impl.h"
#include "tests/graph_fixture.h"
#include "tests/test_util.h"

#define F2(a, b) ((const float[]){(a), (b)})

static sj_value param_zeros(sj_graph *g, const char *name, int rank, const int64_t *dims) {
    static const float zeros[64];
    return param_ok(g, name, rank, dims, zeros);
}

static void assert_shape(const sj_graph *g, sj_value v, int rank, const int64_t *dims) {
    sj_value_desc d;
    assert_int_equal(sj_graph_value_desc(g, v, &d), SJ_OK);
    char got[128], want[128];
    sj_shape want_shape = {rank, {0}};
    if (rank > 0) memcpy(want_shape.dims, dims, (size_t)rank * sizeof *dims);
    sj_shape_format(&d.shape, "N", got, sizeof got);
    sj_shape_format(&want_shape, "N", want, sizeof want);
    assert_string_equal(got, want);
}
#define ASSERT_SHAPE(g, v, ...) assert_shape((g), (v), RANK(__VA_ARGS__), DIMS(__VA_ARGS__))
#define ASSERT_SCALAR(g, v) assert_shape((g), (v), 0, NULL)

static const sj_node *node(const sj_graph *g, sj_value v) { return &g->nodes[v]; }

/* ---------------------------------------------------------------- building */

static void test_header_example(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = f->g;
    static float w_data[64 * 256];
    sj_value x = INPUT(g, "x", S, 64), w, y, z;
    assert_int_equal(sj_graph_param(g, "w", 2, DIMS(64, 256), w_data, &w), SJ_OK);
    assert_int_equal(sj_graph_matmul(g, x, w, &y), SJ_OK);
    assert_int_equal(sj_graph_unary(g, SJ_OP_GELU, y, &z), SJ_OK);
    assert_int_equal(sj_graph_output(g, z, "out"), SJ_OK);
    ASSERT_SHAPE(g, z, S, 256);
    assert_int_equal(sj_graph_num_values(g), 4);
    assert_int_equal(sj_graph_num_inputs(g), 1);
    assert_int_equal(sj_graph_num_outputs(g), 1);
    assert_string_equal(sj_graph_symbol(g), "N");
    assert_ptr_equal(sj_graph_ctx(g), f->ctx);
}

static void test_unary_ops(void **state) {
    graph_fixture *f = *state;
    sj_value x = INPUT(f->g, "x", S, 3), y;
    for (sj_op op = SJ_OP_NEG; op <= SJ_OP_ERF; op++) {
        if (op == SJ_OP_LEAKY_RELU) continue;
        assert_int_equal(sj_graph_unary(f->g, op, x, &y), SJ_OK);
        ASSERT_SHAPE(f->g, y, S, 3);
        assert_int_equal(node(f->g, y)->op, op);
        assert_int_equal(node(f->g, y)->inputs[0], x);
    }
    assert_int_equal(sj_graph_leaky_relu(f->g, x, 0.25f, &y), SJ_OK);
    assert_float_equal(node(f->g, y)->attrs.alpha, 0.25f, 0);
    /* leaky_relu needs its alpha; binary ops are not unary. */
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_LEAKY_RELU, x, &y), SJ_E_INVALID_ARG);
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_ADD, x, &y), SJ_E_INVALID_ARG);
    assert_error_has(f->ctx, "add", NULL, NULL);
}

static void test_binary_broadcast(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = f->g;
    sj_value a = INPUT(g, "a", S, 1, 4), b = INPUT(g, "b", 3, 1), c = INPUT(g, "c", 1),
             d = INPUT(g, "d", 1, 4), nn = INPUT(g, "nn", S, S), s = INPUT(g, "s"), y;
    for (sj_op op = SJ_OP_ADD; op <= SJ_OP_MIN; op++) {
        assert_int_equal(sj_graph_binary(g, op, a, b, &y), SJ_OK);
        ASSERT_SHAPE(g, y, S, 3, 4);
    }
    assert_int_equal(sj_graph_binary(g, SJ_OP_MUL, c, a, &y), SJ_OK); /* [1] vs [N,1,4] */
    ASSERT_SHAPE(g, y, S, 1, 4);
    assert_int_equal(sj_graph_binary(g, SJ_OP_SUB, s, d, &y), SJ_OK); /* rank 0 broadcasts */
    ASSERT_SHAPE(g, y, 1, 4);
    assert_int_equal(sj_graph_binary(g, SJ_OP_ADD, nn, c, &y), SJ_OK); /* [N, N] scores */
    ASSERT_SHAPE(g, y, S, S);
    sj_value col = INPUT(g, "col", S, 1);
    assert_int_equal(sj_graph_binary(g, SJ_OP_DIV, nn, col, &y), SJ_OK); /* SYM vs 1 -> SYM */
    ASSERT_SHAPE(g, y, S, S);
    assert_int_equal(sj_graph_binary(g, SJ_OP_ADD, s, s, &y), SJ_OK);
    ASSERT_SCALAR(g, y);
    assert_int_equal(sj_graph_binary(g, SJ_OP_EXP, a, b, &y), SJ_E_INVALID_ARG);
}

static void test_reduce(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = f->g;
    sj_value x = INPUT(g, "x", 2, S, 5), y;
    assert_int_equal(sj_graph_reduce(g, SJ_OP_REDUCE_SUM, x, 1, (int[]){-1}, false, &y), SJ_OK);
    ASSERT_SHAPE(g, y, 2, S);
    assert_int_equal(node(g, y)->attrs.axes, 1u << 2);
    assert_false(node(g, y)->attrs.keepdims);
    assert_int_equal(sj_graph_reduce(g, SJ_OP_REDUCE_MEAN, x, 2, (int[]){1, 0}, true, &y), SJ_OK);
    ASSERT_SHAPE(g, y, 1, 1, 5);
    assert_int_equal(node(g, y)->attrs.axes, 3u);
    assert_true(node(g, y)->attrs.keepdims);
    assert_int_equal(sj_graph_reduce(g, SJ_OP_REDUCE_MAX, x, 0, NULL, false, &y), SJ_OK);
    ASSERT_SCALAR(g, y);
    assert_int_equal(node(g, y)->attrs.axes, 7u);
    assert_int_equal(sj_graph_reduce(g, SJ_OP_REDUCE_MAX, x, 0, NULL, true, &y), SJ_OK);
    ASSERT_SHAPE(g, y, 1, 1, 1);
    sj_value s = INPUT(g, "s");
    assert_int_equal(sj_graph_reduce(g, SJ_OP_REDUCE_SUM, s, 0, NULL, false, &y), SJ_OK);
    ASSERT_SCALAR(g, y);
}

static void test_matmul_shapes(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = f->g;
    sj_value m = INPUT(g, "m", S, 8), w = INPUT(g, "w", 8, 5), v8 = INPUT(g, "v8", 8),
             v5 = INPUT(g, "v5", 5), b4 = INPUT(g, "b4", 2, 1, S, 8), b3 = INPUT(g, "b3", 3, 8, 5),
             q = INPUT(g, "q", S, 4), k = INPUT(g, "k", 4, S), y;
    assert_int_equal(sj_graph_matmul(g, m, w, &y), SJ_OK);
    ASSERT_SHAPE(g, y, S, 5);
    assert_int_equal(sj_graph_matmul(g, v8, w, &y), SJ_OK); /* vector @ matrix */
    ASSERT_SHAPE(g, y, 5);
    assert_int_equal(sj_graph_matmul(g, w, v5, &y), SJ_OK); /* matrix @ vector */
    ASSERT_SHAPE(g, y, 8);
    assert_int_equal(sj_graph_matmul(g, v8, v8, &y), SJ_OK); /* dot */
    ASSERT_SCALAR(g, y);
    assert_int_equal(sj_graph_matmul(g, b4, b3, &y), SJ_OK); /* batch dims broadcast */
    ASSERT_SHAPE(g, y, 2, 3, S, 5);
    assert_int_equal(sj_graph_matmul(g, v8, b3, &y), SJ_OK);
    ASSERT_SHAPE(g, y, 3, 5);
    assert_int_equal(sj_graph_matmul(g, q, k, &y), SJ_OK); /* attention scores */
    ASSERT_SHAPE(g, y, S, S);
    assert_int_equal(sj_graph_matmul(g, k, q, &y), SJ_OK); /* contracting over N */
    ASSERT_SHAPE(g, y, 4, 4);
}

static void test_gemm_shapes(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = f->g;
    sj_value a = INPUT(g, "a", S, 3), at = INPUT(g, "at", 3, S), b = INPUT(g, "b", 3, 4),
             bt = INPUT(g, "bt", 4, 3), c1 = INPUT(g, "c1", 4), c2 = INPUT(g, "c2", S, 1),
             c0 = INPUT(g, "c0"), y;
    assert_int_equal(sj_graph_gemm(g, a, b, SJ_NO_VALUE, 1, 0, false, false, &y), SJ_OK);
    ASSERT_SHAPE(g, y, S, 4);
    assert_int_equal(node(g, y)->inputs[2], SJ_NO_VALUE);
    assert_int_equal(node(g, y)->n_inputs, 3);
    assert_int_equal(sj_graph_gemm(g, at, bt, c1, 2, 3, true, true, &y), SJ_OK);
    ASSERT_SHAPE(g, y, S, 4);
    const sj_node_attrs *at_attrs = &node(g, y)->attrs;
    assert_float_equal(at_attrs->alpha, 2, 0);
    assert_float_equal(at_attrs->beta, 3, 0);
    assert_true(at_attrs->trans_a && at_attrs->trans_b);
    assert_int_equal(sj_graph_gemm(g, a, bt, c2, 1, 1, false, true, &y), SJ_OK);
    ASSERT_SHAPE(g, y, S, 4);
    assert_int_equal(sj_graph_gemm(g, at, b, c0, 1, 1, true, false, &y), SJ_OK);
    ASSERT_SHAPE(g, y, S, 4);
}

static void test_row_ops(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = f->g;
    sj_value x = INPUT(g, "x", 2, S, 6), y;
    assert_int_equal(sj_graph_softmax(g, SJ_OP_SOFTMAX, x, -2, &y), SJ_OK);
    ASSERT_SHAPE(g, y, 2, S, 6);
    assert_int_equal(node(g, y)->attrs.axis, 1);
    assert_int_equal(sj_graph_softmax(g, SJ_OP_LOG_SOFTMAX, x, 2, &y), SJ_OK);
    assert_int_equal(node(g, y)->attrs.axis, 2);
    assert_int_equal(sj_graph_softmax(g, SJ_OP_RELU, x, 2, &y), SJ_E_INVALID_ARG);
    sj_value scale = param_zeros(g, "scale", 1, DIMS(6)), bias = param_zeros(g, "bias", 1, DIMS(1));
    assert_int_equal(sj_graph_layernorm(g, x, scale, bias, -1, 1e-5f, &y), SJ_OK);
    ASSERT_SHAPE(g, y, 2, S, 6);
    assert_int_equal(node(g, y)->attrs.axis, 2);
    assert_float_equal(node(g, y)->attrs.epsilon, 1e-5f, 0);
    sj_value s2 = INPUT(g, "s2", S, 6);
    assert_int_equal(sj_graph_layernorm(g, x, s2, SJ_NO_VALUE, 1, 0, &y), SJ_OK);
    assert_int_equal(node(g, y)->inputs[1], s2);
    assert_int_equal(node(g, y)->inputs[2], SJ_NO_VALUE);
    assert_int_equal(sj_graph_layernorm(g, x, SJ_NO_VALUE, SJ_NO_VALUE, 0, 0, &y), SJ_OK);
}

static void test_layout_ops(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = f->g;
    sj_value x = INPUT(g, "x", 2, S, 3, 4), y;
    assert_int_equal(sj_graph_transpose(g, x, (int[]){2, 0, 3, 1}, &y), SJ_OK);
    ASSERT_SHAPE(g, y, 3, 2, 4, S);
    assert_memory_equal(node(g, y)->attrs.perm, ((int[]){2, 0, 3, 1}), 4 * sizeof(int));
    assert_int_equal(sj_graph_reshape(g, x, 3, DIMS(2, S, 12), &y), SJ_OK);
    ASSERT_SHAPE(g, y, 2, S, 12);
    assert_int_equal(sj_graph_reshape(g, x, 4, DIMS(1, 2, S, 12), &y), SJ_OK);
    assert_int_equal(sj_graph_reshape(g, x, 4, DIMS(2, S, 6, 2), &y), SJ_OK);
    /* the symbolic dim twice (attention scores per head): each keeps its axis */
    sj_value hss = INPUT(g, "hss", 4, S, S);
    assert_int_equal(sj_graph_reshape(g, hss, 4, DIMS(1, 4, S, S), &y), SJ_OK);
    ASSERT_SHAPE(g, y, 1, 4, S, S);
    assert_int_equal(sj_graph_reshape(g, hss, 5, DIMS(2, 2, S, 1, S), &y), SJ_OK);
    ASSERT_SHAPE(g, y, 2, 2, S, 1, S);
    sj_value c = INPUT(g, "c", 4, 6);
    assert_int_equal(sj_graph_reshape(g, c, 3, DIMS(2, 3, 4), &y), SJ_OK);
    ASSERT_SHAPE(g, y, 2, 3, 4);
    assert_int_equal(sj_graph_reshape(g, c, 1, DIMS(24), &y), SJ_OK);
    sj_value one = INPUT(g, "one", 1, 1);
    assert_int_equal(sj_graph_reshape(g, one, 0, NULL, &y), SJ_OK);
    ASSERT_SCALAR(g, y);
    sj_value s = INPUT(g, "s");
    assert_int_equal(sj_graph_transpose(g, s, NULL, &y), SJ_OK);
    ASSERT_SCALAR(g, y);
}

/* --------------------------------------------------------- shape failures */

/* Each call fails with `st` and a message holding the fragments. */
#define EXPECT_FAIL(f, st, call, a, b, c)                                                          \
    do {                                                                                           \
        int before_ = sj_graph_num_values((f)->g);                                                 \
        assert_int_equal((call), (st));                                                            \
        assert_error_has((f)->ctx, (a), (b), (c));                                                 \
        assert_int_equal(sj_graph_num_values((f)->g), before_);                                    \
    } while (0)

static void test_shape_errors(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = f->g;
    sj_value y, x = INPUT(g, "x", S, 64), w = INPUT(g, "w", 32, 16), t = INPUT(g, "t", 3, 64),
                r3 = INPUT(g, "r3", 2, S, 8), b3 = INPUT(g, "b3", 3, 8, 5), s = INPUT(g, "s"),
                nn = INPUT(g, "nn", S, S);
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_binary(g, SJ_OP_ADD, x, t, &y), "add", "[N, 64]",
                "[3, 64]");
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_binary(g, SJ_OP_POW, x, w, &y), "pow", "[N, 64]",
                "[32, 16]");
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_matmul(g, x, w, &y),
                "matmul: inner dims differ: [N, 64] vs [32, 16]", NULL, NULL);
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_matmul(g, r3, b3, &y), "matmul", "[2, N, 8]", "[3, 8, 5]");
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_matmul(g, s, x, &y), "matmul", "[]", "[N, 64]");
    /* Inner dims N vs 64: a symbolic dim only matches itself. */
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_matmul(g, nn, t, &y), "matmul", "[N, N]", "[3, 64]");
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_gemm(g, x, w, SJ_NO_VALUE, 1, 0, false, false, &y),
                "gemm", "[N, 64]", "[32, 16]");
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_gemm(g, r3, w, SJ_NO_VALUE, 1, 0, false, false, &y),
                "gemm", "[2, N, 8]", NULL);
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_gemm(g, w, w, SJ_NO_VALUE, 1, 0, true, true, &y), "gemm",
                "[32, 16]^T vs [32, 16]^T", NULL);
    sj_value c_bad = INPUT(g, "c_bad", 3, 1);
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_gemm(g, w, w, c_bad, 1, 1, false, true, &y), "gemm",
                "[3, 1]", "[32, 32]");
    sj_value c_rank3 = INPUT(g, "c_rank3", 1, 1, 1);
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_gemm(g, w, w, c_rank3, 1, 1, false, true, &y), "gemm",
                "[1, 1, 1]", NULL);
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_layernorm(g, x, t, SJ_NO_VALUE, -1, 0, &y), "layernorm",
                "scale [3, 64]", "[64]");
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_layernorm(g, x, SJ_NO_VALUE, w, 0, 0, &y), "layernorm",
                "bias [32, 16]", "[N, 64]");
    /* Reshape rules: SYM as often in both, the dims in front of the first
     * and each symbolic dim's group keep their products, counts equal. */
    sj_value hss = INPUT(g, "hss", 4, S, S);
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_reshape(g, hss, 4, DIMS(4, S, 2, S), &y), "reshape",
                "[4, N, N] to [4, N, 2, N]", "symbolic dim 1 and the dims behind it hold 1 vs 2");
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_reshape(g, hss, 3, DIMS(S, 4, S), &y), "reshape",
                "[N, 4, N]", "(4 vs 1)");
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_reshape(g, x, 2, DIMS(S, 32), &y), "reshape", "[N, 64]",
                "[N, 32]");
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_reshape(g, r3, 2, DIMS(S, 16), &y), "reshape",
                "[2, N, 8]", "[N, 16]");
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_reshape(g, x, 3, DIMS(S, S, 64), &y), "reshape",
                "[N, N, 64]", NULL);
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_reshape(g, x, 1, DIMS(64), &y), "reshape", "[N, 64]",
                "[64]");
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_reshape(g, t, 2, DIMS(S, 64), &y), "reshape", "[3, 64]",
                "[N, 64]");
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_reshape(g, nn, 1, DIMS(S), &y), "reshape", "[N, N]",
                NULL);
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_reshape(g, t, 2, DIMS(64, 4), &y), "reshape", "[3, 64]",
                "[64, 4]");
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_reshape(g, t, 2, DIMS(0, 4), &y), "reshape", "dim 0",
                NULL);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_reshape(g, t, 7, DIMS(1, 1, 1, 1, 1, 3, 64), &y),
                "reshape", "rank 7", NULL);
}

static void test_axis_errors(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = f->g;
    sj_value y, x = INPUT(g, "x", S, 4);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG,
                sj_graph_reduce(g, SJ_OP_REDUCE_SUM, x, 1, (int[]){2}, false, &y), "reduce_sum",
                "axis 2", "[N, 4]");
    EXPECT_FAIL(f, SJ_E_INVALID_ARG,
                sj_graph_reduce(g, SJ_OP_REDUCE_MAX, x, 1, (int[]){-3}, false, &y), "reduce_max",
                "axis -3", NULL);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG,
                sj_graph_reduce(g, SJ_OP_REDUCE_MEAN, x, 2, (int[]){1, -1}, false, &y),
                "reduce_mean", "twice", NULL);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG,
                sj_graph_reduce(g, SJ_OP_REDUCE_SUM, x, 3, (int[]){0, 1, 1}, false, &y),
                "reduce_sum", NULL, NULL);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_reduce(g, SJ_OP_REDUCE_SUM, x, -1, NULL, false, &y),
                "reduce_sum", NULL, NULL);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_reduce(g, SJ_OP_ADD, x, 0, NULL, false, &y), "add",
                NULL, NULL);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_softmax(g, SJ_OP_SOFTMAX, x, 2, &y), "softmax",
                "axis 2", "[N, 4]");
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_softmax(g, SJ_OP_LOG_SOFTMAX, x, -3, &y),
                "log_softmax", "axis -3", NULL);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG,
                sj_graph_layernorm(g, x, SJ_NO_VALUE, SJ_NO_VALUE, 2, 0, &y), "layernorm",
                "axis 2", NULL);
    sj_value s = INPUT(g, "s");
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_softmax(g, SJ_OP_SOFTMAX, s, 0, &y), "softmax",
                "[]", NULL);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_transpose(g, x, (int[]){0, 0}, &y), "transpose",
                "[N, 4]", NULL);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_transpose(g, x, (int[]){0, 2}, &y), "transpose",
                NULL, NULL);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_transpose(g, x, (int[]){-1, 0}, &y), "transpose",
                NULL, NULL);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_transpose(g, x, NULL, &y), "transpose", NULL, NULL);
}

static void test_bad_value_ids(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = f->g;
    sj_value y, x = INPUT(g, "x", S, 4);
    const sj_value bad[] = {-1, 1, 1000};
    for (int i = 0; i < 3; i++) {
        sj_value b = bad[i];
        EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_unary(g, SJ_OP_EXP, b, &y), "exp",
                    "does not exist", NULL);
        EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_leaky_relu(g, b, 0.1f, &y), "leaky_relu", NULL,
                    NULL);
        EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_binary(g, SJ_OP_ADD, x, b, &y), "add", NULL,
                    NULL);
        EXPECT_FAIL(f, SJ_E_INVALID_ARG,
                    sj_graph_reduce(g, SJ_OP_REDUCE_SUM, b, 0, NULL, false, &y), "reduce_sum",
                    NULL, NULL);
        EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_matmul(g, b, x, &y), "matmul", NULL, NULL);
        EXPECT_FAIL(f, SJ_E_INVALID_ARG,
                    sj_graph_gemm(g, b, x, SJ_NO_VALUE, 1, 1, false, true, &y), "gemm",
                    NULL, NULL);
        EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_softmax(g, SJ_OP_SOFTMAX, b, 0, &y), "softmax",
                    NULL, NULL);
        EXPECT_FAIL(f, SJ_E_INVALID_ARG,
                    sj_graph_layernorm(g, b, SJ_NO_VALUE, SJ_NO_VALUE, 1, 0, &y),
                    "layernorm", NULL, NULL);
        EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_transpose(g, b, (int[]){1, 0}, &y), "transpose",
                    NULL, NULL);
        EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_reshape(g, b, 1, DIMS(4), &y), "reshape", NULL,
                    NULL);
        EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_set_name(g, b, "z"), "set_name", NULL, NULL);
        EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_output(g, b, "z"), "output", NULL, NULL);
    }
    /* Optional operands are checked too, once present. */
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_gemm(g, x, x, 7, 1, 1, false, true, &y), "gemm",
                "value 7", NULL);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_layernorm(g, x, -5, SJ_NO_VALUE, 1, 0, &y),
                "layernorm", "value -5", NULL);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_layernorm(g, x, SJ_NO_VALUE, 3, 1, 0, &y),
                "layernorm", "value 3", NULL);
    assert_int_equal(sj_graph_num_outputs(g), 0);
}

static void test_leaf_errors(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = f->g;
    sj_value y;
    float data[4] = {0};
    INPUT(g, "x", S, 4);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_input(g, "x", 1, DIMS(4), &y), "'x'", NULL, NULL);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_param(g, "x", 1, DIMS(4), data, &y), "'x'", NULL,
                NULL);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_input(g, "", 1, DIMS(4), &y), "empty", NULL, NULL);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_input(g, NULL, 1, DIMS(4), &y), "empty", NULL,
                NULL);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_input(g, "r7", 7, DIMS(1, 1, 1, 1, 1, 1, 1), &y), "r7",
                "rank 7", NULL);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_input(g, "neg", -1, NULL, &y), "rank -1", NULL,
                NULL);
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_input(g, "zero", 2, DIMS(3, 0), &y), "zero", "dim 1",
                NULL);
    /* -2 is 2 * N (SJ_DIM_AFFINE(2, 0)); a factor of 0 is no dim */
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_input(g, "minus", 1, DIMS(-((int64_t)1 << 21)), &y), "minus",
                "neither >= 1 nor SJ_DIM_AFFINE", NULL);
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_param(g, "p", 1, DIMS(S), data, &y), "param p",
                "symbolic", NULL);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_param(g, "p", 1, DIMS(4), NULL, &y), "param p",
                "NULL", NULL);
    /* Element counts past 2^40 are refused, also with the symbolic dim. */
    EXPECT_FAIL(f, SJ_E_SHAPE,
                sj_graph_input(g, "big", 3, DIMS(1 << 20, 1 << 20, 2), &y), "big",
                "[1048576, 1048576, 2]", "2^40");
    EXPECT_FAIL(f, SJ_E_SHAPE,
                sj_graph_input(g, "bigs", 3, DIMS(S, (int64_t)1 << 40, 2), &y), "bigs", NULL,
                NULL);
    EXPECT_FAIL(f, SJ_E_SHAPE,
                sj_graph_input(g, "huge", 2, DIMS(INT64_MAX, INT64_MAX), &y), "huge", NULL, NULL);
    assert_int_equal(sj_graph_num_inputs(g), 1);
    /* A result shape that overflows is refused just the same. */
    sj_value a = INPUT(g, "a", 1 << 20, 1), b = INPUT(g, "b", 1, 1 << 21);
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_binary(g, SJ_OP_ADD, a, b, &y), "add", "2^40", NULL);
    sj_value one = INPUT(g, "one", 1);
    EXPECT_FAIL(f, SJ_E_SHAPE, sj_graph_reshape(g, one, 2, DIMS((int64_t)1 << 41, 1), &y),
                "reshape", NULL, NULL);
    assert_int_equal(sj_graph_find_input(g, "big"), -1);
}

static void test_no_symbol(void **state) {
    (void)state;
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    sj_graph *g;
    assert_int_equal(sj_graph_create(ctx, NULL, &g), SJ_OK);
    assert_null(sj_graph_symbol(g));
    sj_value x, y;
    assert_int_equal(sj_graph_input(g, "x", 2, DIMS(S, 4), &x), SJ_E_SHAPE);
    assert_error_has(ctx, "input x", "no symbolic dim", NULL);
    assert_int_equal(sj_graph_input(g, "x", 2, DIMS(3, 4), &x), SJ_OK);
    assert_int_equal(sj_graph_reshape(g, x, 2, DIMS(S, 4), &y), SJ_E_SHAPE);
    assert_int_equal(sj_graph_num_values(g), 1);
    sj_graph_destroy(g);
    assert_int_equal(sj_graph_create(ctx, "", &g), SJ_E_INVALID_ARG);
    assert_null(g);
    sj_ctx_destroy(ctx);
}

static void test_names_and_outputs(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = f->g;
    sj_value x = INPUT(g, "x", S, 4), y, z;
    assert_int_equal(sj_graph_unary(g, SJ_OP_EXP, x, &y), SJ_OK);
    assert_int_equal(sj_graph_unary(g, SJ_OP_LOG, y, &z), SJ_OK);
    sj_value_desc d;
    assert_int_equal(sj_graph_value_desc(g, y, &d), SJ_OK);
    assert_null(d.name);
    assert_int_equal(sj_graph_set_name(g, y, "e"), SJ_OK);
    assert_int_equal(sj_graph_set_name(g, y, "e"), SJ_OK); /* renaming to itself is fine */
    assert_int_equal(sj_graph_set_name(g, y, "e2"), SJ_OK);
    assert_int_equal(sj_graph_value_desc(g, y, &d), SJ_OK);
    assert_string_equal(d.name, "e2");
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_set_name(g, z, "x"), "'x'", NULL, NULL);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_set_name(g, z, ""), "empty", NULL, NULL);
    assert_int_equal(sj_graph_value_desc(g, z, &d), SJ_OK);
    assert_null(d.name);
    /* Output names are their own namespace: an output may share its value's name. */
    assert_int_equal(sj_graph_output(g, z, "z"), SJ_OK);
    assert_int_equal(sj_graph_output(g, y, "e2"), SJ_OK);
    assert_int_equal(sj_graph_output(g, z, "z_again"), SJ_OK);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_output(g, y, "z"), "output z", NULL, NULL);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_output(g, y, NULL), "output", NULL, NULL);
    assert_int_equal(sj_graph_num_outputs(g), 3);
    assert_int_equal(sj_graph_output_desc(g, 1, &d), SJ_OK);
    assert_string_equal(d.name, "e2");
    assert_int_equal(d.value, y);
    ASSERT_SHAPE(g, d.value, S, 4);
    assert_int_equal(sj_graph_output_desc(g, 3, &d), SJ_E_INVALID_ARG);
    assert_int_equal(sj_graph_output_desc(g, -1, &d), SJ_E_INVALID_ARG);
    assert_int_equal(sj_graph_input_desc(g, 0, &d), SJ_OK);
    assert_string_equal(d.name, "x");
    assert_int_equal(d.value, x);
    assert_int_equal(sj_graph_input_desc(g, 1, &d), SJ_E_INVALID_ARG);
    assert_int_equal(sj_graph_value_desc(g, 3, &d), SJ_E_INVALID_ARG);
    assert_int_equal(sj_graph_find_input(g, "x"), 0);
    assert_int_equal(sj_graph_find_input(g, "e2"), -1);
    assert_int_equal(sj_graph_find_input(g, NULL), -1);
}

/* The name every value of test_many_names should have. */
static void expected_name(int v, char *buf, size_t len) {
    snprintf(buf, len, v % 3 == 0 ? "r%d" : "v%d", v);
}

/* Every value of g has its expected name, and no other value may take it. */
static void expect_names_held(sj_graph *g, int count) {
    for (int v = 0; v < count; v++) {
        char want[32], holder[48];
        expected_name(v, want, sizeof want);
        sj_value_desc d;
        assert_int_equal(sj_graph_value_desc(g, v, &d), SJ_OK);
        assert_string_equal(d.name, want);
        assert_int_equal(sj_graph_set_name(g, (v + 1) % count, want), SJ_E_INVALID_ARG);
        snprintf(holder, sizeof holder, "is already value %d", v);
        assert_error_has(sj_graph_ctx(g), want, holder, NULL);
    }
}

/* Names are checked through an index: after many inserts and renames (which
 * move entries around inside it) every name is still found, a name given
 * up can be taken again, and a clone keeps its own copy of the names. */
static void test_many_names(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = f->g;
    enum { COUNT = 3000 };
    char name[32];
    sj_value v = INPUT(g, "v0", S, 4);
    for (int i = 1; i < COUNT; i++) {
        assert_int_equal(sj_graph_unary(g, SJ_OP_RELU, v, &v), SJ_OK);
        snprintf(name, sizeof name, "v%d", i);
        assert_int_equal(sj_graph_set_name(g, v, name), SJ_OK);
    }
    for (int i = 0; i < COUNT; i += 3) {
        expected_name(i, name, sizeof name);
        assert_int_equal(sj_graph_set_name(g, i, name), SJ_OK);
    }
    expect_names_held(g, COUNT);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_input(g, "v5", 1, DIMS(4), NULL), "'v5'", NULL, NULL);
    EXPECT_FAIL(f, SJ_E_INVALID_ARG, sj_graph_param(g, "r6", 1, DIMS(4), F2(0, 0), NULL), "'r6'",
                "value 6", NULL);
    assert_int_equal(sj_graph_find_input(g, "r0"), 0);

    sj_graph *c;
    assert_int_equal(sj_graph_clone(g, &c), SJ_OK);
    expect_names_held(c, COUNT);
    /* "v3" was given up by the rename; the original reuses it, the clone is untouched. */
    assert_int_equal(sj_graph_set_name(g, 1, "v3"), SJ_OK);
    assert_int_equal(sj_graph_set_name(g, 2, "v1"), SJ_OK);
    assert_int_equal(sj_graph_set_name(c, 4, "v1"), SJ_E_INVALID_ARG);
    assert_int_equal(sj_graph_set_name(c, 4, "v3"), SJ_OK);
    sj_graph_destroy(c);
}

static void test_null_arguments(void **state) {
    (void)state;
    sj_value y;
    assert_int_equal(sj_graph_create(NULL, "N", NULL), SJ_E_INVALID_ARG);
    assert_int_equal(sj_graph_unary(NULL, SJ_OP_EXP, 0, &y), SJ_E_INVALID_ARG);
    assert_int_equal(sj_graph_input(NULL, "x", 0, NULL, &y), SJ_E_INVALID_ARG);
    assert_int_equal(sj_graph_num_values(NULL), 0);
    assert_null(sj_graph_symbol(NULL));
    sj_graph_destroy(NULL);
}

/* ---------------------------------------------------------- small helpers */

static void test_op_names(void **state) {
    (void)state;
    for (int i = 0; i < SJ_OP_COUNT_; i++) {
        const char *name = sj_op_name((sj_op)i);
        assert_string_not_equal(name, "?");
        sj_op back;
        assert_int_equal(sj_op_from_name(name, &back), SJ_OK);
        assert_int_equal(back, i);
        for (int j = 0; j < i; j++) assert_string_not_equal(name, sj_op_name((sj_op)j));
    }
    assert_string_equal(sj_op_name(SJ_OP_REDUCE_SUM), "reduce_sum");
    assert_string_equal(sj_op_name(SJ_OP_LAYERNORM), "layernorm");
    assert_string_equal(sj_op_name(SJ_OP_COUNT_), "?");
    assert_string_equal(sj_op_name((sj_op)-1), "?");
    sj_op op;
    assert_int_equal(sj_op_from_name("conv", &op), SJ_E_NOT_FOUND);
    assert_int_equal(sj_op_from_name("?", &op), SJ_E_NOT_FOUND);
}

static void test_shape_utils(void **state) {
    (void)state;
    sj_shape s = {3, {S, 64, S}}, scalar = {0, {0}};
    char buf[64];
    sj_shape_format(&s, "N", buf, sizeof buf);
    assert_string_equal(buf, "[N, 64, N]");
    sj_shape_format(&s, NULL, buf, sizeof buf);
    assert_string_equal(buf, "[?, 64, ?]");
    sj_shape_format(&scalar, "N", buf, sizeof buf);
    assert_string_equal(buf, "[]");
    sj_shape_format(&s, "N", buf, 6);
    assert_string_equal(buf, "[N, 6");
    sj_shape_format(&s, "N", buf, 1);
    assert_string_equal(buf, "");
    sj_shape at = sj_shape_at(&s, 7);
    assert_int_equal(at.rank, 3);
    assert_int_equal(at.dims[0], 7);
    assert_int_equal(at.dims[1], 64);
    assert_int_equal(at.dims[2], 7);
    assert_int_equal(sj_shape_numel(&s, 7), 7 * 64 * 7);
    assert_int_equal(sj_shape_numel(&scalar, 7), 1);
    assert_int_equal(sj_shape_numel(&s, SJ_MAX_EXTENT), -1);
    sj_shape edge = {2, {S, 1024}};
    assert_int_equal(sj_shape_numel(&edge, SJ_MAX_EXTENT), SJ_MAX_ELEMENTS);
    sj_shape over = {2, {S, 1025}};
    assert_int_equal(sj_shape_numel(&over, SJ_MAX_EXTENT), -1);
}

/* ---------------------------------------------- failed calls change nothing */

static void hash_of(const sj_graph *g, uint8_t out[32]) { sj_graph_hash(g, out); }

static void test_unchanged_after_failure(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = f->g;
    sj_value x = INPUT(g, "x", S, 4), w = INPUT(g, "w", 5, 6), y;
    assert_int_equal(sj_graph_unary(g, SJ_OP_EXP, x, &y), SJ_OK);
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    uint8_t before[32], after[32];
    hash_of(g, before);
    int values = sj_graph_num_values(g);
    sj_value untouched = 12345;
    assert_int_not_equal(sj_graph_matmul(g, x, w, &untouched), SJ_OK);
    assert_int_not_equal(sj_graph_input(g, "x", 1, DIMS(1), &untouched), SJ_OK);
    assert_int_not_equal(sj_graph_output(g, x, "y"), SJ_OK);
    assert_int_not_equal(sj_graph_reshape(g, x, 1, DIMS(4), &untouched), SJ_OK);
    assert_int_equal(untouched, 12345);
    assert_int_equal(sj_graph_num_values(g), values);
    assert_int_equal(sj_graph_num_inputs(g), 2);
    assert_int_equal(sj_graph_num_outputs(g), 1);
    hash_of(g, after);
    assert_memory_equal(before, after, 32);
    /* And building continues normally. */
    assert_int_equal(sj_graph_unary(g, SJ_OP_TANH, y, &y), SJ_OK);
    assert_int_equal(y, values);
}

/* ------------------------------------------------------------------ hashing */

/* One graph exercising every attribute kind. `variant` selects one change
 * (0 = none); `swap` builds independent branches in the other order;
 * `prefix` renames every value. */
enum {
    V_NONE,
    V_OP,
    V_LEAKY_ALPHA,
    V_GEMM_ALPHA,
    V_GEMM_BETA,
    V_TRANS_A,
    V_TRANS_B,
    V_REDUCE_AXES,
    V_KEEPDIMS,
    V_SOFTMAX_AXIS,
    V_LN_AXIS,
    V_EPSILON,
    V_PERM,
    V_SHAPE,
    V_WEIGHT_BIT,
    V_OUTPUT_ORDER,
    V_NO_SYMBOL,
    V_EXTRA_INPUT,
    V_INPUT_ORDER,
    V_RESHAPE,
    V_COUNT
};

static sj_graph *build_variant(sj_ctx *ctx, int variant, bool swap, const char *prefix,
                               bool dead_nodes) {
    sj_graph *g;
    assert_int_equal(sj_graph_create(ctx, variant == V_NO_SYMBOL ? NULL : "N", &g), SJ_OK);
    int64_t n = variant == V_NO_SYMBOL ? 5 : S;
    char name[64];
#define NAME(s) (snprintf(name, sizeof name, "%s%s", prefix, (s)), name)
    float wdata[12];
    for (int i = 0; i < 12; i++) wdata[i] = (float)i * 0.5f;
    if (variant == V_WEIGHT_BIT) {
        uint32_t bits;
        memcpy(&bits, &wdata[7], 4);
        bits ^= 1;
        memcpy(&wdata[7], &bits, 4);
    }
    sj_value x, u, w, a, b, c, d, e, h, k, m, o1, o2;
    if (variant == V_INPUT_ORDER) u = input_ok(g, NAME("u"), 1, DIMS(3));
    x = input_ok(g, NAME("x"), 2, DIMS(n, variant == V_SHAPE ? 4 : 3));
    if (variant != V_INPUT_ORDER) u = input_ok(g, NAME("u"), 1, DIMS(3));
    (void)u;
    if (variant == V_EXTRA_INPUT) input_ok(g, NAME("unused"), 1, DIMS(3));
    assert_int_equal(sj_graph_param(g, NAME("w"), 2, DIMS(variant == V_SHAPE ? 4 : 3, 4), wdata,
                                    &w),
                     SJ_OK);
    if (dead_nodes) {
        sj_value dead;
        assert_int_equal(sj_graph_unary(g, SJ_OP_EXP, x, &dead), SJ_OK);
        assert_int_equal(sj_graph_set_name(g, dead, NAME("dead")), SJ_OK);
    }
    /* Branch 1: gemm -> leaky_relu -> layernorm -> softmax. */
    sj_value branch1[4] = {SJ_NO_VALUE}, branch2[4] = {SJ_NO_VALUE};
    for (int pass = 0; pass < 2; pass++) {
        bool first = (pass == 0) != swap;
        if (first) {
            /* Square [4, 4] operands so either transpose flag keeps the
             * shapes valid and only the flag differs. */
            sj_value sq, sq2;
            float sq_data[16] = {1, 2, 3, 4, 5};
            assert_int_equal(sj_graph_param(g, NAME("sq"), 2, DIMS(4, 4), sq_data, &sq), SJ_OK);
            assert_int_equal(sj_graph_gemm(g, sq, sq, SJ_NO_VALUE, 1, 0, variant == V_TRANS_A,
                                           false, &sq2),
                             SJ_OK);
            assert_int_equal(sj_graph_gemm(g, x, w, SJ_NO_VALUE, variant == V_GEMM_ALPHA ? 2 : 1,
                                           variant == V_GEMM_BETA ? 1 : 0, false, false, &a),
                             SJ_OK);
            assert_int_equal(sj_graph_gemm(g, a, sq2, SJ_NO_VALUE, 1, 0, false,
                                           variant == V_TRANS_B, &a),
                             SJ_OK);
            assert_int_equal(sj_graph_leaky_relu(g, a, variant == V_LEAKY_ALPHA ? 0.2f : 0.1f, &b),
                             SJ_OK);
            assert_int_equal(sj_graph_layernorm(g, b, SJ_NO_VALUE, SJ_NO_VALUE,
                                                variant == V_LN_AXIS ? 0 : 1,
                                                variant == V_EPSILON ? 1e-6f : 1e-5f, &c),
                             SJ_OK);
            int softmax_axis = variant == V_SOFTMAX_AXIS ? 0 : 1;
            assert_int_equal(sj_graph_softmax(g, SJ_OP_SOFTMAX, c, softmax_axis, &d),
                             SJ_OK);
            branch1[0] = d;
        } else {
            /* Branch 2: transpose -> reduce -> unary -> reshape. */
            int perm[] = {1, 0};
            if (variant == V_PERM) {
                perm[0] = 0;
                perm[1] = 1;
            }
            assert_int_equal(sj_graph_transpose(g, x, perm, &e), SJ_OK);
            int axis = variant == V_REDUCE_AXES ? 0 : 1;
            if (variant == V_PERM) axis = 0; /* keep the reduced result's shape */
            assert_int_equal(sj_graph_reduce(g, SJ_OP_REDUCE_SUM, e, 1, &axis,
                                             variant == V_KEEPDIMS, &h),
                             SJ_OK);
            assert_int_equal(sj_graph_unary(g, variant == V_OP ? SJ_OP_SIGMOID : SJ_OP_RELU, h, &k),
                             SJ_OK);
            const sj_shape *ks = &g->nodes[k].shape;
            int64_t flat[SJ_MAX_RANK] = {0};
            int rank = variant == V_RESHAPE ? 2 : 1;
            if (ks->rank == 1) flat[0] = ks->dims[0];
            if (ks->rank == 2) flat[0] = ks->dims[0] == 1 ? ks->dims[1] : ks->dims[0];
            if (rank == 2) flat[1] = 1;
            if (ks->rank == 2 && variant != V_RESHAPE)
                m = k;
            else
                assert_int_equal(sj_graph_reshape(g, k, rank, flat, &m), SJ_OK);
            branch2[0] = m;
        }
    }
    o1 = branch1[0];
    o2 = branch2[0];
    if (variant == V_OUTPUT_ORDER) {
        sj_value t = o1;
        o1 = o2;
        o2 = t;
    }
    assert_int_equal(sj_graph_set_name(g, o1, NAME("o1")), SJ_OK);
    assert_int_equal(sj_graph_output(g, o1, NAME("first")), SJ_OK);
    assert_int_equal(sj_graph_output(g, o2, NAME("second")), SJ_OK);
#undef NAME
    return g;
}

static void graph_hash(sj_ctx *ctx, int variant, bool swap, const char *prefix, bool dead,
                       uint8_t out[32]) {
    sj_graph *g = build_variant(ctx, variant, swap, prefix, dead);
    sj_graph_hash(g, out);
    sj_graph_destroy(g);
}

/* Element types are part of the content: an input's dtype, a param's type
 * (same bytes, other meaning), a cast's target and a range's values each
 * change the hash; types are checked when the graph is built. */
static sj_graph *typed_graph(sj_ctx *ctx, sj_dtype in_t, sj_dtype param_t, sj_dtype cast_t,
                             double range_delta) {
    sj_graph *g;
    assert_int_equal(sj_graph_create(ctx, "N", &g), SJ_OK);
    int64_t d[1] = {SJ_DIM_SYM};
    int32_t words[4] = {1, 0, 1, 0}; /* 16 bytes: four int32, or two int64 */
    sj_value x, p, c, r, y;
    assert_int_equal(sj_graph_input_typed(g, "ids", in_t, 1, d, &x), SJ_OK);
    int64_t pd2[1] = {param_t == SJ_I64 ? 2 : 4};
    assert_int_equal(sj_graph_param_typed(g, "p", param_t, 1, pd2, words, &p), SJ_OK);
    assert_int_equal(sj_graph_cast(g, x, cast_t, &c), SJ_OK);
    assert_int_equal(sj_graph_range(g, cast_t, 0, range_delta, SJ_DIM_SYM, &r), SJ_OK);
    assert_int_equal(sj_graph_binary(g, SJ_OP_ADD, c, r, &y), SJ_OK);
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    assert_int_equal(sj_graph_output(g, p, "p"), SJ_OK);
    return g;
}

static void test_hash_dtypes(void **state) {
    graph_fixture *f = *state;
    uint8_t h[5][32];
    sj_graph *g[5] = {
        typed_graph(f->ctx, SJ_I64, SJ_I32, SJ_I64, 1),
        typed_graph(f->ctx, SJ_I32, SJ_I32, SJ_I64, 1), /* input type */
        typed_graph(f->ctx, SJ_I64, SJ_I64, SJ_I64, 1), /* same bytes as int64 */
        typed_graph(f->ctx, SJ_I64, SJ_I32, SJ_I32, 1), /* cast target */
        typed_graph(f->ctx, SJ_I64, SJ_I32, SJ_I64, 2), /* range step */
    };
    for (int i = 0; i < 5; i++) sj_graph_hash(g[i], h[i]);
    for (int i = 1; i < 5; i++)
        if (!memcmp(h[0], h[i], 32)) fail_msg("variant %d hashes like the base graph", i);
    sj_value_desc d;
    assert_int_equal(sj_graph_output_desc(g[0], 0, &d), SJ_OK);
    assert_int_equal(d.dtype, SJ_I64);
    assert_int_equal(sj_graph_output_desc(g[0], 1, &d), SJ_OK);
    assert_int_equal(d.dtype, SJ_I32);
    /* float ops refuse ints, mixed operands are refused, naming both types */
    sj_value y, x = g[0]->inputs[0];
    assert_int_equal(sj_graph_unary(g[0], SJ_OP_EXP, x, &y), SJ_E_SHAPE);
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "int64"));
    assert_int_equal(sj_graph_binary(g[0], SJ_OP_ADD, x, 1, &y), SJ_E_SHAPE);
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "different element types"));
    assert_int_equal(sj_graph_where(g[0], x, x, x, &y), SJ_E_SHAPE);
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "bool"));
    for (int i = 0; i < 5; i++) sj_graph_destroy(g[i]);
}

static void test_hash_equal_cases(void **state) {
    graph_fixture *f = *state;
    uint8_t base[32], other[32];
    graph_hash(f->ctx, V_NONE, false, "", false, base);
    graph_hash(f->ctx, V_NONE, false, "renamed_", false, other);
    assert_memory_equal(base, other, 32);
    graph_hash(f->ctx, V_NONE, true, "", false, other);
    assert_memory_equal(base, other, 32);
    graph_hash(f->ctx, V_NONE, true, "z", true, other);
    assert_memory_equal(base, other, 32);
    /* Hashing is deterministic and does not change the graph. */
    sj_graph *g = build_variant(f->ctx, V_NONE, false, "", false);
    sj_graph_hash(g, other);
    assert_memory_equal(base, other, 32);
    sj_graph_hash(g, other);
    assert_memory_equal(base, other, 32);
    sj_graph_destroy(g);
}

static void test_hash_unequal_cases(void **state) {
    graph_fixture *f = *state;
    uint8_t hashes[V_COUNT][32];
    for (int v = 0; v < V_COUNT; v++) graph_hash(f->ctx, v, false, "", false, hashes[v]);
    for (int v = 0; v < V_COUNT; v++)
        for (int w = 0; w < v; w++)
            if (memcmp(hashes[v], hashes[w], 32) == 0) fail_msg("variants %d and %d collide", v, w);
}

/* Attributes an op does not read must not split equal graphs. */
static void test_hash_ignores_unused_attrs(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = build_variant(f->ctx, V_NONE, false, "", false);
    uint8_t before[32], after[32];
    sj_graph_hash(g, before);
    for (int v = 0; v < g->n_nodes; v++)
        if (g->nodes[v].op == SJ_OP_TRANSPOSE || g->nodes[v].op == SJ_OP_RELU)
            g->nodes[v].attrs.epsilon = 42;
    sj_graph_hash(g, after);
    assert_memory_equal(before, after, 32);
    sj_graph_destroy(g);
}

static void test_hash_hex(void **state) {
    (void)state;
    uint8_t h[32];
    for (int i = 0; i < 32; i++) h[i] = (uint8_t)(i * 8 + 1);
    char hex[65];
    sj_hash_hex(h, hex);
    assert_int_equal(strlen(hex), 64);
    assert_memory_equal(hex, "0109111921293139", 16);
    assert_string_equal(hex + 62, "f9");
}

/* The hash of an empty graph, and of one whose only output is an input. */
static void test_hash_small_graphs(void **state) {
    graph_fixture *f = *state;
    uint8_t empty[32], passthrough[32];
    sj_graph_hash(f->g, empty);
    sj_value x = INPUT(f->g, "x", 2);
    assert_int_equal(sj_graph_output(f->g, x, "x"), SJ_OK);
    sj_graph_hash(f->g, passthrough);
    assert_memory_not_equal(empty, passthrough, 32);
}

/* -------------------------------------------------------------------- clone */

static void test_clone(void **state) {
    graph_fixture *f = *state;
    sj_graph *g = build_variant(f->ctx, V_NONE, false, "", true), *c;
    assert_int_equal(sj_graph_clone(g, &c), SJ_OK);
    uint8_t hg[32], hc[32];
    sj_graph_hash(g, hg);
    assert_int_equal(sj_graph_num_values(c), sj_graph_num_values(g));
    sj_value_desc dg, dc;
    assert_int_equal(sj_graph_output_desc(g, 1, &dg), SJ_OK);
    sj_graph_destroy(g); /* the clone shares nothing */
    sj_graph_hash(c, hc);
    assert_memory_equal(hg, hc, 32);
    assert_int_equal(sj_graph_output_desc(c, 1, &dc), SJ_OK);
    assert_string_equal(dc.name, "second");
    assert_int_equal(sj_graph_find_input(c, "u"), 1);
    assert_string_equal(sj_graph_symbol(c), "N");
    /* The clone grows on its own. */
    sj_value y;
    assert_int_equal(sj_graph_unary(c, SJ_OP_EXP, dc.value, &y), SJ_OK);
    sj_graph_destroy(c);
}

/* ------------------------------------------------------- allocation failure */

/* Builds a graph through a context whose k-th allocation fails. Every call
 * either succeeds or reports SJ_E_NOMEM; returns whether all succeeded. */
static bool build_with_failure(long k) {
    alloc_counter a;
    sj_ctx *ctx = ctx_with_counter(&a);
    a.fail_at = a.calls + k;
    bool all_ok = true;
    sj_graph *g = NULL, *c = NULL;
    sj_status st = sj_graph_create(ctx, "N", &g);
    if (st == SJ_OK) {
        float wd[6] = {1, 2, 3, 4, 5, 6};
        sj_value x = 0, w = 0, y = 0;
        sj_status s1 = sj_graph_input(g, "x", 2, DIMS(S, 2), &x);
        sj_status s2 = sj_graph_param(g, "w", 2, DIMS(2, 3), wd, &w);
        sj_status s3 = s1 == SJ_OK && s2 == SJ_OK ? sj_graph_matmul(g, x, w, &y) : SJ_E_NOMEM;
        sj_status s4 = s3 == SJ_OK ? sj_graph_set_name(g, y, "y") : SJ_E_NOMEM;
        sj_status s5 = s3 == SJ_OK ? sj_graph_output(g, y, "out") : SJ_E_NOMEM;
        for (int i = 0; i < 20 && s3 == SJ_OK; i++) /* past the first growth */
            if (sj_graph_unary(g, SJ_OP_EXP, y, &y) != SJ_OK) s3 = SJ_E_NOMEM;
        sj_status s6 = sj_graph_clone(g, &c);
        uint8_t h[32];
        sj_graph_hash(g, h);
        sj_status all[] = {s1, s2, s3, s4, s5, s6};
        for (int i = 0; i < 6; i++) {
            if (all[i] != SJ_OK) assert_int_equal(all[i], SJ_E_NOMEM);
            all_ok = all_ok && all[i] == SJ_OK;
        }
        /* Whatever failed left a consistent graph behind. */
        assert_int_equal(sj_graph_num_inputs(g), s1 == SJ_OK);
        assert_int_equal(sj_graph_num_outputs(g), s5 == SJ_OK);
    } else {
        assert_int_equal(st, SJ_E_NOMEM);
        all_ok = false;
    }
    sj_graph_destroy(c);
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
    assert_int_equal(a.live, 0);
    return all_ok;
}

/* Hashing under memory pressure falls back to an index-order form: still
 * deterministic and content-sensitive, but never equal to the canonical
 * hash, so it can cost a cache miss and never a false hit. */
static void hash_when_allocation_fails(const float *weights, uint8_t canonical[32],
                                       uint8_t fallback[32], uint8_t fallback_again[32]) {
    alloc_counter a;
    sj_ctx *ctx = ctx_with_counter(&a);
    sj_graph *g;
    assert_int_equal(sj_graph_create(ctx, "N", &g), SJ_OK);
    sj_value x = input_ok(g, "x", 2, DIMS(S, 2)), w, y;
    assert_int_equal(sj_graph_param(g, "w", 1, DIMS(2), weights, &w), SJ_OK);
    assert_int_equal(sj_graph_binary(g, SJ_OP_MUL, x, w, &y), SJ_OK);
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    /* Fallbacks first: a canonical hash is memoised, a fallback is not. */
    a.fail_at = a.calls;
    sj_graph_hash(g, fallback);
    a.fail_at = a.calls;
    sj_graph_hash(g, fallback_again);
    sj_graph_hash(g, canonical);
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
    assert_int_equal(a.live, 0);
}

static void test_hash_fallback(void **state) {
    (void)state;
    uint8_t c1[32], f1[32], f1_again[32], c2[32], f2[32], f2_again[32];
    hash_when_allocation_fails(F2(1, 2), c1, f1, f1_again);
    hash_when_allocation_fails(F2(1, 3), c2, f2, f2_again);
    assert_memory_equal(f1, f1_again, 32);
    assert_memory_not_equal(c1, f1, 32);
    assert_memory_not_equal(f1, f2, 32);
    assert_memory_not_equal(c1, c2, 32);
}

/* The memoised hash follows every change that the hash covers. */
static void test_hash_after_change(void **state) {
    (void)state;
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    sj_graph *g;
    assert_int_equal(sj_graph_create(ctx, "N", &g), SJ_OK);
    sj_value x = input_ok(g, "x", 2, DIMS(S, 2)), y, z;
    assert_int_equal(sj_graph_unary(g, SJ_OP_EXP, x, &y), SJ_OK);
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    uint8_t first[32], again[32], grown[32], more[32];
    sj_graph_hash(g, first);
    sj_graph_hash(g, again);
    assert_memory_equal(first, again, 32);
    assert_int_equal(sj_graph_unary(g, SJ_OP_TANH, y, &z), SJ_OK);
    sj_graph_hash(g, grown); /* z is not an output yet: same canonical form */
    assert_memory_equal(first, grown, 32);
    assert_int_equal(sj_graph_output(g, z, "z"), SJ_OK);
    sj_graph_hash(g, more);
    assert_memory_not_equal(first, more, 32);
    sj_graph *c;
    assert_int_equal(sj_graph_clone(g, &c), SJ_OK);
    sj_graph_hash(c, again);
    assert_memory_equal(more, again, 32);
    sj_graph_destroy(c);
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
}

static void test_allocation_failures(void **state) {
    (void)state;
    long k = 0;
    while (!build_with_failure(k)) k++;
    assert_true(k > 5);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, graph_fixture_setup, graph_fixture_teardown)
    const struct CMUnitTest tests[] = {
        T(test_header_example),
        T(test_unary_ops),
        T(test_binary_broadcast),
        T(test_reduce),
        T(test_matmul_shapes),
        T(test_gemm_shapes),
        T(test_row_ops),
        T(test_layout_ops),
        T(test_shape_errors),
        T(test_axis_errors),
        T(test_bad_value_ids),
        T(test_leaf_errors),
        cmocka_unit_test(test_no_symbol),
        T(test_names_and_outputs),
        T(test_many_names),
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_op_names),
        cmocka_unit_test(test_shape_utils),
        T(test_unchanged_after_failure),
        T(test_hash_equal_cases),
        T(test_hash_dtypes),
        T(test_hash_unequal_cases),
        T(test_hash_ignores_unused_attrs),
        cmocka_unit_test(test_hash_hex),
        T(test_hash_small_graphs),
        T(test_clone),
        cmocka_unit_test(test_hash_fallback),
        cmocka_unit_test(test_hash_after_change),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
