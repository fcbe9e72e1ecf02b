/* The host test harness itself (tests/host_harness.h) on the inputs the
 * exporters write: BERT's [1, seq] int64 input_ids and attention_mask. h_run
 * (NaN/-1-poisoned padding, arena and outputs) and the runtime's executable
 * both match the interpreter at extents 1, in between and the bucket's, so
 * every other test that trusts h_run is proven on int64 inputs too; and
 * h_run refuses, as the executor does, a seq past the bucket or inputs not
 * at the seq asked for, instead of writing past its buffers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <cmocka.h>

#include "shapejit/model.h"
#include "tests/host_harness.h"

#define BERT SJ_SOURCE_DIR "/tests/data/real_models/bert_torchscript/model.onnx"

static sj_graph *load_exported(sj_ctx *ctx, const char *path) {
    sj_model_options mo;
    sj_model_options_init(&mo);
    sj_dim_value batch[] = {{"batch", 1}};
    mo.dynamic_name = "seq";
    mo.fixed_dims = batch;
    mo.n_fixed_dims = 1;
    sj_graph *g;
    assert_int_equal(sj_model_load(ctx, path, &mo, &g), SJ_OK);
    int int64_inputs = 0;
    for (int i = 0; i < g->n_inputs; i++) int64_inputs += g->nodes[g->inputs[i]].dtype == SJ_I64;
    assert_int_equal(int64_inputs, 2); /* input_ids and attention_mask: what this is about */
    return g;
}

/* A context, a host device and the exported BERT, for each test. */
typedef struct rig {
    sj_ctx *ctx;
    sj_device *dev;
    sj_graph *g;
} rig;

static int rig_setup(void **state) {
    rig *r = calloc(1, sizeof *r);
    assert_non_null(r);
    assert_int_equal(sj_ctx_create(NULL, &r->ctx), SJ_OK);
    assert_int_equal(sj_host_device_create(r->ctx, NULL, &r->dev), SJ_OK);
    r->g = load_exported(r->ctx, BERT);
    *state = r;
    return 0;
}

static int rig_teardown(void **state) {
    rig *r = *state;
    sj_graph_destroy(r->g);
    sj_device_destroy(r->dev);
    sj_ctx_destroy(r->ctx);
    free(r);
    return 0;
}

/* h_run and the executable both match the interpreter on [1, seq] int64
 * ids and mask, at seq 1, in between and the bucket's 16. */
static void test_int64_inputs_match(void **state) {
    rig *r = *state;
    sj_compile_options o;
    sj_compile_options_init(&o);
    const int64_t ns[] = {1, 5, 15, 16};
    assert_true(h_check(r->dev, r->g, 16, ns, 4, &o, 0x5eed, 1e-3, BERT));
}

/* A request the executor refuses, h_run refuses too, before it copies a
 * byte: seq past the bucket (it wrote 100 rows into 64-row buffers), and
 * an input of the wrong dtype or length. */
static void test_refuses_what_the_executor_refuses(void **state) {
    rig *r = *state;
    sj_ctx *ctx = r->ctx;
    sj_device *dev = r->dev;
    sj_graph *g = r->g;
    sj_compile_options o;
    sj_compile_options_init(&o);
    sj_artifact *a;
    assert_int_equal(sj_compile(g, 16, &o, &a), SJ_OK);
    uint64_t seed = 3;
    sj_tensor in[2] = {{0}}, out[2] = {{0}};
    h_inputs(g, 100, &seed, in);
    assert_int_equal(h_run(dev, a, g, 100, in, out), SJ_E_OUT_OF_RANGE);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "outside the bucket 1..16"));
    assert_int_equal(h_run(dev, a, g, 0, in, out), SJ_E_OUT_OF_RANGE);
    assert_int_equal(h_run(dev, a, g, 15, in, out), SJ_E_SHAPE); /* inputs made for 100 */
    h_free_tensors(ctx, in, 2);
    h_inputs(g, 8, &seed, in);
    in[1].dtype = SJ_I32; /* the mask's bytes read as int32 */
    assert_int_equal(h_run(dev, a, g, 8, in, out), SJ_E_SHAPE);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "input 1 is not the graph's int64"));
    in[1].dtype = SJ_I64;
    assert_int_equal(h_run(dev, a, g, 8, in, out), SJ_OK);
    h_free_tensors(ctx, out, g->n_outputs);
    h_free_tensors(ctx, in, 2);
    sj_artifact_destroy(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_int64_inputs_match, rig_setup, rig_teardown),
        cmocka_unit_test_setup_teardown(test_refuses_what_the_executor_refuses, rig_setup,
                                        rig_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
