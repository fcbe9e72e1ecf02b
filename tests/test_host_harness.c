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

#include "tests/host_harness.h"

#define BERT SJ_SOURCE_DIR "/tests/data/real_models/bert_torchscript/model.onnx"

/* The fixture, its graph the exported BERT. */
static int bert_setup(void **state) {
    if (h_fixture_setup(state, 0x5eed) != 0) return -1;
    fixture *f = *state;
    sj_graph_destroy(f->g);
    f->g = h_load_exported(f->ctx, BERT);
    int int64_inputs = 0;
    for (int i = 0; i < f->g->n_inputs; i++) int64_inputs += f->g->nodes[f->g->inputs[i]].dtype == SJ_I64;
    assert_int_equal(int64_inputs, 2); /* input_ids and attention_mask: what this is about */
    return 0;
}

/* h_run and the executable both match the interpreter on [1, seq] int64
 * ids and mask, at seq 1, in between and the bucket's 16. */
static void test_int64_inputs_match(void **state) {
    fixture *f = *state;
    sj_compile_options o;
    sj_compile_options_init(&o);
    const int64_t ns[] = {1, 5, 15, 16};
    assert_true(h_check(f->dev, f->g, 16, ns, 4, &o, f->seed, 1e-3, BERT));
}

/* A request the executor refuses, h_run refuses too, before it copies a
 * byte: seq past the bucket (it wrote 100 rows into 64-row buffers), and
 * an input of the wrong dtype or length. */
static void test_refuses_what_the_executor_refuses(void **state) {
    fixture *f = *state;
    sj_ctx *ctx = f->ctx;
    sj_device *dev = f->dev;
    sj_graph *g = f->g;
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
        cmocka_unit_test_setup_teardown(test_int64_inputs_match, bert_setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refuses_what_the_executor_refuses, bert_setup,
                                        h_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
