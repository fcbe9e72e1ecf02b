/* The remote (Redis) tier against a real redis-server started on a free
 * loopback port: round trips, two processes, a server that is down, killed
 * or stalled, and values that must be refused. Timings are loose upper
 * bounds that show a call never waits past its budget, not benchmarks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shapejit/remote.h"
#include "store/remote_tier_impl.h"
#include "tests/redis_server.h"

#define CONNECT_MS 100
#define COMMAND_MS 200
#define BACKOFF_MS 300
/* A call's budget: connect + one command (no password, db 0), 3x slack. */
#define CALL_BUDGET_MS (3.0 * (CONNECT_MS + COMMAND_MS))
/* A call while backing off never touches the network. */
#define SKIP_BUDGET_MS 20.0

typedef struct fixture {
    sj_ctx *ctx;
    sj_test_redis srv;
    char url[64];
} fixture;

static void make_key(uint8_t key[SJ_REMOTE_KEY_SIZE], int seed) {
    for (int i = 0; i < SJ_REMOTE_KEY_SIZE; i++) key[i] = (uint8_t)(seed * 31 + i * 7);
}

static void make_value(uint8_t *v, size_t n, int seed) {
    for (size_t i = 0; i < n; i++) v[i] = (uint8_t)(seed + i * 13 + (i >> 8));
    if (n > 5) v[5] = 0; /* binary-safe: embedded NUL */
}

static void config_for(sj_remote_config *rc, const char *url) {
    sj_remote_config_init(rc);
    rc->url = url;
    rc->key_prefix = "sjtest:";
    rc->connect_timeout_ms = CONNECT_MS;
    rc->command_timeout_ms = COMMAND_MS;
    rc->backoff_ms = BACKOFF_MS;
}

static sj_remote *open_tier(fixture *f, const char *secret, bool read_only, size_t max_value) {
    sj_remote_config rc;
    config_for(&rc, f->url);
    rc.secret = secret;
    rc.read_only = read_only;
    if (max_value) rc.max_value_size = max_value;
    sj_remote *r = NULL;
    assert_int_equal(sj_remote_create(f->ctx, &rc, &r), SJ_OK);
    return r;
}

static int setup_ctx(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (!f || sj_ctx_create(NULL, &f->ctx) != SJ_OK) return -1;
    *state = f;
    return 0;
}

static int setup_server(void **state) {
    if (setup_ctx(state) != 0) return -1;
    fixture *f = *state;
    if (!sj_test_redis_path()) return 0; /* the test skips itself */
    if (sj_test_redis_start(&f->srv, 0) != 0) {
        fprintf(stderr, "could not start redis-server on a loopback port\n");
        return -1;
    }
    snprintf(f->url, sizeof f->url, "redis://127.0.0.1:%d", f->srv.port);
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    sj_test_redis_stop(&f->srv);
    sj_ctx_destroy(f->ctx);
    free(f);
    return 0;
}

#define NEED_SERVER(f)                                                                             \
    do {                                                                                           \
        if (!(f)->srv.pid) {                                                                       \
            printf("SKIP: redis-server is not installed (Debian: redis-server)\n");                \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

static void expect_hit(sj_ctx *ctx, sj_remote *r, const uint8_t *key, const uint8_t *want, size_t n) {
    void *got = NULL;
    size_t got_n = 0;
    sj_status st = sj_remote_get(r, key, &got, &got_n);
    if (st != SJ_OK) fail_msg("expected a hit: %s", sj_status_str(st));
    assert_int_equal(got_n, n);
    assert_memory_equal(got, want, n);
    sj_free(ctx, got);
}

/* Runs a get that must miss with `want`, and returns its duration in ms. */
static double timed_miss(sj_remote *r, const uint8_t *key, sj_status want) {
    void *got = (void *)1;
    size_t n = 1;
    double t0 = sj_test_now_ms();
    sj_status st = sj_remote_get(r, key, &got, &n);
    double ms = sj_test_now_ms() - t0;
    if (st != want) fail_msg("expected %s, got %s", sj_status_str(want), sj_status_str(st));
    assert_null(got);
    assert_int_equal(n, 0);
    return ms;
}

/* Raw access, bypassing the tier: what an attacker or a broken writer does. */
static void raw_key(sj_remote *r, const uint8_t *key, char *buf, size_t cap) {
    size_t need = sj_remote_key_name(r, key, buf, cap);
    assert_true(need < cap);
}

static redisReply *raw_get(int port, const char *name) {
    redisContext *c = sj_test_redis_connect(port);
    assert_non_null(c);
    redisReply *rep = redisCommand(c, "GET %s", name);
    redisFree(c);
    assert_non_null(rep);
    return rep;
}

static void raw_set(int port, const char *name, const void *v, size_t n) {
    redisContext *c = sj_test_redis_connect(port);
    assert_non_null(c);
    redisReply *rep = redisCommand(c, "SET %s %b", name, v, n);
    assert_non_null(rep);
    assert_int_equal(rep->type, REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    redisFree(c);
}

/* ---- without a server */

static void expect_bad_url(sj_ctx *ctx, const char *url, const char *words) {
    sj_remote_config rc;
    config_for(&rc, url);
    sj_remote *r = (sj_remote *)1;
    assert_int_equal(sj_remote_create(ctx, &rc, &r), SJ_E_INVALID_ARG);
    assert_null(r);
    if (!strstr(sj_ctx_last_error(ctx), words))
        fail_msg("URL '%s': message '%s' lacks '%s'", url, sj_ctx_last_error(ctx), words);
    assert_null(strstr(sj_ctx_last_error(ctx), "hunter2")); /* never echo a password */
}

static void test_url_errors(void **state) {
    fixture *f = *state;
    expect_bad_url(f->ctx, "http://127.0.0.1", "scheme 'http' not supported");
    expect_bad_url(f->ctx, "127.0.0.1:6379", "scheme");
    expect_bad_url(f->ctx, "redis://", "no host");
    expect_bad_url(f->ctx, "redis://:6379", "no host");
    expect_bad_url(f->ctx, "redis://h:0", "port '0'");
    expect_bad_url(f->ctx, "redis://h:70000", "port '70000'");
    expect_bad_url(f->ctx, "redis://h:6x", "port '6x'");
    expect_bad_url(f->ctx, "redis://h:6379/one", "database 'one'");
    expect_bad_url(f->ctx, "redis://hunter2@h", "need a ':'");
    expect_bad_url(f->ctx, "redis://user:@h", "empty password");
    expect_bad_url(f->ctx, "redis://:hunter2%zz@h", "%-escape");
    expect_bad_url(f->ctx, "redis://[::1:6379", "without ']'");
    expect_bad_url(f->ctx, "", "no URL");

    sj_remote_config rc;
    config_for(&rc, "redis://h");
    sj_remote *r;
    rc.command_timeout_ms = 0;
    assert_int_equal(sj_remote_create(f->ctx, &rc, &r), SJ_E_INVALID_ARG);
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "command_timeout_ms (0)"));
    config_for(&rc, "redis://h");
    rc.max_value_size = 10;
    assert_int_equal(sj_remote_create(f->ctx, &rc, &r), SJ_E_INVALID_ARG);
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "max_value_size 10"));
}

static void test_url_forms(void **state) {
    fixture *f = *state;
    static const char *const cases[][2] = {
        {"redis://cache.internal", "redis://cache.internal:6379/0"},
        {"redis://:hunter2@127.0.0.1:6380/3", "redis://:***@127.0.0.1:6380/3"},
        {"redis://ops:p%40ss/w@10.0.0.1/", "redis://ops:***@10.0.0.1:6379/0"},
        {"redis://[::1]:7000/1", "redis://[::1]:7000/1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sj_remote_config rc;
        config_for(&rc, cases[i][0]);
        sj_remote *r;
        assert_int_equal(sj_remote_create(f->ctx, &rc, &r), SJ_OK);
        assert_string_equal(sj_remote_url(r), cases[i][1]);
        uint8_t key[SJ_REMOTE_KEY_SIZE];
        make_key(key, 1);
        char name[128];
        assert_int_equal(sj_remote_key_name(r, key, name, sizeof name), 7 + 64);
        assert_int_equal(strncmp(name, "sjtest:", 7), 0);
        assert_int_equal(strspn(name + 7, "0123456789abcdef"), 64);
        sj_remote_destroy(r);
    }
    sj_remote_destroy(NULL);
}

static void test_frame(void **state) {
    (void)state;
    sj_remote_trust mac, mac2, plain;
    sj_remote_trust_init(&mac, "fleet secret");
    sj_remote_trust_init(&mac2, "other secret");
    sj_remote_trust_init(&plain, NULL);
    uint8_t key[32], other[32], frame[SJ_REMOTE_FRAME_OVERHEAD + 100];
    make_key(key, 1);
    make_key(other, 2);
    make_value(frame + SJ_REMOTE_FRAME_OVERHEAD, 100, 3);
    sj_remote_frame_seal(&mac, key, frame, 100);
    size_t off, n;
    assert_null(sj_remote_frame_check(&mac, key, frame, sizeof frame, &off, &n));
    assert_int_equal(off, SJ_REMOTE_FRAME_OVERHEAD);
    assert_int_equal(n, 100);
    assert_non_null(strstr(sj_remote_frame_check(&mac, other, frame, sizeof frame, &off, &n),
                           "another key"));
    assert_non_null(strstr(sj_remote_frame_check(&mac2, key, frame, sizeof frame, &off, &n), "MAC"));
    assert_non_null(strstr(sj_remote_frame_check(&plain, key, frame, sizeof frame, &off, &n),
                           "no secret"));
    assert_non_null(sj_remote_frame_check(&mac, key, frame, sizeof frame - 1, &off, &n));
    assert_non_null(sj_remote_frame_check(&mac, key, frame, 10, &off, &n));
    for (size_t i = 0; i < sizeof frame; i += 7) { /* any flipped bit is caught */
        frame[i] ^= 0x10;
        assert_non_null(sj_remote_frame_check(&mac, key, frame, sizeof frame, &off, &n));
        frame[i] ^= 0x10;
    }
    sj_remote_frame_seal(&plain, key, frame, 100);
    assert_null(sj_remote_frame_check(&plain, key, frame, sizeof frame, &off, &n));
    assert_non_null(strstr(sj_remote_frame_check(&mac, key, frame, sizeof frame, &off, &n),
                           "no MAC"));
}

/* ---- with a server */

static void test_put_get(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    sj_remote *r = open_tier(f, "s3cret", false, 0);
    uint8_t key[32], absent[32], v[5000];
    make_key(key, 1);
    make_key(absent, 9);
    make_value(v, sizeof v, 4);
    timed_miss(r, absent, SJ_E_NOT_FOUND);
    assert_int_equal(sj_remote_put(r, key, v, sizeof v), SJ_OK);
    sj_remote_flush(r);
    expect_hit(f->ctx, r, key, v, sizeof v);
    uint8_t empty_key[32];
    make_key(empty_key, 3);
    assert_int_equal(sj_remote_put(r, empty_key, NULL, 0), SJ_OK);
    sj_remote_flush(r);
    expect_hit(f->ctx, r, empty_key, v, 0);
    sj_remote_stats s;
    sj_remote_get_stats(r, &s);
    assert_int_equal(s.hits, 2);
    assert_int_equal(s.misses, 1);
    assert_int_equal(s.puts, 2);
    assert_int_equal(s.errors + s.timeouts + s.rejected + s.dropped_puts, 0);
    sj_remote_destroy(r);
}

/* A put queued just before destroy still reaches the server. */
static void test_destroy_publishes(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    uint8_t key[32], v[300];
    make_key(key, 5);
    make_value(v, sizeof v, 5);
    sj_remote *w = open_tier(f, NULL, false, 0);
    assert_int_equal(sj_remote_put(w, key, v, sizeof v), SJ_OK);
    sj_remote_destroy(w);
    sj_remote *r = open_tier(f, NULL, true, 0);
    expect_hit(f->ctx, r, key, v, sizeof v);
    sj_remote_destroy(r);
}

/* Two processes share one server: what the child publishes, the parent reads. */
static void test_two_processes(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    uint8_t key[32], v[70000];
    make_key(key, 7);
    make_value(v, sizeof v, 7);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        sj_ctx *ctx;
        if (sj_ctx_create(NULL, &ctx) != SJ_OK) _exit(2);
        sj_remote_config rc;
        config_for(&rc, f->url);
        rc.secret = "fleet";
        sj_remote *w;
        if (sj_remote_create(ctx, &rc, &w) != SJ_OK) _exit(3);
        int bad = sj_remote_put(w, key, v, sizeof v) != SJ_OK;
        sj_remote_flush(w);
        sj_remote_stats s;
        sj_remote_get_stats(w, &s);
        sj_remote_destroy(w);
        sj_ctx_destroy(ctx);
        _exit(bad || s.puts != 1 ? 4 : 0);
    }
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    sj_remote *r = open_tier(f, "fleet", true, 0);
    expect_hit(f->ctx, r, key, v, sizeof v);
    sj_remote_destroy(r);
}

static void test_down_from_start(void **state) {
    fixture *f = *state;
    int port = sj_test_free_port();
    assert_true(port > 0);
    snprintf(f->url, sizeof f->url, "redis://127.0.0.1:%d", port);
    sj_remote *r = open_tier(f, NULL, false, 0);
    uint8_t key[32], v[100];
    make_key(key, 1);
    make_value(v, sizeof v, 1);
    assert_true(timed_miss(r, key, SJ_E_IO) < CALL_BUDGET_MS);
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "connect to 127.0.0.1"));
    for (int i = 0; i < 3; i++) assert_true(timed_miss(r, key, SJ_E_BUSY) < SKIP_BUDGET_MS);
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "off for"));
    assert_int_equal(sj_remote_put(r, key, v, sizeof v), SJ_OK);
    sj_remote_flush(r);
    sj_remote_stats s;
    sj_remote_get_stats(r, &s);
    assert_int_equal(s.errors, 1);
    assert_int_equal(s.timeouts, 0);
    assert_int_equal(s.backoff_skips, 3);
    assert_int_equal(s.misses, 4);
    assert_int_equal(s.dropped_puts, 1);
    assert_int_equal(s.hits + s.puts, 0);
    /* After the back-off the tier tries again (and fails again, at once). */
    sj_test_sleep_ms(BACKOFF_MS + 50);
    assert_true(timed_miss(r, key, SJ_E_IO) < CALL_BUDGET_MS);
    sj_remote_get_stats(r, &s);
    assert_int_equal(s.errors, 2);
    sj_remote_destroy(r);
}

static void test_killed_mid_run(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    sj_remote *r = open_tier(f, "k", false, 0);
    uint8_t key[32], v[1000];
    make_key(key, 2);
    make_value(v, sizeof v, 2);
    assert_int_equal(sj_remote_put(r, key, v, sizeof v), SJ_OK);
    sj_remote_flush(r);
    expect_hit(f->ctx, r, key, v, sizeof v); /* leaves a pooled connection to the server */
    int port = f->srv.port;
    sj_test_redis_stop(&f->srv);
    assert_true(timed_miss(r, key, SJ_E_IO) < CALL_BUDGET_MS);
    assert_true(timed_miss(r, key, SJ_E_BUSY) < SKIP_BUDGET_MS);
    sj_remote_stats s;
    sj_remote_get_stats(r, &s);
    assert_int_equal(s.errors, 1);
    assert_int_equal(s.backoff_skips, 1);
    /* A new server on the same port: the dead connection was dropped, a new
     * one is made after the back-off. The new server starts empty. */
    assert_int_equal(sj_test_redis_start(&f->srv, port), 0);
    sj_test_sleep_ms(BACKOFF_MS + 50);
    timed_miss(r, key, SJ_E_NOT_FOUND);
    assert_int_equal(sj_remote_put(r, key, v, sizeof v), SJ_OK);
    sj_remote_flush(r);
    expect_hit(f->ctx, r, key, v, sizeof v);
    sj_remote_get_stats(r, &s);
    assert_int_equal(s.errors, 1);
    assert_int_equal(s.puts, 2);
    sj_remote_destroy(r);
}

static void test_stalled(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    sj_remote *r = open_tier(f, "k", false, 0);
    uint8_t key[32], key2[32], v[1000];
    make_key(key, 3);
    make_key(key2, 4);
    make_value(v, sizeof v, 3);
    assert_int_equal(sj_remote_put(r, key, v, sizeof v), SJ_OK);
    sj_remote_flush(r);
    expect_hit(f->ctx, r, key, v, sizeof v);
    assert_int_equal(kill(f->srv.pid, SIGSTOP), 0);
    double ms = timed_miss(r, key, SJ_E_IO);
    assert_true(ms >= COMMAND_MS * 0.8); /* it did wait for the server, ... */
    assert_true(ms < CALL_BUDGET_MS);    /* ... but not past its budget */
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "timed out"));
    for (int i = 0; i < 5; i++) assert_true(timed_miss(r, key, SJ_E_BUSY) < SKIP_BUDGET_MS);
    double t0 = sj_test_now_ms();
    assert_int_equal(sj_remote_put(r, key2, v, sizeof v), SJ_OK); /* never waits */
    assert_true(sj_test_now_ms() - t0 < SKIP_BUDGET_MS);
    sj_remote_flush(r);
    sj_remote_stats s;
    sj_remote_get_stats(r, &s);
    assert_int_equal(s.timeouts, 1);
    assert_int_equal(s.errors, 0);
    assert_int_equal(s.backoff_skips, 5);
    assert_int_equal(s.dropped_puts, 1);
    assert_int_equal(kill(f->srv.pid, SIGCONT), 0);
    sj_test_sleep_ms(BACKOFF_MS + 50);
    expect_hit(f->ctx, r, key, v, sizeof v);
    sj_remote_destroy(r);
}

/* A stalled server holds the writer; further puts fill the queue and are
 * dropped, and the callers never wait. */
static void test_queue_full(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    sj_remote_config rc;
    config_for(&rc, f->url);
    rc.queue_capacity = 2;
    sj_remote *r;
    assert_int_equal(sj_remote_create(f->ctx, &rc, &r), SJ_OK);
    uint8_t key[32], v[100];
    make_value(v, sizeof v, 1);
    assert_int_equal(kill(f->srv.pid, SIGSTOP), 0);
    make_key(key, 1);
    assert_int_equal(sj_remote_put(r, key, v, sizeof v), SJ_OK);
    sj_test_sleep_ms(COMMAND_MS / 4); /* the writer takes it and stalls in SET */
    int busy = 0;
    double t0 = sj_test_now_ms();
    for (int i = 2; i < 6; i++) {
        make_key(key, i);
        busy += sj_remote_put(r, key, v, sizeof v) == SJ_E_BUSY;
    }
    assert_true(sj_test_now_ms() - t0 < SKIP_BUDGET_MS);
    assert_int_equal(busy, 2);
    sj_remote_flush(r);
    sj_remote_stats s;
    sj_remote_get_stats(r, &s);
    assert_int_equal(s.timeouts, 1);
    assert_int_equal(s.dropped_puts, 4); /* 2 on a full queue, 2 while backing off */
    assert_int_equal(s.puts, 0);
    kill(f->srv.pid, SIGCONT);
    sj_remote_destroy(r);
}

/* Publishes v under key through the tier, then reads the raw stored value. */
static redisReply *publish_and_read_raw(fixture *f, sj_remote *r, const uint8_t *key,
                                        const uint8_t *v, size_t n, char *name, size_t cap) {
    assert_int_equal(sj_remote_put(r, key, v, n), SJ_OK);
    sj_remote_flush(r);
    raw_key(r, key, name, cap);
    redisReply *rep = raw_get(f->srv.port, name);
    assert_int_equal(rep->type, REDIS_REPLY_STRING);
    assert_int_equal(rep->len, n + SJ_REMOTE_FRAME_OVERHEAD);
    return rep;
}

static void expect_rejected(fixture *f, sj_remote *r, const uint8_t *key, const char *why,
                            uint64_t rejected_before) {
    timed_miss(r, key, SJ_E_CORRUPT);
    if (!strstr(sj_ctx_last_error(f->ctx), why))
        fail_msg("message '%s' lacks '%s'", sj_ctx_last_error(f->ctx), why);
    sj_remote_stats s;
    sj_remote_get_stats(r, &s);
    assert_int_equal(s.rejected, rejected_before + 1);
    assert_int_equal(s.hits, 0);
    assert_int_equal(s.errors + s.timeouts + s.backoff_skips, 0); /* the server is fine */
}

static void test_tampered(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    sj_remote *r = open_tier(f, "fleet", false, 0);
    uint8_t key[32], v[2000];
    make_key(key, 1);
    make_value(v, sizeof v, 1);
    char name[128];
    redisReply *rep = publish_and_read_raw(f, r, key, v, sizeof v, name, sizeof name);
    rep->str[SJ_REMOTE_FRAME_OVERHEAD + 1234] ^= 1;
    raw_set(f->srv.port, name, rep->str, rep->len);
    expect_rejected(f, r, key, "MAC does not verify", 0);
    rep->str[SJ_REMOTE_FRAME_OVERHEAD + 1234] ^= 1;
    rep->str[40] ^= 1; /* the length field */
    raw_set(f->srv.port, name, rep->str, rep->len);
    expect_rejected(f, r, key, "content length", 1);
    freeReplyObject(rep);
    sj_remote_destroy(r);
}

static void test_wrong_key(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    sj_remote *r = open_tier(f, "fleet", false, 0);
    uint8_t key[32], other[32], v[500];
    make_key(key, 1);
    make_key(other, 2);
    make_value(v, sizeof v, 1);
    char name[128], other_name[128];
    redisReply *rep = publish_and_read_raw(f, r, key, v, sizeof v, name, sizeof name);
    raw_key(r, other, other_name, sizeof other_name);
    raw_set(f->srv.port, other_name, rep->str, rep->len);
    freeReplyObject(rep);
    expect_rejected(f, r, other, "another key", 0);
    expect_hit(f->ctx, r, key, v, sizeof v);
    sj_remote_destroy(r);
}

static void test_garbage(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    sj_remote *r = open_tier(f, NULL, false, 0);
    uint8_t key[32];
    make_key(key, 1);
    char name[128];
    raw_key(r, key, name, sizeof name);
    raw_set(f->srv.port, name, "definitely not an artifact", 26);
    expect_rejected(f, r, key, "shorter than a frame", 0);
    char junk[300];
    memset(junk, 'x', sizeof junk);
    raw_set(f->srv.port, name, junk, sizeof junk);
    expect_rejected(f, r, key, "bad magic", 1);
    memcpy(junk, "SJRT\x09", 5);
    raw_set(f->srv.port, name, junk, sizeof junk);
    expect_rejected(f, r, key, "version", 2);
    redisContext *c = sj_test_redis_connect(f->srv.port);
    assert_non_null(c);
    freeReplyObject(redisCommand(c, "DEL %s", name));
    freeReplyObject(redisCommand(c, "RPUSH %s a b", name));
    redisFree(c);
    expect_rejected(f, r, key, "not a string", 3);
    sj_remote_destroy(r);
}

static void test_oversized(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    enum { SMALL_MAX = 4096 };
    sj_remote *w = open_tier(f, "fleet", false, 0);
    sj_remote *r = open_tier(f, "fleet", false, SMALL_MAX);
    uint8_t key[32], v[3 * SMALL_MAX];
    make_key(key, 1);
    make_value(v, sizeof v, 1);
    assert_int_equal(sj_remote_put(w, key, v, sizeof v), SJ_OK);
    sj_remote_flush(w);
    expect_rejected(f, r, key, "larger than max_value_size", 0);
    /* The limit holds for publishing too. */
    assert_int_equal(sj_remote_put(r, key, v, SMALL_MAX - SJ_REMOTE_FRAME_OVERHEAD + 1),
                     SJ_E_OUT_OF_RANGE);
    assert_int_equal(sj_remote_put(r, key, v, SMALL_MAX - SJ_REMOTE_FRAME_OVERHEAD), SJ_OK);
    sj_remote_flush(r);
    expect_hit(f->ctx, r, key, v, SMALL_MAX - SJ_REMOTE_FRAME_OVERHEAD);
    sj_remote_stats s;
    sj_remote_get_stats(r, &s);
    assert_int_equal(s.dropped_puts, 1);
    sj_remote_destroy(r);
    sj_remote_destroy(w);
}

static void test_wrong_secret(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    sj_remote *w = open_tier(f, "alpha", false, 0);
    uint8_t key[32], v[800];
    make_key(key, 1);
    make_value(v, sizeof v, 1);
    assert_int_equal(sj_remote_put(w, key, v, sizeof v), SJ_OK);
    sj_remote_flush(w);
    sj_remote *beta = open_tier(f, "beta", true, 0);
    expect_rejected(f, beta, key, "MAC does not verify", 0);
    sj_remote *none = open_tier(f, NULL, true, 0);
    expect_rejected(f, none, key, "no secret", 0);
    sj_remote *alpha = open_tier(f, "alpha", true, 0);
    expect_hit(f->ctx, alpha, key, v, sizeof v);
    sj_remote_destroy(alpha);
    sj_remote_destroy(none);
    sj_remote_destroy(beta);
    sj_remote_destroy(w);
}

static void test_read_only(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    sj_remote *r = open_tier(f, "fleet", true, 0);
    uint8_t key[32], v[100];
    make_key(key, 1);
    make_value(v, sizeof v, 1);
    assert_int_equal(sj_remote_put(r, key, v, sizeof v), SJ_OK);
    sj_remote_flush(r);
    char name[128];
    raw_key(r, key, name, sizeof name);
    redisReply *rep = raw_get(f->srv.port, name);
    assert_int_equal(rep->type, REDIS_REPLY_NIL);
    freeReplyObject(rep);
    sj_remote_stats s;
    sj_remote_get_stats(r, &s);
    assert_int_equal(s.puts + s.dropped_puts, 0);
    timed_miss(r, key, SJ_E_NOT_FOUND);
    sj_remote_destroy(r);
}

typedef struct reader_arg {
    sj_ctx *ctx;
    sj_remote *r;
    const uint8_t *key, *v;
    size_t n;
    int hits;
} reader_arg;

static void *reader(void *p) {
    reader_arg *a = p;
    for (int i = 0; i < 50; i++) {
        void *got;
        size_t n;
        if (sj_remote_get(a->r, a->key, &got, &n) == SJ_OK) {
            a->hits += n == a->n && memcmp(got, a->v, n) == 0;
            sj_free(a->ctx, got);
        }
    }
    return NULL;
}

/* More serving threads than pooled connections, all reading at once. */
static void test_concurrent_gets(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    sj_remote *r = open_tier(f, "fleet", false, 0);
    uint8_t key[32], v[10000];
    make_key(key, 1);
    make_value(v, sizeof v, 1);
    assert_int_equal(sj_remote_put(r, key, v, sizeof v), SJ_OK);
    sj_remote_flush(r);
    enum { THREADS = 6 };
    pthread_t t[THREADS];
    reader_arg a[THREADS];
    for (int i = 0; i < THREADS; i++) {
        a[i] = (reader_arg){f->ctx, r, key, v, sizeof v, 0};
        assert_int_equal(pthread_create(&t[i], NULL, reader, &a[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(a[i].hits, 50);
    }
    sj_remote_stats s;
    sj_remote_get_stats(r, &s);
    assert_int_equal(s.hits, THREADS * 50);
    sj_remote_destroy(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_url_errors, setup_ctx, teardown),
        cmocka_unit_test_setup_teardown(test_url_forms, setup_ctx, teardown),
        cmocka_unit_test(test_frame),
        cmocka_unit_test_setup_teardown(test_down_from_start, setup_ctx, teardown),
        cmocka_unit_test_setup_teardown(test_put_get, setup_server, teardown),
        cmocka_unit_test_setup_teardown(test_destroy_publishes, setup_server, teardown),
        cmocka_unit_test_setup_teardown(test_two_processes, setup_server, teardown),
        cmocka_unit_test_setup_teardown(test_killed_mid_run, setup_server, teardown),
        cmocka_unit_test_setup_teardown(test_stalled, setup_server, teardown),
        cmocka_unit_test_setup_teardown(test_queue_full, setup_server, teardown),
        cmocka_unit_test_setup_teardown(test_tampered, setup_server, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_key, setup_server, teardown),
        cmocka_unit_test_setup_teardown(test_garbage, setup_server, teardown),
        cmocka_unit_test_setup_teardown(test_oversized, setup_server, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_secret, setup_server, teardown),
        cmocka_unit_test_setup_teardown(test_read_only, setup_server, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_gets, setup_server, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
