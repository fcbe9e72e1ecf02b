/* Context, status strings, allocator hook and per-thread error messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shapejit/common.h"
#include "jit/core/core_impl.h"

typedef struct counting {
    int allocs, frees, fail_after;
} counting;

static void *count_alloc(void *u, size_t n) {
    counting *c = u;
    if (c->fail_after >= 0 && c->allocs >= c->fail_after) return NULL;
    c->allocs++;
    return malloc(n);
}
static void *count_realloc(void *u, void *p, size_t n) {
    counting *c = u;
    if (!p) c->allocs++;
    return realloc(p, n);
}
static void count_free(void *u, void *p) {
    ((counting *)u)->frees++;
    free(p);
}

static void test_version(void **state) {
    (void)state;
    assert_int_equal(sj_version_number(), SJ_VERSION_NUMBER);
    assert_string_equal(sj_version_string(), SJ_VERSION_STRING);
}

static void test_status_strings(void **state) {
    (void)state;
    for (int s = 0; s >= SJ_E_INTERNAL; s--)
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
    sj_error_prefix(ctx, "model.sjg");
    assert_string_equal(sj_ctx_last_error(ctx), "model.sjg: add: [3] vs [4]");
    sj_ctx_clear_error(ctx);
    assert_string_equal(sj_ctx_last_error(ctx), "");
    sj_ctx_destroy(ctx);
    sj_ctx_destroy(NULL);
}

static void *other_thread_fails(void *arg) {
    sj_ctx *ctx = arg;
    sj_fail(ctx, SJ_E_IO, "other thread");
    return NULL;
}

static void test_error_per_thread(void **state) {
    (void)state;
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    sj_fail(ctx, SJ_E_PARSE, "main thread");
    pthread_t t;
    pthread_create(&t, NULL, other_thread_fails, ctx);
    pthread_join(t, NULL);
    assert_string_equal(sj_ctx_last_error(ctx), "main thread");
    sj_ctx_destroy(ctx);
}

static void test_allocator_hook(void **state) {
    (void)state;
    counting c = {0, 0, -1};
    sj_ctx_config cfg;
    sj_ctx_config_init(&cfg);
    cfg.allocator = (sj_allocator){count_alloc, count_realloc, count_free, &c};
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(&cfg, &ctx), SJ_OK);
    void *p = sj_alloc(ctx, 16);
    assert_non_null(p);
    char *s = sj_strdup(ctx, "abc");
    assert_string_equal(s, "abc");
    sj_free(ctx, s);
    sj_free(ctx, p);
    sj_ctx_destroy(ctx);
    assert_int_equal(c.allocs, 3);
    assert_int_equal(c.frees, 3);

    /* A half-set allocator is refused, and allocation failure is reported. */
    cfg.allocator.free_fn = NULL;
    assert_int_equal(sj_ctx_create(&cfg, &ctx), SJ_E_INVALID_ARG);
    counting f = {0, 0, 0};
    cfg.allocator = (sj_allocator){count_alloc, count_realloc, count_free, &f};
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
        cmocka_unit_test(test_error_per_thread),
        cmocka_unit_test(test_allocator_hook),
        cmocka_unit_test(test_calloc_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
