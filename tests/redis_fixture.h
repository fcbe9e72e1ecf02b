/* A cmocka fixture for tests of the fleet tier: a context and, where
 * redis-server is installed, a throwaway server on a loopback port (the
 * tests that need one skip themselves with NEED_SERVER otherwise).
 *
 *   cmocka_unit_test_setup_teardown(test_x, redis_fixture_server, redis_fixture_teardown)
 *   static void test_x(void **state) {
 *       redis_fixture *f = *state;
 *       NEED_SERVER(f);
 *       ... f->ctx, f->url ("redis://127.0.0.1:<port>") ...
 *   }
 */
#ifndef SJ_TEST_REDIS_FIXTURE_H
#define SJ_TEST_REDIS_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

#include "shapejit/common.h"
#include "tests/redis_server.h"
#include "tests/skip.h"

typedef struct redis_fixture {
    sj_ctx *ctx;
    sj_test_redis srv;
    char url[64];
} redis_fixture;

/* The context only (tests that need no server). */
static inline int redis_fixture_ctx(void **state) {
    redis_fixture *f = calloc(1, sizeof *f);
    if (!f || sj_ctx_create(NULL, &f->ctx) != SJ_OK) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static inline int redis_fixture_server(void **state) {
    if (redis_fixture_ctx(state) != 0) return -1;
    redis_fixture *f = *state;
    if (!sj_test_redis_path()) return 0; /* each test skips itself */
    if (sj_test_redis_start(&f->srv, 0) != 0) {
        fprintf(stderr, "could not start redis-server on a loopback port\n");
        return -1;
    }
    snprintf(f->url, sizeof f->url, "redis://127.0.0.1:%d", f->srv.port);
    return 0;
}

static inline int redis_fixture_teardown(void **state) {
    redis_fixture *f = *state;
    sj_test_redis_stop(&f->srv);
    sj_ctx_destroy(f->ctx);
    free(f);
    return 0;
}

#define NEED_SERVER(f)                                                                             \
    do {                                                                                           \
        if (!(f)->srv.pid) SJ_SKIP("redis-server is not installed (Debian: redis-server)");        \
    } while (0)

#endif
