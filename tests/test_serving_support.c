/* What the HTTP endpoint needs from the library: sj_graph_rows_independent
 * (proved, never guessed: every op that mixes rows is refused, and safe
 * graphs are accepted) and zero-stall promotion (sj_engine_run_ready runs
 * a request in a larger ready bucket with the same result, reports it, and
 * sj_engine_prepare_bucket / sj_bucketed_cache_ready_at_least see it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>

#include "shapejit/engine.h"

#include "tests/test_util.h"

static sj_ctx *ctx;
static float wdata[8 * 8];

static sj_graph *new_graph(sj_value *x, int64_t d0, int64_t d1) {
    sj_graph *g;
    assert_int_equal(sj_graph_create(ctx, "N", &g), SJ_OK);
    int64_t xd[] = {d0, d1};
    assert_int_equal(sj_graph_input(g, "x", 2, xd, x), SJ_OK);
    return g;
}

static sj_value param(sj_graph *g, const char *name, int64_t r, int64_t c) {
    int64_t d[] = {r, c};
    sj_value v;
    assert_int_equal(sj_graph_param(g, name, 2, d, wdata, &v), SJ_OK);
    return v;
}

static void expect(sj_graph *g, bool want, const char *why_part) {
    bool ok = !want;
    char why[256];
    assert_int_equal(sj_graph_rows_independent(g, &ok, why, sizeof why), SJ_OK);
    if (ok != want) fail_msg("expected %s, got %s (%s)", want ? "independent" : "dependent", ok ? "independent" : "dependent", why);
    if (!want && !strstr(why, why_part)) fail_msg("reason '%s' does not name '%s'", why, why_part);
    sj_graph_destroy(g);
}

static void rows_mlp_and_layernorm_are_independent(void **state) {
    (void)state;
    sj_value x, h, y, s, b, ln;
    sj_graph *g = new_graph(&x, SJ_DIM_SYM, 8);
    assert_int_equal(sj_graph_matmul(g, x, param(g, "w", 8, 8), &h), SJ_OK);
    assert_int_equal(sj_graph_unary(g, SJ_OP_RELU, h, &y), SJ_OK);
    int64_t vd[] = {8};
    assert_int_equal(sj_graph_param(g, "s", 1, vd, wdata, &s), SJ_OK);
    assert_int_equal(sj_graph_param(g, "b", 1, vd, wdata, &b), SJ_OK);
    assert_int_equal(sj_graph_layernorm(g, y, s, b, -1, 1e-5f, &ln), SJ_OK);
    sj_value sm, r;
    assert_int_equal(sj_graph_softmax(g, SJ_OP_SOFTMAX, ln, 1, &sm), SJ_OK);
    int axis1 = 1;
    assert_int_equal(sj_graph_reduce(g, SJ_OP_REDUCE_SUM, sm, 1, &axis1, true, &r), SJ_OK);
    sj_value out;
    assert_int_equal(sj_graph_binary(g, SJ_OP_MUL, sm, r, &out), SJ_OK);
    assert_int_equal(sj_graph_output(g, out, "y"), SJ_OK);
    expect(g, true, NULL);
}

static void rows_gemm_transpose_reshape_are_followed(void **state) {
    (void)state;
    sj_value x, y, t, tt, rs;
    sj_graph *g = new_graph(&x, SJ_DIM_SYM, 8);
    assert_int_equal(sj_graph_gemm(g, x, param(g, "w", 8, 8), SJ_NO_VALUE, 1, 0, false, false, &y), SJ_OK);
    int perm[] = {1, 0};
    assert_int_equal(sj_graph_transpose(g, y, perm, &t), SJ_OK); /* rows now on axis 1 */
    assert_int_equal(sj_graph_transpose(g, t, perm, &tt), SJ_OK);
    int64_t rd[] = {SJ_DIM_SYM, 2, 4};
    assert_int_equal(sj_graph_reshape(g, tt, 3, rd, &rs), SJ_OK); /* splits each row: rows stay */
    assert_int_equal(sj_graph_output(g, rs, "y"), SJ_OK);
    expect(g, true, NULL);
}

static void rows_mixing_ops_are_refused(void **state) {
    (void)state;
    sj_value x, v;
    int axis0 = 0;
    /* A reduction over the rows. */
    sj_graph *g = new_graph(&x, SJ_DIM_SYM, 8);
    assert_int_equal(sj_graph_reduce(g, SJ_OP_REDUCE_MEAN, x, 1, &axis0, true, &v), SJ_OK);
    assert_int_equal(sj_graph_output(g, v, "y"), SJ_OK);
    expect(g, false, "reduces over the request rows");
    /* A softmax over the rows. */
    g = new_graph(&x, SJ_DIM_SYM, 8);
    assert_int_equal(sj_graph_softmax(g, SJ_OP_SOFTMAX, x, 0, &v), SJ_OK);
    assert_int_equal(sj_graph_output(g, v, "y"), SJ_OK);
    expect(g, false, "normalises over the request rows");
    /* Attention scores x @ x^T contract rows with rows. */
    g = new_graph(&x, SJ_DIM_SYM, 8);
    int perm[] = {1, 0};
    sj_value xt;
    assert_int_equal(sj_graph_transpose(g, x, perm, &xt), SJ_OK);
    assert_int_equal(sj_graph_matmul(g, x, xt, &v), SJ_OK);
    assert_int_equal(sj_graph_output(g, v, "y"), SJ_OK);
    expect(g, false, "both operands depend on the request rows");
    /* w @ x contracts over the rows. */
    g = new_graph(&x, SJ_DIM_SYM, 8);
    sj_value xt2;
    assert_int_equal(sj_graph_transpose(g, x, perm, &xt2), SJ_OK);
    assert_int_equal(sj_graph_matmul(g, param(g, "w", 8, 8), xt2, &v), SJ_OK); /* [8, N]: rows on the last axis */
    assert_int_equal(sj_graph_matmul(g, v, x, &v), SJ_OK);                    /* contracts N */
    assert_int_equal(sj_graph_output(g, v, "y"), SJ_OK);
    expect(g, false, "both operands depend");
    /* The rows on the second axis of the input. */
    g = new_graph(&x, 8, SJ_DIM_SYM);
    assert_int_equal(sj_graph_output(g, x, "y"), SJ_OK);
    expect(g, false, "does not have the dynamic dim first");
    /* An output without the rows (a layernorm over them is refused first). */
    sj_value s, b;
    int64_t vd[] = {8};
    g = new_graph(&x, SJ_DIM_SYM, 8);
    assert_int_equal(sj_graph_param(g, "s", 1, vd, wdata, &s), SJ_OK);
    assert_int_equal(sj_graph_param(g, "b", 1, vd, wdata, &b), SJ_OK);
    assert_int_equal(sj_graph_layernorm(g, x, s, b, 0, 1e-5f, &v), SJ_OK);
    assert_int_equal(sj_graph_output(g, v, "y"), SJ_OK);
    expect(g, false, "normalises over the request rows");
    /* A second input without the dynamic dim: requests cannot be stacked. */
    g = new_graph(&x, SJ_DIM_SYM, 8);
    int64_t gd[] = {1, 8};
    sj_value gain;
    assert_int_equal(sj_graph_input(g, "gain", 2, gd, &gain), SJ_OK);
    assert_int_equal(sj_graph_binary(g, SJ_OP_MUL, x, gain, &v), SJ_OK);
    assert_int_equal(sj_graph_output(g, v, "y"), SJ_OK);
    expect(g, false, "has no dynamic dim");
}

/* The ops exported models use around their rows: embedding lookups,
 * where, expand, slices and concats beside the rows, masks over other axes,
 * attention batched along the rows. */
static void rows_through_lookups_and_batched_attention(void **state) {
    (void)state;
    sj_value x, ids, tab, e, c, w, ex, sl, cat, q, kt, s, tri, a, o;
    sj_graph *g;
    assert_int_equal(sj_graph_create(ctx, "N", &g), SJ_OK);
    assert_int_equal(sj_graph_input(g, "x", 3, (int64_t[]){SJ_DIM_SYM, 4, 8}, &x), SJ_OK);
    assert_int_equal(sj_graph_input_typed(g, "ids", SJ_I64, 2, (int64_t[]){SJ_DIM_SYM, 4}, &ids), SJ_OK);
    tab = param(g, "table", 8, 8);
    assert_int_equal(sj_graph_gather(g, tab, ids, 0, &e), SJ_OK); /* [N, 4, 8] */
    assert_int_equal(sj_graph_unary(g, SJ_OP_ISNAN, x, &c), SJ_OK);
    assert_int_equal(sj_graph_where(g, c, e, x, &w), SJ_OK);
    assert_int_equal(sj_graph_expand(g, w, 4, (int64_t[]){2, SJ_DIM_SYM, 4, 8}, &ex), SJ_OK);
    assert_int_equal(sj_graph_slice(g, w, (sj_slice_axis[]){{0, 0, 1, SJ_DIM_SYM}, {1, 0, 1, 2},
                                                          {0, 0, 1, 8}}, &sl), SJ_OK);
    assert_int_equal(sj_graph_concat(g, w, sl, 1, &cat), SJ_OK); /* [N, 6, 8] */
    assert_int_equal(sj_graph_transpose(g, cat, (int[]){0, 2, 1}, &kt), SJ_OK);
    q = cat;
    assert_int_equal(sj_graph_matmul(g, q, kt, &s), SJ_OK); /* [N, 6, 6], per row */
    assert_int_equal(sj_graph_trilu(g, s, false, 0, &tri), SJ_OK);
    assert_int_equal(sj_graph_softmax(g, SJ_OP_SOFTMAX, tri, -1, &a), SJ_OK);
    assert_int_equal(sj_graph_matmul(g, a, cat, &o), SJ_OK);
    assert_int_equal(sj_graph_output(g, o, "o"), SJ_OK);
    assert_int_equal(sj_graph_reduce(g, SJ_OP_REDUCE_SUM, ex, 1, (int[]){0}, false, &o), SJ_OK);
    assert_int_equal(sj_graph_output(g, o, "ex"), SJ_OK);
    expect(g, true, NULL);
}

/* Positions along the rows differ in a stacked batch from a request's own:
 * any value built from them is refused beside the rows, as are ops that
 * pick, slice, join or mask along the rows. */
static void rows_positions_and_picks_are_refused(void **state) {
    (void)state;
    sj_value x, r, rc, v, i;
    /* a range of row positions added to the rows */
    sj_graph *g = new_graph(&x, SJ_DIM_SYM, 8);
    assert_int_equal(sj_graph_range(g, SJ_F32, 0, 1, SJ_DIM_SYM, &r), SJ_OK);
    assert_int_equal(sj_graph_reshape(g, r, 2, (int64_t[]){SJ_DIM_SYM, 1}, &rc), SJ_OK);
    assert_int_equal(sj_graph_binary(g, SJ_OP_ADD, x, rc, &v), SJ_OK);
    assert_int_equal(sj_graph_output(g, v, "y"), SJ_OK);
    expect(g, false, "depend on their positions");
    /* a table sliced to n rows (position embeddings) */
    g = new_graph(&x, SJ_DIM_SYM, 8);
    sj_value tab = param(g, "pos", 8, 8), t;
    assert_int_equal(sj_graph_slice(g, tab, (sj_slice_axis[]){{0, 0, 1, SJ_DIM_SYM}, {0, 0, 1, 8}}, &t),
                     SJ_OK);
    assert_int_equal(sj_graph_binary(g, SJ_OP_ADD, x, t, &v), SJ_OK);
    assert_int_equal(sj_graph_output(g, v, "y"), SJ_OK);
    expect(g, false, "depend on their positions");
    /* a slice that drops the first row */
    g = new_graph(&x, SJ_DIM_SYM, 8);
    assert_int_equal(sj_graph_slice(g, x, (sj_slice_axis[]){{-1, 1, -1, SJ_DIM_SYM}, {0, 0, 1, 8}}, &v),
                     SJ_OK);
    assert_int_equal(sj_graph_output(g, v, "y"), SJ_OK);
    expect(g, false, "slices the request rows");
    /* rows joined beside rows along another axis stay rows */
    g = new_graph(&x, SJ_DIM_SYM, 8);
    assert_int_equal(sj_graph_reshape(g, x, 3, (int64_t[]){SJ_DIM_SYM, 8, 1}, &v), SJ_OK);
    assert_int_equal(sj_graph_concat(g, v, v, 2, &v), SJ_OK);
    assert_int_equal(sj_graph_output(g, v, "y"), SJ_OK);
    expect(g, true, NULL);
    /* constant picks along the rows */
    g = new_graph(&x, SJ_DIM_SYM, 8);
    assert_int_equal(sj_graph_param_typed(g, "i", SJ_I64, 1, (int64_t[]){1}, (int64_t[]){0}, &i), SJ_OK);
    assert_int_equal(sj_graph_gather(g, x, i, 0, &v), SJ_OK);
    assert_int_equal(sj_graph_output(g, v, "y"), SJ_OK);
    expect(g, false, "picks along the request rows");
    /* a triangle over the rows */
    g = new_graph(&x, SJ_DIM_SYM, 8);
    assert_int_equal(sj_graph_trilu(g, x, true, 0, &v), SJ_OK);
    assert_int_equal(sj_graph_output(g, v, "y"), SJ_OK);
    expect(g, false, "masks by position along the request rows");
}

/* mask [N, 7] flattened to [7N, 1] and gathered at arange(N) * 7 +
 * arange(7) (TorchScript's mask expansion): row r reads row r only. `mul`
 * and `last` vary the arithmetic; `tuple` writes it as GatherND of
 * (arange(N), arange(7)) pairs instead (dynamo's). */
static sj_graph *mask_lookup(int64_t mul, int64_t last, bool tuple, bool second_moves) {
    sj_value x, m, r, ru, k, j, idx, got, out;
    sj_graph *g = new_graph(&x, SJ_DIM_SYM, 7);
    assert_int_equal(sj_graph_range(g, SJ_I64, 0, 1, SJ_DIM_SYM, &r), SJ_OK);
    assert_int_equal(sj_graph_reshape(g, r, 2, (int64_t[]){SJ_DIM_SYM, 1}, &ru), SJ_OK);
    int64_t js[7];
    for (int i = 0; i < 7; i++) js[i] = i * last / 6;
    assert_int_equal(sj_graph_param_typed(g, "j", SJ_I64, 2, (int64_t[]){1, 7}, js, &j), SJ_OK);
    if (!tuple) {
        assert_int_equal(sj_graph_reshape(g, x, 2, (int64_t[]){SJ_DIM_SYM_TIMES(7), 1}, &m), SJ_OK);
        assert_int_equal(sj_graph_param_typed(g, "k", SJ_I64, 0, NULL, (int64_t[]){mul}, &k), SJ_OK);
        assert_int_equal(sj_graph_binary(g, SJ_OP_MUL, ru, k, &idx), SJ_OK);
        assert_int_equal(sj_graph_binary(g, SJ_OP_ADD, idx, j, &idx), SJ_OK); /* [N, 7] */
        assert_int_equal(sj_graph_gather(g, m, idx, 0, &got), SJ_OK);        /* [N, 7, 1] */
        assert_int_equal(sj_graph_reshape(g, got, 2, (int64_t[]){SJ_DIM_SYM, 7}, &out), SJ_OK);
    } else {
        sj_value b, c, pair;
        assert_int_equal(sj_graph_expand(g, ru, 2, (int64_t[]){SJ_DIM_SYM, 7}, &b), SJ_OK);
        assert_int_equal(sj_graph_expand(g, second_moves ? ru : j, 2, (int64_t[]){SJ_DIM_SYM, 7}, &c),
                         SJ_OK);
        assert_int_equal(sj_graph_reshape(g, b, 3, (int64_t[]){SJ_DIM_SYM, 7, 1}, &b), SJ_OK);
        assert_int_equal(sj_graph_reshape(g, c, 3, (int64_t[]){SJ_DIM_SYM, 7, 1}, &c), SJ_OK);
        assert_int_equal(sj_graph_concat(g, b, c, 2, &pair), SJ_OK);
        assert_int_equal(sj_graph_gather_nd(g, x, pair, 0, &out), SJ_OK); /* [N, 7] */
    }
    assert_int_equal(sj_graph_output(g, out, "y"), SJ_OK);
    return g;
}

static void rows_own_positions_are_followed(void **state) {
    (void)state;
    expect(mask_lookup(7, 6, false, false), true, NULL);
    expect(mask_lookup(7, 6, true, false), true, NULL);
    /* row r reading row r - 1's entries, or past its own */
    expect(mask_lookup(6, 6, false, false), false, "depend on their positions");
    expect(mask_lookup(7, 7, false, false), false, "depend on their positions");
    /* the second coordinate moving with the row: (r, r) is a position */
    expect(mask_lookup(7, 6, true, true), false, "depend on their positions");
}

/* An exported conv net (timm's ResNet topology, batch dynamic) is proved
 * row-independent, and a stacked batch of 3 images gives each image's
 * result alone. */
static void rows_of_an_exported_conv_net(void **state) {
    (void)state;
    const char *path = SJ_SOURCE_DIR "/tests/data/real_models/resnet18_dynamo/model.onnx";
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.ladder = "list:1,4";
    cfg.store_path = NULL;
    sj_engine *e;
    assert_int_equal(sj_engine_open(ctx, path, &cfg, &e), SJ_OK);
    bool ok;
    char why[256];
    assert_int_equal(sj_graph_rows_independent(sj_engine_graph(e), &ok, why, sizeof why), SJ_OK);
    if (!ok) fail_msg("resnet18_dynamo: %s", why);
    enum { PIX = 3 * 32 * 32 };
    static float imgs[3 * PIX];
    for (int i = 0; i < 3 * PIX; i++) imgs[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    sj_named_tensor in = {"pixel_values", {.dtype = SJ_F32, .rank = 4, .dims = {3, 3, 32, 32}, .data = imgs}};
    sj_named_tensor all;
    assert_int_equal(sj_engine_run(e, &in, 1, &all, 1, NULL), SJ_OK);
    int64_t classes = all.tensor.dims[1];
    for (int b = 0; b < 3; b++) {
        sj_named_tensor one = {"pixel_values", {.dtype = SJ_F32, .rank = 4, .dims = {1, 3, 32, 32},
                                                .data = imgs + b * PIX}};
        sj_named_tensor alone;
        assert_int_equal(sj_engine_run(e, &one, 1, &alone, 1, NULL), SJ_OK);
        const float *got = (const float *)all.tensor.data + b * classes, *want = alone.tensor.data;
        for (int64_t c = 0; c < classes; c++)
            if (fabsf(got[c] - want[c]) > 1e-4f * (1 + fabsf(want[c])))
                fail_msg("image %d class %lld: %g stacked, %g alone", b, (long long)c, got[c], want[c]);
        sj_tensor_free(ctx, &alone.tensor);
    }
    sj_tensor_free(ctx, &all.tensor);
    sj_engine_close(e);
}

/* Every transformers export here, batch dynamic at seq 7, is proved
 * row-independent, and BERT's stacked batch of 3 gives each sequence's
 * result alone. */
static void rows_of_exported_transformers(void **state) {
    (void)state;
    static const char *const names[] = {"bert", "distilbert", "gpt2", "llama", "roberta", "bloom"};
    sj_dim_value seq[] = {{"seq", 7}};
    for (int i = 0; i < 12; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/tests/data/real_models/%s_%s/model.onnx", SJ_SOURCE_DIR,
                 names[i / 2], i % 2 ? "dynamo" : "torchscript");
        sj_engine_config cfg;
        sj_engine_config_init(&cfg);
        cfg.ladder = "list:1,4";
        cfg.model.dynamic_name = "batch";
        cfg.model.fixed_dims = seq;
        cfg.model.n_fixed_dims = 1;
        sj_engine *e;
        if (sj_engine_open(ctx, path, &cfg, &e) != SJ_OK) fail_msg("%s: %s", path, sj_ctx_last_error(ctx));
        bool ok;
        char why[256];
        assert_int_equal(sj_graph_rows_independent(sj_engine_graph(e), &ok, why, sizeof why), SJ_OK);
        if (!ok) fail_msg("%s: %s", path, why);
        if (i == 0) {
            static int64_t ids[3 * 7], mask[3 * 7];
            for (int t = 0; t < 3 * 7; t++) ids[t] = (t * 29) % 100, mask[t] = t % 7 < 7 - t / 7;
            sj_named_tensor in[2] = {{"input_ids", {.dtype = SJ_I64, .rank = 2, .dims = {3, 7}, .i64 = ids}},
                                     {"attention_mask", {.dtype = SJ_I64, .rank = 2, .dims = {3, 7}, .i64 = mask}}};
            int n_out = sj_engine_num_outputs(e);
            sj_named_tensor all[4], alone[4];
            assert_int_equal(sj_engine_run(e, in, 2, all, n_out, NULL), SJ_OK);
            for (int b = 0; b < 3; b++) {
                sj_named_tensor one[2] = {in[0], in[1]};
                for (int k = 0; k < 2; k++) {
                    one[k].tensor.dims[0] = 1;
                    one[k].tensor.i64 += b * 7;
                }
                assert_int_equal(sj_engine_run(e, one, 2, alone, n_out, NULL), SJ_OK);
                for (int o = 0; o < n_out; o++) {
                    int64_t row = sj_tensor_numel(&alone[o].tensor);
                    const float *got = all[o].tensor.data + b * row, *want = alone[o].tensor.data;
                    for (int64_t c = 0; c < row; c++)
                        if (fabsf(got[c] - want[c]) > 1e-4f * (1 + fabsf(want[c])))
                            fail_msg("bert output %d row %d entry %lld: %g stacked, %g alone", o, b,
                                     (long long)c, got[c], want[c]);
                    sj_tensor_free(ctx, &alone[o].tensor);
                }
            }
            for (int o = 0; o < n_out; o++) sj_tensor_free(ctx, &all[o].tensor);
        }
        sj_engine_close(e);
    }
}

/* y = relu(x @ w) on a ladder list:2,4,8 with the interpreter. */
static sj_engine *small_engine(void) {
    sj_value x, h, y;
    sj_graph *g = new_graph(&x, SJ_DIM_SYM, 8);
    assert_int_equal(sj_graph_matmul(g, x, param(g, "w", 8, 8), &h), SJ_OK);
    assert_int_equal(sj_graph_unary(g, SJ_OP_RELU, h, &y), SJ_OK);
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.backend = "interp";
    cfg.ladder = "list:2,4,8";
    sj_engine *e;
    assert_int_equal(sj_engine_open_graph(ctx, g, &cfg, &e), SJ_OK);
    return e;
}

static void run3(sj_engine *e, bool promote, sj_engine_run_report *rep, float *y) {
    float x[3 * 8];
    for (int i = 0; i < 24; i++) x[i] = (float)(i % 5) - 2.0f;
    sj_named_tensor in[1] = {{"x", {.rank = 2, .dims = {3, 8}, .data = x}}};
    sj_named_tensor out[1];
    assert_int_equal(sj_engine_run_ready(e, in, 1, out, 1, promote, rep), SJ_OK);
    assert_int_equal(out[0].tensor.dims[0], 3);
    memcpy(y, out[0].tensor.data, 24 * sizeof *y);
    sj_tensor_free(ctx, &out[0].tensor);
}

static void promotion_runs_in_a_larger_ready_bucket(void **state) {
    (void)state;
    sj_engine *e = small_engine();
    bool ready;
    /* Nothing ready: a promoting run waits for its own bucket (4). */
    float own[24], promoted[24];
    sj_engine_run_report rep;
    run3(e, true, &rep, own);
    assert_false(rep.promoted);
    assert_int_equal(rep.own_bucket, 1);
    assert_int_equal(rep.info.bucket, 4);
    assert_int_not_equal(rep.info.wait, SJ_RUN_READY);
    sj_engine_close(e);

    e = small_engine();
    assert_int_equal(sj_engine_prepare_bucket(e, 2), SJ_OK); /* only 8 is ready */
    assert_int_equal(sj_engine_bucket(e, 2, NULL, NULL, &ready), SJ_OK);
    assert_true(ready);
    assert_int_equal(sj_engine_bucket(e, 1, NULL, NULL, &ready), SJ_OK);
    assert_false(ready);
    run3(e, true, &rep, promoted);
    assert_true(rep.promoted);
    assert_int_equal(rep.own_bucket, 1);
    assert_int_equal(rep.info.bucket, 8);
    assert_int_equal(rep.info.wait, SJ_RUN_READY);
    assert_memory_equal(own, promoted, sizeof own); /* exact: kernels run at 3 rows */
    /* Its own bucket stays cold until someone prepares it. */
    assert_int_equal(sj_engine_bucket(e, 1, NULL, NULL, &ready), SJ_OK);
    assert_false(ready);
    /* Without promotion it waits for its own. */
    run3(e, false, &rep, promoted);
    assert_false(rep.promoted);
    assert_int_equal(rep.info.bucket, 4);
    assert_int_not_equal(rep.info.wait, SJ_RUN_READY);
    assert_memory_equal(own, promoted, sizeof own);
    /* Now ready, a promoting run stays in its own bucket. */
    run3(e, true, &rep, promoted);
    assert_false(rep.promoted);
    assert_int_equal(rep.info.bucket, 4);
    assert_int_equal(rep.info.wait, SJ_RUN_READY);
    assert_int_equal(sj_engine_prepare_bucket(e, 3), SJ_E_OUT_OF_RANGE);
    assert_int_equal(sj_engine_prepare_bucket(e, -1), SJ_E_OUT_OF_RANGE);
    sj_engine_close(e);
}

static int setup(void **state) {
    (void)state;
    for (int i = 0; i < 64; i++) wdata[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    return sj_ctx_create(NULL, &ctx) == SJ_OK ? 0 : -1;
}
static int teardown(void **state) {
    (void)state;
    sj_ctx_destroy(ctx);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rows_mlp_and_layernorm_are_independent),
        cmocka_unit_test(rows_gemm_transpose_reshape_are_followed),
        cmocka_unit_test(rows_mixing_ops_are_refused),
        cmocka_unit_test(rows_through_lookups_and_batched_attention),
        cmocka_unit_test(rows_positions_and_picks_are_refused),
        cmocka_unit_test(rows_own_positions_are_followed),
        cmocka_unit_test(rows_of_an_exported_conv_net),
        cmocka_unit_test(rows_of_exported_transformers),
        cmocka_unit_test(promotion_runs_in_a_larger_ready_bucket),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
