/* Ulp sweep of the host backend's inline transcendental functions
 * (compile/llvm/host_math.c) against libm: one kernel per function compiled
 * through the host backend, run over 2^21 inputs (every 4096th bit pattern,
 * so every binade of both signs with denormals, infinities and NaNs, plus
 * dense linear sweeps over each function's working range and hand-picked
 * boundaries), each result compared with the double-precision libm result
 * rounded to float. pow gets its own pairs: y scaled so y log2 x spans
 * underflow to overflow, x next to 1 with large y, negative x with integral
 * and fractional y, random bit patterns and C's special-case grid.
 *
 * Runs for this machine's CPU, for x86-64-v2 (no FMA, no AVX: pow is a libm
 * call there) and for x86-64-v2 with AVX (inline pow without FMA), so the
 * bounds hold whether or not fmuladd fuses. The bounds below are the
 * measured maxima (docs/host-math.md); a change that loses accuracy fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <float.h>

#include "tests/host_harness.h"
#include "tests/skip.h"

#define S SJ_DIM_SYM
#define COUNT (1 << 21)

enum { F_EXP, F_LOG, F_ERF, F_TANH, F_SIGMOID, F_POW, N_FUNCS };
static const char *const names[N_FUNCS] = {"exp", "log", "erf", "tanh", "sigmoid", "pow"};
/* Max ulp allowed per function: the measured maxima. */
static const int64_t max_ulp[N_FUNCS] = {1, 1, 6, 1, 2, 1};

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* A float's position on the number line in ulps (-0 and +0 both 0). */
static int64_t ordinal(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u & 0x80000000u ? -(int64_t)(u & 0x7fffffffu) : (int64_t)u;
}

/* Ulps between got and want; NaN matches only NaN and a zero only the zero
 * of its sign (INT64_MAX otherwise). */
static int64_t ulps(float got, float want) {
    if (isnan(got) || isnan(want)) return isnan(got) && isnan(want) ? 0 : INT64_MAX;
    if (got == 0.0f && want == 0.0f) return !signbit(got) == !signbit(want) ? 0 : INT64_MAX;
    int64_t d = ordinal(got) - ordinal(want);
    return d < 0 ? -d : d;
}

static double reference(int fn, double x, double y) {
    switch (fn) {
    case F_EXP: return exp(x);
    case F_LOG: return log(x);
    case F_ERF: return erf(x);
    case F_TANH: return tanh(x);
    case F_SIGMOID: return 1.0 / (1.0 + exp(-x));
    default: return pow(x, y);
    }
}

static const float specials[] = {
    0.0f, -0.0f, 0x1p-149f, -0x1p-149f, 0x1.fffffcp-127f, -0x1.fffffcp-127f, FLT_MIN, -FLT_MIN,
    FLT_MAX, -FLT_MAX, INFINITY, -INFINITY, NAN, -NAN, 1.0f, -1.0f, 0.5f, 2.0f,
    88.72283f, 88.72284f, 89.0f, -87.33655f, -103.972f, -104.0f, -89.0f, 0.625f, -0.625f,
    0.62499994f, 3.92f, -3.92f, 3.9199998f, 4.0f, -4.0f, 1.41421354f, 1.41421366f, 0.70710677f,
    0x1p-126f, 0x1.000002p-126f, 1.0000001f, 0.99999994f, 1e-30f, -1e-6f, 9.0f, -9.0f};
#define N_SPECIALS ((int)(sizeof specials / sizeof specials[0]))

/* x for the one-operand functions. */
static void fill_x(float *x) {
    uint64_t seed = 0x2545f4914f6cdd1dull;
    for (int i = 0; i < COUNT / 2; i++) /* every 4096th pattern, low bits varied */
        x[i] = from_bits((uint32_t)i * 4096u + (uint32_t)(h_rng(&seed) & 4095u));
    int q = COUNT / 8;
    for (int i = 0; i < q; i++) {
        double t = (double)i / (q - 1);
        x[COUNT / 2 + i] = (float)(-110.0 + 220.0 * t);         /* exp, sigmoid */
        x[COUNT / 2 + q + i] = (float)(-6.0 + 12.0 * t);        /* erf, tanh */
        x[COUNT / 2 + 2 * q + i] = (float)(0.25 + 3.75 * t);    /* log */
        x[COUNT / 2 + 3 * q + i] = (float)(0.98 + 0.04 * t);    /* log next to 1 */
    }
    memcpy(x, specials, sizeof specials);
}

/* (x, y) pairs for pow. */
static void fill_pow(float *x, float *y) {
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int q = COUNT / 4;
    for (int i = 0; i < q; i++) {
        /* Positive x over every binade, y so that y log2 x is in [-160, 140]. */
        float a = from_bits((uint32_t)i * 4096u + (uint32_t)(h_rng(&seed) & 4095u));
        if (!(a > 0.0f) || isinf(a)) a = 1.5f;
        double l = log2(a), t = -160.0 + 300.0 * (double)(h_rng(&seed) >> 11) / 0x1p53;
        x[i] = a;
        y[i] = fabs(l) > 1e-3 ? (float)(t / l) : h_uniform(&seed, -100, 100);
        /* x within 1000 ulps of 1, large y. */
        int64_t k = (int64_t)(h_rng(&seed) % 2001) - 1000;
        x[q + i] = from_bits((uint32_t)(0x3f800000 + k));
        y[q + i] = h_uniform(&seed, -2e6f, 2e6f);
        /* Negative x: integral y (odd and even) half the time, else fractional. */
        x[2 * q + i] = -h_uniform(&seed, 0.05f, 20.0f);
        y[2 * q + i] = i & 1 ? (float)((int64_t)(h_rng(&seed) % 121) - 60) : h_uniform(&seed, -30, 30);
        /* Any bit patterns. */
        x[3 * q + i] = from_bits((uint32_t)h_rng(&seed));
        y[3 * q + i] = from_bits((uint32_t)h_rng(&seed));
    }
    static const float ys[] = {0.0f, -0.0f, 0.5f, -0.5f, 1.0f, -1.0f, 2.0f, -2.0f, 3.0f, -3.0f,
                               1.5f, -1.5f, INFINITY, -INFINITY, NAN, 1e10f, -1e10f,
                               16777215.0f, -16777215.0f, 16777216.0f, 127.0f, 128.0f,
                               -149.0f, -150.0f, 0x1p-149f};
    int n = 0;
    for (int i = 0; i < N_SPECIALS; i++)
        for (size_t j = 0; j < sizeof ys / sizeof ys[0]; j++, n++) {
            x[n] = specials[i];
            y[n] = ys[j];
        }
}

static void sweep(fixture *f, const char *cpu, const char *features, const float *xs, const float *px, const float *py) {
    sj_graph *g = f->g;
    sj_value x = input(f, "x", 1, (int64_t[]){S}), a = input(f, "px", 1, (int64_t[]){S});
    sj_value b = input(f, "py", 1, (int64_t[]){S}), out[N_FUNCS];
    static const sj_op ops[] = {SJ_OP_EXP, SJ_OP_LOG, SJ_OP_ERF, SJ_OP_TANH, SJ_OP_SIGMOID};
    for (int i = 0; i < F_POW; i++) {
        assert_int_equal(sj_graph_unary(g, ops[i], x, &out[i]), SJ_OK);
        assert_int_equal(sj_graph_output(g, out[i], names[i]), SJ_OK);
    }
    assert_int_equal(sj_graph_binary(g, SJ_OP_POW, a, b, &out[F_POW]), SJ_OK);
    assert_int_equal(sj_graph_output(g, out[F_POW], names[F_POW]), SJ_OK);
    sj_compile_options o;
    sj_compile_options_init(&o);
    o.cpu = cpu;
    o.features = features;
    o.fusion = false; /* one kernel per function */
    sj_artifact *art;
    assert_int_equal(sj_compile(g, COUNT, &o, &art), SJ_OK);
    sj_tensor in[3] = {{.rank = 1, .dims = {COUNT}, .data = (float *)xs},
                       {.rank = 1, .dims = {COUNT}, .data = (float *)px},
                       {.rank = 1, .dims = {COUNT}, .data = (float *)py}};
    sj_tensor got[N_FUNCS];
    assert_int_equal(h_run(f->dev, art, g, COUNT, in, got), SJ_OK);
    int ok = 1;
    for (int fn = 0; fn < N_FUNCS; fn++) {
        int64_t worst = 0, at = 0;
        for (int i = 0; i < COUNT; i++) {
            float a1 = fn == F_POW ? px[i] : xs[i], a2 = fn == F_POW ? py[i] : 0.0f;
            int64_t d = ulps(got[fn].data[i], (float)reference(fn, a1, a2));
            if (d > worst) {
                worst = d;
                at = i;
            }
        }
        float a1 = fn == F_POW ? px[at] : xs[at], a2 = fn == F_POW ? py[at] : 0.0f;
        char what[48];
        if (worst == INT64_MAX) snprintf(what, sizeof what, "a NaN or zero-sign mismatch");
        else snprintf(what, sizeof what, "max %lld ulp", (long long)worst);
        printf("%-7s %-14s %s at (%.9g, %.9g): %.9g, libm %.9g\n", names[fn],
               features ? "x86-64-v2+avx" : cpu ? cpu : "native", what, a1, a2, got[fn].data[at],
               (float)reference(fn, a1, a2));
        if (worst > max_ulp[fn]) {
            printf("  %s: over the %lld ulp bound\n", names[fn], (long long)max_ulp[fn]);
            ok = 0;
        }
    }
    h_free_tensors(f->ctx, got, N_FUNCS);
    sj_artifact_destroy(art);
    assert_true(ok);
}

typedef struct inputs {
    float *x, *px, *py;
} inputs;

static void run_for(void **state, const char *cpu, const char *features) {
    fixture *f = *state;
    inputs in = {malloc(COUNT * sizeof(float)), malloc(COUNT * sizeof(float)),
                 malloc(COUNT * sizeof(float))};
    assert_non_null(in.x);
    assert_non_null(in.px);
    assert_non_null(in.py);
    fill_x(in.x);
    fill_pow(in.px, in.py);
    sweep(f, cpu, features, in.x, in.px, in.py);
    free(in.x);
    free(in.px);
    free(in.py);
}

static void test_native(void **state) { run_for(state, NULL, NULL); }

#if defined(__x86_64__)
/* The lowest level a CI machine can have: SSE4, no FMA, so fmuladd does
 * not fuse and vectors are 4 wide. */
static void test_x86_64_v2(void **state) { run_for(state, "x86-64-v2", NULL); }

/* AVX without FMA (Sandy Bridge): the inline pow with unfused multiply-adds. */
static void test_avx_without_fma(void **state) {
    if (!__builtin_cpu_supports("avx")) SJ_SKIP("this CPU has no AVX to run the code on");
    run_for(state, "x86-64-v2", "+avx");
}
#endif

static int setup(void **state) { return h_fixture_setup(state, 0x5eed); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_native, setup, h_fixture_teardown),
#if defined(__x86_64__)
        cmocka_unit_test_setup_teardown(test_x86_64_v2, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_avx_without_fma, setup, h_fixture_teardown),
#endif
    };
    return sj_run_tests(tests, NULL, NULL);
}
