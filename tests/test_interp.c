/* Reference interpreter against hand-computed values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "shapejit/interp.h"

#define S SJ_DIM_SYM

static void test_matmul_smoke(void **state) {
    (void)state;
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    sj_graph *g;
    assert_int_equal(sj_graph_create(ctx, "N", &g), SJ_OK);
    float w[] = {1, 2, 3, 4, 5, 6}; /* [2, 3] */
    sj_value x, wv, y;
    assert_int_equal(sj_graph_input(g, "x", 2, (int64_t[]){S, 2}, &x), SJ_OK);
    assert_int_equal(sj_graph_param(g, "w", 2, (int64_t[]){2, 3}, w, &wv), SJ_OK);
    assert_int_equal(sj_graph_matmul(g, x, wv, &y), SJ_OK);
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    float xd[] = {1, 0, 0, 1, 1, 1};
    sj_tensor in = {2, {3, 2}, xd}, out;
    assert_int_equal(sj_interp_run(g, 3, &in, &out), SJ_OK);
    float want[] = {1, 2, 3, 4, 5, 6, 5, 7, 9};
    assert_int_equal(out.rank, 2);
    assert_int_equal(out.dims[0], 3);
    assert_int_equal(out.dims[1], 3);
    for (int i = 0; i < 9; i++) assert_float_equal(out.data[i], want[i], 0);
    sj_tensor_free(ctx, &out);
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_smoke),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
