/* Dims that are an affine form of the symbolic dim (SJ_DIM_AFFINE, graph.h):
 * multiples, and the symbol plus a constant that a concat along it makes.
 * For multiples:
 * the reshape rule that makes them (a symbolic dim merges only with the dims
 * inside it), the builder's refusals, the .sjg spelling `4*N`, row
 * independence through them, and the host backend against the interpreter
 * with NaN-poisoned padding, on one thread and on split launches, for every
 * kernel kind that bounds a loop by k * n: elementwise, a reduction and a
 * softmax over a k*N axis, a matmul with k*N rows, a gather counting from
 * the active end of a k*N axis, and attention batched over k*N heads. For
 * N + c: the concat that makes it (either side constant), the builder's
 * rules, and a KV-cache step (a cache of N rows grown by one, attended over)
 * on the host against the interpreter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "shapejit/model.h"
#include "tests/gpu_graphs.h"
#include "tests/host_harness.h"

#define S SJ_DIM_SYM
#define S4 SJ_DIM_SYM_TIMES(4)
#define TOL 2e-4

static int setup(void **state) { return h_fixture_setup(state, 7); }

static const char *err(fixture *f) { return sj_ctx_last_error(f->ctx); }

/* Bucket 64 at extents 1, 33, 64 and 47, and the one-element bucket; then
 * the same on two threads with every launch split. */
static void check_buckets(fixture *f, const char *what) {
    sj_compile_options o;
    sj_compile_options_init(&o);
    static const int64_t ns[] = {1, 33, 64, 47};
    assert_true(h_check(f->dev, f->g, 64, ns, 4, &o, 11, TOL, what));
    assert_true(h_check(f->dev, f->g, 1, ns, 1, &o, 12, TOL, what));
    o.fusion = false;
    assert_true(h_check(f->dev, f->g, 64, ns, 4, &o, 13, TOL, what));
    sj_host_device_config cfg;
    sj_host_device_config_init(&cfg);
    cfg.threads = 2;
    cfg.min_part_work = 1;
    cfg.wake_share_work = 1;
    sj_device *threaded;
    assert_int_equal(sj_host_device_create_config(f->ctx, &cfg, &threaded), SJ_OK);
    sj_compile_options_init(&o);
    assert_true(h_check(threaded, f->g, 64, ns, 4, &o, 14, TOL, what));
    sj_device_destroy(threaded);
}

static void test_reshape_rule(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 3, (int64_t[]){S, 4, 8}), t = input(f, "t", 3, (int64_t[]){2, S, 3});
    sj_value v;
    /* merged with the dims inside it, and split back */
    assert_int_equal(sj_graph_reshape(f->g, x, 2, (int64_t[]){S4, 8}, &v), SJ_OK);
    sj_value_desc d;
    assert_int_equal(sj_graph_value_desc(f->g, v, &d), SJ_OK);
    assert_int_equal(d.shape.dims[0], S4);
    assert_int_equal(sj_graph_reshape(f->g, v, 2, (int64_t[]){S, 32}, &v), SJ_OK);
    assert_int_equal(sj_graph_reshape(f->g, x, 2, (int64_t[]){SJ_DIM_SYM_TIMES(32), 1}, &v), SJ_OK);
    assert_int_equal(sj_graph_reshape(f->g, x, 3, (int64_t[]){SJ_DIM_SYM_TIMES(2), 2, 8}, &v), SJ_OK);
    assert_int_equal(sj_graph_reshape(f->g, t, 2, (int64_t[]){2, SJ_DIM_SYM_TIMES(3)}, &v), SJ_OK);
    int before = sj_graph_num_values(f->g);
    /* merged with a dim in front of it: no view (the active rows are no
     * prefix), a compact copy (test_front_merges); a split of the dims
     * behind it that leaves no whole part per row is still refused */
    assert_int_equal(sj_graph_reshape(f->g, t, 2, (int64_t[]){SJ_DIM_SYM_TIMES(3), 2}, &v), SJ_E_SHAPE);
    assert_non_null(strstr(err(f), "in front of the symbolic dim differ"));
    /* a group that loses elements */
    assert_int_equal(sj_graph_reshape(f->g, x, 2, (int64_t[]){S4, 4}, &v), SJ_E_SHAPE);
    assert_non_null(strstr(err(f), "32 vs 16 elements per symbolic index"));
    /* factors past the limit, and params that would hold one (an input
     * may: a run finds N from it) */
    assert_int_equal(sj_graph_reshape(f->g, x, 2, (int64_t[]){-(SJ_MAX_SYM_FACTOR + 1), 8}, &v),
                     SJ_E_SHAPE);
    assert_non_null(strstr(err(f), "neither >= 1 nor SJ_DIM_AFFINE(k, c)"));
    assert_int_equal(sj_graph_input(f->g, "y", 2, (int64_t[]){S4, 8}, &v), SJ_OK);
    assert_int_equal(sj_graph_param(f->g, "w", 1, (int64_t[]){S4}, (float[]){0}, &v), SJ_E_SHAPE);
    /* two k*N parts joined along their axis: the second at the first's
     * active extent */
    sj_value m;
    assert_int_equal(sj_graph_reshape(f->g, x, 2, (int64_t[]){S4, 8}, &m), SJ_OK);
    assert_int_equal(sj_graph_concat(f->g, m, m, 0, &v), SJ_OK);
    assert_int_equal(sj_graph_value_desc(f->g, v, &d), SJ_OK);
    assert_int_equal(d.shape.dims[0], SJ_DIM_SYM_TIMES(8));
    before = sj_graph_num_values(f->g);
    /* a k*N run of a slice is the whole axis or nothing */
    assert_int_equal(sj_graph_slice(f->g, m, (sj_slice_axis[]){{1, 0, 1, S4}, {0, 0, 1, 8}}, &v),
                     SJ_E_UNSUPPORTED);
    assert_non_null(strstr(err(f), "sliced whole or to constant lengths"));
    assert_int_equal(sj_graph_num_values(f->g), before);
    assert_int_equal(sj_graph_slice(f->g, m, (sj_slice_axis[]){{0, 0, 1, S4}, {2, 0, 1, 3}}, &v),
                     SJ_OK);
    assert_int_equal(sj_graph_slice(f->g, m, (sj_slice_axis[]){{1, 0, 1, 3}, {0, 0, 1, 8}}, &v),
                     SJ_OK);
    /* three rows exist at every extent (4 at n = 1); five do not */
    assert_int_equal(sj_graph_slice(f->g, m, (sj_slice_axis[]){{0, 0, 1, 5}, {0, 0, 1, 8}}, &v),
                     SJ_E_SHAPE);
}

/* [N, 4, 8] -> [4N, 8], then every kernel kind over the 4N axis. */
static void test_kernels_over_multiples(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 3, (int64_t[]){S, 4, 8}), m, sm, p, w, mm, red, sc, back;
    assert_int_equal(sj_graph_reshape(f->g, x, 2, (int64_t[]){S4, 8}, &m), SJ_OK);
    /* softmax along the rows' own axis, then a matmul whose rows are 4N */
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, m, -1, &sm), SJ_OK);
    w = param(f, "w", 2, (int64_t[]){8, 16});
    assert_int_equal(sj_graph_matmul(f->g, sm, w, &mm), SJ_OK);
    /* a sum and a softmax over the 4N axis itself: padding must not enter */
    assert_int_equal(sj_graph_reduce(f->g, SJ_OP_REDUCE_SUM, mm, 1, (int[]){0}, false, &red), SJ_OK);
    int perm[2] = {1, 0};
    assert_int_equal(sj_graph_transpose(f->g, mm, perm, &p), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, p, -1, &sc), SJ_OK);
    /* back to [N, 64] through the transpose's inverse */
    sj_value t2;
    assert_int_equal(sj_graph_transpose(f->g, sc, perm, &t2), SJ_OK);
    assert_int_equal(sj_graph_reshape(f->g, t2, 2, (int64_t[]){S, 64}, &back), SJ_OK);
    /* rows counted from the active end of the 4N axis, clamped into it */
    sj_value idx, g;
    assert_int_equal(sj_graph_param_typed(f->g, "idx", SJ_I64, 1, (int64_t[]){4},
                                          (int64_t[]){0, 5, -1, -6}, &idx),
                     SJ_OK);
    assert_int_equal(sj_graph_gather(f->g, mm, idx, 0, &g), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, back, "back"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, red, "sum"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, g, "picked"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, mm, "rows"), SJ_OK);
    check_buckets(f, "4N kernels");
}

/* Attention as a dynamic-batch export writes it: [N, 2, 5, 8] heads merged
 * into [2N, 5, 8], scores softmaxed over the keys, back to [N, 2, 5, 8]. */
static void test_attention_over_merged_heads(void **state) {
    fixture *f = *state;
    int64_t hd[] = {SJ_DIM_SYM_TIMES(2), 5, 8};
    sj_value q = input(f, "q", 4, (int64_t[]){S, 2, 5, 8}), k = input(f, "k", 4, (int64_t[]){S, 2, 5, 8});
    sj_value v = input(f, "v", 4, (int64_t[]){S, 2, 5, 8}), qm, km, vm, kt, s, a, o, out;
    assert_int_equal(sj_graph_reshape(f->g, q, 3, hd, &qm), SJ_OK);
    assert_int_equal(sj_graph_reshape(f->g, k, 3, hd, &km), SJ_OK);
    assert_int_equal(sj_graph_reshape(f->g, v, 3, hd, &vm), SJ_OK);
    assert_int_equal(sj_graph_transpose(f->g, km, (int[]){0, 2, 1}, &kt), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, qm, kt, &s), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, s, -1, &a), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, a, vm, &o), SJ_OK);
    assert_int_equal(sj_graph_reshape(f->g, o, 4, (int64_t[]){S, 2, 5, 8}, &out), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, out, "out"), SJ_OK);
    check_buckets(f, "attention over 2N heads");
}

static void test_offset_rules(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 8}), t = input(f, "t", 2, (int64_t[]){1, 8}), v, w;
    sj_value_desc d;
    assert_int_equal(sj_graph_concat(f->g, x, t, 0, &v), SJ_OK);
    assert_int_equal(sj_graph_value_desc(f->g, v, &d), SJ_OK);
    assert_int_equal(d.shape.dims[0], SJ_DIM_AFFINE(1, 1));
    assert_int_equal(sj_graph_concat(f->g, t, v, 0, &w), SJ_OK); /* the constant part in front */
    assert_int_equal(sj_graph_value_desc(f->g, w, &d), SJ_OK);
    assert_int_equal(d.shape.dims[0], SJ_DIM_AFFINE(1, 2));
    assert_int_equal(sj_graph_reshape(f->g, v, 3, (int64_t[]){SJ_DIM_AFFINE(1, 1), 2, 4}, &w), SJ_OK);
    int before = sj_graph_num_values(f->g);
    /* a part past the limits of k * N + c */
    sj_value big;
    assert_int_equal(sj_graph_input(f->g, "big", 2, (int64_t[]){SJ_DIM_AFFINE(1, SJ_MAX_SYM_OFFSET), 8},
                                    &big),
                     SJ_OK);
    before++;
    assert_int_equal(sj_graph_concat(f->g, big, v, 0, &w), SJ_E_UNSUPPORTED);
    assert_non_null(strstr(err(f), "at most"));
    /* N + 1 rows merge with nothing: they are not a whole number per index */
    assert_int_equal(sj_graph_reshape(f->g, v, 1, (int64_t[]){SJ_DIM_AFFINE(8, 8)}, &w), SJ_E_SHAPE);
    assert_non_null(strstr(err(f), "has a constant part, so it stays one dim of its own"));
    assert_int_equal(sj_graph_slice(f->g, v, (sj_slice_axis[]){{0, 0, 1, S}, {0, 0, 1, 8}}, &w),
                     SJ_OK); /* the first n rows: a constant-part-free prefix */
    assert_int_equal(sj_graph_slice(f->g, v, (sj_slice_axis[]){{1, 0, 1, SJ_DIM_AFFINE(1, 1)},
                                                              {0, 0, 1, 8}}, &w),
                     SJ_E_UNSUPPORTED);
    assert_non_null(strstr(err(f), "takes N+1 entries from 1"));
    assert_int_equal(sj_graph_reshape(f->g, x, 2, (int64_t[]){SJ_DIM_AFFINE(1, SJ_MAX_SYM_OFFSET + 1), 8},
                                      &w),
                     SJ_E_SHAPE);
    assert_int_equal(sj_graph_num_values(f->g), before + 1);
}

/* Symbolic parts joined along their axis, each placed at the active extent
 * of the ones before it: [N, 8] twice ([2N, 8]), with a constant row
 * between ([2N + 1, 8]), a [N + 1, 8] part after a 4N one ([5N + 1, 8]),
 * along an inner axis ([3, 2N]), and a softmax and a sum over the joined
 * axes, against the interpreter with the padding poisoned. */
static void test_joined_symbolic_parts(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 8}), t = input(f, "t", 2, (int64_t[]){1, 8});
    sj_value c = input(f, "c", 2, (int64_t[]){3, S}), r, two, mid, grown, m4, five, wide, p, sum;
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_RELU, x, &r), SJ_OK);
    assert_int_equal(sj_graph_concat(f->g, x, r, 0, &two), SJ_OK);
    assert_int_equal(sj_graph_concat(f->g, x, t, 0, &grown), SJ_OK); /* N + 1 */
    assert_int_equal(sj_graph_concat(f->g, grown, r, 0, &mid), SJ_OK);  /* 2N + 1 */
    assert_int_equal(sj_graph_reshape(f->g, two, 3, (int64_t[]){S, 2, 8}, &m4), SJ_OK);
    assert_int_equal(sj_graph_reshape(f->g, m4, 2, (int64_t[]){S4, 4}, &m4), SJ_OK);
    assert_int_equal(sj_graph_reshape(f->g, m4, 2, (int64_t[]){SJ_DIM_SYM_TIMES(2), 8}, &m4), SJ_OK);
    assert_int_equal(sj_graph_concat(f->g, m4, two, 0, &m4), SJ_OK);    /* 4N */
    assert_int_equal(sj_graph_concat(f->g, m4, grown, 0, &five), SJ_OK); /* 5N + 1 */
    assert_int_equal(sj_graph_concat(f->g, c, c, 1, &wide), SJ_OK);      /* [3, 2N] */
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, wide, -1, &p), SJ_OK);
    assert_int_equal(sj_graph_reduce(f->g, SJ_OP_REDUCE_SUM, mid, 1, (int[]){0}, false, &sum), SJ_OK);
    sj_value_desc d;
    assert_int_equal(sj_graph_value_desc(f->g, mid, &d), SJ_OK);
    assert_int_equal(d.shape.dims[0], SJ_DIM_AFFINE(2, 1));
    assert_int_equal(sj_graph_value_desc(f->g, five, &d), SJ_OK);
    assert_int_equal(d.shape.dims[0], SJ_DIM_AFFINE(5, 1));
    assert_int_equal(sj_graph_output(f->g, two, "two"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, mid, "mid"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, five, "five"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, p, "p"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, sum, "sum"), SJ_OK);
    check_buckets(f, "joined symbolic parts");
}

/* Reshapes that merge the symbolic dim with rows in front of it, as the
 * Flatten of a [batch, seq] mask in every transformers decoder does:
 * [3, N, 2] to [6N], [3, N + 1] to [3N + 3], [2, 2, N, 4] to [2, 2N, 4],
 * each built compact (row f at the active extent of the rows before it),
 * with a softmax and a sum over the merged axes, against the interpreter,
 * padding poisoned; more rows than the part limit are an error naming it. */
static void test_front_merges(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 3, (int64_t[]){3, S, 2}), m = input(f, "m", 2, (int64_t[]){3, S});
    sj_value t = input(f, "t", 4, (int64_t[]){2, 2, S, 4}), one = input(f, "one", 2, (int64_t[]){3, 1});
    sj_value flat, mask, grown, heads, p, sum, ps;
    assert_int_equal(sj_graph_reshape(f->g, x, 1, (int64_t[]){SJ_DIM_SYM_TIMES(6)}, &flat), SJ_OK);
    assert_int_equal(sj_graph_concat(f->g, m, one, 1, &grown), SJ_OK); /* [3, N + 1] */
    assert_int_equal(sj_graph_reshape(f->g, grown, 1, (int64_t[]){SJ_DIM_AFFINE(3, 3)}, &mask), SJ_OK);
    assert_int_equal(sj_graph_reshape(f->g, t, 3, (int64_t[]){2, SJ_DIM_SYM_TIMES(2), 4}, &heads),
                     SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, mask, -1, &p), SJ_OK);
    assert_int_equal(sj_graph_reduce(f->g, SJ_OP_REDUCE_SUM, heads, 1, (int[]){1}, false, &sum), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, flat, -1, &ps), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, flat, "flat"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, mask, "mask"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, heads, "heads"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, p, "p"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, sum, "sum"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, ps, "ps"), SJ_OK);
    check_buckets(f, "front merges");
    sj_value wide = input(f, "wide", 2, (int64_t[]){65, S}), v;
    int before = sj_graph_num_values(f->g);
    assert_int_equal(sj_graph_reshape(f->g, wide, 1, (int64_t[]){SJ_DIM_SYM_TIMES(65)}, &v),
                     SJ_E_UNSUPPORTED);
    assert_non_null(strstr(err(f), "with 65 rows in front of it"));
    assert_int_equal(sj_graph_num_values(f->g), before);
}

/* One decode step of a single attention head over a KV cache: the cache
 * of N past rows grown by this step's row (N + 1), attended over by the
 * step's query, the grown cache an output; a prefix token in front of it
 * as well, and the cache's last active row picked by a gather. */
static void test_cache_step(void **state) {
    fixture *f = *state;
    sj_value past = input(f, "past", 2, (int64_t[]){S, 8}), x = input(f, "x", 2, (int64_t[]){1, 8});
    sj_value wq = param(f, "wq", 2, (int64_t[]){8, 8}), wk = param(f, "wk", 2, (int64_t[]){8, 8});
    sj_value k, cache, q, ct, s, p, ctx, pre, sum, idx, last;
    assert_int_equal(sj_graph_matmul(f->g, x, wk, &k), SJ_OK);
    assert_int_equal(sj_graph_concat(f->g, past, k, 0, &cache), SJ_OK); /* [N+1, 8] */
    assert_int_equal(sj_graph_matmul(f->g, x, wq, &q), SJ_OK);
    assert_int_equal(sj_graph_transpose(f->g, cache, (int[]){1, 0}, &ct), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, q, ct, &s), SJ_OK); /* [1, N+1] */
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, s, -1, &p), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, p, cache, &ctx), SJ_OK);
    assert_int_equal(sj_graph_concat(f->g, x, cache, 0, &pre), SJ_OK); /* [N+2, 8] */
    assert_int_equal(sj_graph_reduce(f->g, SJ_OP_REDUCE_SUM, pre, 1, (int[]){0}, false, &sum), SJ_OK);
    assert_int_equal(sj_graph_param_typed(f->g, "idx", SJ_I64, 1, (int64_t[]){2}, (int64_t[]){-1, 0},
                                          &idx),
                     SJ_OK);
    assert_int_equal(sj_graph_gather(f->g, cache, idx, 0, &last), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, cache, "cache"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, ctx, "ctx"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, sum, "sum"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, last, "last"), SJ_OK);
    check_buckets(f, "cache step");
}

/* sj_dim_parse reads what sj_shape_format and sj_dim_format write, and
 * nothing else. */
static void test_dim_parse(void **state) {
    (void)state;
    int64_t d;
    static const struct { const char *text; int64_t want; } ok[] = {
        {"64", 64}, {"past", SJ_DIM_SYM}, {"past+1", SJ_DIM_AFFINE(1, 1)},
        {"4*past", SJ_DIM_SYM_TIMES(4)}, {"2*past+3", SJ_DIM_AFFINE(2, 3)}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        assert_int_equal(sj_dim_parse(ok[i].text, "past", &d), SJ_OK);
        assert_int_equal(d, ok[i].want);
        char back[64];
        sj_shape s = {1, {d}};
        sj_shape_format(&s, "past", back, sizeof back);
        char want[80];
        snprintf(want, sizeof want, "[%s]", ok[i].text);
        assert_string_equal(back, want);
        sj_dim_format(d, "past", back, sizeof back);
        assert_string_equal(back, ok[i].text);
    }
    char cut[4];
    sj_dim_format(SJ_DIM_AFFINE(2, 3), "past", cut, sizeof cut);
    assert_string_equal(cut, "2*p");
    static const char *const bad[] = {"0", "-1", "past-1", "0*past", "past+", "pasta", "x",
                                      "2*", "+1", "past+1+1", "99999999999999999999", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (sj_dim_parse(bad[i], "past", &d) != SJ_E_PARSE) fail_msg("'%s' parsed", bad[i]);
    assert_int_equal(sj_dim_parse("past", NULL, &d), SJ_E_PARSE);
    assert_int_equal(sj_dim_parse("past+1048577", "past", &d), SJ_E_PARSE);
}

static void test_sjg_spelling(void **state) {
    fixture *f = *state;
    static const char text[] = "graph mult(N) {\n"
                               "  input x: [N, 4, 8]\n"
                               "  m = reshape(x, shape=[4*N, 8])\n"
                               "  s = softmax(m, axis=0)\n"
                               "  r = reshape(s, shape=[N, 32])\n"
                               "  output r\n"
                               "  input t: [1, 32]\n"
                               "  c = concat(r, t, axis=0)\n"
                               "  o = reshape(c, shape=[N+1, 4, 8])\n"
                               "  output o\n"
                               "}\n";
    sj_graph *g;
    assert_int_equal(sj_sjg_parse(f->ctx, text, strlen(text), "mult.sjg", NULL, &g), SJ_OK);
    char *printed;
    size_t len;
    assert_int_equal(sj_sjg_print(g, &printed, &len), SJ_OK);
    assert_non_null(strstr(printed, "[4*N, 8]"));
    assert_non_null(strstr(printed, "[N+1, 4, 8]"));
    sj_graph *back;
    assert_int_equal(sj_sjg_parse(f->ctx, printed, len, "printed", NULL, &back), SJ_OK);
    uint8_t h1[32], h2[32];
    sj_graph_hash(g, h1);
    sj_graph_hash(back, h2);
    assert_memory_equal(h1, h2, 32);
    sj_free(f->ctx, printed);
    sj_graph_destroy(back);
    sj_graph_destroy(g);
    /* a factor needs the symbolic dim after it, and is at least 1 */
    static const char *const bad[][2] = {
        {"graph b(N) {\n  input x: [N, 4]\n  r = reshape(x, shape=[4*M])\n  output r\n}\n", "unknown dim 'M'"},
        {"graph b(N) {\n  input x: [N, 4]\n  r = reshape(x, shape=[4*])\n  output r\n}\n",
         "expected the symbolic dim after '4*'"},
        {"graph b(N) {\n  input x: [N, 4]\n  r = reshape(x, shape=[0*N, 4])\n  output r\n}\n",
         "factor 0 of a symbolic dim"},
        {"graph b(N) {\n  input x: [N, 4]\n  r = reshape(x, shape=[N+x, 4])\n  output r\n}\n",
         "after the symbolic dim's '+'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_not_equal(sj_sjg_parse(f->ctx, bad[i][0], strlen(bad[i][0]), "bad.sjg", NULL, &g),
                             SJ_OK);
        if (!strstr(err(f), bad[i][1])) fail_msg("case %zu: %s", i, err(f));
    }
}

/* Rows stay independent through a merge with the dims inside them; an
 * output that keeps them merged cannot be split back per request. */
static void test_rows_through_multiples(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 3, (int64_t[]){S, 4, 8}), m, sm, back;
    assert_int_equal(sj_graph_reshape(f->g, x, 2, (int64_t[]){S4, 8}, &m), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, m, -1, &sm), SJ_OK);
    assert_int_equal(sj_graph_reshape(f->g, sm, 2, (int64_t[]){S, 32}, &back), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, back, "back"), SJ_OK);
    bool ok;
    char why[256];
    assert_int_equal(sj_graph_rows_independent(f->g, &ok, why, sizeof why), SJ_OK);
    assert_true(ok);
    assert_int_equal(sj_graph_output(f->g, sm, "merged"), SJ_OK);
    assert_int_equal(sj_graph_rows_independent(f->g, &ok, why, sizeof why), SJ_OK);
    assert_false(ok);
    assert_non_null(strstr(why, "output 'merged' does not carry the request rows, one per entry"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reshape_rule, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_kernels_over_multiples, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_attention_over_merged_heads, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_offset_rules, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_joined_symbolic_parts, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_front_merges, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cache_step, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_sjg_spelling, setup, h_fixture_teardown),
        cmocka_unit_test(test_dim_parse),
        cmocka_unit_test_setup_teardown(test_rows_through_multiples, setup, h_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
