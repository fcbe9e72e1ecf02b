/* Graph builder: shape inference, errors, inspection, hashing, cloning. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_example),
        cmocka_unit_test(test_matmul_inner_mismatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
