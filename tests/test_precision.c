/* The precision policy (shapejit/precision.h): the bf16 / fp16 roundings
 * against exhaustive and hand-picked cases, the rule (which params narrow),
 * the host backend against the rounding-aware interpreter with NaN-poisoned
 * padding on every matmul path (register tiles, edges, dot products,
 * batched, gemm, gathers from a narrowed table), the weight buffers (half
 * the bytes, shared by buckets), the options hash and store key, the
 * engine's policy and its bad names, and a GPU target's refusal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/half.h"
#include "runtime/weight_pool.h"
#include "compile/lower/lower.h"
#include "shapejit/engine.h"
#include "shapejit/ext/bucketed_cache.h"
#include "tests/host_harness.h"
#include "tests/test_util.h"

#define S SJ_DIM_SYM
/* As the fp32 host tests: the policy changes the weights both sides read,
 * not how closely the kernels follow the interpreter. */
#define TOL 2e-4

static int setup(void **state) { return h_fixture_setup(state, 0x2545f4914f6cdd1dull); }

/* ---- the roundings ---- */

/* The nearest of a value's two neighbours in a 16-bit format, ties to the
 * even one, by exact double arithmetic: what sj_f32_to_* must return. */
static void check_nearest(float x, uint16_t got, float (*to_f32)(uint16_t), const char *what) {
    double v = x, g = to_f32(got);
    if (isnan(x)) {
        if (!isnan(g)) fail_msg("%s: NaN became %g", what, g);
        return;
    }
    if (isinf(g)) return; /* overflow: checked by the hand-picked cases */
    uint16_t up = (uint16_t)(got + 1), down = (uint16_t)(got - 1);
    double du = fabs(to_f32(up) - v), dd = fabs(to_f32(down) - v), d = fabs(g - v);
    if (d > du || d > dd) fail_msg("%s: %.9g -> %.9g is not the nearest", what, v, g);
    if ((d == du || d == dd) && (got & 1))
        fail_msg("%s: %.9g -> %.9g breaks a tie to the odd side", what, v, g);
}

static void test_bf16_rounding(void **state) {
    (void)state;
    /* every bf16 value survives the round trip (NaN stays a NaN) */
    for (uint32_t b = 0; b < 65536; b++) {
        float f = sj_bf16_to_f32((uint16_t)b);
        if (isnan(f)) assert_true(isnan(sj_bf16_to_f32(sj_f32_to_bf16(f))));
        else assert_int_equal(sj_f32_to_bf16(f), b);
    }
    /* ties: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7; ties go to even */
    assert_int_equal(sj_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
    assert_int_equal(sj_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
    assert_int_equal(sj_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
    assert_int_equal(sj_f32_to_bf16(-2.0f), 0xc000);
    assert_int_equal(sj_f32_to_bf16(INFINITY), 0x7f80);
    assert_int_equal(sj_f32_to_bf16(3.4028235e38f), 0x7f80); /* FLT_MAX rounds up to inf */
    assert_true(isnan(sj_bf16_to_f32(sj_f32_to_bf16(sj_bits_f32(0x7f800001u))))); /* no inf */
    uint64_t s = 7;
    for (int i = 0; i < 200000; i++) {
        float x = sj_bits_f32((uint32_t)h_rng(&s));
        check_nearest(x, sj_f32_to_bf16(x), sj_bf16_to_f32, "bf16");
    }
}

static void test_fp16_rounding(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = sj_f16_to_f32((uint16_t)h);
        if (isnan(f)) assert_true(isnan(sj_f16_to_f32(sj_f32_to_f16(f))));
        else assert_int_equal(sj_f32_to_f16(f), h);
    }
    assert_int_equal(sj_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(sj_f32_to_f16(65519.0f), 0x7bff);
    assert_int_equal(sj_f32_to_f16(65520.0f), 0x7c00); /* the tie goes to infinity */
    assert_int_equal(sj_f32_to_f16(0x1p-24f), 0x0001);  /* smallest subnormal */
    assert_int_equal(sj_f32_to_f16(0x1p-25f), 0x0000);  /* half of it: tie to even 0 */
    assert_int_equal(sj_f32_to_f16(0x1.8p-24f), 0x0002); /* 1.5 units: tie to even 2 */
    assert_int_equal(sj_f32_to_f16(-0.0f), 0x8000);
    assert_float_equal(sj_f16_to_f32(0x3555), 0.333251953125f, 0);
    uint64_t s = 11;
    for (int i = 0; i < 200000; i++) {
        /* random bits, and values in and near binary16's range */
        float x = (i & 1) ? sj_bits_f32((uint32_t)h_rng(&s))
                          : ldexpf(h_uniform(&s, -1, 1), (int)(h_rng(&s) % 50) - 30);
        check_nearest(x, sj_f32_to_f16(x), sj_f16_to_f32, "fp16");
    }
}

static void test_names(void **state) {
    (void)state;
    sj_precision p = SJ_PRECISION_FP32;
    assert_int_equal(sj_precision_from_name("bf16", &p), SJ_OK);
    assert_int_equal(p, SJ_PRECISION_BF16);
    assert_int_equal(sj_precision_from_name("fp16", &p), SJ_OK);
    assert_int_equal(p, SJ_PRECISION_FP16);
    assert_int_equal(sj_precision_from_name("BF16", &p), SJ_E_NOT_FOUND);
    assert_int_equal(sj_precision_from_name("fp8", &p), SJ_E_NOT_FOUND);
    assert_int_equal(sj_precision_from_name(NULL, &p), SJ_E_NOT_FOUND);
    assert_int_equal(p, SJ_PRECISION_FP16);
    assert_string_equal(sj_precision_name(SJ_PRECISION_FP32), "fp32");
    assert_null(sj_precision_name(SJ_PRECISION_COUNT_));
}

/* ---- the rule ---- */

static void test_rule(void **state) {
    fixture *f = *state;
    sj_graph *g = f->g;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 16});
    sj_value w = param(f, "w", 2, (int64_t[]){32, 16});      /* used transposed */
    sj_value c = param(f, "c", 1, (int64_t[]){32});          /* gemm's C: stays */
    sj_value sc = param(f, "scale", 1, (int64_t[]){32});     /* layernorm: stays */
    sj_value emb = param(f, "emb", 2, (int64_t[]){10, 32});  /* tied: gather and matmul */
    sj_value mul = param(f, "mul", 1, (int64_t[]){32});      /* elementwise only: stays */
    sj_value ids, t, h, mm, wt, y, logits, ew;
    int64_t one = 1;
    assert_int_equal(sj_graph_param_typed(g, "ids", SJ_I64, 1, (int64_t[]){1}, &one, &ids), SJ_OK);
    assert_int_equal(sj_graph_transpose(g, w, (int[]){1, 0}, &wt), SJ_OK);
    assert_int_equal(sj_graph_matmul(g, x, wt, &mm), SJ_OK);
    assert_int_equal(sj_graph_gemm(g, x, w, c, 1, 1, false, true, &t), SJ_OK);
    assert_int_equal(sj_graph_binary(g, SJ_OP_ADD, mm, t, &h), SJ_OK);
    assert_int_equal(sj_graph_binary(g, SJ_OP_MUL, h, mul, &h), SJ_OK);
    assert_int_equal(sj_graph_layernorm(g, h, sc, SJ_NO_VALUE, 1, 1e-5f, &y), SJ_OK);
    assert_int_equal(sj_graph_transpose(g, emb, (int[]){1, 0}, &ew), SJ_OK);
    assert_int_equal(sj_graph_matmul(g, y, ew, &logits), SJ_OK);
    sj_value row;
    assert_int_equal(sj_graph_gather(g, emb, ids, 0, &row), SJ_OK);
    assert_int_equal(sj_graph_output(g, logits, "logits"), SJ_OK);
    assert_int_equal(sj_graph_output(g, row, "row"), SJ_OK);

    bool narrow[64];
    assert_true(g->n_nodes <= 64);
    sj_value first;
    assert_int_equal(sj__precision_mark(g, SJ_PRECISION_BF16, narrow, &first), 2);
    assert_true(narrow[w] && narrow[emb]);
    assert_false(narrow[c] || narrow[sc] || narrow[mul] || narrow[ids] || narrow[x]);
    assert_int_equal(first, mm); /* the first contraction a narrowed param feeds */
    assert_int_equal(sj_graph_precision_narrowed(g, SJ_PRECISION_FP16), 2);
    assert_int_equal(sj_graph_precision_narrowed(g, SJ_PRECISION_FP32), 0);

    /* the transform rounds exactly those, and every reader sees it */
    sj_graph *r;
    assert_int_equal(sj_graph_apply_precision(g, SJ_PRECISION_BF16, &r), SJ_OK);
    int changed = 0;
    for (int i = 0; i < 32 * 16; i++) {
        float a = g->nodes[w].data[i], b = r->nodes[w].data[i];
        assert_true(b == sj_bf16_to_f32(sj_f32_to_bf16(a)));
        changed += a != b;
    }
    assert_true(changed > 32 * 16 / 2);
    assert_memory_equal(g->nodes[c].data, r->nodes[c].data, 32 * sizeof(float));
    assert_memory_equal(g->nodes[sc].data, r->nodes[sc].data, 32 * sizeof(float));
    uint8_t h1[32], h2[32];
    sj_graph_hash(g, h1);
    sj_graph_hash(r, h2);
    assert_memory_not_equal(h1, h2, 32);
    sj_graph_destroy(r);
    assert_int_equal(sj_graph_apply_precision(g, (sj_precision)9, &r), SJ_E_INVALID_ARG);
    assert_null(r);
}

/* ---- host against the rounding-aware interpreter ---- */

static void check_policies(fixture *f, int64_t E, const int64_t *ns, int n_ns, const char *what) {
    sj_compile_options o;
    sj_compile_options_init(&o);
    for (int p = SJ_PRECISION_BF16; p <= SJ_PRECISION_FP16; p++) {
        o.precision = (sj_precision)p;
        o.fusion = true;
        assert_true(h_check(f->dev, f->g, E, ns, n_ns, &o, f->seed + (uint64_t)p, TOL, what));
        o.fusion = false;
        assert_true(h_check(f->dev, f->g, E, ns, n_ns, &o, f->seed + 7, TOL, what));
    }
    /* the reference is not fp32's: the weights really are rounded */
    sj_graph *r;
    assert_int_equal(sj_graph_apply_precision(f->g, SJ_PRECISION_BF16, &r), SJ_OK);
    sj_tensor in[8] = {0}, a[8] = {0}, b[8] = {0};
    uint64_t seed = f->seed;
    h_inputs(f->g, ns[0], &seed, in);
    assert_int_equal(sj_interp_run(f->g, ns[0], in, a), SJ_OK);
    assert_int_equal(sj_interp_run(r, ns[0], in, b), SJ_OK);
    int differ = 0;
    for (int o = 0; o < f->g->n_outputs; o++)
        for (int64_t i = 0; i < sj_tensor_numel(&a[o]); i++) differ += !h_close(a[o].data[i], b[o].data[i], 1e-7);
    assert_true(differ > 0);
    h_free_tensors(f->ctx, in, f->g->n_inputs);
    h_free_tensors(f->ctx, a, f->g->n_outputs);
    h_free_tensors(f->ctx, b, f->g->n_outputs);
    sj_graph_destroy(r);
}

/* Weight-bound shapes: the register-tiled kernel (n = 256, 4+ rows), its
 * row edges (1..3 rows), a second matmul reading the first's output. */
static void test_mlp(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 64});
    sj_value w1 = param(f, "w1", 2, (int64_t[]){64, 256}), w2 = param(f, "w2", 2, (int64_t[]){256, 64});
    sj_value b1 = param(f, "b1", 1, (int64_t[]){256});
    sj_value h, y;
    assert_int_equal(sj_graph_matmul(f->g, x, w1, &h), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_ADD, h, b1, &h), SJ_OK);
    assert_int_equal(sj_graph_unary(f->g, SJ_OP_RELU, h, &h), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, h, w2, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    check_policies(f, 8, (int64_t[]){1, 3, 5, 8}, 4, "mlp");
    check_policies(f, 64, (int64_t[]){64, 37}, 2, "mlp");
}

/* The few-rows kernel (buckets of at most 8 rows) at every row count, with
 * a column count that leaves a tail past the vectors (100), a transposed
 * input as operand a (strided), batch dims, and the same under fp32. */
static void test_few_rows(void **state) {
    fixture *f = *state;
    sj_value xt = input(f, "xt", 2, (int64_t[]){40, S});
    sj_value z = input(f, "z", 3, (int64_t[]){3, S, 40});
    sj_value w = param(f, "w", 2, (int64_t[]){40, 100}), w3 = param(f, "w3", 3, (int64_t[]){3, 40, 36});
    sj_value x, y, y3;
    assert_int_equal(sj_graph_transpose(f->g, xt, (int[]){1, 0}, &x), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, x, w, &y), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, z, w3, &y3), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y3, "y3"), SJ_OK);
    static const int64_t ns[] = {1, 2, 3, 4, 5, 6, 7, 8};
    check_policies(f, 8, ns, 8, "few rows");
    sj_compile_options o;
    sj_compile_options_init(&o);
    assert_true(h_check(f->dev, f->g, 8, ns, 8, &o, f->seed, TOL, "few rows, fp32"));
    assert_true(h_check(f->dev, f->g, 5, ns, 5, &o, f->seed, TOL, "few rows, fp32, E=5"));
    o.precision = SJ_PRECISION_BF16;
    assert_true(h_check(f->dev, f->g, 5, ns, 5, &o, f->seed, TOL, "few rows, bf16, E=5"));
    /* 4-float vectors (x86-64-v2: SSE4.2, which every x86-64 CI host has), and
     * 8- and 16-float ones compiled (this host may not run them) */
    o.cpu = "x86-64-v2";
    assert_true(h_check(f->dev, f->g, 8, ns, 8, &o, f->seed, TOL, "few rows, bf16, x86-64-v2"));
    o.precision = SJ_PRECISION_FP32;
    assert_true(h_check(f->dev, f->g, 8, ns, 8, &o, f->seed, TOL, "few rows, fp32, x86-64-v2"));
    static const char *const levels[] = {"x86-64-v3", "x86-64-v4"};
    for (int i = 0; i < 2; i++) {
        o.cpu = levels[i];
        o.precision = SJ_PRECISION_BF16;
        sj_artifact *a;
        if (sj_compile(f->g, 8, &o, &a) != SJ_OK) fail_msg("%s: %s", levels[i], sj_ctx_last_error(f->ctx));
        sj_artifact_destroy(a);
    }
}

/* A gemm with the weight transposed (b contiguous along k: the dot-product
 * kernel), its bias C kept in float32, and a tied table both gathered and
 * contracted with. */
static void test_gemm_and_tied_table(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 48});
    sj_value ids = input(f, "ids", 1, (int64_t[]){S});
    sj_value w = param(f, "w", 2, (int64_t[]){40, 48}), c = param(f, "c", 1, (int64_t[]){40});
    sj_value emb = param(f, "emb", 2, (int64_t[]){9, 40});
    sj_value ids_i, t, row, sum, ew, logits;
    assert_int_equal(sj_graph_cast(f->g, ids, SJ_I64, &ids_i), SJ_OK);
    assert_int_equal(sj_graph_gemm(f->g, x, w, c, 0.5f, 2.0f, false, true, &t), SJ_OK);
    assert_int_equal(sj_graph_gather(f->g, emb, ids_i, 0, &row), SJ_OK);
    assert_int_equal(sj_graph_binary(f->g, SJ_OP_ADD, t, row, &sum), SJ_OK);
    assert_int_equal(sj_graph_transpose(f->g, emb, (int[]){1, 0}, &ew), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, sum, ew, &logits), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, logits, "logits"), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, sum, "sum"), SJ_OK);
    check_policies(f, 16, (int64_t[]){1, 16, 11}, 3, "gemm + tied table");
}

/* Batched heads: [2, N, 16] x [2, 16, 32], the weight a reshape of one
 * param, softmax over the result (float32 throughout). */
static void test_batched(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 3, (int64_t[]){2, S, 16});
    sj_value w = param(f, "w", 2, (int64_t[]){32, 32});
    sj_value wr, y, z;
    assert_int_equal(sj_graph_reshape(f->g, w, 3, (int64_t[]){2, 16, 32}, &wr), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, x, wr, &y), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, y, -1, &z), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, z, "z"), SJ_OK);
    check_policies(f, 32, (int64_t[]){1, 32, 19}, 3, "batched");
}

/* NaN and infinities in a weight, and a value past fp16's range: both
 * sides agree on what the rounding makes of them. */
static void test_special_weights(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 4});
    float wd[4 * 8];
    for (int i = 0; i < 32; i++) wd[i] = 0.1f * (float)(i - 16);
    wd[3] = NAN;
    wd[9] = INFINITY;
    wd[17] = 70000.0f; /* fp16: infinity */
    wd[21] = 1e-6f;    /* fp16: a subnormal */
    sj_value w, y;
    assert_int_equal(sj_graph_param(f->g, "w", 2, (int64_t[]){4, 8}, wd, &w), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, x, w, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    sj_compile_options o;
    sj_compile_options_init(&o);
    for (int p = SJ_PRECISION_BF16; p <= SJ_PRECISION_FP16; p++) {
        o.precision = (sj_precision)p;
        assert_true(h_check(f->dev, f->g, 4, (int64_t[]){1, 4}, 2, &o, f->seed, TOL, "special"));
    }
}

/* ---- weights: half the bytes, one copy for every bucket ---- */

static void test_weight_buffers(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 64});
    sj_value w = param(f, "w", 2, (int64_t[]){64, 128});
    sj_value y;
    assert_int_equal(sj_graph_matmul(f->g, x, w, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    sj_compile_options o;
    sj_compile_options_init(&o);
    uint64_t bytes[3];
    for (int p = 0; p < 3; p++) {
        o.precision = (sj_precision)p;
        sj_artifact *a8, *a16;
        assert_int_equal(sj_compile(f->g, 8, &o, &a8), SJ_OK);
        assert_int_equal(sj_compile(f->g, 16, &o, &a16), SJ_OK);
        const sj_launch_plan *pl = sj__artifact_plan(a8);
        for (int i = 0; i < pl->n_slots; i++)
            if (pl->slots[i].kind == SJ_SLOT_PARAM) assert_int_equal(sj_slot_storage(&pl->slots[i]), p);
        sj_executable *e8, *e16;
        assert_int_equal(sj_artifact_load(a8, f->dev, f->g, &e8), SJ_OK);
        assert_int_equal(sj_artifact_load(a16, f->dev, f->g, &e16), SJ_OK);
        sj_executable_memory_info m8, m16;
        sj_executable_memory(e8, &m8);
        sj_executable_memory(e16, &m16);
        bytes[p] = m8.weight_bytes;
        assert_int_equal(m16.weight_bytes, m8.weight_bytes);
        sj_weight_pool_stats ws;
        sj__weight_pool_stats_get(sj__ctx_weight_pool(f->ctx), &ws);
        assert_int_equal(ws.buffers, 1); /* both buckets share the one buffer */
        assert_int_equal(ws.bytes, bytes[p]);
        sj_executable_destroy(e8);
        sj_executable_destroy(e16);
        sj_artifact_destroy(a8);
        sj_artifact_destroy(a16);
    }
    assert_int_equal(bytes[0], 64 * 128 * 4);
    assert_int_equal(bytes[1], 64 * 128 * 2);
    assert_int_equal(bytes[2], 64 * 128 * 2);
}

/* A plan naming a storage that does not exist is refused before any use. */
static void test_plan_checks_storage(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 8});
    sj_value w = param(f, "w", 2, (int64_t[]){8, 8});
    sj_value y;
    assert_int_equal(sj_graph_matmul(f->g, x, w, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    sj_lowered *l;
    sj_lower_options lo = {.fusion = true, .prefix = "t_", .precision = SJ_PRECISION_BF16};
    assert_int_equal(sj__lower(f->g, 4, &lo, &l), SJ_OK);
    assert_int_equal(sj__plan_validate(f->ctx, &l->plan), SJ_OK);
    for (int i = 0; i < l->plan.n_slots; i++)
        if (l->plan.slots[i].kind == SJ_SLOT_PARAM) {
            assert_int_equal(l->plan.slots[i].bytes, 8 * 8 * 2);
            l->plan.slots[i].offset = 3;
        }
    assert_int_equal(sj__plan_validate(f->ctx, &l->plan), SJ_E_CORRUPT);
    assert_error_contains(f->ctx, "unknown storage 3");
    sj__lowered_destroy(l);
}

/* ---- options, keys, targets ---- */

static void test_options_hash_and_refusals(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 8});
    sj_value w = param(f, "w", 2, (int64_t[]){8, 8});
    sj_value y;
    assert_int_equal(sj_graph_matmul(f->g, x, w, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    sj_compile_options o;
    sj_compile_options_init(&o);
    assert_int_equal(o.precision, SJ_PRECISION_FP32);
    uint64_t h[3];
    for (int p = 0; p < 3; p++) {
        o.precision = (sj_precision)p;
        h[p] = sj_compile_options_hash(&o);
    }
    assert_true(h[0] != h[1] && h[1] != h[2] && h[0] != h[2]);
    o.precision = (sj_precision)5;
    sj_artifact *a = NULL;
    assert_int_equal(sj_compile(f->g, 8, &o, &a), SJ_E_INVALID_ARG);
    assert_error_contains(f->ctx, "precision 5 is not fp32, bf16 or fp16");
    assert_null(a);
    /* a GPU target that cannot lower the policy says so; never float32 code */
    o.target = SJ_TARGET_NVRTC;
    for (int p = SJ_PRECISION_BF16; p <= SJ_PRECISION_FP16; p++) {
        o.precision = (sj_precision)p;
        sj_status st = sj_compile(f->g, 8, &o, &a);
        assert_int_equal(st, SJ_E_UNSUPPORTED);
        char want[96];
        snprintf(want, sizeof want, "precision %s not supported by target nvrtc for op matmul",
                 sj_precision_name((sj_precision)p));
        assert_error_contains(f->ctx, want);
        assert_null(a);
    }
    /* NVPTX lowers it: its text reads 16-bit words (test_nvptx_emu runs it) */
    o.target = SJ_TARGET_NVPTX;
    o.precision = SJ_PRECISION_BF16;
    char *ir = NULL;
    size_t len;
    assert_int_equal(sj_emit_text(f->g, 8, &o, SJ_EMIT_LLVM_IR, &ir, &len), SJ_OK);
    assert_non_null(strstr(ir, "load i16"));
    sj_free(f->ctx, ir);
}

/* ---- the engine: policy by name, in the store key, the interpreter ---- */

static const char sjg[] = "graph mlp(N) {\n"
                          "  input x: [N, 32]\n"
                          "  param w: [32, 64] = random(seed=3, scale=0.5)\n"
                          "  y = relu(matmul(x, w))\n"
                          "  output y\n"
                          "}\n";

typedef struct engine_run {
    float y[5 * 64];
    sj_engine_stats stats;
} engine_run;

static sj_status run_engine(sj_ctx *ctx, const char *model, const char *store, const char *backend,
                            sj_precision precision, engine_run *out) {
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.ladder = "list:8";
    cfg.store_path = store;
    cfg.backend = backend;
    cfg.precision = precision;
    sj_engine *e;
    SJ_TRY(sj_engine_open(ctx, model, &cfg, &e));
    float x[5 * 32];
    for (int i = 0; i < 5 * 32; i++) x[i] = 0.05f * (float)(i % 17) - 0.3f;
    sj_named_tensor in = {"x", {.rank = 2, .dims = {5, 32}, .data = x}}, outt = {0};
    sj_status st = sj_engine_run(e, &in, 1, &outt, 1, NULL);
    if (st == SJ_OK) {
        memcpy(out->y, outt.tensor.data, sizeof out->y);
        sj_tensor_free(ctx, &outt.tensor);
    }
    sj_engine_stats_get(e, &out->stats);
    sj_engine_close(e);
    return st;
}

static void test_engine(void **state) {
    fixture *f = *state;
    char dir[64], model[128], store[128];
    assert_true(scratch_dir_create(dir, sizeof dir, "precision"));
    snprintf(model, sizeof model, "%s/mlp.sjg", dir);
    snprintf(store, sizeof store, "%s/s.db", dir);
    write_text_file(model, sjg);
    engine_run *r = calloc(6, sizeof *r);
    assert_int_equal(run_engine(f->ctx, model, store, "host", SJ_PRECISION_FP32, &r[0]), SJ_OK);
    assert_int_equal(r[0].stats.compiles, 1);
    /* bf16 misses the fp32 row: another options hash, another key */
    assert_int_equal(run_engine(f->ctx, model, store, "host", SJ_PRECISION_BF16, &r[1]), SJ_OK);
    assert_int_equal(r[1].stats.compiles, 1);
    assert_int_equal(r[1].stats.store_hits, 0);
    assert_int_equal(r[1].stats.weight_bytes, 32 * 64 * 2);
    /* and both are then found */
    assert_int_equal(run_engine(f->ctx, model, store, "host", SJ_PRECISION_BF16, &r[2]), SJ_OK);
    assert_int_equal(r[2].stats.store_hits, 1);
    assert_int_equal(run_engine(f->ctx, model, store, "host", SJ_PRECISION_FP32, &r[3]), SJ_OK);
    assert_int_equal(r[3].stats.store_hits, 1);
    assert_int_equal(r[3].stats.weight_bytes, 32 * 64 * 4);
    assert_memory_equal(r[0].y, r[3].y, sizeof r[0].y);
    assert_memory_equal(r[1].y, r[2].y, sizeof r[1].y);
    assert_memory_not_equal(r[0].y, r[1].y, sizeof r[0].y);
    /* the interpreter under the same policy agrees with the host */
    assert_int_equal(run_engine(f->ctx, model, NULL, "interp", SJ_PRECISION_BF16, &r[4]), SJ_OK);
    for (int i = 0; i < 5 * 64; i++) assert_true(h_close(r[1].y[i], r[4].y[i], TOL));
    assert_int_equal(run_engine(f->ctx, model, NULL, "interp", SJ_PRECISION_FP32, &r[5]), SJ_OK);
    for (int i = 0; i < 5 * 64; i++) assert_true(h_close(r[0].y[i], r[5].y[i], TOL));
    /* bad names are refused (by the name conversion the caller makes), and
     * a value outside the enum at open, naming the value */
    sj_precision p = SJ_PRECISION_FP16;
    assert_int_equal(sj_precision_from_name("bfloat16", &p), SJ_E_NOT_FOUND);
    assert_int_equal(sj_precision_from_name("", &p), SJ_E_NOT_FOUND);
    assert_int_equal(p, SJ_PRECISION_FP16);
    assert_int_equal(run_engine(f->ctx, model, NULL, "host", (sj_precision)7, &r[0]), SJ_E_INVALID_ARG);
    assert_error_contains(f->ctx, "engine: precision 7 is not fp32, bf16 or fp16");
    assert_int_equal(run_engine(f->ctx, model, NULL, "interp", (sj_precision)-1, &r[0]), SJ_E_INVALID_ARG);
    free(r);
    remove_tree(dir);
}

/* The interpreter compiler keys its policy too. */
static void test_interp_compiler_options(void **state) {
    (void)state;
    sj_compiler a, b;
    assert_int_equal(sj_interp_compiler_precision(SJ_PRECISION_FP32, &a), SJ_OK);
    assert_int_equal(a.options_len, 0);
    assert_int_equal(sj_interp_compiler_precision(SJ_PRECISION_BF16, &a), SJ_OK);
    assert_int_equal(sj_interp_compiler_precision(SJ_PRECISION_FP16, &b), SJ_OK);
    assert_true(a.options_len > 0 && b.options_len > 0);
    assert_memory_not_equal(a.options, b.options, a.options_len);
    assert_int_equal(sj_interp_compiler_precision((sj_precision)-1, &a), SJ_E_INVALID_ARG);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_rounding),
        cmocka_unit_test(test_fp16_rounding),
        cmocka_unit_test(test_names),
        cmocka_unit_test_setup_teardown(test_rule, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_mlp, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_few_rows, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gemm_and_tied_table, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_batched, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_special_weights, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_weight_buffers, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_plan_checks_storage, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_options_hash_and_refusals, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_engine, setup, h_fixture_teardown),
        cmocka_unit_test(test_interp_compiler_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
