/* Graph builder: shape inference, errors, inspection, hashing, cloning. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "shapejit/graph.h"
#include "jit/graph/graph_impl.h"

#define S SJ_DIM_SYM

static sj_ctx *new_ctx(void) {
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    return ctx;
}

static void assert_shape(const sj_graph *g, sj_value v, int rank, const int64_t *dims) {
    sj_value_desc d;
    assert_int_equal(sj_graph_value_desc(g, v, &d), SJ_OK);
    assert_int_equal(d.shape.rank, rank);
    for (int i = 0; i < rank; i++) assert_int_equal(d.shape.dims[i], dims[i]);
}

/* The last error contains every one of the given fragments. */
static void assert_error_has(sj_ctx *ctx, const char *a, const char *b, const char *c) {
    const char *msg = sj_ctx_last_error(ctx);
    const char *parts[] = {a, b, c};
    for (int i = 0; i < 3; i++)
        if (parts[i] && !strstr(msg, parts[i])) fail_msg("message '%s' lacks '%s'", msg, parts[i]);
}

static void test_header_example(void **state) {
    (void)state;
    sj_ctx *ctx = new_ctx();
    sj_graph *g;
    assert_int_equal(sj_graph_create(ctx, "N", &g), SJ_OK);
    int64_t xd[] = {S, 64}, wd[] = {64, 256};
    static float w_data[64 * 256];
    sj_value x, w, y, z;
    assert_int_equal(sj_graph_input(g, "x", 2, xd, &x), SJ_OK);
    assert_int_equal(sj_graph_param(g, "w", 2, wd, w_data, &w), SJ_OK);
    assert_int_equal(sj_graph_matmul(g, x, w, &y), SJ_OK);
    assert_int_equal(sj_graph_unary(g, SJ_OP_GELU, y, &z), SJ_OK);
    assert_int_equal(sj_graph_output(g, z, "out"), SJ_OK);
    assert_shape(g, z, 2, (int64_t[]){S, 256});
    assert_int_equal(sj_graph_num_values(g), 4);
    assert_int_equal(sj_graph_num_inputs(g), 1);
    assert_int_equal(sj_graph_num_outputs(g), 1);
    assert_string_equal(sj_graph_symbol(g), "N");
    sj_value_desc d;
    assert_int_equal(sj_graph_output_desc(g, 0, &d), SJ_OK);
    assert_string_equal(d.name, "out");
    assert_int_equal(d.value, z);
    assert_int_equal(sj_graph_find_input(g, "x"), 0);
    assert_int_equal(sj_graph_find_input(g, "w"), -1);
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
}

static void test_matmul_inner_mismatch(void **state) {
    (void)state;
    sj_ctx *ctx = new_ctx();
    sj_graph *g;
    assert_int_equal(sj_graph_create(ctx, "N", &g), SJ_OK);
    sj_value a, b, c;
    assert_int_equal(sj_graph_input(g, "a", 2, (int64_t[]){S, 64}, &a), SJ_OK);
    assert_int_equal(sj_graph_input(g, "b", 2, (int64_t[]){32, 16}, &b), SJ_OK);
    assert_int_equal(sj_graph_matmul(g, a, b, &c), SJ_E_SHAPE);
    assert_error_has(ctx, "matmul: inner dims differ: [N, 64] vs [32, 16]", NULL, NULL);
    assert_int_equal(sj_graph_num_values(g), 2);
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
}

/* x -> relu -> a; x -> exp -> b; out = a + b, built in two orders with
 * different names. */
static sj_graph *build_two_branch(sj_ctx *ctx, bool swap, const char *prefix) {
    sj_graph *g;
    assert_int_equal(sj_graph_create(ctx, "N", &g), SJ_OK);
    char name[32];
    snprintf(name, sizeof name, "%sx", prefix);
    sj_value x, a, b, y;
    assert_int_equal(sj_graph_input(g, name, 2, (int64_t[]){S, 4}, &x), SJ_OK);
    if (swap) {
        assert_int_equal(sj_graph_unary(g, SJ_OP_EXP, x, &b), SJ_OK);
        assert_int_equal(sj_graph_unary(g, SJ_OP_RELU, x, &a), SJ_OK);
    } else {
        assert_int_equal(sj_graph_unary(g, SJ_OP_RELU, x, &a), SJ_OK);
        assert_int_equal(sj_graph_unary(g, SJ_OP_EXP, x, &b), SJ_OK);
    }
    assert_int_equal(sj_graph_binary(g, SJ_OP_ADD, a, b, &y), SJ_OK);
    snprintf(name, sizeof name, "%sy", prefix);
    assert_int_equal(sj_graph_output(g, y, name), SJ_OK);
    return g;
}

static void test_hash_smoke(void **state) {
    (void)state;
    sj_ctx *ctx = new_ctx();
    sj_graph *g1 = build_two_branch(ctx, false, "");
    sj_graph *g2 = build_two_branch(ctx, true, "other_");
    uint8_t h1[32], h2[32];
    sj_graph_hash(g1, h1);
    sj_graph_hash(g2, h2);
    assert_memory_equal(h1, h2, 32);
    sj_graph *c;
    assert_int_equal(sj_graph_clone(g1, &c), SJ_OK);
    sj_graph_hash(c, h2);
    assert_memory_equal(h1, h2, 32);
    char hex[65];
    sj_hash_hex(h1, hex);
    assert_int_equal(strlen(hex), 64);
    sj_graph_destroy(c);
    sj_graph_destroy(g1);
    sj_graph_destroy(g2);
    sj_ctx_destroy(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_example),
        cmocka_unit_test(test_matmul_inner_mismatch),
        cmocka_unit_test(test_hash_smoke),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
