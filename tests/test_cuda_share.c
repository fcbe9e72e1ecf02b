/* CUDA code shared per kernel (issue #33, item 3): a GPU artifact's code is
 * one module per kernel (PTX and cubin, bundled), named by its code, so two
 * buckets whose kernels compile alike carry the same bytes and the store
 * keeps them once; a CUDA device (on the fake driver, tests/fake_cuda/)
 * loads each distinct module once however many executables hold it,
 * unloads it with the last, and loads afresh after a reset; a damaged
 * piece is refused by name. Kernels do not run on the fake: what runs
 * right on a GPU is scripts/gpu-check.sh's to show. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/skip.h"

#include <stdio.h>
#include <string.h>

#include "shapejit/ext/artifact.h"
#include "shapejit/ext/compile.h"
#include "shapejit/ext/cuda_device.h"
#include "shapejit/ext/runtime.h"
#include "tests/artifact_parts.h"
#include "tests/test_util.h"
#include "tests/fake_cuda/fake_cuda_test.h"

#ifdef SJ_FAKE_CUDA
#include <cuda.h>

#include "plan/artifact_impl.h"
#include "plan/code_bundle.h"

#define S SJ_DIM_SYM

static alloc_counter counter;
static sj_ctx *ctx;
static fake_cuda_controls fake;

static fake_cuda_counters fake_counts(void) {
    fake_cuda_counters c;
    fake.counters(&c);
    return c;
}

/* x [N, 24] -> h = tanh(x w) -> y = softmax(h) over its 40 columns, and
 * s = the sum of h over the rows. The softmax's code is the same in every
 * bucket; the row sum's block size follows the bucket (a ROW kernel over
 * the symbolic dim), so its code, and its name, differ. */
static sj_graph *build(void) {
    sj_graph *g;
    assert_int_equal(sj_graph_create(ctx, "N", &g), SJ_OK);
    float w[24 * 40];
    for (int i = 0; i < 24 * 40; i++) w[i] = (float)((i * 37) % 17 - 8) / 16.0f;
    sj_value x, p, h, y, s;
    assert_int_equal(sj_graph_input(g, "x", 2, (int64_t[]){S, 24}, &x), SJ_OK);
    assert_int_equal(sj_graph_param(g, "w", 2, (int64_t[]){24, 40}, w, &p), SJ_OK);
    assert_int_equal(sj_graph_matmul(g, x, p, &h), SJ_OK);
    assert_int_equal(sj_graph_unary(g, SJ_OP_TANH, h, &h), SJ_OK);
    assert_int_equal(sj_graph_softmax(g, SJ_OP_SOFTMAX, h, 1, &y), SJ_OK);
    assert_int_equal(sj_graph_reduce(g, SJ_OP_REDUCE_SUM, h, 1, (int[]){0}, false, &s), SJ_OK);
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    assert_int_equal(sj_graph_output(g, s, "s"), SJ_OK);
    return g;
}

static sj_artifact *compile(const sj_graph *g, sj_target target, const char *arch, int64_t extent) {
    sj_compile_options o;
    sj_compile_options_init(&o);
    o.target = target;
    o.arch = arch;
    sj_artifact *a;
    if (sj_compile(g, extent, &o, &a) != SJ_OK) fail_msg("compile: %s", sj_ctx_last_error(ctx));
    return a;
}

/* The pieces of a's blob of format fmt: one per kernel of the plan. */
static int pieces_of(const sj_artifact *a, sj_code_format fmt, const uint8_t **bytes,
                     sj_code_piece **pieces) {
    size_t len;
    assert_int_equal(sj_artifact_find_code(a, fmt, bytes, &len), SJ_OK);
    assert_true(sj__code_bundle_is(*bytes, len));
    int n;
    assert_int_equal(sj__code_bundle_parse(ctx, *bytes, len, pieces, &n), SJ_OK);
    assert_int_equal(n, sj__artifact_plan(a)->n_kernels);
    return n;
}

/* For every kernel name the two artifacts share, the same bytes (PTX and
 * cubin); for every name they do not, other bytes. Returns the shared. */
static int same_names_same_bytes(const sj_artifact *a, const sj_artifact *b) {
    int shared = 0;
    const sj_launch_plan *pa = sj__artifact_plan(a), *pb = sj__artifact_plan(b);
    for (sj_code_format fmt = SJ_CODE_PTX; fmt <= SJ_CODE_CUBIN; fmt++) {
        const uint8_t *ba, *bb;
        sj_code_piece *ka, *kb;
        int na = pieces_of(a, fmt, &ba, &ka), nb = pieces_of(b, fmt, &bb, &kb);
        for (int i = 0; i < na; i++)
            for (int j = 0; j < nb; j++) {
                bool same_name = !strcmp(pa->kernels[i].name, pb->kernels[j].name);
                bool same_bytes = ka[i].len == kb[j].len &&
                                  !memcmp(ba + ka[i].offset, bb + kb[j].offset, ka[i].len);
                if (same_name != same_bytes)
                    fail_msg("%s kernels %s and %s: names %s, bytes %s",
                             fmt == SJ_CODE_PTX ? "PTX" : "cubin", pa->kernels[i].name,
                             pb->kernels[j].name, same_name ? "equal" : "differ",
                             same_bytes ? "equal" : "differ");
                shared += same_name && fmt == SJ_CODE_PTX;
            }
        sj_free(ctx, ka);
        sj_free(ctx, kb);
    }
    return shared;
}

/* Buckets 8 and 64, by both emitters and for both arches: every kernel is
 * its own module (a cubin each: NVRTC or nvJitLink accepted it for the
 * arch); equal names are equal bytes, the row sum's name differs with its
 * code, and the store would keep the shared pieces once. */
static void test_artifacts_share_pieces(void **state) {
    (void)state;
    sj_graph *g = build();
    const sj_target targets[] = {SJ_TARGET_NVPTX, SJ_TARGET_NVRTC};
    const char *arches[] = {"sm_80", "sm_90"};
    for (int t = 0; t < 2; t++)
        for (int s = 0; s < 2; s++) {
            sj_artifact *a = compile(g, targets[t], arches[s], 8);
            sj_artifact *b = compile(g, targets[t], arches[s], 64);
            const sj_launch_plan *pa = sj__artifact_plan(a);
            assert_true(pa->n_kernels >= 3);
            int names = same_names_same_bytes(a, b);
            assert_true(names >= 2);
            assert_true(names < pa->n_kernels); /* the row sum's differs */
            int n_parts, same = tp_shared_parts(ctx, a, b, &n_parts);
            assert_int_equal(n_parts, 2 * pa->n_kernels); /* cubins and PTX */
            assert_int_equal(same, 2 * names);
            sj_artifact_destroy(a);
            sj_artifact_destroy(b);
        }
    sj_graph_destroy(g);
}

static sj_device *fake_device(void) {
    sj_cuda_device_config cfg;
    sj_cuda_device_config_init(&cfg);
    cfg.driver_path = SJ_FAKE_CUDA;
    sj_device *dev;
    if (sj_cuda_device_create(ctx, &cfg, NULL, &dev) != SJ_OK)
        fail_msg("fake device: %s", sj_ctx_last_error(ctx));
    return dev;
}

static sj_device_code_stats code_stats(sj_device *dev) {
    sj_device_code_stats s;
    assert_int_equal(sj_device_code_stats_get(dev, &s), SJ_OK);
    return s;
}

static sj_executable *load(const sj_artifact *a, sj_device *dev, const sj_graph *g) {
    sj_executable *e;
    if (sj_artifact_load(a, dev, g, &e) != SJ_OK) fail_msg("load: %s", sj_ctx_last_error(ctx));
    return e;
}

static sj_status run(sj_executable *e, int64_t n) {
    float *x = calloc((size_t)(n * 24), sizeof *x);
    assert_non_null(x);
    sj_tensor in = {.dtype = SJ_F32, .rank = 2, .dims = {n, 24}, .data = x}, out[2] = {0};
    sj_status st = sj_executable_run_or_replay(e, n, &in, out);
    for (int i = 0; i < 2 && st == SJ_OK; i++) sj_tensor_free(ctx, &out[i]);
    free(x);
    return st;
}

/* Two buckets of one model on one CUDA device: the second loads and
 * resolves only the kernels the first does not hold; a module goes with
 * its last holder. */
static void test_buckets_load_shared_modules_once(void **state) {
    (void)state;
    sj_graph *g = build();
    sj_artifact *a = compile(g, SJ_TARGET_NVPTX, "sm_90", 8);
    sj_artifact *b = compile(g, SJ_TARGET_NVPTX, "sm_90", 64);
    int n_a = sj__artifact_plan(a)->n_kernels, n_b = sj__artifact_plan(b)->n_kernels;
    int shared = same_names_same_bytes(a, b);
    sj_device *dev = fake_device();
    fake_cuda_counters c0 = fake_counts();
    sj_executable *ea = load(a, dev, g);
    assert_int_equal(fake_counts().module_loads - c0.module_loads, (uint64_t)n_a);
    assert_int_equal(fake_counts().function_lookups - c0.function_lookups, (uint64_t)n_a);
    sj_executable *eb = load(b, dev, g);
    /* cuModuleLoadData and cuModuleGetFunction for b's own kernels only */
    assert_int_equal(fake_counts().module_loads - c0.module_loads, (uint64_t)(n_a + n_b - shared));
    assert_int_equal(fake_counts().function_lookups - c0.function_lookups,
                     (uint64_t)(n_a + n_b - shared));
    sj_device_code_stats s = code_stats(dev);
    assert_int_equal(s.objects_loaded, (uint64_t)(n_a + n_b - shared));
    assert_int_equal(s.objects_shared, (uint64_t)shared);
    assert_int_equal(s.objects_resident, n_a + n_b - shared);
    assert_int_equal(run(ea, 5), SJ_OK);
    assert_int_equal(run(eb, 40), SJ_OK);
    assert_int_equal(run(ea, 8), SJ_OK); /* replayed */
    /* a's own modules go with it; the shared ones stay for b */
    sj_executable_destroy(ea);
    assert_int_equal(fake_counts().live_modules - c0.live_modules, (uint64_t)n_b);
    assert_int_equal(code_stats(dev).objects_resident, n_b);
    assert_int_equal(run(eb, 33), SJ_OK);
    sj_executable_destroy(eb);
    assert_int_equal(fake_counts().live_modules, c0.live_modules);
    assert_int_equal(code_stats(dev).objects_resident, 0);
    assert_int_equal(fake_counts().bad_handles, 0);
    sj_device_destroy(dev);
    sj_artifact_destroy(a);
    sj_artifact_destroy(b);
    sj_graph_destroy(g);
}

/* A fault resets the device: the registry starts afresh (nothing of the
 * lost context is shared or unloaded), the next load loads every module. */
static void test_reset_drops_registry(void **state) {
    (void)state;
    sj_graph *g = build();
    sj_artifact *a = compile(g, SJ_TARGET_NVRTC, "sm_90", 8);
    int n_a = sj__artifact_plan(a)->n_kernels;
    sj_device *dev = fake_device();
    sj_executable *e1 = load(a, dev, g);
    sj_executable *e2 = load(a, dev, g);
    assert_int_equal(code_stats(dev).objects_shared, (uint64_t)n_a);
    fake.inject(sj__artifact_plan(a)->kernels[0].name, CUDA_ERROR_ILLEGAL_ADDRESS, 1);
    assert_int_equal(run(e1, 5), SJ_E_DEVICE_LOST);
    fake.inject(NULL, 0, 0);
    assert_int_equal(sj_device_resets(dev), 1);
    assert_int_equal(code_stats(dev).objects_resident, 0);
    uint64_t loads = fake_counts().module_loads;
    sj_executable *e3 = load(a, dev, g);
    assert_int_equal(fake_counts().module_loads - loads, (uint64_t)n_a);
    sj_device_code_stats s = code_stats(dev);
    assert_int_equal(s.objects_resident, n_a);
    assert_int_equal(s.objects_shared, (uint64_t)n_a); /* none served by a stale module */
    assert_int_equal(run(e3, 7), SJ_OK);
    /* the stale holders let go without a call into the driver */
    sj_executable_destroy(e1);
    sj_executable_destroy(e2);
    assert_int_equal(code_stats(dev).objects_resident, n_a);
    sj_executable_destroy(e3);
    assert_int_equal(code_stats(dev).objects_resident, 0);
    assert_int_equal(fake_counts().bad_handles, 0);
    sj_device_destroy(dev);
    sj_artifact_destroy(a);
    sj_graph_destroy(g);
}

/* A piece the driver refuses fails the load naming the piece, and the
 * pieces loaded before it are let go; a bundle cut short is refused
 * before any piece loads. */
static void test_damaged_piece_named(void **state) {
    (void)state;
    sj_graph *g = build();
    sj_artifact *a = compile(g, SJ_TARGET_NVPTX, "sm_90", 8);
    const uint8_t *bytes;
    sj_code_piece *pieces;
    int n = pieces_of(a, SJ_CODE_PTX, &bytes, &pieces);
    size_t len;
    assert_int_equal(sj_artifact_find_code(a, SJ_CODE_PTX, &bytes, &len), SJ_OK);
    uint8_t *bad = malloc(len);
    assert_non_null(bad);
    memcpy(bad, bytes, len);
    /* piece 1 without its kernel: the driver answers an invalid image */
    for (size_t i = pieces[1].offset; i + 6 <= pieces[1].offset + pieces[1].len; i++)
        if (!memcmp(bad + i, ".entry", 6)) memcpy(bad + i, ".en_ry", 6);
    sj_device *dev = fake_device();
    uint64_t live = fake_counts().live_modules;
    sj_module *m;
    assert_int_not_equal(sj_device_load_module(dev, SJ_CODE_PTX, bad, len, &m), SJ_OK);
    char want[64];
    snprintf(want, sizeof want, "piece 1 of %d", n);
    if (!strstr(sj_ctx_last_error(ctx), want)) fail_msg("error: %s", sj_ctx_last_error(ctx));
    assert_int_equal(fake_counts().live_modules, live);
    assert_int_equal(code_stats(dev).objects_resident, 0);
    assert_int_equal(sj_device_load_module(dev, SJ_CODE_PTX, bytes, len - 3, &m), SJ_E_CORRUPT);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "code bundle"));
    assert_int_equal(fake_counts().live_modules, live);
    free(bad);
    sj_free(ctx, pieces);
    sj_device_destroy(dev);
    sj_artifact_destroy(a);
    sj_graph_destroy(g);
}

static int setup(void **state) {
    (void)state;
    ctx = ctx_with_counter(&counter);
    return ctx && fake_cuda_test_open(&fake) == 0 ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    sj_ctx_destroy(ctx);
    dlclose(fake.lib);
    return atomic_load(&counter.live) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_artifacts_share_pieces),
                                       cmocka_unit_test(test_buckets_load_shared_modules_once),
                                       cmocka_unit_test(test_reset_drops_registry),
                                       cmocka_unit_test(test_damaged_piece_named)};
    return sj_run_tests(tests, setup, teardown);
}

#endif
