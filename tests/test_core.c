/* Context, status strings, allocator hook and per-thread error messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shapejit/common.h"
#include "core/core_impl.h"
#include "tests/test_util.h"

static void test_version(void **state) {
    (void)state;
    assert_int_equal(sj_version_number(), SJ_VERSION_NUMBER);
    assert_string_equal(sj_version_string(), SJ_VERSION_STRING);
}

static void test_status_strings(void **state) {
    (void)state;
    for (int s = 0; s >= SJ_E_DEVICE_LOST; s--)
        assert_string_not_equal(sj_status_str((sj_status)s), "unknown status");
    assert_string_equal(sj_status_str((sj_status)-999), "unknown status");
}

static void test_error_message(void **state) {
    (void)state;
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    assert_string_equal(sj_ctx_last_error(ctx), "");
    assert_int_equal(sj_fail(ctx, SJ_E_SHAPE, "add: [%d] vs [%d]", 3, 4), SJ_E_SHAPE);
    assert_string_equal(sj_ctx_last_error(ctx), "add: [3] vs [4]");
    sj__error_prefix(ctx, "model.sjg");
    assert_string_equal(sj_ctx_last_error(ctx), "model.sjg: add: [3] vs [4]");
    sj_ctx_clear_error(ctx);
    assert_string_equal(sj_ctx_last_error(ctx), "");
    sj_ctx_destroy(ctx);
    sj_ctx_destroy(NULL);
}

/* The public pair a client reports its own failures with. */
static void test_error_public_setters(void **state) {
    (void)state;
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    assert_int_equal(sj_ctx_set_error(ctx, SJ_E_INVALID_ARG, "window %d", 0), SJ_E_INVALID_ARG);
    assert_string_equal(sj_ctx_last_error(ctx), "window 0");
    sj_ctx_prefix_error(ctx, "ladder fit:%d", 4);
    assert_string_equal(sj_ctx_last_error(ctx), "ladder fit:4: window 0");
    assert_int_equal(sj_ctx_set_error(NULL, SJ_E_NOMEM, "nothing recorded"), SJ_E_NOMEM);
    sj_ctx_prefix_error(NULL, "nothing");
    sj_ctx_destroy(ctx);
}

static void *other_thread_fails(void *arg) {
    sj_ctx *ctx = arg;
    sj__set_error(ctx, "other thread");
    return NULL;
}

static void test_error_per_thread(void **state) {
    (void)state;
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    sj__set_error(ctx, "main thread");
    pthread_t t;
    pthread_create(&t, NULL, other_thread_fails, ctx);
    pthread_join(t, NULL);
    assert_string_equal(sj_ctx_last_error(ctx), "main thread");
    sj_ctx_destroy(ctx);
}

/* A thread's error slot is freed when the thread ends: a context that
 * serves short-lived failing threads (precompile makes fresh ones each
 * call) does not grow. Slots used to live until the context died. */
static void test_error_slots_freed_with_threads(void **state) {
    (void)state;
    alloc_counter a;
    sj_ctx *ctx = ctx_with_counter(&a);
    long base = atomic_load(&a.live);
    for (int round = 0; round < 50; round++) {
        pthread_t t[4];
        for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&t[i], NULL, other_thread_fails, ctx), 0);
        for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    }
    assert_int_equal(atomic_load(&a.live), base);
    /* the main thread's own slot lives on, and is freed with the context */
    sj__set_error(ctx, "main");
    assert_int_equal(atomic_load(&a.live), base + 1);
    assert_string_equal(sj_ctx_last_error(ctx), "main");
    sj_ctx_destroy(ctx);
    assert_int_equal(atomic_load(&a.live), 0);
}

static void test_allocator_hook(void **state) {
    (void)state;
    alloc_counter c;
    sj_ctx *ctx = ctx_with_counter(&c);
    void *p = sj_alloc(ctx, 16);
    assert_non_null(p);
    char *s = sj_strdup(ctx, "abc");
    assert_string_equal(s, "abc");
    sj_free(ctx, s);
    sj_free(ctx, p);
    sj_ctx_destroy(ctx);
    assert_int_equal(c.calls, 3);
    assert_int_equal(c.live, 0);

    /* A half-set allocator is refused, and allocation failure is reported. */
    sj_ctx_config cfg;
    sj_ctx_config_init(&cfg);
    cfg.allocator = alloc_counter_allocator(&c);
    cfg.allocator.free_fn = NULL;
    assert_int_equal(sj_ctx_create(&cfg, &ctx), SJ_E_INVALID_ARG);
    cfg.allocator = alloc_counter_allocator(&c);
    c.fail_at = 0;
    c.keep_failing = true;
    assert_int_equal(sj_ctx_create(&cfg, &ctx), SJ_E_NOMEM);
}

static void test_calloc_overflow(void **state) {
    (void)state;
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    assert_null(sj_calloc(ctx, SIZE_MAX / 2, 4));
    sj_ctx_destroy(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_status_strings),
        cmocka_unit_test(test_error_message),
        cmocka_unit_test(test_error_public_setters),
        cmocka_unit_test(test_error_per_thread),
        cmocka_unit_test(test_error_slots_freed_with_threads),
        cmocka_unit_test(test_allocator_hook),
        cmocka_unit_test(test_calloc_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
