/* Host backend against the interpreter: hand-picked patterns (reductions and
 * contractions over the symbolic dim, fused epilogues, views, outputs that are
 * inputs), NaN/Inf propagation, and seeded random graphs at random extents
 * across pow2 buckets. Padding, arena and outputs are poisoned with NaN by the
 * harness, so a kernel that reads padding fails the comparison. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/host_harness.h"

#define S SJ_DIM_SYM
#define TOL 2e-4

static int setup(void **state) { return h_fixture_setup(state, 0x9e3779b97f4a7c15ull); }

/* Extents 1, bucket-min (33), bucket-max (64) and in between, in bucket 64;
 * plus the one-element bucket. */
static void check_buckets(fixture *f, const char *what) {
    sj_compile_options o;
    sj_compile_options_init(&o);
    static const int64_t ns[] = {1, 33, 64, 47};
    assert_true(h_check(f->dev, f->g, 64, ns, 4, &o, f->seed, TOL, what));
    assert_true(h_check(f->dev, f->g, 1, ns, 1, &o, f->seed + 1, TOL, what));
    o.blas_min_work = 1; /* every matmul through cblas_sgemm */
    assert_true(h_check(f->dev, f->g, 64, ns, 4, &o, f->seed + 3, TOL, what));
    o.fusion = false;
    o.blas_min_work = 0;
    assert_true(h_check(f->dev, f->g, 64, ns, 4, &o, f->seed + 2, TOL, what));
    o.fusion = true;
    o.opt_level = 0; /* unoptimised code must compute the same */
    assert_true(h_check(f->dev, f->g, 64, ns, 4, &o, f->seed + 4, TOL, what));
}

static void test_elementwise_chain(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 8}), p = param(f, "p", 1, (int64_t[]){8});
    sj_value c = param(f, "c", 2, (int64_t[]){1, 1}), col = input(f, "col", 2, (int64_t[]){S, 1});
    sj_value a, b, y;
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_MUL, x, p, &a), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_ADD, a, c, &a), SJ_OK);
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_GELU, a, &b), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_SUB, b, col, &b), SJ_OK);
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_TANH, b, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    check_buckets(f, "elementwise chain");
}

/* scores = q @ k^T : [N, N]; p = softmax(scores * s); out = p @ v. */
static void test_attention(void **state) {
    fixture *f = *state;
    sj_value q = input(f, "q", 2, (int64_t[]){S, 16}), k = input(f, "k", 2, (int64_t[]){S, 16});
    sj_value v = input(f, "v", 2, (int64_t[]){S, 16}), sc = param(f, "s", 1, (int64_t[]){1});
    sj_value kt, s, s2, p, o;
    assert_int_equal(sj_graph_transpose(f->g, k, (int[]){1, 0}, &kt), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, q, kt, &s), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_MUL, s, sc, &s2), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, s2, -1, &p), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, p, v, &o), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, o, "out"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, p, "probs"), SJ_OK);
    check_buckets(f, "attention");
}

static void test_reductions_over_sym(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 8}), r1, r2, r3, r4, e;
    assert_int_equal(sj_graph_reduce(f->g, SJ_OP_REDUCE_SUM, x, 1, (int[]){0}, false, &r1), SJ_OK);
    assert_int_equal(sj_graph_reduce(f->g, SJ_OP_REDUCE_MEAN, x, 1, (int[]){0}, true, &r2), SJ_OK);
    assert_int_equal(sj_graph_reduce(f->g, SJ_OP_REDUCE_MAX, x, 0, NULL, false, &r3), SJ_OK);
    assert_int_equal(sj_graph_reduce(f->g, SJ_OP_REDUCE_MEAN, x, 1, (int[]){1}, false, &r4), SJ_OK);
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_EXP, r2, &e), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, r1, "sum0"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, e, "expmean0"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, r3, "max"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, r4, "mean1"), SJ_OK);
    check_buckets(f, "reductions");
}

static void test_row_ops_over_sym(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 3, (int64_t[]){2, S, 4}), a, b, c, d;
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, x, 1, &a), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_LOG_SOFTMAX, x, 1, &b), SJ_OK);
    assert_int_equal(sj_graph_layernorm(f->g, x, SJ_NO_VALUE, SJ_NO_VALUE, 1, 1e-5f, &c), SJ_OK);
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_RELU, c, &d), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, a, "softmax"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, b, "logsoftmax"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, d, "ln"), SJ_OK);
    check_buckets(f, "row ops over N");
}

/* Softmax and log_softmax over dims that are not the innermost, with the
 * innermost static (the host runs these by columns: a running max and sum
 * per innermost position, in chunks of 1024): over N, over a static dim
 * between N and the innermost, innermost widths that are and are not a
 * vector multiple, one past a chunk (1100), an innermost of 1 (the row
 * loop), and an epilogue after the row op. */
static void test_row_ops_by_columns(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 24}), y = input(f, "y", 4, (int64_t[]){S, 3, 2, 17});
    sj_value z = input(f, "z", 2, (int64_t[]){S, 1}), w = input(f, "w", 2, (int64_t[]){S, 1100});
    sj_value a, b, c, d, e, g, h;
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, x, 0, &a), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_LOG_SOFTMAX, x, 0, &b), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, y, 1, &c), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_LOG_SOFTMAX, y, 0, &d), SJ_OK);
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_TANH, d, &d), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, z, 0, &e), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, y, 2, &g), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_LOG_SOFTMAX, w, 0, &h), SJ_OK);
    sj_value outs[] = {a, b, c, d, e, g, h};
    const char *names[] = {"sm0", "lsm0", "sm1", "tanh_lsm0", "sm_col", "sm2", "lsm_wide"};
    for (int i = 0; i < 7; i++) assert_int_equal(sj_graph_output(f->g, outs[i], names[i]), SJ_OK);
    check_buckets(f, "row ops by columns");
}

static void test_ffn_block(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 32});
    sj_value g = param(f, "g", 1, (int64_t[]){32}), bb = param(f, "b", 1, (int64_t[]){32});
    sj_value w1 = param(f, "w1", 2, (int64_t[]){32, 64}), b1 = param(f, "b1", 1, (int64_t[]){64});
    sj_value w2 = param(f, "w2", 2, (int64_t[]){32, 64}), b2 = param(f, "b2", 1, (int64_t[]){32});
    sj_value ln, h, h1, act, o, y;
    assert_int_equal(sj_graph_layernorm(f->g, x, g, bb, 1, 1e-5f, &ln), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, ln, w1, &h), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_ADD, h, b1, &h1), SJ_OK);
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_GELU, h1, &act), SJ_OK);
    assert_int_equal(sj_graph_gemm(f->g, act, w2, b2, 0.5f, 2.0f, false, true, &o), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_ADD, o, x, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    check_buckets(f, "ffn");
}

static void test_batched_matmul_and_views(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 3, (int64_t[]){2, S, 8}), w = param(f, "w", 2, (int64_t[]){8, 4});
    sj_value vec = param(f, "vec", 1, (int64_t[]){8}), m, mv, r, t, t2;
    assert_int_equal(sj_graph_matmul(f->g, x, w, &m), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, x, vec, &mv), SJ_OK);
    assert_int_equal(sj_graph_reshape(f->g, m, 4, (int64_t[]){2, S, 2, 2}, &r), SJ_OK);
    assert_int_equal(sj_graph_transpose(f->g, r, (int[]){1, 3, 0, 2}, &t), SJ_OK);
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_NEG, t, &t2), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, mv, "mv"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, t, "t"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, t2, "t2"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, r, "r"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, x, "x_again"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, x, "x_twice"), SJ_OK);
    check_buckets(f, "batched matmul and views");
}

/* A batched matmul whose weight holds one matrix per index of a constant
 * batch dim ([4, 1, 64, 64], broadcast over the symbolic dim, as a
 * Winograd conv's) is read as one packed slot of 4 matrices, in the
 * weight's stored precision. The host matches the interpreter; a plan
 * whose slot claims more matrices than the param holds, or none, or
 * another element size or none, is refused at load. */
static void test_batched_weight_packed(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 4, (int64_t[]){4, S, 64, 64}), y;
    sj_value w = param(f, "w", 4, (int64_t[]){4, 1, 64, 64});
    assert_int_equal(sj_graph_matmul(f->g, x, w, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    /* float32, and bf16 / fp16 weights packed as 16-bit panels */
    for (int prec = 0; prec < SJ_PRECISION_COUNT_; prec++) {
        sj_compile_options o;
        sj_compile_options_init(&o);
        o.precision = (sj_precision)prec;
        static const int64_t ns[] = {1, 5, 8};
        assert_true(h_check(f->dev, f->g, 8, ns, 3, &o, f->seed, TOL, sj_precision_name(o.precision)));
        sj_artifact *a;
        assert_int_equal(sj_compile(f->g, 8, &o, &a), SJ_OK);
        int64_t *words = NULL;
        for (int i = 0; i < a->plan.n_slots; i++)
            if (a->plan.slots[i].kind == SJ_SLOT_PACKED) words = a->plan.words + a->plan.slots[i].offset;
        assert_non_null(words);
        assert_int_equal(words[SJ_PACK_BATCH], 4);
        assert_int_equal(words[SJ_PACK_BATCH_STRIDE], 64 * 64);
        assert_int_equal(words[SJ_PACK_STORAGE], prec);
        sj_executable *exe = NULL;
        words[SJ_PACK_BATCH] = 5;
        assert_int_equal(sj_artifact_load(a, f->dev, f->g, &exe), SJ_E_CORRUPT);
        assert_non_null(strstr(sj_ctx_last_error(f->ctx), "reads past"));
        words[SJ_PACK_BATCH] = 0;
        assert_int_equal(sj_artifact_load(a, f->dev, f->g, &exe), SJ_E_CORRUPT);
        words[SJ_PACK_BATCH] = 4;
        /* another element size than the slot's bytes were sized for, and
         * no precision at all: refused, never read as the wrong panels */
        words[SJ_PACK_STORAGE] = prec == SJ_PRECISION_FP32 ? SJ_PRECISION_BF16 : SJ_PRECISION_FP32;
        assert_int_equal(sj_artifact_load(a, f->dev, f->g, &exe), SJ_E_CORRUPT);
        assert_non_null(strstr(sj_ctx_last_error(f->ctx), "bytes"));
        words[SJ_PACK_STORAGE] = SJ_PRECISION_COUNT_;
        assert_int_equal(sj_artifact_load(a, f->dev, f->g, &exe), SJ_E_CORRUPT);
        words[SJ_PACK_STORAGE] = prec;
        assert_int_equal(sj_artifact_load(a, f->dev, f->g, &exe), SJ_OK);
        sj_executable_destroy(exe);
        sj_artifact_destroy(a);
    }
}

/* A long chain, each step with its own param: kernels with many buffers, and
 * inlining bounded in depth. */
static void test_long_chain(void **state) {
    fixture *f = *state;
    sj_value y = input(f, "x", 2, (int64_t[]){S, 8});
    for (int i = 0; i < 150; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        sj_value p = param(f, name, 1, (int64_t[]){8});
        assert_int_equal(sj_graph_binary(f->g, i % 2 ? SJ_OP_MUL : SJ_OP_ADD, y, p, &y), SJ_OK);
        if (i % 10 == 0) assert_int_equal(sj_graph_unary(f->g, SJ_OP_TANH, y, &y), SJ_OK);
    }
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    int n;
    assert_int_equal(sj_compile_kernel_count(f->g, 16, NULL, &n), SJ_OK);
    assert_true(n >= 2 && n <= 4);
    int matmuls;
    assert_int_equal(sj_compile_kernel_counts(f->g, 16, NULL, &n, &matmuls), SJ_OK);
    assert_true(n >= 2 && n <= 4);
    assert_int_equal(matmuls, 0);
    sj_compile_options o;
    sj_compile_options_init(&o);
    static const int64_t ns[] = {1, 9, 16};
    assert_true(h_check(f->dev, f->g, 16, ns, 3, &o, f->seed, TOL, "long chain"));
}

/* The inline exp, erf, tanh (and gelu, sigmoid built on them) against libm in
 * double, over dense sweeps: relative error for exp, absolute for the
 * bounded ones. */
static void test_math_accuracy(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 1, (int64_t[]){S}), y[5];
    sj_op ops[5] = {SJ_OP_EXP, SJ_OP_ERF, SJ_OP_TANH, SJ_OP_GELU, SJ_OP_SIGMOID};
    const char *names[5] = {"exp", "erf", "tanh", "gelu", "sigmoid"};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(sj_graph_unary(f->g, ops[i], x, &y[i]), SJ_OK);
        assert_int_equal(sj_graph_output(f->g, y[i], names[i]), SJ_OK);
    }
    enum { COUNT = 20001 };
    sj_artifact *a;
    assert_int_equal(sj_compile(f->g, 32768, NULL, &a), SJ_OK);
    sj_tensor in = {.rank = 1, .dims = {COUNT}, .data = malloc(COUNT * sizeof(float))}, out[5];
    for (int i = 0; i < COUNT; i++) in.data[i] = -100.0f + 190.0f * (float)i / (COUNT - 1);
    in.data[0] = -INFINITY;
    in.data[1] = INFINITY;
    in.data[2] = NAN;
    in.data[3] = 1e-30f;
    in.data[4] = -1e-6f;
    for (int i = 5; i < 2000; i++) in.data[i] = -5.0f + 10.0f * (float)i / 2000.0f; /* dense near 0 */
    assert_int_equal(h_run(f->dev, a, f->g, COUNT, &in, out), SJ_OK);
    double worst[5] = {0};
    for (int i = 0; i < COUNT; i++) {
        double v = in.data[i];
        double want[5] = {exp(v), erf(v), tanh(v), v * 0.5 * (1.0 + erf(v / sqrt(2.0))), 1.0 / (1.0 + exp(-v))};
        for (int o = 0; o < 5; o++) {
            float got = out[o].data[i];
            float w = (float)want[o];
            if (isnan(w) || isnan(got) || isinf(w) || isinf(got)) {
                if (!(isnan(w) && isnan(got)) && got != w) {
                    printf("%s(%g): got %g, want %g\n", names[o], v, got, w);
                    fail();
                }
                continue;
            }
            /* exp: relative; gelu: relative above 1 (its tail is 1 + erf in
             * float, absolute there); the bounded ones: absolute. */
            double scale = o == 0 ? fmax(fabs(want[o]), 1e-30) : o == 3 ? fmax(fabs(want[o]), 1.0) : 1.0;
            double err = fabs(got - want[o]) / scale;
            if (err > worst[o]) worst[o] = err;
        }
    }
    printf("max error: exp %.2g (rel), erf %.2g, tanh %.2g, gelu %.2g, sigmoid %.2g\n", worst[0],
           worst[1], worst[2], worst[3], worst[4]);
    assert_true(worst[0] < 4e-7 && worst[1] < 4e-7 && worst[2] < 4e-7 && worst[3] < 1e-6 && worst[4] < 4e-7);
    h_free_tensors(f->ctx, out, 5);
    free(in.data);
    sj_artifact_destroy(a);
}

/* A graph without a symbolic dim has one bucket; the extent is ignored. */
static void test_static_graph(void **state) {
    fixture *f = *state;
    sj_graph *g;
    assert_int_equal(sj_graph_create(f->ctx, NULL, &g), SJ_OK);
    sj_graph_destroy(f->g);
    f->g = g;
    sj_value x = input(f, "x", 2, (int64_t[]){5, 8}), w = param(f, "w", 2, (int64_t[]){8, 3}), y;
    assert_int_equal(sj_graph_matmul(g, x, w, &y), SJ_OK);
    assert_int_equal(sj_graph_softmax(g, SJ_OP_LOG_SOFTMAX, y, 0, &y), SJ_OK);
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    sj_compile_options o;
    sj_compile_options_init(&o);
    static const int64_t ns[] = {1};
    assert_true(h_check(f->dev, g, 1, ns, 1, &o, f->seed, TOL, "static graph"));
}

/* NaN and Inf in the inputs reach the outputs as the interpreter has them. */
static void test_nan_inf_propagate(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 8}), w = param(f, "w", 2, (int64_t[]){8, 8});
    sj_value r, m, mx, s, l, mn;
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_RELU, x, &r), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, x, w, &m), SJ_OK);
    assert_int_equal(sj_graph_reduce(f->g, SJ_OP_REDUCE_MAX, x, 1, (int[]){1}, false, &mx), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, x, 1, &s), SJ_OK);
    assert_int_equal(sj_graph_layernorm(f->g, x, SJ_NO_VALUE, SJ_NO_VALUE, 1, 1e-5f, &l), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_MIN, x, r, &mn), SJ_OK);
    sj_value outs[] = {r, m, mx, s, l, mn};
    const char *names[] = {"r", "m", "mx", "s", "l", "mn"};
    for (int i = 0; i < 6; i++) assert_int_equal(sj_graph_output(f->g, outs[i], names[i]), SJ_OK);
    sj_artifact *a;
    assert_int_equal(sj_compile(f->g, 16, NULL, &a), SJ_OK);
    sj_tensor in[1], got[6], want[6];
    h_inputs(f->g, 11, &f->seed, in);
    in[0].data[3] = NAN;
    in[0].data[17] = INFINITY;
    in[0].data[40] = -INFINITY;
    in[0].data[41] = INFINITY;
    assert_int_equal(sj_interp_run(f->g, 11, in, want), SJ_OK);
    assert_int_equal(h_run(f->dev, a, f->g, 11, in, got), SJ_OK);
    assert_true(h_compare(f->g, got, want, TOL, "nan/inf"));
    h_free_tensors(f->ctx, got, 6);
    h_free_tensors(f->ctx, want, 6);
    h_free_tensors(f->ctx, in, 1);
    sj_artifact_destroy(a);
}

/* An artifact whose code needs a feature this CPU lacks is refused. */
static void test_cpu_feature_mismatch_refused(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 4}), y;
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_EXP, x, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    sj_artifact *a;
    assert_int_equal(sj_compile(f->g, 8, NULL, &a), SJ_OK);
    assert_int_equal(sj_artifact_check_host(a), SJ_OK);
    /* Flip one feature the host lacks ("-x" in its list) to "+x". */
    char *feat = strdup(a->features), *minus = strstr(feat, ",-");
    assert_non_null(minus);
    minus[1] = '+';
    char *end = strchr(minus + 1, ',');
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(end ? end - minus - 2 : (long)strlen(minus + 2)), minus + 2);
    assert_int_equal(sj__artifact_set_string(a, &a->features, feat), SJ_OK);
    free(feat);
    assert_int_equal(sj_artifact_check_host(a), SJ_E_MISMATCH);
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), name));
    sj_tensor in[1], out[1];
    h_inputs(f->g, 3, &f->seed, in);
    assert_int_equal(h_run(f->dev, a, f->g, 3, in, out), SJ_E_MISMATCH);
    sj_executable *exe = NULL;
    assert_int_equal(sj_artifact_load(a, f->dev, f->g, &exe), SJ_E_MISMATCH);
    assert_null(exe);
    h_free_tensors(f->ctx, in, 1);
    sj_artifact_destroy(a);
}

/* An artifact is only loaded for the graph it was compiled from. */
static void test_graph_mismatch_refused(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 4}), y;
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_EXP, x, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    sj_artifact *a;
    assert_int_equal(sj_compile(f->g, 8, NULL, &a), SJ_OK);
    sj_graph *other;
    assert_int_equal(sj_graph_create(f->ctx, "N", &other), SJ_OK);
    assert_int_equal(sj_graph_input(other, "x", 2, (int64_t[]){S, 4}, &x), SJ_OK);
    assert_int_equal(sj_graph_unary(other, SJ_OP_LOG, x, &y), SJ_OK);
    assert_int_equal(sj_graph_output(other, y, "y"), SJ_OK);
    sj_executable *exe = NULL;
    assert_int_equal(sj_artifact_load(a, f->dev, other, &exe), SJ_E_MISMATCH);
    /* An extern kernel this build lacks is named, not left to the linker. */
    assert_int_equal(sj__artifact_set_string(a, &a->externs, "cblas_sgemm,sj_no_such_kernel"), SJ_OK);
    assert_int_equal(sj_artifact_load(a, f->dev, f->g, &exe), SJ_E_UNSUPPORTED);
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "sj_no_such_kernel"));
    assert_int_equal(sj__artifact_set_string(a, &a->externs, ""), SJ_OK);
    assert_int_equal(sj_artifact_load(a, f->dev, f->g, &exe), SJ_OK);
    sj_executable_destroy(exe);
    sj_graph_destroy(other);
    sj_artifact_destroy(a);
}

/* ---- random graphs ---- */

static const sj_op unaries[] = {SJ_OP_NEG,  SJ_OP_ABS,     SJ_OP_EXP,     SJ_OP_TANH,
                                SJ_OP_SIGMOID, SJ_OP_RELU, SJ_OP_GELU, SJ_OP_SILU,
                                SJ_OP_ERF,  SJ_OP_LEAKY_RELU};
static const sj_op binaries[] = {SJ_OP_ADD, SJ_OP_SUB, SJ_OP_MUL, SJ_OP_MAX, SJ_OP_MIN};

/* Values the generator may still pick; kept small so shapes stay bounded. */
typedef struct pool {
    sj_value v[64];
    int n;
} pool;

static sj_value pick(pool *p, uint64_t *s) { return p->v[h_rng(s) % (uint64_t)p->n]; }
static void push(pool *p, sj_value v) {
    if (p->n < 64) p->v[p->n++] = v;
}

/* One random op on pool values; ops whose shapes do not fit are refused by
 * the builder and simply skipped. Domain-limited ops get safe operands. */
static void random_op(fixture *f, pool *p) {
    sj_graph *g = f->g;
    uint64_t *s = &f->seed;
    sj_value a = pick(p, s), b = pick(p, s), out, t;
    sj_value_desc d;
    sj_graph_value_desc(g, a, &d);
    int r = d.shape.rank;
    switch (h_rng(s) % 14) {
    case 0:
    case 1: {
        sj_op op = unaries[h_rng(s) % (sizeof unaries / sizeof unaries[0])];
        if (op == SJ_OP_LEAKY_RELU) {
            if (sj_graph_leaky_relu(g, a, 0.1f, &out) == SJ_OK) push(p, out);
        } else if (op == SJ_OP_EXP) {
            if (sj_graph_unary(g, SJ_OP_TANH, a, &t) == SJ_OK && sj_graph_unary(g, op, t, &out) == SJ_OK)
                push(p, out);
        } else if (sj_graph_unary(g, op, a, &out) == SJ_OK) {
            push(p, out);
        }
        break;
    }
    case 2:
    case 3:
    case 4: {
        sj_op op = binaries[h_rng(s) % (sizeof binaries / sizeof binaries[0])];
        if (sj_graph_binary(g, op, a, b, &out) == SJ_OK) push(p, out);
        break;
    }
    case 5: { /* safe log/sqrt/div/pow: positive operands */
        sj_value pos;
        if (sj_graph_unary(g, SJ_OP_SIGMOID, b, &pos) != SJ_OK) break;
        static const sj_op ops[] = {SJ_OP_LOG, SJ_OP_SQRT, SJ_OP_RSQRT, SJ_OP_RECIPROCAL};
        int which = (int)(h_rng(s) % 6);
        if (which < 4) {
            if (sj_graph_unary(g, ops[which], pos, &out) == SJ_OK) push(p, out);
        } else if (sj_graph_binary(g, which == 4 ? SJ_OP_DIV : SJ_OP_POW, which == 4 ? a : pos,
                                   which == 4 ? pos : a, &out) == SJ_OK) {
            push(p, out);
        }
        break;
    }
    case 6: {
        int axis = r ? (int)(h_rng(s) % (uint64_t)r) : 0;
        sj_op op = SJ_OP_REDUCE_SUM + (sj_op)(h_rng(s) % 3);
        if (sj_graph_reduce(g, op, a, r ? 1 : 0, &axis, h_rng(s) % 2, &out) == SJ_OK) push(p, out);
        break;
    }
    case 7: {
        int axis = r ? (int)(h_rng(s) % (uint64_t)r) : 0;
        if (sj_graph_softmax(g, h_rng(s) % 2 ? SJ_OP_SOFTMAX : SJ_OP_LOG_SOFTMAX, a, axis, &out) == SJ_OK)
            push(p, out);
        break;
    }
    case 8: {
        if (!r) break;
        int axis = (int)(h_rng(s) % (uint64_t)r);
        if (sj_graph_layernorm(g, a, SJ_NO_VALUE, SJ_NO_VALUE, axis, 1e-3f, &out) == SJ_OK) push(p, out);
        break;
    }
    case 9:
    case 10: {
        if (sj_graph_matmul(g, a, b, &out) == SJ_OK) {
            push(p, out);
        } else if (r >= 1) { /* a @ param of a fitting shape */
            int64_t wd[2] = {d.shape.dims[r - 1] == SJ_DIM_SYM ? 0 : d.shape.dims[r - 1],
                             1 + (int64_t)(h_rng(s) % 9)};
            if (wd[0] == 0) break;
            char name[32];
            snprintf(name, sizeof name, "w%d", sj_graph_num_values(g));
            sj_value w = param(f, name, 2, wd);
            if (sj_graph_matmul(g, a, w, &out) == SJ_OK) push(p, out);
        }
        break;
    }
    case 11: {
        if (r < 2) break;
        int perm[SJ_MAX_RANK];
        for (int i = 0; i < r; i++) perm[i] = i;
        for (int i = r - 1; i > 0; i--) {
            int j = (int)(h_rng(s) % (uint64_t)(i + 1)), tmp = perm[i];
            perm[i] = perm[j];
            perm[j] = tmp;
        }
        if (sj_graph_transpose(g, a, perm, &out) == SJ_OK) push(p, out);
        break;
    }
    case 12: { /* reshape: split the last constant dim in two */
        if (!r || r >= SJ_MAX_RANK || d.shape.dims[r - 1] == SJ_DIM_SYM || d.shape.dims[r - 1] % 2) break;
        int64_t nd[SJ_MAX_RANK];
        memcpy(nd, d.shape.dims, sizeof nd);
        nd[r - 1] = d.shape.dims[r - 1] / 2;
        nd[r] = 2;
        if (sj_graph_reshape(g, a, r + 1, nd, &out) == SJ_OK) push(p, out);
        break;
    }
    default: {
        if (r != 2) break;
        sj_value_desc db;
        sj_graph_value_desc(g, b, &db);
        if (sj_graph_gemm(g, a, b, SJ_NO_VALUE, 0.5f, 1.0f, false, true, &out) == SJ_OK) push(p, out);
        break;
    }
    }
}

static void test_random_graphs(void **state) {
    fixture *f = *state;
    int n_graphs = 40;
    for (int gi = 0; gi < n_graphs; gi++) {
        sj_graph *g;
        assert_int_equal(sj_graph_create(f->ctx, "N", &g), SJ_OK);
        sj_graph_destroy(f->g);
        f->g = g;
        pool p = {.n = 0};
        int64_t d1 = 1 + (int64_t)(h_rng(&f->seed) % 12), d2 = 2 * (1 + (int64_t)(h_rng(&f->seed) % 4));
        push(&p, input(f, "x", 2, (int64_t[]){S, d1}));
        push(&p, input(f, "y", 2, (int64_t[]){S, d2}));
        push(&p, input(f, "z", 3, (int64_t[]){2, S, d1}));
        push(&p, param(f, "row", 1, (int64_t[]){d1}));
        push(&p, param(f, "sq", 2, (int64_t[]){d2, d2}));
        int n_ops = 4 + (int)(h_rng(&f->seed) % 10);
        for (int i = 0; i < n_ops; i++) random_op(f, &p);
        /* Outputs: the last two values made, and a random earlier one. */
        int n_out = 0;
        char name[16];
        for (int i = p.n - 1; i >= 5 && n_out < 2; i--, n_out++) {
            snprintf(name, sizeof name, "o%d", n_out);
            assert_int_equal(sj_graph_output(g, p.v[i], name), SJ_OK);
        }
        snprintf(name, sizeof name, "o%d", n_out);
        assert_int_equal(sj_graph_output(g, pick(&p, &f->seed), name), SJ_OK);
        int64_t E = (int64_t)1 << (h_rng(&f->seed) % 8);
        int64_t ns[3] = {E, E / 2 + 1, 1 + (int64_t)(h_rng(&f->seed) % (uint64_t)E)};
        sj_compile_options o;
        sj_compile_options_init(&o);
        o.fusion = gi % 5 != 4;
        char what[64];
        snprintf(what, sizeof what, "random graph %d (%d values)", gi, g->n_nodes);
        assert_true(h_check(f->dev, g, E, ns, 3, &o, f->seed, 1e-3, what));
    }
}

/* Matmuls of every width around the vector (the masked tail of a few rows,
 * the tiles' column edge), contraction lengths short and long, in buckets of
 * 1, 3, 8 and 64 rows at row counts inside each, under both matmul
 * schedules; a gelu epilogue so the tail's outputs pass through it too.
 * NaN-poisoned padding (the harness) fails any lane a mask lets through. */
static void test_matmul_widths(void **state) {
    fixture *f = *state;
    static const int64_t widths[] = {1, 3, 10, 17, 33}, ks[] = {7, 64};
    static const int64_t buckets[] = {1, 3, 8, 64};
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            sj_graph *g;
            assert_int_equal(sj_graph_create(f->ctx, "N", &g), SJ_OK);
            sj_graph_destroy(f->g);
            f->g = g;
            int64_t w = widths[wi], k = ks[ki];
            sj_value x = input(f, "x", 2, (int64_t[]){S, k}), wt = param(f, "w", 2, (int64_t[]){k, w});
            sj_value b = param(f, "b", 1, (int64_t[]){w}), m, y;
            assert_int_equal(sj_graph_matmul(g, x, wt, &m), SJ_OK);
            assert_int_equal(sj_graph_binary(g, SJ_OP_ADD, m, b, &y), SJ_OK);
            assert_int_equal(sj_graph_unary(g, SJ_OP_GELU, y, &y), SJ_OK);
            assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
            for (int tiled = 0; tiled < 2; tiled++)
                for (size_t bi = 0; bi < sizeof buckets / sizeof buckets[0]; bi++) {
                    int64_t E = buckets[bi], ns[3] = {E, E / 2 + 1, 1};
                    sj_compile_options o;
                    sj_compile_options_init(&o);
                    o.matmul = tiled ? SJ_MATMUL_TILED : SJ_MATMUL_AUTO;
                    char what[96];
                    snprintf(what, sizeof what, "[N, %lld] @ [%lld, %lld], bucket %lld, %s", (long long)k,
                             (long long)k, (long long)w, (long long)E, tiled ? "tiled" : "auto");
                    assert_true(h_check(f->dev, g, E, ns, 3, &o, f->seed + wi * 7 + ki, TOL, what));
                }
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_elementwise_chain, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_attention, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_reductions_over_sym, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_row_ops_over_sym, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_row_ops_by_columns, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_ffn_block, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_batched_matmul_and_views, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_batched_weight_packed, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_long_chain, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_static_graph, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_math_accuracy, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_nan_inf_propagate, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cpu_feature_mismatch_refused, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_graph_mismatch_refused, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_random_graphs, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_matmul_widths, setup, h_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
