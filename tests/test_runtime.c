/* The host device and executables: native kernels following the plan ABI,
 * host object files through ORC, eager runs checked against the reference
 * interpreter, capture and replay at several active extents, pins under
 * eviction pressure (a wrong pin is a use-after-free under ASan), zero
 * allocations in steady state, device release, bad plans and requests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

#include "shapejit/ext/compile.h"
#include "shapejit/ext/interp.h"
#include "shapejit/ext/metadata_cache.h"
#include "shapejit/ext/device.h"
#include "shapejit/ext/runtime.h"
#include "plan/plan.h"
#include "runtime/device_impl.h"
#include "runtime/executable_create.h"
#include "tests/test_util.h"

/* ---------------------------------------------------------------- kernels
 * Buffers laid out at the bucket extent E; loops stop at the active extent. */

/* y = x * s[0] over the first n rows of [N, cols]; info {cols}. */
static void k_scale(void *const *b, const int64_t *info, int64_t n, void *scratch) {
    (void)scratch;
    const float *x = b[0], *s = b[1];
    float *y = b[2];
    for (int64_t i = 0; i < n * info[0]; i++) y[i] = x[i] * s[0];
}

/* z[i, j] = y[i, j] + bias[j]; info {cols}. */
static void k_add_row(void *const *b, const int64_t *info, int64_t n, void *scratch) {
    (void)scratch;
    const float *y = b[0], *bias = b[1];
    float *z = b[2];
    int64_t cols = info[0];
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < cols; j++) z[i * cols + j] = y[i * cols + j] + bias[j];
}

/* s[j] = sum over the first n rows of z[:, j]: a reduction over the symbolic
 * axis, so a padded row that leaked in would change the answer; info {cols}. */
static void k_col_sum(void *const *b, const int64_t *info, int64_t n, void *scratch) {
    (void)scratch;
    const float *z = b[0];
    float *s = b[1];
    int64_t cols = info[0];
    for (int64_t j = 0; j < cols; j++) {
        double acc = 0;
        for (int64_t i = 0; i < n; i++) acc += z[i * cols + j];
        s[j] = (float)acc;
    }
}

/* y = a * k[0] for a: [rows, N] (symbolic inner axis); info {rows, E}. */
static void k_scale_cols(void *const *b, const int64_t *info, int64_t n, void *scratch) {
    (void)scratch;
    const float *a = b[0], *k = b[1];
    float *y = b[2];
    for (int64_t i = 0; i < info[0]; i++)
        for (int64_t j = 0; j < n; j++) y[i * info[1] + j] = a[i * info[1] + j] * k[0];
}

/* y = q + q^T for q: [N, N]; info {E}. */
static void k_sym_add(void *const *b, const int64_t *info, int64_t n, void *scratch) {
    (void)scratch;
    const float *q = b[0];
    float *y = b[1];
    int64_t e = info[0];
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) y[i * e + j] = q[i * e + j] + q[j * e + i];
}

static const sj_native_kernel kernels_a[] = {
    {"scale", k_scale, NULL, 0}, {"add_row", k_add_row, NULL, 0}, {"col_sum", k_col_sum, NULL, 0}};
static const sj_native_kernel kernels_b[] = {{"scale_cols", k_scale_cols, NULL, 0},
                                                  {"sym_add", k_sym_add, NULL, 0}};

/* --------------------------------------------------------------- contexts */

typedef struct fixture {
    alloc_counter counts;
    sj_ctx *ctx;
    sj_device *dev;
} fixture;

static fixture *fixture_new(const sj_mdcache_policy *policy) {
    fixture *f = calloc(1, sizeof *f);
    f->ctx = ctx_with_counter(&f->counts);
    assert_int_equal(sj_host_device_create(f->ctx, policy, &f->dev), SJ_OK);
    return f;
}

static void fixture_free(fixture *f) {
    sj_device_destroy(f->dev);
    sj_ctx_destroy(f->ctx);
    free(f);
}

/* ----------------------------------------------------------------- graphs */

#define COLS 8

/* Graph A: x [N, 8]; z = x * two + b; s = reduce_sum(z, axis 0) -> [8].
 * Outputs z, s. Its plan: scale -> arena, add_row -> z, col_sum -> s. */
typedef struct model_a {
    sj_graph *g;
    sj_value two, b;
    sj_kernel_desc kernels[3];
    sj_buffer_slot slots[6];
    sj_launch launches[3];
    int32_t launch_slots[8];
    int64_t words[3];
    sj_launch_plan plan;
} model_a;

static void model_a_init(sj_ctx *ctx, int64_t extent, float bias_base, model_a *m) {
    memset(m, 0, sizeof *m);
    assert_int_equal(sj_graph_create(ctx, "N", &m->g), SJ_OK);
    int64_t xd[] = {SJ_DIM_SYM, COLS}, one[] = {1}, cols[] = {COLS};
    float two = 2.0f, bias[COLS];
    for (int j = 0; j < COLS; j++) bias[j] = bias_base + (float)j;
    sj_value x, y, z, s;
    assert_int_equal(sj_graph_input(m->g, "x", 2, xd, &x), SJ_OK);
    assert_int_equal(sj_graph_param(m->g, "two", 1, one, &two, &m->two), SJ_OK);
    assert_int_equal(sj_graph_param(m->g, "b", 1, cols, bias, &m->b), SJ_OK);
    assert_int_equal(sj_graph_binary(m->g, SJ_OP_MUL, x, m->two, &y), SJ_OK);
    assert_int_equal(sj_graph_binary(m->g, SJ_OP_ADD, y, m->b, &z), SJ_OK);
    int axis0 = 0;
    assert_int_equal(sj_graph_reduce(m->g, SJ_OP_REDUCE_SUM, z, 1, &axis0, false, &s), SJ_OK);
    assert_int_equal(sj_graph_output(m->g, z, "z"), SJ_OK);
    assert_int_equal(sj_graph_output(m->g, s, "s"), SJ_OK);

    int64_t rows_bytes = extent * COLS * 4;
    strcpy(m->kernels[0].name, "scale");
    strcpy(m->kernels[1].name, "add_row");
    strcpy(m->kernels[2].name, "col_sum");
    m->slots[0] = (sj_buffer_slot){SJ_SLOT_INPUT, 0, 0, rows_bytes};
    m->slots[1] = (sj_buffer_slot){SJ_SLOT_PARAM, m->two, 0, 4};
    m->slots[2] = (sj_buffer_slot){SJ_SLOT_PARAM, m->b, 0, COLS * 4};
    m->slots[3] = (sj_buffer_slot){SJ_SLOT_ARENA, 0, 0, rows_bytes};
    m->slots[4] = (sj_buffer_slot){SJ_SLOT_OUTPUT, 0, 0, rows_bytes};
    m->slots[5] = (sj_buffer_slot){SJ_SLOT_OUTPUT, 1, 0, COLS * 4};
    int32_t ls[] = {0, 1, 3, 3, 2, 4, 4, 5};
    memcpy(m->launch_slots, ls, sizeof ls);
    /* Launches 0 and 1 share their words: one cached info buffer for both. */
    m->words[0] = COLS;
    m->words[1] = COLS;
    m->words[2] = extent;
    m->launches[0] = (sj_launch){.kernel = 0, .first_slot = 0, .n_slots = 3, .first_word = 0,
                                 .n_words = 1};
    m->launches[1] = (sj_launch){.kernel = 1, .first_slot = 3, .n_slots = 3, .first_word = 0,
                                 .n_words = 1};
    m->launches[2] = (sj_launch){.kernel = 2, .first_slot = 6, .n_slots = 2, .first_word = 1,
                                 .n_words = 2};
    m->plan = (sj_launch_plan){.extent = extent,
                               .n_kernels = 3,
                               .kernels = m->kernels,
                               .n_slots = 6,
                               .slots = m->slots,
                               .n_launches = 3,
                               .launches = m->launches,
                               .n_launch_slots = 8,
                               .launch_slots = m->launch_slots,
                               .n_words = 3,
                               .words = m->words,
                               .arena_bytes = rows_bytes};
}

static sj_executable *model_a_load(fixture *f, model_a *m) {
    sj_executable *exe;
    sj_status st = sj__executable_create(f->dev, &m->plan, SJ_CODE_HOST_NATIVE, kernels_a,
                                        sizeof kernels_a, m->g, &exe);
    if (st != SJ_OK) fail_msg("create: %s", sj_ctx_last_error(f->ctx));
    return exe;
}

/* Graph B: a [4, N] -> a * three; q [N, N] -> q + q^T. The symbolic dim sits
 * on an inner axis, and on two axes at once. */
typedef struct model_b {
    sj_graph *g;
    sj_kernel_desc kernels[2];
    sj_buffer_slot slots[5];
    sj_launch launches[2];
    int32_t launch_slots[5];
    int64_t words[3];
    sj_launch_plan plan;
} model_b;

static void model_b_init(sj_ctx *ctx, int64_t extent, model_b *m) {
    memset(m, 0, sizeof *m);
    assert_int_equal(sj_graph_create(ctx, "N", &m->g), SJ_OK);
    int64_t ad[] = {4, SJ_DIM_SYM}, qd[] = {SJ_DIM_SYM, SJ_DIM_SYM}, one[] = {1};
    float three = 3.0f;
    sj_value a, q, k, y, qt, w;
    assert_int_equal(sj_graph_input(m->g, "a", 2, ad, &a), SJ_OK);
    assert_int_equal(sj_graph_input(m->g, "q", 2, qd, &q), SJ_OK);
    assert_int_equal(sj_graph_param(m->g, "three", 1, one, &three, &k), SJ_OK);
    assert_int_equal(sj_graph_binary(m->g, SJ_OP_MUL, a, k, &y), SJ_OK);
    int perm[] = {1, 0};
    assert_int_equal(sj_graph_transpose(m->g, q, perm, &qt), SJ_OK);
    assert_int_equal(sj_graph_binary(m->g, SJ_OP_ADD, q, qt, &w), SJ_OK);
    assert_int_equal(sj_graph_output(m->g, y, "y"), SJ_OK);
    assert_int_equal(sj_graph_output(m->g, w, "w"), SJ_OK);

    strcpy(m->kernels[0].name, "scale_cols");
    strcpy(m->kernels[1].name, "sym_add");
    m->slots[0] = (sj_buffer_slot){SJ_SLOT_INPUT, 0, 0, 4 * extent * 4};
    m->slots[1] = (sj_buffer_slot){SJ_SLOT_PARAM, k, 0, 4};
    m->slots[2] = (sj_buffer_slot){SJ_SLOT_OUTPUT, 0, 0, 4 * extent * 4};
    m->slots[3] = (sj_buffer_slot){SJ_SLOT_INPUT, 1, 0, extent * extent * 4};
    m->slots[4] = (sj_buffer_slot){SJ_SLOT_OUTPUT, 1, 0, extent * extent * 4};
    int32_t ls[] = {0, 1, 2, 3, 4};
    memcpy(m->launch_slots, ls, sizeof ls);
    m->words[0] = 4;
    m->words[1] = extent;
    m->words[2] = extent;
    m->launches[0] = (sj_launch){.kernel = 0, .first_slot = 0, .n_slots = 3, .first_word = 0,
                                 .n_words = 2};
    m->launches[1] = (sj_launch){.kernel = 1, .first_slot = 3, .n_slots = 2, .first_word = 2,
                                 .n_words = 1};
    m->plan = (sj_launch_plan){.extent = extent,
                               .n_kernels = 2,
                               .kernels = m->kernels,
                               .n_slots = 5,
                               .slots = m->slots,
                               .n_launches = 2,
                               .launches = m->launches,
                               .n_launch_slots = 5,
                               .launch_slots = m->launch_slots,
                               .n_words = 3,
                               .words = m->words};
}

/* ------------------------------------------------------------ comparisons */

/* Inputs for a graph at extent n: deterministic values from `seed`. */
static void make_inputs(sj_ctx *ctx, const sj_graph *g, int64_t n, int seed, sj_tensor *in) {
    for (int i = 0; i < sj_graph_num_inputs(g); i++) {
        sj_value_desc d;
        assert_int_equal(sj_graph_input_desc(g, i, &d), SJ_OK);
        sj_shape s = sj_shape_at(&d.shape, n);
        assert_int_equal(sj_tensor_alloc(ctx, s.rank, s.dims, &in[i]), SJ_OK);
        int64_t numel = sj_tensor_numel(&in[i]);
        for (int64_t k = 0; k < numel; k++)
            in[i].data[k] = (float)((k * 7 + seed * 13 + i * 5) % 23) - 11.0f;
    }
}

static void free_tensors(sj_ctx *ctx, sj_tensor *t, int n) {
    for (int i = 0; i < n; i++) sj_tensor_free(ctx, &t[i]);
}

static void assert_tensors_close(const sj_tensor *a, const sj_tensor *b, int n) {
    for (int i = 0; i < n; i++) {
        assert_int_equal(a[i].rank, b[i].rank);
        for (int d = 0; d < a[i].rank; d++) assert_int_equal(a[i].dims[d], b[i].dims[d]);
        int64_t numel = sj_tensor_numel(&a[i]);
        for (int64_t k = 0; k < numel; k++)
            if (fabsf(a[i].data[k] - b[i].data[k]) > 1e-4f * (1.0f + fabsf(b[i].data[k])))
                fail_msg("output %d element %lld: %g vs %g", i, (long long)k, a[i].data[k],
                         b[i].data[k]);
    }
}

typedef sj_status (*run_fn)(sj_executable *, int64_t, const sj_tensor *, sj_tensor *);

/* Runs exe (eagerly or by replay) at extent n and compares with the
 * interpreter. */
static void check_against_interp(fixture *f, sj_executable *exe, const sj_graph *g, int64_t n,
                                 int seed, run_fn run) {
    sj_tensor in[2] = {{0}}, got[2] = {{0}}, want[2] = {{0}};
    int ni = sj_graph_num_inputs(g), no = sj_graph_num_outputs(g);
    make_inputs(f->ctx, g, n, seed, in);
    sj_status st = run(exe, n, in, got);
    if (st != SJ_OK) fail_msg("run at %lld: %s", (long long)n, sj_ctx_last_error(f->ctx));
    assert_int_equal(sj_interp_run(g, n, in, want), SJ_OK);
    assert_tensors_close(got, want, no);
    free_tensors(f->ctx, in, ni);
    free_tensors(f->ctx, got, no);
    free_tensors(f->ctx, want, no);
}

/* ------------------------------------------------------------------ tests */

static void test_eager_matches_interpreter(void **state) {
    (void)state;
    fixture *f = fixture_new(NULL);
    model_a a;
    model_a_init(f->ctx, 16, 0.5f, &a);
    sj_executable *exe = model_a_load(f, &a);
    assert_int_equal(sj_executable_extent(exe), 16);
    assert_int_equal(sj_executable_num_inputs(exe), 1);
    assert_int_equal(sj_executable_num_outputs(exe), 2);
    /* Largest first: a smaller run must not see the rows the larger one left
     * in the padded buffers and the arena. */
    int64_t extents[] = {16, 9, 1, 5, 16};
    for (int i = 0; i < 5; i++)
        check_against_interp(f, exe, a.g, extents[i], i, sj_executable_run);
    sj_executable_destroy(exe);
    sj_graph_destroy(a.g);
    fixture_free(f);
}

static void test_symbolic_inner_and_double_axes(void **state) {
    (void)state;
    fixture *f = fixture_new(NULL);
    model_b b;
    model_b_init(f->ctx, 8, &b);
    sj_executable *exe;
    assert_int_equal(sj__executable_create(f->dev, &b.plan, SJ_CODE_HOST_NATIVE, kernels_b,
                                          sizeof kernels_b, b.g, &exe),
                     SJ_OK);
    int64_t extents[] = {8, 3, 1, 7};
    for (int i = 0; i < 4; i++)
        check_against_interp(f, exe, b.g, extents[i], i, sj_executable_run);
    assert_int_equal(sj_executable_capture(exe), SJ_OK);
    for (int i = 0; i < 4; i++)
        check_against_interp(f, exe, b.g, extents[i], i + 10, sj_executable_replay);
    sj_executable_destroy(exe);
    sj_graph_destroy(b.g);
    fixture_free(f);
}

static void test_replay_equals_eager(void **state) {
    (void)state;
    fixture *f = fixture_new(NULL);
    model_a a;
    model_a_init(f->ctx, 16, 1.0f, &a);
    sj_executable *exe = model_a_load(f, &a);
    assert_false(sj_executable_has_capture(exe));
    assert_int_equal(sj_executable_capture(exe), SJ_OK);
    assert_true(sj_executable_has_capture(exe));
    int64_t extents[] = {1, 3, 7, 16, 2};
    for (int i = 0; i < 5; i++) {
        sj_tensor in[1] = {{0}}, eager[2] = {{0}}, replay[2] = {{0}};
        make_inputs(f->ctx, a.g, extents[i], i, in);
        assert_int_equal(sj_executable_run(exe, extents[i], in, eager), SJ_OK);
        assert_int_equal(sj_executable_replay(exe, extents[i], in, replay), SJ_OK);
        assert_tensors_close(replay, eager, 2);
        free_tensors(f->ctx, in, 1);
        free_tensors(f->ctx, eager, 2);
        free_tensors(f->ctx, replay, 2);
        check_against_interp(f, exe, a.g, extents[i], i + 20, sj_executable_replay);
    }
    /* The capture pinned the two distinct infos (launches 0 and 1 share one). */
    sj_mdcache_stats s;
    sj_mdcache_stats_get(sj_device_metadata_cache(f->dev), &s);
    assert_int_equal(s.live_graphs, 1);
    assert_int_equal(s.pinned, 2);
    sj_executable_release_capture(exe);
    sj_executable_release_capture(exe); /* no capture: no-op */
    sj_mdcache_stats_get(sj_device_metadata_cache(f->dev), &s);
    assert_int_equal(s.live_graphs, 0);
    assert_int_equal(s.pinned, 0);
    sj_executable_destroy(exe);
    sj_graph_destroy(a.g);
    fixture_free(f);
}

/* sj_device_set_timing: runs counted with their dispatch time while on,
 * nothing while off; the host measures no separate kernel time. */
static void test_device_timing(void **state) {
    (void)state;
    fixture *f = fixture_new(NULL);
    model_a a;
    model_a_init(f->ctx, 16, 1.0f, &a);
    sj_executable *exe = model_a_load(f, &a);
    assert_int_equal(sj_executable_capture(exe), SJ_OK);
    sj_tensor in[1] = {{0}}, out[2] = {{0}};
    make_inputs(f->ctx, a.g, 9, 1, in);
    sj_device_timing t;
    assert_int_equal(sj_executable_run(exe, 9, in, out), SJ_OK);
    assert_int_equal(sj_device_timing_get(f->dev, &t), SJ_OK);
    assert_int_equal(t.runs, 0);
    assert_int_equal(sj_device_set_timing(f->dev, true), SJ_OK);
    for (int i = 0; i < 3; i++) {
        free_tensors(f->ctx, out, 2);
        assert_int_equal((i % 2 ? sj_executable_replay : sj_executable_run)(exe, 9, in, out), SJ_OK);
    }
    assert_int_equal(sj_device_timing_get(f->dev, &t), SJ_OK);
    assert_int_equal(t.runs, 3);
    assert_true(t.dispatch_ns > 0);
    assert_false(t.kernel_measured);
    assert_int_equal(t.kernel_ns, 0);
    assert_int_equal(sj_device_set_timing(f->dev, false), SJ_OK);
    free_tensors(f->ctx, out, 2);
    assert_int_equal(sj_executable_replay(exe, 9, in, out), SJ_OK);
    assert_int_equal(sj_device_timing_get(f->dev, &t), SJ_OK);
    assert_int_equal(t.runs, 0);
    assert_int_equal(sj_device_timing_get(NULL, &t), SJ_E_INVALID_ARG);
    free_tensors(f->ctx, in, 1);
    free_tensors(f->ctx, out, 2);
    sj_executable_destroy(exe);
    sj_graph_destroy(a.g);
    fixture_free(f);
}

static void test_capture_state_errors(void **state) {
    (void)state;
    fixture *f = fixture_new(NULL);
    model_a a;
    model_a_init(f->ctx, 4, 0.0f, &a);
    sj_executable *exe = model_a_load(f, &a);
    sj_tensor in[1] = {{0}}, out[2] = {{0}};
    make_inputs(f->ctx, a.g, 2, 0, in);
    assert_int_equal(sj_executable_replay(exe, 2, in, out), SJ_E_STATE);
    assert_null(out[0].data);
    assert_int_equal(sj_executable_capture(exe), SJ_OK);
    assert_int_equal(sj_executable_capture(exe), SJ_E_STATE);

    /* A capture that cannot start (the device is already recording) is
     * abandoned: its pins are discarded and the cache is back in Normal. */
    sj_executable *other = model_a_load(f, &a);
    assert_int_equal(sj_device_begin_capture(f->dev), SJ_OK);
    assert_int_equal(sj_device_begin_capture(f->dev), SJ_E_STATE);
    assert_int_equal(sj_executable_capture(other), SJ_E_STATE);
    assert_int_equal(sj_executable_run(other, 2, in, out), SJ_E_STATE);
    sj_graph_handle g;
    assert_int_equal(sj_device_end_capture(f->dev, &g), SJ_OK);
    sj_device_destroy_graph(f->dev, g);
    assert_int_equal(sj_device_end_capture(f->dev, &g), SJ_E_STATE);
    sj_mdcache *mc = sj_device_metadata_cache(f->dev);
    assert_int_equal(sj_mdcache_mode(mc), SJ_CACHE_NORMAL);
    sj_mdcache_stats s;
    sj_mdcache_stats_get(mc, &s);
    assert_int_equal(s.live_graphs, 1);
    /* A metadata capture opened by someone else also refuses cleanly. */
    assert_int_equal(sj_mdcache_capture_begin(mc), SJ_OK);
    assert_int_equal(sj_executable_capture(other), SJ_E_STATE);
    sj_mdcache_capture_discard(mc);
    assert_int_equal(sj_executable_capture(other), SJ_OK);
    sj_mdcache_stats_get(mc, &s);
    assert_int_equal(s.live_graphs, 2);

    free_tensors(f->ctx, in, 1);
    sj_executable_destroy(other);
    sj_executable_destroy(exe);
    sj_graph_destroy(a.g);
    fixture_free(f);
}

/* A tiny metadata cache, flooded between capture and replay: the captured
 * info buffers are pinned, so replay reads live memory (ASan would report a
 * use-after-free otherwise) and still matches the interpreter. */
static void test_replay_survives_eviction_pressure(void **state) {
    (void)state;
    sj_mdcache_policy pol = {4, 2048, SJ_CACHE_NORMAL};
    fixture *f = fixture_new(&pol);
    model_a a;
    model_a_init(f->ctx, 16, 2.0f, &a);
    sj_executable *exe = model_a_load(f, &a);
    assert_int_equal(sj_executable_capture(exe), SJ_OK);

    sj_mdcache *mc = sj_device_metadata_cache(f->dev);
    for (int64_t i = 0; i < 5000; i++) {
        int64_t words[3] = {i, -i, 77};
        void *buf;
        if (sj_mdcache_lookup(mc, words, 3, &buf) != SJ_MDCACHE_BUILD_STORE) continue;
        assert_int_equal(sj_device_alloc(f->dev, sizeof words, &buf), SJ_OK);
        assert_int_equal(sj_mdcache_store(mc, words, 3, buf), SJ_OK);
    }
    /* Other executables with other infos run eagerly through the same cache. */
    for (int k = 0; k < 6; k++) {
        model_a other;
        model_a_init(f->ctx, 8 + k, 0.0f, &other);
        sj_executable *o = model_a_load(f, &other);
        check_against_interp(f, o, other.g, 3, k, sj_executable_run);
        sj_executable_destroy(o);
        sj_graph_destroy(other.g);
    }
    sj_mdcache_clear_unpinned(mc);
    sj_mdcache_stats s;
    sj_mdcache_stats_get(mc, &s);
    assert_true(s.evictions > 4000);
    assert_int_equal(s.entries, 2);
    assert_int_equal(s.pinned, 2);
    int64_t extents[] = {16, 1, 6};
    for (int i = 0; i < 3; i++)
        check_against_interp(f, exe, a.g, extents[i], i, sj_executable_replay);
    sj_executable_destroy(exe);
    sj_graph_destroy(a.g);
    fixture_free(f);
}

/* Two executables with the same infos share cached buffers; each capture
 * pins them, and they are freed only when no live capture pins them. */
static void test_pins_across_two_graphs(void **state) {
    (void)state;
    sj_mdcache_policy pol = {4, 2048, SJ_CACHE_NORMAL};
    fixture *f = fixture_new(&pol);
    model_a a1, a2;
    model_a_init(f->ctx, 16, 1.0f, &a1);
    model_a_init(f->ctx, 16, 3.0f, &a2); /* same words, other weights */
    sj_executable *e1 = model_a_load(f, &a1), *e2 = model_a_load(f, &a2);
    assert_int_equal(sj_executable_capture(e1), SJ_OK);
    assert_int_equal(sj_executable_capture(e2), SJ_OK);
    sj_mdcache *mc = sj_device_metadata_cache(f->dev);
    sj_mdcache_stats s;
    sj_mdcache_stats_get(mc, &s);
    assert_int_equal(s.live_graphs, 2);
    assert_int_equal(s.entries, 2);
    assert_int_equal(s.pinned, 2);

    sj_executable_destroy(e1);
    /* Still pinned by e2's capture: flooding cannot evict them. */
    for (int64_t i = 0; i < 100; i++) {
        int64_t w = 1000 + i;
        void *buf;
        if (sj_mdcache_lookup(mc, &w, 1, &buf) != SJ_MDCACHE_BUILD_STORE) continue;
        assert_int_equal(sj_device_alloc(f->dev, 8, &buf), SJ_OK);
        assert_int_equal(sj_mdcache_store(mc, &w, 1, buf), SJ_OK);
    }
    sj_mdcache_stats_get(mc, &s);
    assert_int_equal(s.pinned, 2);
    check_against_interp(f, e2, a2.g, 5, 1, sj_executable_replay);

    sj_executable_release_capture(e2);
    sj_mdcache_stats_get(mc, &s);
    assert_int_equal(s.pinned, 0);
    assert_int_equal(s.live_graphs, 0);
    assert_int_equal(s.entries, 2); /* only the two newest flood entries are left */
    sj_executable_destroy(e2);
    sj_graph_destroy(a1.g);
    sj_graph_destroy(a2.g);
    fixture_free(f);
}

static void test_steady_state_allocates_nothing(void **state) {
    (void)state;
    fixture *f = fixture_new(NULL);
    model_a a;
    model_a_init(f->ctx, 16, 1.0f, &a);
    sj_executable *exe = model_a_load(f, &a);
    sj_tensor in[1] = {{0}}, out[2] = {{0}};
    make_inputs(f->ctx, a.g, 16, 0, in);
    int64_t zd[] = {16, COLS}, sd[] = {COLS};
    assert_int_equal(sj_tensor_alloc(f->ctx, 2, zd, &out[0]), SJ_OK);
    assert_int_equal(sj_tensor_alloc(f->ctx, 1, sd, &out[1]), SJ_OK);
    assert_int_equal(sj_executable_run(exe, 16, in, out), SJ_OK); /* warms the caches */
    assert_int_equal(sj_executable_capture(exe), SJ_OK);
    long before = atomic_load(&f->counts.calls);
    for (int i = 0; i < 200; i++) {
        assert_int_equal(sj_executable_run(exe, 16, in, out), SJ_OK);
        assert_int_equal(sj_executable_replay(exe, 16, in, out), SJ_OK);
    }
    assert_int_equal(atomic_load(&f->counts.calls), before);
    /* A smaller extent with tensors of that size: still nothing. */
    sj_tensor in5[1] = {{0}}, out5[2] = {{0}};
    make_inputs(f->ctx, a.g, 5, 0, in5);
    int64_t zd5[] = {5, COLS};
    assert_int_equal(sj_tensor_alloc(f->ctx, 2, zd5, &out5[0]), SJ_OK);
    assert_int_equal(sj_tensor_alloc(f->ctx, 1, sd, &out5[1]), SJ_OK);
    before = atomic_load(&f->counts.calls);
    assert_int_equal(sj_executable_run(exe, 5, in5, out5), SJ_OK);
    assert_int_equal(sj_executable_replay(exe, 5, in5, out5), SJ_OK);
    assert_int_equal(atomic_load(&f->counts.calls), before);
    free_tensors(f->ctx, in, 1);
    free_tensors(f->ctx, out, 2);
    free_tensors(f->ctx, in5, 1);
    free_tensors(f->ctx, out5, 2);
    sj_executable_destroy(exe);
    sj_graph_destroy(a.g);
    fixture_free(f);
}

/* The host backend's table with resolve_kernel counted: the executor asks
 * for each kernel once, at create, and never again on a run, replay or
 * capture (its launches read the handles it kept). */
static const sj_device_ops *counted_base;
static int counted_resolves;
static sj_status counted_resolve(void *impl, void *module, const char *name, sj_kernel_handle *out,
                                 sj_kernel_attrs *attrs) {
    counted_resolves++;
    return counted_base->resolve_kernel(impl, module, name, out, attrs);
}

static void test_kernels_resolved_at_create_only(void **state) {
    (void)state;
    fixture *f = fixture_new(NULL);
    static sj_device_ops counted;
    counted_base = f->dev->ops;
    counted = *counted_base;
    counted.resolve_kernel = counted_resolve;
    f->dev->ops = &counted;
    counted_resolves = 0;
    model_a a;
    model_a_init(f->ctx, 16, 1.0f, &a);
    sj_executable *exe = model_a_load(f, &a);
    assert_int_equal(counted_resolves, a.plan.n_kernels);
    sj_tensor in[1] = {{0}}, out[2] = {{0}};
    make_inputs(f->ctx, a.g, 16, 0, in);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(sj_executable_run(exe, 16, in, out), SJ_OK);
        free_tensors(f->ctx, out, 2);
    }
    assert_int_equal(sj_executable_capture(exe), SJ_OK);
    assert_int_equal(sj_executable_replay(exe, 16, in, out), SJ_OK);
    assert_int_equal(counted_resolves, a.plan.n_kernels);
    free_tensors(f->ctx, in, 1);
    free_tensors(f->ctx, out, 2);
    sj_executable_destroy(exe);
    sj_graph_destroy(a.g);
    f->dev->ops = counted_base;
    fixture_free(f);
}

static void test_bad_requests(void **state) {
    (void)state;
    fixture *f = fixture_new(NULL);
    model_a a;
    model_a_init(f->ctx, 8, 0.0f, &a);
    sj_executable *exe = model_a_load(f, &a);
    sj_tensor in[1] = {{0}}, out[2] = {{0}};
    make_inputs(f->ctx, a.g, 4, 0, in);
    assert_int_equal(sj_executable_run(exe, 0, in, out), SJ_E_OUT_OF_RANGE);
    assert_int_equal(sj_executable_run(exe, 9, in, out), SJ_E_OUT_OF_RANGE);
    assert_error_contains(f->ctx, "1..8");
    /* The symbolic dim must equal the active extent. */
    assert_int_equal(sj_executable_run(exe, 5, in, out), SJ_E_SHAPE);
    assert_error_contains(f->ctx, "'x'");
    in[0].dims[1] = 7;
    assert_int_equal(sj_executable_run(exe, 4, in, out), SJ_E_SHAPE);
    in[0].dims[1] = COLS;
    in[0].rank = 1;
    assert_int_equal(sj_executable_run(exe, 4, in, out), SJ_E_SHAPE);
    assert_error_contains(f->ctx, "rank");
    in[0].rank = 2;
    assert_int_equal(sj_executable_run(exe, 4, NULL, out), SJ_E_INVALID_ARG);
    assert_null(out[0].data);
    /* A caller-provided output of the wrong shape is refused, and outputs
     * allocated by the failed call are freed again. */
    int64_t wrong[] = {3};
    assert_int_equal(sj_tensor_alloc(f->ctx, 1, wrong, &out[1]), SJ_OK);
    assert_int_equal(sj_executable_run(exe, 4, in, out), SJ_E_SHAPE);
    assert_error_contains(f->ctx, "'s'");
    assert_null(out[0].data);
    sj_tensor_free(f->ctx, &out[1]);
    assert_int_equal(sj_executable_run(exe, 4, in, out), SJ_OK);
    free_tensors(f->ctx, out, 2);
    free_tensors(f->ctx, in, 1);
    sj_executable_destroy(exe);
    sj_executable_destroy(NULL);
    sj_graph_destroy(a.g);
    fixture_free(f);
}

static void expect_corrupt(fixture *f, model_a *m, sj_status want, const char *needle) {
    sj_executable *exe = NULL;
    sj_status st = sj__executable_create(f->dev, &m->plan, SJ_CODE_HOST_NATIVE, kernels_a,
                                        sizeof kernels_a, m->g, &exe);
    assert_int_equal(st, want);
    assert_null(exe);
    assert_error_contains(f->ctx, needle);
}

static void test_bad_plans(void **state) {
    (void)state;
    fixture *f = fixture_new(NULL);
    model_a m;
    model_a_init(f->ctx, 8, 0.0f, &m);
    m.slots[0].bytes = 12;
    expect_corrupt(f, &m, SJ_E_CORRUPT, "slot #0");
    m.slots[0].bytes = 8 * COLS * 4;
    m.slots[1].index = 0; /* value 0 is the input, not a param */
    expect_corrupt(f, &m, SJ_E_CORRUPT, "not a param");
    m.slots[1].index = m.two;
    m.slots[3].offset = 64;
    expect_corrupt(f, &m, SJ_E_CORRUPT, "arena");
    m.slots[3].offset = 0;
    m.slots[5].index = 2;
    expect_corrupt(f, &m, SJ_E_CORRUPT, "output 2");
    m.slots[5].index = 1;
    m.launches[2].kernel = 3;
    expect_corrupt(f, &m, SJ_E_CORRUPT, "launch #2");
    m.launches[2].kernel = 2;
    m.launches[1].n_words = 5;
    expect_corrupt(f, &m, SJ_E_CORRUPT, "words");
    m.launches[1].n_words = 1;
    m.launch_slots[7] = 6;
    expect_corrupt(f, &m, SJ_E_CORRUPT, "slot 6");
    m.launch_slots[7] = 5;
    m.plan.extent = 0;
    expect_corrupt(f, &m, SJ_E_CORRUPT, "extent");
    m.plan.extent = 8;
    strcpy(m.kernels[1].name, "absent");
    expect_corrupt(f, &m, SJ_E_NOT_FOUND, "absent");
    strcpy(m.kernels[1].name, "add_row");
    /* Repaired, it loads. */
    sj_executable *exe = model_a_load(f, &m);
    sj_executable_destroy(exe);
    sj_graph_destroy(m.g);
    fixture_free(f);
}

static void test_device_release_then_use(void **state) {
    (void)state;
    fixture *f = fixture_new(NULL);
    model_a a;
    model_a_init(f->ctx, 8, 0.0f, &a);
    sj_executable *exe = model_a_load(f, &a);
    assert_int_equal(sj_executable_capture(exe), SJ_OK);
    sj_module *m;
    assert_int_equal(sj_device_load_module(f->dev, SJ_CODE_HOST_NATIVE, kernels_b,
                                           sizeof kernels_b, &m),
                     SJ_OK);
    sj_device *dev = f->dev;
    sj_device_destroy(dev);
    f->dev = NULL;
    assert_false(sj_device_alive(dev));
    sj_tensor in[1] = {{0}}, out[2] = {{0}};
    make_inputs(f->ctx, a.g, 4, 0, in);
    assert_int_equal(sj_executable_run(exe, 4, in, out), SJ_E_STATE);
    assert_error_contains(f->ctx, "released");
    assert_int_equal(sj_executable_replay(exe, 4, in, out), SJ_E_STATE);
    assert_null(out[0].data);
    sj_executable_release_capture(exe);
    assert_int_equal(sj_executable_capture(exe), SJ_E_STATE);
    void *p;
    assert_int_equal(sj_device_alloc(dev, 16, &p), SJ_E_STATE);
    assert_int_equal(sj_device_sync(dev), SJ_E_STATE);
    sj_module *m2;
    assert_int_equal(sj_device_load_module(dev, SJ_CODE_HOST_NATIVE, kernels_b,
                                           sizeof kernels_b, &m2),
                     SJ_E_STATE);
    sj_executable *e2;
    assert_int_equal(sj__executable_create_from_module(dev, &a.plan, m, a.g, &e2), SJ_E_STATE);
    sj_module_destroy(m);
    sj_executable_destroy(exe); /* frees host memory only; the last reference */
    free_tensors(f->ctx, in, 1);
    sj_graph_destroy(a.g);
    fixture_free(f);
}

static void test_native_modules_and_device_calls(void **state) {
    (void)state;
    fixture *f = fixture_new(NULL);
    assert_string_equal(sj_device_name(f->dev), "host");
    assert_true(sj_device_flags(f->dev) & SJ_DEVICE_HOST_VISIBLE);
    sj_module *m;
    assert_int_equal(sj_device_load_module(f->dev, SJ_CODE_HOST_NATIVE, kernels_a, 5, &m),
                     SJ_E_INVALID_ARG);
    sj_native_kernel dup[] = {{"k", k_scale, NULL, 0}, {"k", k_add_row, NULL, 0}};
    assert_int_equal(sj_device_load_module(f->dev, SJ_CODE_HOST_NATIVE, dup, sizeof dup, &m),
                     SJ_E_INVALID_ARG);
    assert_error_contains(f->ctx, "twice");
    sj_native_kernel unnamed[] = {{NULL, k_scale, NULL, 0}};
    assert_int_equal(
        sj_device_load_module(f->dev, SJ_CODE_HOST_NATIVE, unnamed, sizeof unnamed, &m),
        SJ_E_INVALID_ARG);
    assert_int_equal(sj_device_load_module(f->dev, SJ_CODE_PTX, ".version 8.0", 12, &m),
                     SJ_E_MISMATCH);
    assert_int_equal(sj_device_load_module(f->dev, SJ_CODE_HOST_NATIVE, kernels_a,
                                           sizeof kernels_a, &m),
                     SJ_OK);

    /* A kernel launched by hand through the device, with a 64-byte aligned
     * buffer, and a recorded graph replayed at two extents. */
    sj_kernel_handle k;
    sj_kernel_attrs attrs;
    assert_int_equal(sj_module_kernel(m, "scale", &k, &attrs), SJ_OK);
    assert_int_equal(attrs.max_threads, 0);
    assert_int_equal(sj_module_kernel(m, "nope", &k, NULL), SJ_E_NOT_FOUND);
    assert_int_equal(sj_module_kernel(m, "scale", &k, NULL), SJ_OK);
    float *x, *s, *y;
    assert_int_equal(sj_device_alloc(f->dev, 4 * COLS * 4, (void **)&x), SJ_OK);
    assert_int_equal(sj_device_alloc(f->dev, 4, (void **)&s), SJ_OK);
    assert_int_equal(sj_device_alloc(f->dev, 4 * COLS * 4, (void **)&y), SJ_OK);
    assert_int_equal((uintptr_t)x % 64, 0);
    for (int i = 0; i < 4 * COLS; i++) x[i] = (float)i;
    float three = 3;
    assert_int_equal(sj_device_copy(f->dev, s, &three, 4, SJ_COPY_H2D), SJ_OK);
    void *bufs[3] = {x, s, y};
    int64_t cols = COLS;
    sj_launch_dims dims = {{1, 1, 1}, {1, 1, 1}, 0};
    assert_int_equal(sj_device_launch(f->dev, k, &dims, bufs, &cols, 2), SJ_OK);
    assert_true(y[2 * COLS - 1] == 3.0f * (2 * COLS - 1) && y[2 * COLS] == 0.0f);
    assert_int_equal(sj_device_begin_capture(f->dev), SJ_OK);
    assert_int_equal(sj_device_launch(f->dev, k, &dims, bufs, &cols, 1), SJ_OK);
    sj_graph_handle g;
    assert_int_equal(sj_device_end_capture(f->dev, &g), SJ_OK);
    assert_true(y[3 * COLS] == 0.0f); /* recorded, not run */
    assert_int_equal(sj_device_replay(f->dev, g, 4), SJ_OK);
    assert_true(y[4 * COLS - 1] == 3.0f * (4 * COLS - 1));
    sj_device_destroy_graph(f->dev, g);
    sj_device_free(f->dev, x);
    sj_device_free(f->dev, s);
    /* y is left for the device's release to free. */
    sj_module_destroy(m);
    fixture_free(f);
}

/* ------------------------------------------------- host objects via ORC */

/* An object file with `name`(buffers, info, n): y[i] = x[i] * factor for
 * i < n * info[0], and `name_attrs` = {128, 4, 8, 0}. With `external`, the
 * kernel also calls a function no one defines. */
static LLVMMemoryBufferRef emit_object(const char *name, float factor, bool external) {
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
    LLVMContextRef c = LLVMContextCreate();
    LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("sj_test", c);
    LLVMTypeRef ptr = LLVMPointerTypeInContext(c, 0), i64 = LLVMInt64TypeInContext(c),
                f32 = LLVMFloatTypeInContext(c), i32 = LLVMInt32TypeInContext(c);
    LLVMTypeRef params[] = {ptr, ptr, i64};
    LLVMTypeRef fnty = LLVMFunctionType(LLVMVoidTypeInContext(c), params, 3, 0);
    LLVMValueRef fn = LLVMAddFunction(mod, name, fnty);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(c, fn, "entry"),
                      loop = LLVMAppendBasicBlockInContext(c, fn, "loop"),
                      body = LLVMAppendBasicBlockInContext(c, fn, "body"),
                      done = LLVMAppendBasicBlockInContext(c, fn, "done");
    LLVMBuilderRef b = LLVMCreateBuilderInContext(c);
    LLVMPositionBuilderAtEnd(b, entry);
    LLVMValueRef one = LLVMConstInt(i64, 1, 0), zero = LLVMConstInt(i64, 0, 0);
    LLVMValueRef x = LLVMBuildLoad2(b, ptr, LLVMGetParam(fn, 0), "x");
    LLVMValueRef yp = LLVMBuildGEP2(b, ptr, LLVMGetParam(fn, 0), &one, 1, "yp");
    LLVMValueRef y = LLVMBuildLoad2(b, ptr, yp, "y");
    LLVMValueRef cols = LLVMBuildLoad2(b, i64, LLVMGetParam(fn, 1), "cols");
    LLVMValueRef total = LLVMBuildMul(b, cols, LLVMGetParam(fn, 2), "total");
    if (external) {
        LLVMTypeRef ext_ty = LLVMFunctionType(LLVMVoidTypeInContext(c), NULL, 0, 0);
        LLVMValueRef ext = LLVMAddFunction(mod, "sj_test_undefined_function", ext_ty);
        LLVMBuildCall2(b, ext_ty, ext, NULL, 0, "");
    }
    LLVMBuildBr(b, loop);
    LLVMPositionBuilderAtEnd(b, loop);
    LLVMValueRef i = LLVMBuildPhi(b, i64, "i");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, i, total, "more"), body, done);
    LLVMPositionBuilderAtEnd(b, body);
    LLVMValueRef v = LLVMBuildLoad2(b, f32, LLVMBuildGEP2(b, f32, x, &i, 1, "px"), "v");
    v = LLVMBuildFMul(b, v, LLVMConstReal(f32, factor), "v2");
    LLVMBuildStore(b, v, LLVMBuildGEP2(b, f32, y, &i, 1, "py"));
    LLVMValueRef next = LLVMBuildAdd(b, i, one, "next");
    LLVMBuildBr(b, loop);
    LLVMValueRef in_vals[] = {zero, next};
    LLVMBasicBlockRef in_blocks[] = {entry, body};
    LLVMAddIncoming(i, in_vals, in_blocks, 2);
    LLVMPositionBuilderAtEnd(b, done);
    LLVMBuildRetVoid(b);
    LLVMDisposeBuilder(b);

    char attrs_name[80];
    snprintf(attrs_name, sizeof attrs_name, "%s_attrs", name);
    LLVMTypeRef arr = LLVMArrayType2(i32, 4);
    LLVMValueRef vals[] = {LLVMConstInt(i32, 128, 0), LLVMConstInt(i32, 4, 0),
                           LLVMConstInt(i32, 8, 0), LLVMConstInt(i32, 0, 0)};
    LLVMValueRef gattrs = LLVMAddGlobal(mod, arr, attrs_name);
    LLVMSetInitializer(gattrs, LLVMConstArray2(i32, vals, 4));
    LLVMSetGlobalConstant(gattrs, 1);

    char *triple = LLVMGetDefaultTargetTriple();
    LLVMTargetRef target;
    char *err = NULL;
    assert_int_equal(LLVMGetTargetFromTriple(triple, &target, &err), 0);
    LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, "generic", "",
                                                      LLVMCodeGenLevelDefault, LLVMRelocPIC,
                                                      LLVMCodeModelDefault);
    LLVMSetTarget(mod, triple);
    LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(mod, layout);
    LLVMMemoryBufferRef obj = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMObjectFile, &err, &obj))
        fail_msg("emit: %s", err);
    LLVMDisposeTargetData(layout);
    LLVMDisposeTargetMachine(tm);
    LLVMDisposeMessage(triple);
    LLVMDisposeModule(mod);
    LLVMContextDispose(c);
    return obj;
}

static void test_host_object_modules(void **state) {
    (void)state;
    fixture *f = fixture_new(NULL);
    LLVMMemoryBufferRef o2 = emit_object("obj_scale", 2.0f, false),
                        o5 = emit_object("obj_scale", 5.0f, false),
                        bad = emit_object("obj_bad", 1.0f, true);
    sj_module *m2, *m5, *mb;
    assert_int_equal(sj_device_load_module(f->dev, SJ_CODE_HOST_OBJECT, LLVMGetBufferStart(o2),
                                           LLVMGetBufferSize(o2), &m2),
                     SJ_OK);
    /* The same symbol in a second module: its own JITDylib, no clash. */
    assert_int_equal(sj_device_load_module(f->dev, SJ_CODE_HOST_OBJECT, LLVMGetBufferStart(o5),
                                           LLVMGetBufferSize(o5), &m5),
                     SJ_OK);
    assert_int_equal(sj_device_load_module(f->dev, SJ_CODE_HOST_OBJECT, "not an object", 13, &mb),
                     SJ_E_PARSE);
    sj_kernel_handle k2, k5, kb;
    sj_kernel_attrs attrs;
    assert_int_equal(sj_module_kernel(m2, "obj_scale", &k2, &attrs), SJ_OK);
    assert_int_equal(attrs.max_threads, 128);
    assert_int_equal(attrs.tile_m, 4);
    assert_int_equal(attrs.tile_n, 8);
    assert_int_equal(sj_module_kernel(m5, "obj_scale", &k5, NULL), SJ_OK);
    assert_ptr_not_equal(k2, k5);
    assert_int_equal(sj_module_kernel(m2, "missing", &kb, NULL), SJ_E_NOT_FOUND);

    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y2[8] = {0}, y5[8] = {0};
    int64_t cols = 2;
    sj_launch_dims dims = {{1, 1, 1}, {1, 1, 1}, 0};
    void *b2[2] = {x, y2}, *b5[2] = {x, y5};
    assert_int_equal(sj_device_launch(f->dev, k2, &dims, b2, &cols, 3), SJ_OK);
    assert_int_equal(sj_device_launch(f->dev, k5, &dims, b5, &cols, 4), SJ_OK);
    assert_true(y2[5] == 12.0f && y2[6] == 0.0f);
    assert_true(y5[7] == 40.0f);

    /* Linking fails only when the kernel is resolved: an undefined external. */
    assert_int_equal(sj_device_load_module(f->dev, SJ_CODE_HOST_OBJECT, LLVMGetBufferStart(bad),
                                           LLVMGetBufferSize(bad), &mb),
                     SJ_OK);
    assert_int_equal(sj_module_kernel(mb, "obj_bad", &kb, NULL), SJ_E_COMPILE);
    assert_error_contains(f->ctx, "sj_test_undefined_function");
    sj_module_destroy(mb);
    sj_module_destroy(m5);

    /* An executable whose code is a host object file. */
    sj_graph *g;
    assert_int_equal(sj_graph_create(f->ctx, "N", &g), SJ_OK);
    int64_t xd[] = {SJ_DIM_SYM, 2}, one[] = {1};
    float two = 2;
    sj_value xv, tv, yv;
    assert_int_equal(sj_graph_input(g, "x", 2, xd, &xv), SJ_OK);
    assert_int_equal(sj_graph_param(g, "two", 1, one, &two, &tv), SJ_OK);
    assert_int_equal(sj_graph_binary(g, SJ_OP_MUL, xv, tv, &yv), SJ_OK);
    assert_int_equal(sj_graph_output(g, yv, "y"), SJ_OK);
    sj_kernel_desc kd = {.name = "obj_scale"};
    sj_buffer_slot slots[] = {{SJ_SLOT_INPUT, 0, 0, 8 * 2 * 4}, {SJ_SLOT_OUTPUT, 0, 0, 8 * 2 * 4}};
    int32_t ls[] = {0, 1};
    int64_t words[] = {2};
    sj_launch l = {.kernel = 0, .first_slot = 0, .n_slots = 2, .first_word = 0, .n_words = 1};
    sj_launch_plan plan = {.extent = 8, .n_kernels = 1, .kernels = &kd, .n_slots = 2,
                           .slots = slots, .n_launches = 1, .launches = &l,
                           .n_launch_slots = 2, .launch_slots = ls, .n_words = 1,
                           .words = words};
    sj_executable *exe;
    assert_int_equal(sj__executable_create(f->dev, &plan, SJ_CODE_HOST_OBJECT,
                                          LLVMGetBufferStart(o2), LLVMGetBufferSize(o2), g, &exe),
                     SJ_OK);
    check_against_interp(f, exe, g, 8, 0, sj_executable_run);
    check_against_interp(f, exe, g, 3, 1, sj_executable_run);
    assert_int_equal(sj_executable_capture(exe), SJ_OK);
    check_against_interp(f, exe, g, 5, 2, sj_executable_replay);
    sj_executable_destroy(exe);
    sj_graph_destroy(g);
    /* A module still loaded when the device goes is freed with the JIT; its
     * handle then only frees host memory. */
    sj_device_destroy(f->dev);
    f->dev = NULL;
    sj_module_destroy(m2);
    LLVMDisposeMemoryBuffer(o2);
    LLVMDisposeMemoryBuffer(o5);
    LLVMDisposeMemoryBuffer(bad);
    fixture_free(f);
}

typedef struct worker {
    fixture *f;
    model_a m;
    sj_executable *exe;
    int failures;
} worker;

/* Each thread runs its own executable on the shared device, eagerly and by
 * replay, through one metadata cache small enough to keep evicting. */
static void *worker_main(void *arg) {
    worker *w = arg;
    sj_ctx *ctx = w->f->ctx;
    for (int r = 0; r < 150; r++) {
        int64_t n = 1 + (r * 7) % 16;
        sj_tensor in[1] = {{0}}, got[2] = {{0}}, want[2] = {{0}};
        make_inputs(ctx, w->m.g, n, r, in);
        run_fn run = r % 2 ? sj_executable_replay : sj_executable_run;
        if (run(w->exe, n, in, got) != SJ_OK || sj_interp_run(w->m.g, n, in, want) != SJ_OK) {
            w->failures++;
        } else {
            for (int o = 0; o < 2; o++)
                for (int64_t k = 0; k < sj_tensor_numel(&want[o]); k++)
                    if (fabsf(got[o].data[k] - want[o].data[k]) > 1e-3f) w->failures++;
            free_tensors(ctx, got, 2);
            free_tensors(ctx, want, 2);
        }
        free_tensors(ctx, in, 1);
    }
    return NULL;
}

static void test_threads_share_a_device(void **state) {
    (void)state;
    sj_mdcache_policy pol = {3, 2048, SJ_CACHE_NORMAL};
    fixture *f = fixture_new(&pol);
    enum { THREADS = 4 };
    worker w[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i].f = f;
        w[i].failures = 0;
        /* Different extents: different infos, so the threads contend for
         * the cache's three entries. */
        model_a_init(f->ctx, 16 + i, (float)i, &w[i].m);
        w[i].exe = model_a_load(f, &w[i].m);
        assert_int_equal(sj_executable_capture(w[i].exe), SJ_OK);
    }
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker_main, &w[i]);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(w[i].failures, 0);
        sj_executable_destroy(w[i].exe);
        sj_graph_destroy(w[i].m.g);
    }
    fixture_free(f);
}

/* Code from the LLVM host emitter (sj_compile, sj_artifact_load): attention
 * with a softmax over the symbolic dim, eager and replayed at several
 * extents, the replay after the metadata cache was flooded and cleared. */
static void test_compiled_attention_replay(void **state) {
    (void)state;
    sj_mdcache_policy pol = {8, 2048, SJ_CACHE_NORMAL};
    fixture *f = fixture_new(&pol);
    sj_graph *g;
    assert_int_equal(sj_graph_create(f->ctx, "N", &g), SJ_OK);
    int64_t qd[] = {SJ_DIM_SYM, 8}, one[] = {1};
    float scale = 0.35f;
    sj_value q, k, s, kt, sc, ss, p, o;
    int perm[] = {1, 0};
    assert_int_equal(sj_graph_input(g, "q", 2, qd, &q), SJ_OK);
    assert_int_equal(sj_graph_input(g, "k", 2, qd, &k), SJ_OK);
    assert_int_equal(sj_graph_param(g, "scale", 1, one, &scale, &s), SJ_OK);
    assert_int_equal(sj_graph_transpose(g, k, perm, &kt), SJ_OK);
    assert_int_equal(sj_graph_matmul(g, q, kt, &sc), SJ_OK);
    assert_int_equal(sj_graph_binary(g, SJ_OP_MUL, sc, s, &ss), SJ_OK);
    assert_int_equal(sj_graph_softmax(g, SJ_OP_SOFTMAX, ss, -1, &p), SJ_OK);
    assert_int_equal(sj_graph_matmul(g, p, q, &o), SJ_OK);
    assert_int_equal(sj_graph_output(g, o, "out"), SJ_OK);
    sj_compile_options opts;
    sj_compile_options_init(&opts);
    sj_artifact *a;
    if (sj_compile(g, 32, &opts, &a) != SJ_OK) fail_msg("compile: %s", sj_ctx_last_error(f->ctx));
    sj_executable *exe;
    if (sj_artifact_load(a, f->dev, g, &exe) != SJ_OK)
        fail_msg("load: %s", sj_ctx_last_error(f->ctx));
    int64_t extents[] = {32, 7, 1, 20};
    for (int i = 0; i < 4; i++)
        check_against_interp(f, exe, g, extents[i], i, sj_executable_run_or_replay);
    assert_int_equal(sj_executable_capture(exe), SJ_OK);
    sj_mdcache *mc = sj_device_metadata_cache(f->dev);
    for (int64_t i = 0; i < 1000; i++) {
        int64_t w[2] = {i, 5};
        void *buf;
        if (sj_mdcache_lookup(mc, w, 2, &buf) != SJ_MDCACHE_BUILD_STORE) continue;
        assert_int_equal(sj_device_alloc(f->dev, sizeof w, &buf), SJ_OK);
        assert_int_equal(sj_mdcache_store(mc, w, 2, buf), SJ_OK);
    }
    sj_mdcache_clear_unpinned(mc);
    sj_mdcache_stats st;
    sj_mdcache_stats_get(mc, &st);
    assert_true(st.pinned > 0); /* the emitted kernels' infos, held by the capture */
    assert_int_equal(st.entries, st.pinned);
    for (int i = 0; i < 4; i++)
        check_against_interp(f, exe, g, extents[i], i + 10, sj_executable_run_or_replay);
    sj_executable_destroy(exe);
    sj_artifact_destroy(a);
    sj_graph_destroy(g);
    fixture_free(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eager_matches_interpreter),
        cmocka_unit_test(test_kernels_resolved_at_create_only),
        cmocka_unit_test(test_symbolic_inner_and_double_axes),
        cmocka_unit_test(test_replay_equals_eager),
        cmocka_unit_test(test_device_timing),
        cmocka_unit_test(test_capture_state_errors),
        cmocka_unit_test(test_replay_survives_eviction_pressure),
        cmocka_unit_test(test_pins_across_two_graphs),
        cmocka_unit_test(test_steady_state_allocates_nothing),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_bad_plans),
        cmocka_unit_test(test_device_release_then_use),
        cmocka_unit_test(test_native_modules_and_device_calls),
        cmocka_unit_test(test_host_object_modules),
        cmocka_unit_test(test_compiled_attention_replay),
        cmocka_unit_test(test_threads_share_a_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
