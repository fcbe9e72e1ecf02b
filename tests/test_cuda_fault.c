/* A kernel that fails on the GPU, on any machine: the engine's CUDA device
 * runs on the fake driver (tests/fake_cuda/), which records launches
 * instead of running them and fails the ones a test names. Kernels do not
 * run, so outputs are never checked here; what is: a fault in one kernel of
 * bucket B fails B's request with SJ_E_DEVICE_LOST naming that kernel, its
 * launch and the driver's error; the device resets its context; bucket A
 * then serves, loaded again from its artifact without a compile; B serves
 * again once the fault is gone; the counts show in sj_engine_stats; nothing
 * of a lost context is ever handed back to the driver (the fake counts stale
 * pointers and handles), and closing the engine leaves nothing on the
 * device. Also: every sticky error kind; a launch error that is not sticky
 * (out of resources) fails its request naming the kernel and leaves the
 * context (and every bucket) as it was; bucket A served on another thread
 * while B faults; resets that fail until one works; a one-off's fault. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/skip.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "shapejit/engine.h"
#include "tests/test_util.h"
#include "tests/fake_cuda/fake_cuda_test.h"

#ifdef SJ_FAKE_CUDA
#include <cuda.h>

#define MODEL SJ_SOURCE_DIR "/examples/models/ffn.sjg"
#define ROWS_A 5  /* bucket 8 */
#define ROWS_B 20 /* bucket 32 */

static alloc_counter counter;
static sj_ctx *ctx;
static char dir[256];
static fake_cuda_controls fake;

static sj_status open_engine_one_offs(bool one_offs, sj_engine **out) {
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.one_off_out_of_range = one_offs;
    cfg.backend = "cuda";
    cfg.cuda_driver = SJ_FAKE_CUDA;
    cfg.ladder = "list:8,32";
    char store[512];
    snprintf(store, sizeof store, "%s/store.db", dir);
    cfg.store_path = store;
    return sj_engine_open(ctx, MODEL, &cfg, out);
}

static sj_status open_engine(sj_engine **out) { return open_engine_one_offs(false, out); }

static sj_status run_rows(sj_engine *e, int64_t rows) {
    sj_value_desc d;
    assert_int_equal(sj_engine_input(e, 0, &d), SJ_OK);
    int64_t inner = d.shape.dims[1];
    float *x = calloc((size_t)(rows * inner), sizeof *x);
    assert_non_null(x);
    sj_named_tensor in = {d.name, {.rank = 2, .dims = {rows, inner}, .data = x}}, out = {0};
    sj_status st = sj_engine_run(e, &in, 1, &out, 1, NULL);
    if (st == SJ_OK) {
        assert_int_equal(out.tensor.dims[0], rows);
        sj_tensor_free(ctx, &out.tensor);
    } else {
        assert_null(out.tensor.data);
    }
    free(x);
    return st;
}

static void run_ok(sj_engine *e, int64_t rows) {
    sj_status st = run_rows(e, rows);
    if (st != SJ_OK) fail_msg("run of %lld rows: %s", (long long)rows, sj_ctx_last_error(ctx));
}

static fake_cuda_counters fake_counts(void) {
    fake_cuda_counters c;
    fake.counters(&c);
    return c;
}

/* The kernels of one replay of bucket B, in launch order: runs B once and
 * reads the fake's launch history. Returns how many. */
static int kernels_of_b(sj_engine *e, char names[][128], int cap) {
    uint64_t before = fake_counts().launches;
    run_ok(e, ROWS_B);
    uint64_t after = fake_counts().launches;
    int n = 0;
    for (uint64_t i = before; i < after && n < cap; i++, n++)
        snprintf(names[n], sizeof names[n], "%s", fake.launched(i));
    return n;
}

/* Nothing of a lost context reached the driver. */
static void assert_no_misuse(void) {
    fake_cuda_counters c = fake_counts();
    if (c.bad_pointers || c.bad_handles)
        printf("misuse: %llu bad pointers, %llu bad handles\n", (unsigned long long)c.bad_pointers,
               (unsigned long long)c.bad_handles);
    assert_int_equal(c.bad_pointers, 0);
    assert_int_equal(c.bad_handles, 0);
}

/* Closes e and checks the device was used cleanly: no stale pointer or
 * handle reached the driver, and nothing was left allocated at release. */
static void close_clean(sj_engine *e) {
    assert_no_misuse();
    sj_engine_close(e);
    assert_int_equal(fake_counts().live_allocs, 0);
    assert_int_equal(fake_counts().left_at_release, 0);
}

/* An engine that has run A once, and the kernels a run of B launches
 * (names, *n of them, at least min). */
static sj_engine *open_served(char names[64][128], int min, int *n) {
    sj_engine *e;
    if (open_engine(&e) != SJ_OK) fail_msg("open: %s", sj_ctx_last_error(ctx));
    run_ok(e, ROWS_A);
    *n = kernels_of_b(e, names, 64);
    assert_true(*n >= min);
    return e;
}

static void test_sticky_fault(void **state) {
    (void)state;
    char names[64][128];
    int n;
    sj_engine *e = open_served(names, 2, &n);
    /* The last kernel of B faults (at B's extents only: A stays healthy),
     * so the error names a launch past the first. */
    const char *bad = names[n - 1];
    int first = 0;
    while (strcmp(names[first], bad) != 0) first++;
    sj_engine_stats s0;
    sj_engine_stats_get(e, &s0);
    assert_int_equal(s0.compiles, 2);
    assert_int_equal(s0.device_resets, 0);
    fake_cuda_counters c0 = fake_counts();

    fake.inject(bad, CUDA_ERROR_ILLEGAL_ADDRESS, ROWS_A + 1);
    assert_int_equal(run_rows(e, ROWS_B), SJ_E_DEVICE_LOST);
    char want[256];
    snprintf(want, sizeof want, "kernel %s (launch #%d of bucket 32)", bad, first);
    assert_error_contains(ctx, want);
    assert_error_contains(ctx, "CUDA_ERROR_ILLEGAL_ADDRESS");
    printf("B's error: %s\n", sj_ctx_last_error(ctx));
    sj_engine_stats s1;
    sj_engine_stats_get(e, &s1);
    /* the fault, then its pinpointing rerun on B loaded again: two resets */
    assert_int_equal(s1.device_lost, 1);
    assert_int_equal(s1.device_resets, 2);
    assert_int_equal(s1.reloads, 1);
    assert_int_equal(s1.run_failures, s0.run_failures + 1);
    fake_cuda_counters c1 = fake_counts();
    assert_int_equal(c1.resets - c0.resets, 2);
    assert_int_equal(c1.faults - c0.faults, 2);

    /* A was loaded on the lost context: it loads again, compiles nothing */
    run_ok(e, ROWS_A);
    sj_engine_stats s2;
    sj_engine_stats_get(e, &s2);
    assert_int_equal(s2.reloads, 2);
    assert_int_equal(s2.compiles, 2);
    assert_int_equal(s2.device_resets, 2);
    assert_int_equal(fake_counts().faults, c1.faults);

    /* the fault gone, B serves again (loaded again too) */
    fake.inject(NULL, 0, 0);
    run_ok(e, ROWS_B);
    run_ok(e, ROWS_B);
    run_ok(e, ROWS_A);
    sj_engine_stats s3;
    sj_engine_stats_get(e, &s3);
    assert_int_equal(s3.reloads, 3);
    assert_int_equal(s3.compiles, 2);
    assert_int_equal(s3.device_resets, 2);
    assert_int_equal(s3.device_lost, 1);
    close_clean(e);
    assert_int_equal(fake_counts().live_modules, 0);
}

/* Every sticky error the driver can report is a lost device, named. */
static void test_sticky_kinds(void **state) {
    (void)state;
    static const struct {
        CUresult r;
        const char *name;
    } kinds[] = {{CUDA_ERROR_MISALIGNED_ADDRESS, "CUDA_ERROR_MISALIGNED_ADDRESS"},
                 {CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT"},
                 {CUDA_ERROR_ASSERT, "CUDA_ERROR_ASSERT"},
                 {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED"}};
    char names[64][128];
    int n;
    sj_engine *e = open_served(names, 1, &n);
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        fake.inject(names[0], kinds[k].r, ROWS_A + 1);
        assert_int_equal(run_rows(e, ROWS_B), SJ_E_DEVICE_LOST);
        assert_error_contains(ctx, kinds[k].name);
        assert_error_contains(ctx, "(launch #0 of bucket 32)");
        fake.inject(NULL, 0, 0);
        run_ok(e, ROWS_A);
        run_ok(e, ROWS_B);
    }
    sj_engine_stats s;
    sj_engine_stats_get(e, &s);
    assert_int_equal(s.device_lost, 4);
    assert_int_equal(s.device_resets, 8);
    assert_int_equal(s.compiles, 0); /* the first test stored both buckets */
    close_clean(e);
}

static void test_non_sticky_error(void **state) {
    (void)state;
    sj_engine *e;
    if (open_engine(&e) != SJ_OK) fail_msg("open: %s", sj_ctx_last_error(ctx));
    /* B's kernels, from a throwaway engine: this one must not have run B yet */
    sj_engine *probe;
    assert_int_equal(open_engine(&probe), SJ_OK);
    char names[64][128];
    int n = kernels_of_b(probe, names, 64);
    sj_engine_close(probe);
    assert_true(n >= 2);
    run_ok(e, ROWS_A);
    fake_cuda_counters c0 = fake_counts();

    fake.inject(names[1], CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, ROWS_A + 1);
    assert_int_equal(run_rows(e, ROWS_B), SJ_E_DEVICE);
    char want[256];
    snprintf(want, sizeof want, "kernel %s (launch #1 of bucket 32)", names[1]);
    assert_error_contains(ctx, want);
    assert_error_contains(ctx, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES");
    /* the context stayed: no reset, A runs as loaded */
    run_ok(e, ROWS_A);
    fake.inject(NULL, 0, 0);
    run_ok(e, ROWS_B);
    sj_engine_stats s;
    sj_engine_stats_get(e, &s);
    assert_int_equal(s.device_resets, 0);
    assert_int_equal(s.device_lost, 0);
    assert_int_equal(s.reloads, 0);
    assert_int_equal(s.run_failures, 1);
    assert_int_equal(fake_counts().resets, c0.resets);
    close_clean(e);
}

typedef struct a_loop {
    sj_engine *e;
    int runs, failures;
    char first_error[512];
} a_loop;

static void *run_a(void *arg) {
    a_loop *l = arg;
    for (int i = 0; i < l->runs; i++) {
        sj_value_desc d;
        sj_engine_input(l->e, 0, &d);
        int64_t inner = d.shape.dims[1];
        float *x = calloc((size_t)(ROWS_A * inner), sizeof *x);
        sj_named_tensor in = {d.name, {.rank = 2, .dims = {ROWS_A, inner}, .data = x}}, out = {0};
        if (!x || sj_engine_run(l->e, &in, 1, &out, 1, NULL) != SJ_OK) {
            if (!l->failures++)
                snprintf(l->first_error, sizeof l->first_error, "%s", sj_ctx_last_error(ctx));
        }
        sj_tensor_free(ctx, &out.tensor);
        free(x);
    }
    return NULL;
}

/* Requests of A on another thread while B faults again and again: every
 * one of A's is served (reloaded when a reset made it stale, before or
 * while it waited for the device), every one of B's fails naming the kernel. */
static void test_other_bucket_served_meanwhile(void **state) {
    (void)state;
    char names[64][128];
    int n;
    sj_engine *e = open_served(names, 1, &n);
    fake.inject(names[0], CUDA_ERROR_ILLEGAL_ADDRESS, ROWS_A + 1);
    a_loop loop = {e, 60, 0, ""};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, run_a, &loop), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(run_rows(e, ROWS_B), SJ_E_DEVICE_LOST);
        /* the thread's own message slot: A's thread does not overwrite it */
        char want[256];
        snprintf(want, sizeof want, "kernel %s (launch #0 of bucket 32)", names[0]);
        assert_error_contains(ctx, want);
    }
    pthread_join(t, NULL);
    if (loop.failures) fail_msg("%d of A's requests failed: %s", loop.failures, loop.first_error);
    fake.inject(NULL, 0, 0);
    run_ok(e, ROWS_B);
    sj_engine_stats s;
    sj_engine_stats_get(e, &s);
    assert_int_equal(s.device_lost, 3);
    assert_int_equal(s.device_resets, 6);
    assert_int_equal(s.compiles, 0);
    assert_int_equal(s.runs, 2 + 60 + 1);
    assert_int_equal(s.run_failures, 3);
    close_clean(e);
}

/* A reset that fails (a GPU that contained an error) leaves the device
 * lost: every request says so, and each tries the reset again, so the
 * device serves again once a reset works. */
static void test_reset_fails_then_works(void **state) {
    (void)state;
    char names[64][128];
    int n;
    sj_engine *e = open_served(names, 1, &n);
    fake.inject(names[0], CUDA_ERROR_ILLEGAL_ADDRESS, ROWS_A + 1);
    fake.fail_resets(3);
    /* the fault, its reset fails; loading B again for the rerun fails too */
    assert_int_equal(run_rows(e, ROWS_B), SJ_E_DEVICE_LOST);
    assert_error_contains(ctx, "CUDA_ERROR_ILLEGAL_ADDRESS");
    assert_error_contains(ctx, "then the device reset failed");
    assert_error_contains(ctx, "CUDA_ERROR_CONTAINED");
    fake.inject(NULL, 0, 0);
    /* A: the third failed reset */
    assert_int_equal(run_rows(e, ROWS_A), SJ_E_DEVICE_LOST);
    assert_error_contains(ctx, "lost its context and cannot be reset");
    sj_engine_stats s;
    sj_engine_stats_get(e, &s);
    assert_int_equal(s.device_resets, 0);
    /* the fourth works: A and B serve again */
    run_ok(e, ROWS_A);
    run_ok(e, ROWS_B);
    sj_engine_stats_get(e, &s);
    assert_int_equal(s.device_resets, 1);
    assert_int_equal(s.device_lost, 1);
    assert_int_equal(s.compiles, 0);
    close_clean(e);
}

/* A size past the ladder runs in a one-off executable at its exact
 * extent; a fault there is named the same way, and the one-off loads again
 * from the store (no compile) once the device is reset. */
static void test_one_off_fault(void **state) {
    (void)state;
    sj_engine *e;
    if (open_engine_one_offs(true, &e) != SJ_OK) fail_msg("open: %s", sj_ctx_last_error(ctx));
    run_ok(e, 40);
    sj_engine_stats s0;
    sj_engine_stats_get(e, &s0);
    /* kernels are named by their code, not their bucket: the first launch
     * at 40 rows faults */
    fake.inject("*", CUDA_ERROR_ILLEGAL_ADDRESS, 40);
    assert_int_equal(run_rows(e, 40), SJ_E_DEVICE_LOST);
    assert_error_contains(ctx, "kernel sjk_");
    assert_error_contains(ctx, "(launch #0 of bucket 40)");
    fake.inject(NULL, 0, 0);
    run_ok(e, 40);
    run_ok(e, ROWS_A);
    sj_engine_stats s;
    sj_engine_stats_get(e, &s);
    assert_int_equal(s.device_lost, 1);
    assert_int_equal(s.device_resets, 2);
    assert_int_equal(s.compiles, s0.compiles);
    assert_true(s.reloads >= 2);
    close_clean(e);
}

static int setup(void **state) {
    (void)state;
    ctx = ctx_with_counter(&counter);
    if (!ctx || fake_cuda_test_open(&fake) != 0 || !scratch_dir_create(dir, sizeof dir, "cuda_fault"))
        return -1;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    remove_tree(dir);
    sj_ctx_destroy(ctx);
    dlclose(fake.lib);
    return atomic_load(&counter.live) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_sticky_fault),
                                       cmocka_unit_test(test_sticky_kinds),
                                       cmocka_unit_test(test_non_sticky_error),
                                       cmocka_unit_test(test_other_bucket_served_meanwhile),
                                       cmocka_unit_test(test_reset_fails_then_works),
                                       cmocka_unit_test(test_one_off_fault)};
    return sj_run_tests(tests, setup, teardown);
}

#endif
