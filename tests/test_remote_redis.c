/* The remote (Redis) tier against a real redis-server started on a free
 * loopback port: round trips, two processes, a server that is down, killed
 * or stalled, and values that must be refused. Timings are loose upper
 * bounds that show a call never waits past its budget, not benchmarks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/skip.h"

#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shapejit/ext/bucketed_cache.h"
#include "shapejit/graph.h"
#include "shapejit/ext/remote_tier.h"
#include "shapejit/remote.h"
#include "core/core_impl.h"
#include "store/remote_tier_impl.h"
#include "tests/redis_fixture.h"
#include "tests/test_util.h"

#define CONNECT_MS 100
#define COMMAND_MS 200
#define BACKOFF_MS 300
/* A call's budget: connect + one command (no password, db 0), 3x slack. */
#define CALL_BUDGET_MS (3.0 * (CONNECT_MS + COMMAND_MS))
/* A call while backing off never touches the network: far below one
 * command timeout, with room for a loaded machine's scheduling. */
#define SKIP_BUDGET_MS 50.0

typedef redis_fixture fixture;

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

/* Puts v under key and waits until the writer has sent it. */
static void publish(sj_remote *r, const uint8_t *key, const void *v, size_t n) {
    assert_int_equal(sj_remote_put(r, key, v, n), SJ_OK);
    sj_remote_flush(r);
}

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

typedef struct store_dir {
    char dir[64], path[96];
} store_dir;

static void store_dir_make(store_dir *d) {
    assert_true(scratch_dir_create(d->dir, sizeof d->dir, "tiered"));
    snprintf(d->path, sizeof d->path, "%s/store.db", d->dir);
}

static void store_dir_remove(store_dir *d) { remove_tree(d->dir); }

static sj_store *open_store(sj_ctx *ctx, const char *path) {
    sj_store_config sc;
    sj_store_config_init(&sc);
    sc.path = path;
    sj_store *s = NULL;
    if (sj_store_open(ctx, &sc, &s) != SJ_OK) return NULL;
    return s;
}

/* What a child process of a two-process test does; 0 when it went as
 * expected. local is NULL for a child without a store. */
typedef int (*child_job)(sj_ctx *ctx, sj_store *local, sj_remote *remote, void *arg);

/* Forks a child with its own context (and, when with_store, its own local
 * store in a scratch directory) that connects to the fixture's Redis with
 * the secret "fleet" and runs job; destroying its remote tier publishes
 * what is queued. The child must exit 0. */
static void run_child(fixture *f, bool with_store, child_job job, void *arg) {
    store_dir d;
    if (with_store) store_dir_make(&d);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        sj_ctx *ctx;
        if (sj_ctx_create(NULL, &ctx) != SJ_OK) _exit(2);
        sj_store *local = with_store ? open_store(ctx, d.path) : NULL;
        sj_remote_config rc;
        config_for(&rc, f->url);
        rc.secret = "fleet";
        sj_remote *remote;
        if ((with_store && !local) || sj_remote_create(ctx, &rc, &remote) != SJ_OK) _exit(3);
        int bad = job(ctx, local, remote, arg);
        sj_remote_destroy(remote);
        sj_store_close(local);
        sj_ctx_destroy(ctx);
        _exit(bad ? 4 : 0);
    }
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    if (with_store) store_dir_remove(&d);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

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
    assert_error_contains(f->ctx, "command_timeout_ms (0)");
    config_for(&rc, "redis://h");
    rc.max_value_size = 10;
    assert_int_equal(sj_remote_create(f->ctx, &rc, &r), SJ_E_INVALID_ARG);
    assert_error_contains(f->ctx, "max_value_size 10");
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
    sj__remote_trust_init(&mac, "fleet secret");
    sj__remote_trust_init(&mac2, "other secret");
    sj__remote_trust_init(&plain, NULL);
    uint8_t key[32], other[32], frame[SJ_REMOTE_FRAME_OVERHEAD + 100];
    make_key(key, 1);
    make_key(other, 2);
    make_value(frame + SJ_REMOTE_FRAME_OVERHEAD, 100, 3);
    sj__remote_frame_seal(&mac, key, frame, 100);
    size_t off, n;
    assert_null(sj__remote_frame_check(&mac, key, frame, sizeof frame, &off, &n));
    assert_int_equal(off, SJ_REMOTE_FRAME_OVERHEAD);
    assert_int_equal(n, 100);
    assert_non_null(strstr(sj__remote_frame_check(&mac, other, frame, sizeof frame, &off, &n),
                           "another key"));
    assert_non_null(strstr(sj__remote_frame_check(&mac2, key, frame, sizeof frame, &off, &n), "MAC"));
    assert_non_null(strstr(sj__remote_frame_check(&plain, key, frame, sizeof frame, &off, &n),
                           "no secret"));
    assert_non_null(sj__remote_frame_check(&mac, key, frame, sizeof frame - 1, &off, &n));
    assert_non_null(sj__remote_frame_check(&mac, key, frame, 10, &off, &n));
    for (size_t i = 0; i < sizeof frame; i += 7) { /* any flipped bit is caught */
        frame[i] ^= 0x10;
        assert_non_null(sj__remote_frame_check(&mac, key, frame, sizeof frame, &off, &n));
        frame[i] ^= 0x10;
    }
    sj__remote_frame_seal(&plain, key, frame, 100);
    assert_null(sj__remote_frame_check(&plain, key, frame, sizeof frame, &off, &n));
    assert_non_null(strstr(sj__remote_frame_check(&mac, key, frame, sizeof frame, &off, &n),
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
    publish(r, key, v, sizeof v);
    expect_hit(f->ctx, r, key, v, sizeof v);
    uint8_t empty_key[32];
    make_key(empty_key, 3);
    publish(r, empty_key, NULL, 0);
    expect_hit(f->ctx, r, empty_key, v, 0);
    sj_remote_stats s;
    sj_remote_stats_get(r, &s);
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

typedef struct one_value {
    const uint8_t *key, *v;
    size_t n;
} one_value;

static int publish_one_value(sj_ctx *ctx, sj_store *local, sj_remote *w, void *arg) {
    (void)ctx, (void)local;
    const one_value *ov = arg;
    int bad = sj_remote_put(w, ov->key, ov->v, ov->n) != SJ_OK;
    sj_remote_flush(w);
    sj_remote_stats s;
    sj_remote_stats_get(w, &s);
    return bad || s.puts != 1;
}

/* Two processes share one server: what the child publishes, the parent reads. */
static void test_two_processes(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    uint8_t key[32], v[70000];
    make_key(key, 7);
    make_value(v, sizeof v, 7);
    run_child(f, false, publish_one_value, &(one_value){key, v, sizeof v});
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
    assert_error_contains(f->ctx, "connect to 127.0.0.1");
    for (int i = 0; i < 3; i++) assert_true(timed_miss(r, key, SJ_E_BUSY) < SKIP_BUDGET_MS);
    assert_error_contains(f->ctx, "off for");
    publish(r, key, v, sizeof v);
    sj_remote_stats s;
    sj_remote_stats_get(r, &s);
    assert_int_equal(s.errors, 1);
    assert_int_equal(s.timeouts, 0);
    assert_int_equal(s.backoff_skips, 3);
    assert_int_equal(s.misses, 4);
    assert_int_equal(s.dropped_puts, 1);
    assert_int_equal(s.hits + s.puts, 0);
    /* After the back-off the tier tries again (and fails again, at once). */
    sj_test_sleep_ms(BACKOFF_MS + 50);
    assert_true(timed_miss(r, key, SJ_E_IO) < CALL_BUDGET_MS);
    sj_remote_stats_get(r, &s);
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
    publish(r, key, v, sizeof v);
    expect_hit(f->ctx, r, key, v, sizeof v); /* leaves a pooled connection to the server */
    int port = f->srv.port;
    sj_test_redis_stop(&f->srv);
    assert_true(timed_miss(r, key, SJ_E_IO) < CALL_BUDGET_MS);
    assert_true(timed_miss(r, key, SJ_E_BUSY) < SKIP_BUDGET_MS);
    sj_remote_stats s;
    sj_remote_stats_get(r, &s);
    assert_int_equal(s.errors, 1);
    assert_int_equal(s.backoff_skips, 1);
    /* A new server on the same port: the dead connection was dropped, a new
     * one is made after the back-off. The new server starts empty. */
    assert_int_equal(sj_test_redis_start(&f->srv, port), 0);
    sj_test_sleep_ms(BACKOFF_MS + 50);
    timed_miss(r, key, SJ_E_NOT_FOUND);
    publish(r, key, v, sizeof v);
    expect_hit(f->ctx, r, key, v, sizeof v);
    sj_remote_stats_get(r, &s);
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
    publish(r, key, v, sizeof v);
    expect_hit(f->ctx, r, key, v, sizeof v);
    assert_int_equal(kill(f->srv.pid, SIGSTOP), 0);
    double ms = timed_miss(r, key, SJ_E_IO);
    assert_true(ms >= COMMAND_MS * 0.8); /* it did wait for the server, ... */
    assert_true(ms < CALL_BUDGET_MS);    /* ... but not past its budget */
    assert_error_contains(f->ctx, "timed out");
    for (int i = 0; i < 5; i++) assert_true(timed_miss(r, key, SJ_E_BUSY) < SKIP_BUDGET_MS);
    double t0 = sj_test_now_ms();
    assert_int_equal(sj_remote_put(r, key2, v, sizeof v), SJ_OK); /* never waits */
    assert_true(sj_test_now_ms() - t0 < SKIP_BUDGET_MS);
    sj_remote_flush(r);
    sj_remote_stats s;
    sj_remote_stats_get(r, &s);
    assert_int_equal(s.timeouts, 1);
    assert_int_equal(s.errors, 0);
    assert_int_equal(s.backoff_skips, 5);
    assert_int_equal(s.dropped_puts, 1);
    assert_int_equal(kill(f->srv.pid, SIGCONT), 0);
    sj_test_sleep_ms(BACKOFF_MS + 50);
    expect_hit(f->ctx, r, key, v, sizeof v);
    sj_remote_destroy(r);
}

/* A server whose accept queue is full drops new SYNs: connecting runs into
 * the connect timeout, counted as a timeout. The listener is the test's own
 * socket with backlog 0 and its queue filled by two connections. */
static void test_connect_timeout(void **state) {
    fixture *f = *state;
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(lfd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &alen), 0);
    assert_int_equal(listen(lfd, 0), 0);
    int fill[2];
    for (int i = 0; i < 2; i++) {
        fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        assert_true(fill[i] >= 0);
        connect(fill[i], (struct sockaddr *)&a, sizeof a);
    }
    sj_test_sleep_ms(20);
    snprintf(f->url, sizeof f->url, "redis://127.0.0.1:%d", ntohs(a.sin_port));
    sj_remote *r = open_tier(f, NULL, false, 0);
    uint8_t key[32];
    make_key(key, 1);
    double ms = timed_miss(r, key, SJ_E_IO);
    sj_remote_stats s;
    sj_remote_stats_get(r, &s);
    assert_int_equal(s.timeouts, 1);
    assert_true(ms >= CONNECT_MS * 0.8);
    assert_true(ms < CALL_BUDGET_MS);
    assert_true(timed_miss(r, key, SJ_E_BUSY) < SKIP_BUDGET_MS);
    sj_remote_destroy(r);
    close(fill[0]);
    close(fill[1]);
    close(lfd);
}

/* ---- a fake server on a loopback port: one connection, one scripted reply */

typedef enum fake_mode {
    FAKE_TRICKLE, /* a valid reply, one byte every 100 ms */
    FAKE_HUGE     /* announces a 4 GB value and sends zeros */
} fake_mode;

typedef struct fake_redis {
    int lfd, port;
    fake_mode mode;
    pthread_t th;
} fake_redis;

static void *fake_main(void *p) {
    fake_redis *f = p;
    int c = accept(f->lfd, NULL, NULL);
    if (c < 0) return NULL;
    char req[4096];
    if (recv(c, req, sizeof req, 0) <= 0) goto out; /* the command, whatever it is */
    if (f->mode == FAKE_TRICKLE) {
        static const char reply[] = "$20\r\n01234567890123456789\r\n";
        for (size_t i = 0; i + 1 < sizeof reply; i++) {
            if (send(c, &reply[i], 1, MSG_NOSIGNAL) != 1) break;
            sj_test_sleep_ms(100);
        }
    } else {
        static const char head[] = "$4000000000\r\n";
        static char zeros[1 << 20];
        if (send(c, head, sizeof head - 1, MSG_NOSIGNAL) < 0) goto out;
        for (int i = 0; i < 16; i++)
            if (send(c, zeros, sizeof zeros, MSG_NOSIGNAL) < 0) break;
    }
    /* hold the connection until the client lets go */
    struct pollfd pf = {.fd = c, .events = POLLIN};
    poll(&pf, 1, 3000);
out:
    close(c);
    return NULL;
}

static void fake_start(fake_redis *f, fake_mode mode) {
    f->mode = mode;
    f->lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(f->lfd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    assert_int_equal(bind(f->lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&a, &alen), 0);
    assert_int_equal(listen(f->lfd, 4), 0);
    f->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&f->th, NULL, fake_main, f), 0);
}

static void fake_stop(fake_redis *f) {
    pthread_join(f->th, NULL);
    close(f->lfd);
}

/* A server that trickles its reply a byte at a time never lets a recv time
 * out, but the command's deadline still ends the call within its budget
 * (it used to wait for the whole reply: 64 s in the campaign). */
static void test_trickling_server(void **state) {
    fixture *f = *state;
    fake_redis fr;
    fake_start(&fr, FAKE_TRICKLE);
    snprintf(f->url, sizeof f->url, "redis://127.0.0.1:%d", fr.port);
    sj_remote *r = open_tier(f, NULL, true, 0);
    uint8_t key[32];
    make_key(key, 1);
    double ms = timed_miss(r, key, SJ_E_IO);
    assert_error_contains(f->ctx, "timed out");
    assert_true(ms >= COMMAND_MS * 0.8);
    assert_true(ms < CALL_BUDGET_MS);
    sj_remote_stats s;
    sj_remote_stats_get(r, &s);
    assert_int_equal(s.timeouts, 1);
    sj_remote_destroy(r);
    fake_stop(&fr);
}

/* A reply announcing more than max_value_size is refused from its header,
 * before anything is buffered (hiredis would buffer the 4 GB). */
static void test_huge_reply_refused(void **state) {
    fixture *f = *state;
    fake_redis fr;
    fake_start(&fr, FAKE_HUGE);
    snprintf(f->url, sizeof f->url, "redis://127.0.0.1:%d", fr.port);
    sj_remote *r = open_tier(f, NULL, true, 1 << 20);
    uint8_t key[32];
    make_key(key, 1);
    double ms = timed_miss(r, key, SJ_E_CORRUPT);
    assert_error_contains(f->ctx, "announces 4000000000 bytes");
    assert_true(ms < CALL_BUDGET_MS);
    sj_remote_stats s;
    sj_remote_stats_get(r, &s);
    assert_int_equal(s.rejected, 1);
    sj_remote_destroy(r);
    fake_stop(&fr);
}

typedef struct stalled_arg {
    sj_remote *r;
    const uint8_t *key;
    double ms;
    sj_status st;
} stalled_arg;

static void *stalled_reader(void *p) {
    stalled_arg *a = p;
    void *got = NULL;
    size_t n;
    double t0 = sj_test_now_ms();
    a->st = sj_remote_get(a->r, a->key, &got, &n);
    a->ms = sj_test_now_ms() - t0;
    return NULL;
}

/* More serving threads than pooled connections hit a stalled server at
 * once: each returns a miss within the budget, none hangs. */
static void test_stalled_many_threads(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    sj_remote *r = open_tier(f, NULL, false, 0);
    uint8_t key[32];
    make_key(key, 1);
    timed_miss(r, key, SJ_E_NOT_FOUND); /* one pooled connection, up */
    assert_int_equal(kill(f->srv.pid, SIGSTOP), 0);
    enum { THREADS = 7 };
    pthread_t t[THREADS];
    stalled_arg a[THREADS];
    for (int i = 0; i < THREADS; i++) {
        a[i] = (stalled_arg){r, key, 0, SJ_OK};
        assert_int_equal(pthread_create(&t[i], NULL, stalled_reader, &a[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        assert_int_not_equal(a[i].st, SJ_OK);
        if (a[i].ms >= CALL_BUDGET_MS + COMMAND_MS)
            fail_msg("thread %d waited %.0f ms", i, a[i].ms);
    }
    kill(f->srv.pid, SIGCONT);
    sj_remote_stats s;
    sj_remote_stats_get(r, &s);
    assert_int_equal(s.misses, THREADS + 1);
    assert_true(s.timeouts >= 1);
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
    sj_remote_stats_get(r, &s);
    assert_int_equal(s.timeouts, 1);
    assert_int_equal(s.dropped_puts, 4); /* 2 on a full queue, 2 while backing off */
    assert_int_equal(s.puts, 0);
    kill(f->srv.pid, SIGCONT);
    sj_remote_destroy(r);
}

/* Publishes v under key through the tier, then reads the raw stored value. */
static redisReply *publish_and_read_raw(fixture *f, sj_remote *r, const uint8_t *key,
                                        const uint8_t *v, size_t n, char *name, size_t cap) {
    publish(r, key, v, n);
    raw_key(r, key, name, cap);
    redisReply *rep = raw_get(f->srv.port, name);
    assert_int_equal(rep->type, REDIS_REPLY_STRING);
    assert_int_equal(rep->len, n + SJ_REMOTE_FRAME_OVERHEAD);
    return rep;
}

static void expect_rejected(fixture *f, sj_remote *r, const uint8_t *key, const char *why,
                            uint64_t rejected_before) {
    timed_miss(r, key, SJ_E_CORRUPT);
    assert_error_contains(f->ctx, why);
    sj_remote_stats s;
    sj_remote_stats_get(r, &s);
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
    publish(w, key, v, sizeof v);
    expect_rejected(f, r, key, "larger than max_value_size", 0);
    /* The limit holds for publishing too. */
    assert_int_equal(sj_remote_put(r, key, v, SMALL_MAX - SJ_REMOTE_FRAME_OVERHEAD + 1),
                     SJ_E_OUT_OF_RANGE);
    publish(r, key, v, SMALL_MAX - SJ_REMOTE_FRAME_OVERHEAD);
    expect_hit(f->ctx, r, key, v, SMALL_MAX - SJ_REMOTE_FRAME_OVERHEAD);
    sj_remote_stats s;
    sj_remote_stats_get(r, &s);
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
    publish(w, key, v, sizeof v);
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
    publish(r, key, v, sizeof v);
    char name[128];
    raw_key(r, key, name, sizeof name);
    redisReply *rep = raw_get(f->srv.port, name);
    assert_int_equal(rep->type, REDIS_REPLY_NIL);
    freeReplyObject(rep);
    sj_remote_stats s;
    sj_remote_stats_get(r, &s);
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
    publish(r, key, v, sizeof v);
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
    sj_remote_stats_get(r, &s);
    assert_int_equal(s.hits, THREADS * 50);
    sj_remote_destroy(r);
}

/* A password and a database: AUTH and SELECT on every new connection; a
 * wrong password is an error that backs off, never a crash or a hang. */
static void test_auth_and_db(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    redisContext *c = sj_test_redis_connect(f->srv.port);
    assert_non_null(c);
    redisReply *rep = redisCommand(c, "CONFIG SET requirepass hunter2");
    assert_non_null(rep);
    assert_int_equal(rep->type, REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    snprintf(f->url, sizeof f->url, "redis://:hunter2@127.0.0.1:%d/3", f->srv.port);
    sj_remote *r = open_tier(f, "fleet", false, 0);
    uint8_t key[32], v[600];
    make_key(key, 1);
    make_value(v, sizeof v, 1);
    publish(r, key, v, sizeof v);
    expect_hit(f->ctx, r, key, v, sizeof v);
    char name[128];
    raw_key(r, key, name, sizeof name);
    rep = redisCommand(c, "AUTH hunter2");
    freeReplyObject(rep);
    rep = redisCommand(c, "EXISTS %s", name); /* db 0: not there */
    assert_int_equal(rep->integer, 0);
    freeReplyObject(rep);
    freeReplyObject(redisCommand(c, "SELECT 3"));
    rep = redisCommand(c, "EXISTS %s", name);
    assert_int_equal(rep->integer, 1);
    freeReplyObject(rep);
    redisFree(c);
    sj_remote_destroy(r);

    snprintf(f->url, sizeof f->url, "redis://:n0t-th1s@127.0.0.1:%d/3", f->srv.port);
    r = open_tier(f, "fleet", false, 0);
    assert_true(timed_miss(r, key, SJ_E_IO) < CALL_BUDGET_MS);
    assert_error_contains(f->ctx, "AUTH refused");
    assert_null(strstr(sj_ctx_last_error(f->ctx), "n0t-th1s"));
    sj_remote_stats s;
    sj_remote_stats_get(r, &s);
    assert_int_equal(s.errors, 1);
    sj_remote_destroy(r);
}

/* ---- the tiers together: local store, then remote */

enum { BUCKETS = 6 };

static sj_store_key bucket_key(int i) {
    sj_store_key k;
    memset(&k, 0, sizeof k);
    for (int b = 0; b < 32; b++) k.graph_hash[b] = (uint8_t)(b * 3 + 1);
    k.extent = (int64_t)16 << i;
    k.target_triple = "x86_64-pc-linux-gnu";
    k.target_cpu = "generic";
    k.artifact_version = 1;
    k.shapejit_version = "0.1.0";
    k.compiler_version = "test-compiler";
    return k;
}

/* Stands in for the compiler: deterministic bytes per bucket, counted. */
static void compile_bucket(int i, uint8_t *out, size_t n, int *compiles) {
    make_value(out, n, 100 + i);
    (*compiles)++;
}

#define ARTIFACT_BYTES 3000

/* get-or-compile over every bucket through the tiers; counts compiles and
 * where each hit came from. Returns the number of failed calls. */
static int serve_buckets(sj_ctx *ctx, sj_store *local, sj_remote *remote, int *compiles,
                         int from_count[3]) {
    int failures = 0;
    for (int i = 0; i < BUCKETS; i++) {
        sj_store_key k = bucket_key(i);
        void *bytes;
        size_t n;
        sj_tier from;
        uint8_t want[ARTIFACT_BYTES];
        make_value(want, sizeof want, 100 + i);
        if (sj_tiered_get(local, remote, &k, &bytes, &n, &from) == SJ_OK) {
            failures += n != sizeof want || memcmp(bytes, want, n) != 0;
            sj_free(ctx, bytes);
        } else {
            uint8_t art[ARTIFACT_BYTES];
            compile_bucket(i, art, sizeof art, compiles);
            failures += sj_tiered_put(local, remote, &k, art, sizeof art) != SJ_OK;
        }
        from_count[from]++;
    }
    return failures;
}

static int compile_every_bucket(sj_ctx *ctx, sj_store *local, sj_remote *remote, void *arg) {
    (void)arg;
    int compiles = 0, from[3] = {0};
    return serve_buckets(ctx, local, remote, &compiles, from) || compiles != BUCKETS;
}

/* Two processes, separate local stores, one Redis: the second compiles
 * nothing the first published, and the remote hits land in its local store. */
static void test_tiered_two_processes(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    store_dir b;
    store_dir_make(&b);
    run_child(f, true, compile_every_bucket, NULL);

    sj_store *local = open_store(f->ctx, b.path);
    assert_non_null(local);
    sj_remote *remote = open_tier(f, "fleet", false, 0);
    int compiles = 0, from[3] = {0};
    assert_int_equal(serve_buckets(f->ctx, local, remote, &compiles, from), 0);
    assert_int_equal(compiles, 0);
    assert_int_equal(from[SJ_TIER_REMOTE], BUCKETS);
    /* Read-through filled the local store: the next pass stays local. */
    memset(from, 0, sizeof from);
    assert_int_equal(serve_buckets(f->ctx, local, remote, &compiles, from), 0);
    assert_int_equal(compiles, 0);
    assert_int_equal(from[SJ_TIER_LOCAL], BUCKETS);
    sj_remote_stats rs;
    sj_remote_stats_get(remote, &rs);
    assert_int_equal(rs.hits, BUCKETS);
    assert_int_equal(rs.misses + rs.rejected + rs.errors, 0);
    sj_remote_destroy(remote);
    sj_store_close(local);
    store_dir_remove(&b);
}

/* With Redis down the tiers behave as the local store alone, within budget. */
static void test_tiered_remote_down(void **state) {
    fixture *f = *state;
    int port = sj_test_free_port();
    snprintf(f->url, sizeof f->url, "redis://127.0.0.1:%d", port);
    sj_store *local = open_store(f->ctx, NULL);
    assert_non_null(local);
    sj_remote *remote = open_tier(f, "fleet", false, 0);
    int compiles = 0, from[3] = {0};
    double t0 = sj_test_now_ms();
    assert_int_equal(serve_buckets(f->ctx, local, remote, &compiles, from), 0);
    assert_true(sj_test_now_ms() - t0 < CALL_BUDGET_MS + BUCKETS * SKIP_BUDGET_MS);
    assert_int_equal(compiles, BUCKETS);
    memset(from, 0, sizeof from);
    assert_int_equal(serve_buckets(f->ctx, local, remote, &compiles, from), 0);
    assert_int_equal(compiles, BUCKETS);
    assert_int_equal(from[SJ_TIER_LOCAL], BUCKETS);
    sj_remote_flush(remote);
    sj_remote_stats rs;
    sj_remote_stats_get(remote, &rs);
    assert_int_equal(rs.errors, 1);
    assert_int_equal(rs.backoff_skips, BUCKETS - 1);
    assert_int_equal(rs.dropped_puts, BUCKETS);
    sj_remote_destroy(remote);
    sj_store_close(local);
}

/* A tampered remote value is a miss: recompiled, never served, and never
 * copied into the local store. */
static void test_tiered_tampered(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    sj_store *first = open_store(f->ctx, NULL), *second = open_store(f->ctx, NULL);
    assert_non_null(first);
    assert_non_null(second);
    sj_remote *remote = open_tier(f, "fleet", false, 0);
    int compiles = 0, from[3] = {0};
    assert_int_equal(serve_buckets(f->ctx, first, remote, &compiles, from), 0);
    sj_remote_flush(remote);
    sj_store_key k = bucket_key(2);
    uint8_t digest[32];
    sj_tiered_key_digest(&k, digest);
    char name[128];
    raw_key(remote, digest, name, sizeof name);
    redisReply *rep = raw_get(f->srv.port, name);
    assert_int_equal(rep->type, REDIS_REPLY_STRING);
    rep->str[rep->len - 1] ^= 0x40;
    raw_set(f->srv.port, name, rep->str, rep->len);
    freeReplyObject(rep);
    compiles = 0;
    memset(from, 0, sizeof from);
    assert_int_equal(serve_buckets(f->ctx, second, remote, &compiles, from), 0);
    assert_int_equal(compiles, 1);
    assert_int_equal(from[SJ_TIER_REMOTE], BUCKETS - 1);
    sj_remote_stats rs;
    sj_remote_stats_get(remote, &rs);
    assert_int_equal(rs.rejected, 1);
    sj_store_stats ls;
    assert_int_equal(sj_store_stats_get(second, &ls), SJ_OK);
    assert_int_equal(ls.entries, BUCKETS); /* 5 written through + 1 recompiled */
    sj_remote_destroy(remote);
    sj_store_close(second);
    sj_store_close(first);
}

/* ---- through the bucketed compile cache */

/* A compiler that counts its compiles; its artifact names the extent, which
 * load checks, so an artifact served for the wrong bucket would fail. */
typedef struct counting_compiler {
    sj_ctx *ctx;
    int compiles;
} counting_compiler;

static sj_status cc_compile(void *p, const sj_graph *g, int64_t extent, void **artifact, size_t *len) {
    (void)g;
    counting_compiler *cc = p;
    uint8_t *a = sj_alloc(cc->ctx, ARTIFACT_BYTES);
    if (!a) return SJ_E_NOMEM;
    make_value(a, ARTIFACT_BYTES, (int)extent);
    memcpy(a, &extent, sizeof extent);
    cc->compiles++;
    *artifact = a;
    *len = ARTIFACT_BYTES;
    return SJ_OK;
}

static sj_status cc_load(void *p, const sj_graph *g, int64_t extent, const void *artifact,
                         size_t len, void **exe) {
    (void)g;
    counting_compiler *cc = p;
    uint8_t want[ARTIFACT_BYTES];
    make_value(want, sizeof want, (int)extent);
    memcpy(want, &extent, sizeof extent);
    if (len != sizeof want || memcmp(artifact, want, len) != 0)
        return sj_fail(cc->ctx, SJ_E_CORRUPT, "test artifact is not the one of extent %lld",
                       (long long)extent);
    int64_t *e = sj_alloc(cc->ctx, sizeof *e);
    if (!e) return SJ_E_NOMEM;
    *e = extent;
    *exe = e;
    return SJ_OK;
}

static sj_status cc_run(void *p, void *exe, int64_t active, const sj_tensor *in, sj_tensor *out) {
    (void)exe, (void)active, (void)in, (void)out;
    return sj_fail(((counting_compiler *)p)->ctx, SJ_E_UNSUPPORTED, "counting compiler: no run");
}

static void cc_destroy(void *p, void *exe) { sj_free(((counting_compiler *)p)->ctx, exe); }

typedef struct cache_run {
    int compiles;
    sj_bucketed_cache_stats stats;
} cache_run;

/* One "process": a graph, a pow2 ladder, a cache over the given local store
 * and remote tier; asks for every bucket. 0 on success. */
static int run_cache(sj_ctx *ctx, sj_store *local, sj_remote *remote, cache_run *out) {
    sj_graph *g = NULL;
    sj_ladder *l = NULL;
    sj_bucketed_cache *c = NULL;
    counting_compiler cc = {ctx, 0};
    sj_compiler comp = {.ctx = &cc, .target_triple = "test", .target_cpu = "generic",
                        .artifact_version = 1, .compiler_version = "counting-1",
                        .compile = cc_compile, .load = cc_load, .run = cc_run,
                        .destroy = cc_destroy};
    int64_t xd[] = {SJ_DIM_SYM, 4};
    sj_value x, y;
    int bad = sj_graph_create(ctx, "N", &g) != SJ_OK || sj_graph_input(g, "x", 2, xd, &x) != SJ_OK ||
              sj_graph_unary(g, SJ_OP_RELU, x, &y) != SJ_OK || sj_graph_output(g, y, "y") != SJ_OK ||
              sj_ladder_pow2(ctx, 8, 256, &l) != SJ_OK;
    sj_bucketed_cache_config cfg;
    sj_bucketed_cache_config_init(&cfg);
    cfg.remote = remote;
    if (!bad) bad = sj_bucketed_cache_create(g, l, &comp, local, &cfg, &c) != SJ_OK;
    for (int64_t key = 5; !bad && key <= 256; key += 7) {
        int64_t extent;
        void *exe;
        bad = sj_bucketed_cache_get_or_compile(c, key, &extent, &exe) != SJ_OK ||
              *(int64_t *)exe != extent;
    }
    if (!bad) {
        sj_bucketed_cache_stats_get(c, &out->stats);
        out->compiles = cc.compiles;
    }
    sj_bucketed_cache_destroy(c);
    sj_ladder_destroy(l);
    sj_graph_destroy(g);
    return bad;
}

enum { LADDER_BUCKETS = 6 }; /* run_cache's pow2 ladder 8..256 */

static int compile_through_cache(sj_ctx *ctx, sj_store *local, sj_remote *remote, void *arg) {
    (void)arg;
    cache_run run;
    return run_cache(ctx, local, remote, &run) || run.compiles != LADDER_BUCKETS;
}

/* The acceptance test, through the cache: two processes with their
 * own local stores and one Redis; the second compiles nothing. */
static void test_cache_two_processes(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    store_dir b;
    store_dir_make(&b);
    run_child(f, true, compile_through_cache, NULL);

    sj_store *local = open_store(f->ctx, b.path);
    assert_non_null(local);
    sj_remote *remote = open_tier(f, "fleet", true, 0);
    cache_run run;
    assert_int_equal(run_cache(f->ctx, local, remote, &run), 0);
    assert_int_equal(run.compiles, 0);
    assert_int_equal(run.stats.compiles, 0);
    assert_int_equal(run.stats.remote_hits, LADDER_BUCKETS);
    assert_int_equal(run.stats.store_hits, 0);
    /* A restart of this machine finds them in its own store. */
    assert_int_equal(run_cache(f->ctx, local, NULL, &run), 0);
    assert_int_equal(run.compiles, 0);
    assert_int_equal(run.stats.store_hits, LADDER_BUCKETS);
    sj_remote_destroy(remote);
    sj_store_close(local);
    store_dir_remove(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_url_errors, redis_fixture_ctx, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_url_forms, redis_fixture_ctx, redis_fixture_teardown),
        cmocka_unit_test(test_frame),
        cmocka_unit_test_setup_teardown(test_down_from_start, redis_fixture_ctx, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_put_get, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_destroy_publishes, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_two_processes, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_killed_mid_run, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_stalled, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_queue_full, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_connect_timeout, redis_fixture_ctx, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_trickling_server, redis_fixture_ctx, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_huge_reply_refused, redis_fixture_ctx, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_stalled_many_threads, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_tampered, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_wrong_key, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_garbage, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_oversized, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_wrong_secret, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_read_only, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_gets, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_auth_and_db, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_tiered_two_processes, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_tiered_remote_down, redis_fixture_ctx, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_tiered_tampered, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cache_two_processes, redis_fixture_server, redis_fixture_teardown),
    };
    return sj_run_tests(tests, NULL, NULL);
}
