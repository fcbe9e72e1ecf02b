/* Layout ops (slice, concat, expand, trilu): their semantics on known
 * values in the interpreter, the host backend against the interpreter with
 * NaN-poisoned padding at extents 1, bucket-min, bucket-max and between
 * (fused, unfused, through cblas, unoptimised), the extent ceiling of a
 * table sliced to n rows, builder errors, and the .sjg round trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "shapejit/model.h"
#include "tests/gpu_graphs.h"
#include "tests/host_harness.h"

#define S SJ_DIM_SYM
#define TOL 2e-4

static int setup(void **state) { return h_fixture_setup(state, 0); }

static sj_value iota_param(fixture *f, const char *name, int rank, const int64_t *dims) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    float *d = malloc((size_t)n * sizeof *d);
    for (int64_t i = 0; i < n; i++) d[i] = (float)i * 0.25f - 3.0f;
    sj_value v;
    assert_int_equal(sj_graph_param(f->g, name, rank, dims, d, &v), SJ_OK);
    free(d);
    return v;
}

/* Extents 1, bucket-min (33), bucket-max (64) and between, in bucket 64,
 * plus the one-element bucket; fused, through cblas, unfused, at -O0. */
static void check_buckets(fixture *f, const sj_graph *g, const char *what) {
    sj_compile_options o;
    sj_compile_options_init(&o);
    static const int64_t ns[] = {1, 33, 64, 47};
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    assert_true(h_check(f->dev, g, 64, ns, 4, &o, seed, TOL, what));
    assert_true(h_check(f->dev, g, 1, ns, 1, &o, seed + 1, TOL, what));
    o.blas_min_work = 1;
    assert_true(h_check(f->dev, g, 64, ns, 4, &o, seed + 2, TOL, what));
    o.blas_min_work = 0;
    o.fusion = false;
    assert_true(h_check(f->dev, g, 64, ns, 4, &o, seed + 3, TOL, what));
    o.fusion = true;
    o.opt_level = 0;
    assert_true(h_check(f->dev, g, 64, ns, 4, &o, seed + 4, TOL, what));
}

/* ---- semantics on known values (interpreter) ---- */

static void test_slice_values(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 3}), rev, last, mid;
    assert_int_equal(sj_graph_slice(f->g, x, (sj_slice_axis[]){{-1, 1, -1, S}, {2, 0, -1, 3}}, &rev),
                     SJ_OK);
    assert_int_equal(sj_graph_slice(f->g, x, (sj_slice_axis[]){{-1, 1, 1, 1}, {0, 0, 1, 3}}, &last),
                     SJ_OK);
    assert_int_equal(sj_graph_slice(f->g, x, (sj_slice_axis[]){{0, 0, 1, S}, {1, 0, 1, 1}}, &mid),
                     SJ_OK);
    assert_int_equal(sj_graph_output(f->g, rev, "rev"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, last, "last"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, mid, "mid"), SJ_OK);
    float xd[] = {0, 1, 2, 3, 4, 5};
    sj_tensor in = {.rank = 2, .dims = {2, 3}, .data = xd}, out[3];
    assert_int_equal(sj_interp_run(f->g, 2, &in, out), SJ_OK);
    const float want_rev[] = {5, 4, 3, 2, 1, 0}, want_last[] = {3, 4, 5}, want_mid[] = {1, 4};
    for (int i = 0; i < 6; i++) assert_true(out[0].data[i] == want_rev[i]);
    for (int i = 0; i < 3; i++) assert_true(out[1].data[i] == want_last[i]);
    for (int i = 0; i < 2; i++) assert_true(out[2].data[i] == want_mid[i]);
    h_free_tensors(f->ctx, out, 3);
}

static void test_concat_expand_trilu_values(void **state) {
    fixture *f = *state;
    sj_value a = input(f, "a", 2, (int64_t[]){2, 2}), b = input(f, "b", 2, (int64_t[]){2, 1});
    sj_value c, e, up, lo;
    assert_int_equal(sj_graph_concat(f->g, a, b, 1, &c), SJ_OK);
    assert_int_equal(sj_graph_expand(f->g, b, 3, (int64_t[]){2, 1, 3}, &e), SJ_OK);
    assert_int_equal(sj_graph_trilu(f->g, c, true, 1, &up), SJ_OK);
    assert_int_equal(sj_graph_trilu(f->g, c, false, -1, &lo), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, c, "c"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, e, "e"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, up, "up"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, lo, "lo"), SJ_OK);
    float ad[] = {1, 2, 3, 4}, bd[] = {5, 6};
    sj_tensor in[2] = {{.rank = 2, .dims = {2, 2}, .data = ad}, {.rank = 2, .dims = {2, 1}, .data = bd}};
    sj_tensor out[4];
    assert_int_equal(sj_interp_run(f->g, 1, in, out), SJ_OK);
    const float wc[] = {1, 2, 5, 3, 4, 6}, we[] = {5, 5, 5, 6, 6, 6, 5, 5, 5, 6, 6, 6};
    const float wu[] = {0, 2, 5, 0, 0, 6}, wl[] = {0, 0, 0, 3, 0, 0};
    assert_int_equal(out[1].rank, 3);
    assert_int_equal(out[1].dims[0], 2);
    for (int i = 0; i < 6; i++) assert_true(out[0].data[i] == wc[i]);
    for (int i = 0; i < 12; i++) assert_true(out[1].data[i] == we[i]);
    for (int i = 0; i < 6; i++) assert_true(out[2].data[i] == wu[i]);
    for (int i = 0; i < 6; i++) assert_true(out[3].data[i] == wl[i]);
    h_free_tensors(f->ctx, out, 4);
}

/* The graph's two outputs at 2 rows are w0 and w1 exactly, on the
 * interpreter and on the host backend at a bucket above the extent (typed
 * inputs padded by the runtime). */
static void expect_two_outputs(fixture *f, const sj_tensor *in, const float *w0, int n0, const float *w1,
                               int n1) {
    sj_tensor out[2];
    if (sj_interp_run(f->g, 2, in, out) != SJ_OK) fail_msg("%s", sj_ctx_last_error(f->ctx));
    for (int i = 0; i < n0; i++) assert_true(out[0].data[i] == w0[i]);
    for (int i = 0; i < n1; i++) assert_true(out[1].data[i] == w1[i]);
    h_free_tensors(f->ctx, out, 2);
    sj_compile_options o;
    sj_compile_options_init(&o);
    sj_artifact *a = NULL;
    sj_executable *exe = NULL;
    assert_int_equal(sj_compile(f->g, 4, &o, &a), SJ_OK);
    assert_int_equal(sj_artifact_load(a, f->dev, f->g, &exe), SJ_OK);
    sj_tensor ran[2] = {0};
    if (sj_executable_run(exe, 2, in, ran) != SJ_OK) fail_msg("%s", sj_ctx_last_error(f->ctx));
    for (int i = 0; i < n0; i++) assert_true(ran[0].data[i] == w0[i]);
    for (int i = 0; i < n1; i++) assert_true(ran[1].data[i] == w1[i]);
    h_free_tensors(f->ctx, ran, 2);
    sj_executable_destroy(exe);
    sj_artifact_destroy(a);
}

static void test_gather_elements(void **state) {
    fixture *f = *state;
    sj_value d = input(f, "d", 2, (int64_t[]){S, 3}), ix, y0, y1;
    assert_int_equal(sj_graph_input_typed(f->g, "ix", SJ_I64, 2, (int64_t[]){S, 2}, &ix), SJ_OK);
    assert_int_equal(sj_graph_gather_elements(f->g, d, ix, 1, &y1), SJ_OK);
    assert_int_equal(sj_graph_gather_elements(f->g, d, ix, 0, &y0), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y1, "y1"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y0, "y0"), SJ_OK);
    float dd[] = {0, 1, 2, 3, 4, 5};
    int64_t id[] = {2, -1, 7, 0}; /* -1 is the last; 7 is clamped to the last */
    sj_tensor in[2] = {{.rank = 2, .dims = {2, 3}, .data = dd},
                       {.rank = 2, .dims = {2, 2}, .i64 = id, .dtype = SJ_I64}};
    const float w1[] = {2, 2, 5, 3}, w0[] = {3, 4, 3, 1};
    expect_two_outputs(f, in, w1, 4, w0, 4);
    sj_value bad;
    assert_int_equal(sj_graph_gather_elements(f->g, d, d, 0, &bad), SJ_E_SHAPE);
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "not int64"));
}

/* GatherND on known values: tuples into both axes (the symbolic one
 * clamped to the request's rows), a negative coordinate, and batch_dims 1;
 * the host backend at a bucket above the extent gives the same. Shapes it
 * cannot take are refused naming them. */
static void test_gather_nd(void **state) {
    fixture *f = *state;
    sj_value d = input(f, "d", 2, (int64_t[]){S, 3}), ix, ib, y, yb;
    assert_int_equal(sj_graph_input_typed(f->g, "ix", SJ_I64, 2, (int64_t[]){3, 2}, &ix), SJ_OK);
    assert_int_equal(sj_graph_input_typed(f->g, "ib", SJ_I64, 2, (int64_t[]){S, 1}, &ib), SJ_OK);
    assert_int_equal(sj_graph_gather_nd(f->g, d, ix, 0, &y), SJ_OK);
    assert_int_equal(sj_graph_gather_nd(f->g, d, ib, 1, &yb), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, yb, "yb"), SJ_OK);
    float dd[] = {0, 1, 2, 3, 4, 5};
    /* (1, 2); (-1, 0) is (1, 0); (5, 7) is clamped to (1, 2) at 2 rows */
    int64_t id[] = {1, 2, -1, 0, 5, 7}, bd[] = {-1, 1};
    sj_tensor in[3] = {{.rank = 2, .dims = {2, 3}, .data = dd},
                       {.rank = 2, .dims = {3, 2}, .i64 = id, .dtype = SJ_I64},
                       {.rank = 2, .dims = {2, 1}, .i64 = bd, .dtype = SJ_I64}};
    const float w[] = {5, 3, 5}, wb[] = {2, 4};
    expect_two_outputs(f, in, w, 3, wb, 2);
    sj_value bad, i3, i5;
    assert_int_equal(sj_graph_input_typed(f->g, "i3", SJ_I64, 2, (int64_t[]){2, 3}, &i3), SJ_OK);
    assert_int_equal(sj_graph_input_typed(f->g, "i5", SJ_I64, 2, (int64_t[]){5, 1}, &i5), SJ_OK);
    assert_int_equal(sj_graph_gather_nd(f->g, d, d, 0, &bad), SJ_E_SHAPE);
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "not int64"));
    assert_int_equal(sj_graph_gather_nd(f->g, d, i3, 0, &bad), SJ_E_SHAPE); /* 3 coordinates, rank 2 */
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "index tuples of [2, 3]"));
    assert_int_equal(sj_graph_gather_nd(f->g, d, ix, 2, &bad), SJ_E_SHAPE);
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "batch_dims 2"));
    assert_int_equal(sj_graph_gather_nd(f->g, d, i5, 1, &bad), SJ_E_SHAPE); /* 5 against N */
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "batch dim 0"));
}

/* ---- host against the interpreter ---- */

static void test_models(void **state) {
    fixture *f = *state;
    for (int i = GG_N_MODELS - 2; i < GG_N_MODELS; i++) {
        sj_graph *g = NULL;
        const char *name = "";
        assert_int_equal(gg_build(f->ctx, i, 11, &g, &name), SJ_OK);
        check_buckets(f, g, name);
        sj_graph_destroy(g);
    }
}

/* GPT-2's attention input: one projection, q, k and v sliced out of its
 * columns (views read by matmuls, also through cblas), heads by reshape. */
static void test_sliced_projection(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 8}), w = iota_param(f, "w", 2, (int64_t[]){8, 24});
    sj_value qkv, q, k, v, kt, sc, p, o, first;
    assert_int_equal(sj_graph_matmul(f->g, x, w, &qkv), SJ_OK);
    assert_int_equal(sj_graph_slice(f->g, qkv, (sj_slice_axis[]){{0, 0, 1, S}, {0, 0, 1, 8}}, &q), SJ_OK);
    assert_int_equal(sj_graph_slice(f->g, qkv, (sj_slice_axis[]){{0, 0, 1, S}, {8, 0, 1, 8}}, &k), SJ_OK);
    assert_int_equal(sj_graph_slice(f->g, qkv, (sj_slice_axis[]){{0, 0, 1, S}, {16, 0, 1, 8}}, &v), SJ_OK);
    assert_int_equal(sj_graph_transpose(f->g, k, (int[]){1, 0}, &kt), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, q, kt, &sc), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, sc, 1, &p), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, p, v, &o), SJ_OK);
    /* the first token's output (BERT's pooler input) */
    assert_int_equal(sj_graph_slice(f->g, o, (sj_slice_axis[]){{0, 0, 1, 1}, {0, 0, 1, 8}}, &first), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, o, "o"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, first, "first"), SJ_OK);
    check_buckets(f, f->g, "sliced projection");
}

/* Transposes wide enough to run in tiles (host_emit.c's transposed_dim):
 * the innermost output dim the symbolic one or a constant, edges of tiles
 * at both dims (20 = 16 + 4 along the read-in-order dim, 130 = 2 x 64 + 2
 * across), a bias fused in, an outer dim beside them, on one thread and
 * split over three, at extents that end inside a tile. */
static void test_wide_transposes(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 3, (int64_t[]){S, 130, 20}), y = input(f, "y", 2, (int64_t[]){S, 24});
    sj_value z = input(f, "z", 4, (int64_t[]){S, 3, 130, 17});
    sj_value b = iota_param(f, "b", 1, (int64_t[]){130}), xt, xb, yt, zt;
    assert_int_equal(sj_graph_transpose(f->g, x, (int[]){0, 2, 1}, &xt), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_ADD, xt, b, &xb), SJ_OK);
    assert_int_equal(sj_graph_transpose(f->g, y, (int[]){1, 0}, &yt), SJ_OK);
    assert_int_equal(sj_graph_transpose(f->g, z, (int[]){0, 1, 3, 2}, &zt), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, xb, "xb"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, yt, "yt"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, zt, "zt"), SJ_OK);
    sj_host_device_config cfg;
    sj_host_device_config_init(&cfg);
    cfg.threads = 3;
    cfg.wake_share_work = 1; /* split every launch that can be */
    sj_device *split;
    assert_int_equal(sj_host_device_create_config(f->ctx, &cfg, &split), SJ_OK);
    static const int64_t ns[] = {1, 129, 256, 200, 17};
    sj_compile_options o;
    sj_compile_options_init(&o);
    for (int fused = 0; fused < 2; fused++) {
        o.fusion = fused;
        assert_true(h_check(f->dev, f->g, 256, ns, 5, &o, 7 + fused, TOL, "wide transposes"));
        assert_true(h_check(split, f->g, 256, ns, 5, &o, 9 + fused, TOL, "wide transposes, split"));
    }
    sj_device_destroy(split);
}

/* Concat of three (a chain), of computed values, along a leading axis of a
 * rank-3 value with the symbolic dim inside; trilu of batched matrices. */
static void test_concat_and_trilu_shapes(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 3, (int64_t[]){2, S, 4}), y = input(f, "y", 3, (int64_t[]){1, S, 4});
    sj_value ex, c1, c2, t1, t2, sq, e2;
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_EXP, y, &ex), SJ_OK);
    assert_int_equal(sj_graph_concat(f->g, x, ex, 0, &c1), SJ_OK);
    assert_int_equal(sj_graph_concat(f->g, c1, x, 0, &c2), SJ_OK);
    assert_int_equal(sj_graph_trilu(f->g, c2, true, -1, &t1), SJ_OK);
    assert_int_equal(sj_graph_trilu(f->g, c2, false, 2, &t2), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_ADD, t1, t2, &sq), SJ_OK);
    assert_int_equal(sj_graph_expand(f->g, y, 3, (int64_t[]){3, 1, 1}, &e2), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, c2, "c2"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, sq, "sq"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, e2, "e2"), SJ_OK);
    check_buckets(f, f->g, "concat and trilu");
}

/* ---- limits and errors ---- */

/* A 48-row table sliced to n rows works up to n = 48: beyond, the
 * interpreter and lowering refuse, naming the slice. */
static void test_slice_extent_ceiling(void **state) {
    fixture *f = *state;
    sj_value tab = iota_param(f, "tab", 2, (int64_t[]){48, 4}), x = input(f, "x", 2, (int64_t[]){S, 4});
    sj_value rows, y;
    assert_int_equal(sj_graph_slice(f->g, tab, (sj_slice_axis[]){{0, 0, 1, S}, {0, 0, 1, 4}}, &rows), SJ_OK);
    assert_int_equal(sj_graph_set_name(f->g, rows, "pos"), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_ADD, x, rows, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    sj_compile_options o;
    sj_compile_options_init(&o);
    static const int64_t ns[] = {1, 17, 32, 25};
    assert_true(h_check(f->dev, f->g, 32, ns, 4, &o, 5, TOL, "table slice"));
    sj_artifact *a = NULL;
    assert_int_equal(sj_compile(f->g, 64, &o, &a), SJ_E_OUT_OF_RANGE);
    assert_null(a);
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "slice pos"));
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "up to 48"));
    sj_tensor in, out[1];
    uint64_t seed = 3;
    h_inputs(f->g, 49, &seed, &in);
    assert_int_equal(sj_interp_run(f->g, 49, &in, out), SJ_E_OUT_OF_RANGE);
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "slice pos"));
    h_free_tensors(f->ctx, &in, 1);
}

static void test_builder_errors(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 4}), y = input(f, "y", 2, (int64_t[]){S, 3}), v;
    int before = sj_graph_num_values(f->g);
    /* reads column 4 of 4 */
    assert_int_equal(sj_graph_slice(f->g, x, (sj_slice_axis[]){{0, 0, 1, S}, {1, 0, 1, 4}}, &v), SJ_E_SHAPE);
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "outside"));
    /* two rows of the symbolic dim exist only from n = 2 on */
    assert_int_equal(sj_graph_slice(f->g, x, (sj_slice_axis[]){{0, 0, 1, 2}, {0, 0, 1, 4}}, &v), SJ_E_SHAPE);
    assert_int_equal(sj_graph_slice(f->g, x, (sj_slice_axis[]){{0, 0, 0, S}, {0, 0, 1, 4}}, &v),
                     SJ_E_INVALID_ARG);
    assert_int_equal(sj_graph_concat(f->g, x, y, 0, &v), SJ_E_SHAPE); /* widths differ */
    assert_int_equal(sj_graph_concat(f->g, x, y, 2, &v), SJ_E_SHAPE);
    assert_int_equal(sj_graph_expand(f->g, x, 2, (int64_t[]){S, 3}, &v), SJ_E_SHAPE);
    sj_value s;
    assert_int_equal(sj_graph_reduce(f->g, SJ_OP_REDUCE_SUM, x, 1, (int[]){0}, false, &s), SJ_OK);
    assert_int_equal(sj_graph_trilu(f->g, s, true, 0, &v), SJ_E_SHAPE);
    assert_int_equal(sj_graph_num_values(f->g), before + 1);
}

static void test_sjg_round_trip(void **state) {
    fixture *f = *state;
    static const char text[] =
        "graph lay(N) {\n"
        "  input x: [N, 6]\n"
        "  param t: [64, 6] = fill(0.5)\n"
        "  r = slice(x, start=[-1, 5], start_n=[1, 0], step=[-1, -2], shape=[N, 3])\n"
        "  p = slice(t, shape=[N, 6])\n"
        "  c = concat(r, r, axis=1)\n"
        "  e = expand(slice(x, start=[0, 2], shape=[N, 1]), shape=[N, 4])\n"
        "  m = trilu(add(c, p), k=-1, upper=false)\n"
        "  output m\n output e\n"
        "}\n";
    sj_graph *g;
    assert_int_equal(sj_sjg_parse(f->ctx, text, strlen(text), "lay.sjg", NULL, &g), SJ_OK);
    char *printed;
    size_t len;
    assert_int_equal(sj_sjg_print(g, &printed, &len), SJ_OK);
    sj_graph *back;
    assert_int_equal(sj_sjg_parse(f->ctx, printed, len, "printed", NULL, &back), SJ_OK);
    uint8_t h1[32], h2[32];
    sj_graph_hash(g, h1);
    sj_graph_hash(back, h2);
    assert_memory_equal(h1, h2, 32);
    check_buckets(f, g, "sjg layout graph");
    sj_free(f->ctx, printed);
    sj_graph_destroy(back);
    sj_graph_destroy(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_slice_values, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_concat_expand_trilu_values, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gather_elements, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gather_nd, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_models, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_sliced_projection, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_wide_transposes, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_concat_and_trilu_shapes, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_slice_extent_ceiling, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_builder_errors, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_sjg_round_trip, setup, h_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
