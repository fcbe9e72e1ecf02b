/* One compile per fleet: the remote tier's compile leases against a real
 * redis-server on a free loopback port. The lease commands themselves
 * (take, compare-and-renew, compare-and-delete), then the cache: 4 engines
 * in threads and 4 processes, cold, on one ladder compile each bucket once
 * in total; a holder killed with SIGKILL mid-compile, a lease taken by hand
 * and never released, a holder that never publishes, and Redis dying
 * mid-wait each delay the others by at most about the lease time, never a
 * hang. Time bounds are loose upper bounds (a loaded 2-core machine), and
 * lower bounds only where the wait is the point. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/skip.h"

#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "shapejit/ext/bucketed_cache.h"
#include "shapejit/graph.h"
#include "shapejit/ext/remote_tier.h"
#include "shapejit/remote.h"
#include "core/core_impl.h"
#include "tests/redis_fixture.h"
#include "tests/test_util.h"

#define SLACK_MS 1500.0 /* scheduling on a loaded machine, connects, compiles */
#define FLEET 4

typedef redis_fixture fixture;

static sj_remote *open_tier(sj_ctx *ctx, const char *url, int lease_ms) {
    sj_remote_config rc;
    sj_remote_config_init(&rc);
    rc.url = url;
    rc.key_prefix = "sjlease:";
    rc.secret = "fleet";
    rc.connect_timeout_ms = 200;
    rc.command_timeout_ms = 500;
    rc.lease_ms = lease_ms;
    sj_remote *r = NULL;
    if (sj_remote_create(ctx, &rc, &r) != SJ_OK) return NULL;
    return r;
}

static void make_key(uint8_t key[SJ_REMOTE_KEY_SIZE], int seed) {
    for (int i = 0; i < SJ_REMOTE_KEY_SIZE; i++) key[i] = (uint8_t)(seed * 31 + i * 7);
}

/* "sjlease:lease:<hex>": the lease of key, as the tier names it. */
static void lease_name(sj_remote *r, const uint8_t *key, char *buf, size_t cap) {
    char value[128];
    assert_true(sj_remote_key_name(r, key, value, sizeof value) < sizeof value);
    snprintf(buf, cap, "sjlease:lease:%s", value + strlen("sjlease:"));
}

static redisReply *raw(int port, const char *fmt, ...) {
    redisContext *c = sj_test_redis_connect(port);
    assert_non_null(c);
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    assert_non_null(rep);
    return rep;
}

/* The lease's owner token, "" when there is none. */
static void lease_owner(int port, const char *name, char *buf, size_t cap) {
    redisReply *rep = raw(port, "GET %s", name);
    snprintf(buf, cap, "%s", rep->type == REDIS_REPLY_STRING ? rep->str : "");
    freeReplyObject(rep);
}

static long long lease_pttl(int port, const char *name) {
    redisReply *rep = raw(port, "PTTL %s", name);
    long long v = rep->integer;
    freeReplyObject(rep);
    return v;
}

static void raw_ok(int port, const char *fmt, const char *a, const char *b) {
    redisReply *rep = raw(port, fmt, a, b);
    assert_int_equal(rep->type, REDIS_REPLY_STATUS);
    freeReplyObject(rep);
}

static sj_remote_stats stats_of(sj_remote *r) {
    sj_remote_stats s;
    sj_remote_stats_get(r, &s);
    return s;
}

/* ---- the lease commands */

static void test_config(void **state) {
    fixture *f = *state;
    sj_remote_config rc;
    sj_remote_config_init(&rc);
    assert_int_equal(rc.lease_ms, SJ_REMOTE_DEFAULT_LEASE_MS);
    rc.url = "redis://127.0.0.1:1";
    sj_remote *r = NULL;
    rc.lease_ms = -1;
    assert_int_equal(sj_remote_create(f->ctx, &rc, &r), SJ_E_INVALID_ARG);
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "lease_ms -1"));
    rc.lease_ms = SJ_REMOTE_MAX_LEASE_MS + 1;
    assert_int_equal(sj_remote_create(f->ctx, &rc, &r), SJ_E_INVALID_ARG);
    assert_null(r);
    /* No server at all: a claim is ALONE at once, counted. */
    rc.lease_ms = 5000;
    rc.connect_timeout_ms = 100;
    assert_int_equal(sj_remote_create(f->ctx, &rc, &r), SJ_OK);
    uint8_t key[SJ_REMOTE_KEY_SIZE];
    make_key(key, 1);
    sj_remote_claim how;
    sj_remote_lease *l;
    void *data;
    size_t n;
    double t0 = sj_test_now_ms();
    assert_int_equal(sj_remote_lease_claim(r, key, &how, &l, &data, &n), SJ_OK);
    assert_true(sj_test_now_ms() - t0 < SLACK_MS);
    assert_int_equal(how, SJ_REMOTE_CLAIM_ALONE);
    assert_null(l);
    assert_int_equal(stats_of(r).lease_errors, 1);
    assert_int_equal(sj_remote_lease_claim(r, key, &how, NULL, &data, &n), SJ_E_INVALID_ARG);
    sj_remote_destroy(r);
}

static void test_take_renew_drop(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    sj_remote *r = open_tier(f->ctx, f->url, 300);
    assert_non_null(r);
    uint8_t key[SJ_REMOTE_KEY_SIZE];
    make_key(key, 2);
    char name[160], owner[128];
    lease_name(r, key, name, sizeof name);
    sj_remote_claim how;
    sj_remote_lease *l;
    void *data;
    size_t n;
    assert_int_equal(sj_remote_lease_claim(r, key, &how, &l, &data, &n), SJ_OK);
    assert_int_equal(how, SJ_REMOTE_CLAIM_OWNED);
    assert_non_null(l);
    lease_owner(f->srv.port, name, owner, sizeof owner);
    assert_true(owner[0]);
    long long ttl = lease_pttl(f->srv.port, name);
    assert_true(ttl > 0 && ttl <= 300);
    /* Three lease times later it is still held: renewed while "compiling". */
    sj_test_sleep_ms(900);
    char again[128];
    lease_owner(f->srv.port, name, again, sizeof again);
    assert_string_equal(again, owner);
    sj_remote_lease_end(l, false); /* a failed compile: dropped at once */
    lease_owner(f->srv.port, name, again, sizeof again);
    assert_string_equal(again, "");
    sj_remote_stats s = stats_of(r);
    assert_int_equal(s.leases_won, 1);
    assert_int_equal(s.lease_errors, 0);
    sj_remote_destroy(r);
}

/* A lease that expired and was taken by another owner is neither renewed
 * nor deleted by the first: both compare the token. */
static void test_never_touches_another_owner(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    sj_remote *r = open_tier(f->ctx, f->url, 300);
    assert_non_null(r);
    uint8_t key[SJ_REMOTE_KEY_SIZE];
    make_key(key, 3);
    char name[160], owner[128];
    lease_name(r, key, name, sizeof name);
    sj_remote_claim how;
    sj_remote_lease *l;
    void *data;
    size_t n;
    assert_int_equal(sj_remote_lease_claim(r, key, &how, &l, &data, &n), SJ_OK);
    assert_int_equal(how, SJ_REMOTE_CLAIM_OWNED);
    /* Another owner now holds it, for 250 ms. Renewing it (every 100 ms,
     * to 300 ms) would keep it alive past 600 ms. */
    raw_ok(f->srv.port, "SET %s %s PX 250", name, "intruder");
    sj_test_sleep_ms(600);
    lease_owner(f->srv.port, name, owner, sizeof owner);
    assert_string_equal(owner, "");
    assert_true(stats_of(r).lease_errors >= 1); /* found lost at a renewal */
    raw_ok(f->srv.port, "SET %s %s", name, "intruder");
    sj_remote_lease_end(l, false);
    lease_owner(f->srv.port, name, owner, sizeof owner);
    assert_string_equal(owner, "intruder");
    sj_remote_destroy(r);
}

/* Published: the value reaches the server before the lease goes. */
static void test_release_after_publish(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    sj_remote *r = open_tier(f->ctx, f->url, 2000);
    assert_non_null(r);
    uint8_t key[SJ_REMOTE_KEY_SIZE];
    make_key(key, 4);
    char name[160], owner[128], value_name[160];
    lease_name(r, key, name, sizeof name);
    sj_remote_key_name(r, key, value_name, sizeof value_name);
    sj_remote_claim how;
    sj_remote_lease *l;
    void *data;
    size_t n;
    assert_int_equal(sj_remote_lease_claim(r, key, &how, &l, &data, &n), SJ_OK);
    assert_int_equal(how, SJ_REMOTE_CLAIM_OWNED);
    assert_int_equal(sj_remote_put(r, key, "artifact", 8), SJ_OK);
    sj_remote_lease_end(l, true);
    sj_remote_flush(r);
    lease_owner(f->srv.port, name, owner, sizeof owner);
    assert_string_equal(owner, "");
    redisReply *rep = raw(f->srv.port, "EXISTS %s", value_name);
    assert_int_equal(rep->integer, 1);
    freeReplyObject(rep);
    /* Claimed again, the key is there: FETCHED, no lease left behind. */
    assert_int_equal(sj_remote_lease_claim(r, key, &how, &l, &data, &n), SJ_OK);
    assert_int_equal(how, SJ_REMOTE_CLAIM_FETCHED);
    assert_null(l);
    assert_int_equal(n, 8);
    assert_memory_equal(data, "artifact", 8);
    sj_free(f->ctx, data);
    lease_owner(f->srv.port, name, owner, sizeof owner);
    assert_string_equal(owner, "");
    sj_remote_destroy(r);
}

typedef struct waiter {
    sj_remote *r;
    const uint8_t *key;
    sj_remote_claim how;
    sj_remote_lease *lease;
    void *data;
    size_t n;
    double ms;
    sj_status st;
} waiter;

static void *wait_main(void *p) {
    waiter *w = p;
    double t0 = sj_test_now_ms();
    w->st = sj_remote_lease_claim(w->r, w->key, &w->how, &w->lease, &w->data, &w->n);
    w->ms = sj_test_now_ms() - t0;
    return NULL;
}

/* A second node finds the lease held, waits, and gets what the holder
 * publishes, well before the lease time. */
static void test_waiter_gets_value(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    sj_remote *a = open_tier(f->ctx, f->url, 5000), *b = open_tier(f->ctx, f->url, 5000);
    assert_non_null(a);
    assert_non_null(b);
    uint8_t key[SJ_REMOTE_KEY_SIZE];
    make_key(key, 5);
    sj_remote_claim how;
    sj_remote_lease *l;
    void *data;
    size_t n;
    assert_int_equal(sj_remote_lease_claim(a, key, &how, &l, &data, &n), SJ_OK);
    assert_int_equal(how, SJ_REMOTE_CLAIM_OWNED);
    waiter w = {.r = b, .key = key};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, wait_main, &w), 0);
    sj_test_sleep_ms(300);
    assert_int_equal(sj_remote_put(a, key, "compiled", 8), SJ_OK);
    sj_remote_lease_end(l, true);
    pthread_join(th, NULL);
    assert_int_equal(w.st, SJ_OK);
    assert_int_equal(w.how, SJ_REMOTE_CLAIM_FETCHED);
    assert_null(w.lease);
    assert_int_equal(w.n, 8);
    assert_memory_equal(w.data, "compiled", 8);
    sj_free(f->ctx, w.data);
    assert_true(w.ms >= 250 && w.ms < 5000);
    sj_remote_stats s = stats_of(b);
    assert_int_equal(s.lease_waits, 1);
    assert_int_equal(s.lease_waited_hits, 1);
    assert_int_equal(s.lease_waited_compiles, 0);
    assert_int_equal(s.leases_won, 0);
    assert_int_equal(s.misses, 0); /* polls are not misses */
    assert_int_equal(stats_of(a).leases_won, 1);
    sj_remote_destroy(a);
    sj_remote_destroy(b);
}

/* A lease taken by hand and never released: the waiter takes it over when
 * it expires (about the lease time), then compiles under its own. */
static void test_hand_lease_expires(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    sj_remote *r = open_tier(f->ctx, f->url, 800);
    assert_non_null(r);
    uint8_t key[SJ_REMOTE_KEY_SIZE];
    make_key(key, 6);
    char name[160], owner[128];
    lease_name(r, key, name, sizeof name);
    raw_ok(f->srv.port, "SET %s %s PX 600", name, "crashed-node");
    waiter w = {.r = r, .key = key};
    wait_main(&w);
    assert_int_equal(w.st, SJ_OK);
    assert_int_equal(w.how, SJ_REMOTE_CLAIM_OWNED);
    assert_non_null(w.lease);
    assert_true(w.ms >= 550 && w.ms < 800 + SLACK_MS);
    lease_owner(f->srv.port, name, owner, sizeof owner);
    assert_true(owner[0] && strcmp(owner, "crashed-node") != 0);
    sj_remote_lease_end(w.lease, false);
    sj_remote_stats s = stats_of(r);
    assert_int_equal(s.lease_waits, 1);
    assert_int_equal(s.lease_waited_compiles, 1);
    assert_int_equal(s.leases_won, 1);
    sj_remote_destroy(r);
}

/* A holder that keeps its lease forever and never publishes: the waiter
 * gives up after its lease time and compiles alone (documented fallback). */
static void test_holder_never_publishes(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    sj_remote *r = open_tier(f->ctx, f->url, 700);
    assert_non_null(r);
    uint8_t key[SJ_REMOTE_KEY_SIZE];
    make_key(key, 7);
    char name[160];
    lease_name(r, key, name, sizeof name);
    raw_ok(f->srv.port, "SET %s %s", name, "stuck-node"); /* no expiry */
    waiter w = {.r = r, .key = key};
    wait_main(&w);
    assert_int_equal(w.st, SJ_OK);
    assert_int_equal(w.how, SJ_REMOTE_CLAIM_ALONE);
    assert_null(w.lease);
    assert_true(w.ms >= 650 && w.ms < 700 + SLACK_MS);
    sj_remote_stats s = stats_of(r);
    assert_int_equal(s.lease_waits, 1);
    assert_int_equal(s.lease_waited_compiles, 1);
    assert_int_equal(s.leases_won, 0);
    sj_remote_destroy(r);
}

/* Redis dies while a node waits: the wait ends at the next poll (the tier
 * backs off) and the node compiles alone, long before the lease time. */
static void test_redis_dies_mid_wait(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    sj_remote *r = open_tier(f->ctx, f->url, 20000);
    assert_non_null(r);
    uint8_t key[SJ_REMOTE_KEY_SIZE];
    make_key(key, 8);
    char name[160];
    lease_name(r, key, name, sizeof name);
    raw_ok(f->srv.port, "SET %s %s", name, "stuck-node");
    waiter w = {.r = r, .key = key};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, wait_main, &w), 0);
    sj_test_sleep_ms(300);
    sj_test_redis_stop(&f->srv);
    pthread_join(th, NULL);
    assert_int_equal(w.st, SJ_OK);
    assert_int_equal(w.how, SJ_REMOTE_CLAIM_ALONE);
    assert_true(w.ms < 300 + SLACK_MS);
    sj_remote_stats s = stats_of(r);
    assert_int_equal(s.lease_waits, 1);
    assert_int_equal(s.lease_waited_compiles, 1);
    assert_true(s.errors + s.timeouts >= 1);
    sj_remote_destroy(r);
}

/* ---- through the bucketed cache: a fleet on one ladder */

enum { ARTIFACT_BYTES = 256, LADDER_BUCKETS = 6 }; /* pow2 8..256 */

/* A compiler whose compiles take a while (so a fleet started together
 * overlaps), counted in a counter the fleet shares; its artifact names the
 * extent, which load checks. block_fd >= 0: the first compile writes a byte
 * there and never returns (a holder killed mid-compile). */
typedef struct slow_compiler {
    sj_ctx *ctx;
    atomic_int *compiles;
    int compile_ms;
    int block_fd;
} slow_compiler;

static void fill(uint8_t *a, int64_t extent) {
    for (int i = 0; i < ARTIFACT_BYTES; i++) a[i] = (uint8_t)(extent * 13 + i);
    memcpy(a, &extent, sizeof extent);
}

static sj_status sc_compile(void *p, const sj_graph *g, int64_t extent, void **artifact, size_t *len) {
    (void)g;
    slow_compiler *sc = p;
    if (sc->block_fd >= 0) {
        char one = 1;
        if (write(sc->block_fd, &one, 1) != 1) _exit(5);
        for (;;) pause(); /* SIGKILLed here */
    }
    sj_test_sleep_ms(sc->compile_ms);
    uint8_t *a = sj_alloc(sc->ctx, ARTIFACT_BYTES);
    if (!a) return SJ_E_NOMEM;
    fill(a, extent);
    atomic_fetch_add(sc->compiles, 1);
    *artifact = a;
    *len = ARTIFACT_BYTES;
    return SJ_OK;
}

static sj_status sc_load(void *p, const sj_graph *g, int64_t extent, const void *artifact,
                         size_t len, void **exe) {
    (void)g;
    slow_compiler *sc = p;
    uint8_t want[ARTIFACT_BYTES];
    fill(want, extent);
    if (len != sizeof want || memcmp(artifact, want, len) != 0)
        return sj_fail(sc->ctx, SJ_E_CORRUPT, "not the artifact of extent %lld", (long long)extent);
    int64_t *e = sj_alloc(sc->ctx, sizeof *e);
    if (!e) return SJ_E_NOMEM;
    *e = extent;
    *exe = e;
    return SJ_OK;
}

static sj_status sc_run(void *p, void *exe, int64_t active, const sj_tensor *in, sj_tensor *out) {
    (void)exe, (void)active, (void)in, (void)out;
    return sj_fail(((slow_compiler *)p)->ctx, SJ_E_UNSUPPORTED, "slow compiler: no run");
}

static void sc_destroy(void *p, void *exe) { sj_free(((slow_compiler *)p)->ctx, exe); }

/* One member of the fleet: its own context, local store and remote tier;
 * asks for every bucket, starting at bucket `first` (members start at
 * different buckets and meet on the others). 0 on success. */
typedef struct member {
    const char *url;
    const char *dir; /* the store's directory, the caller's; NULL: a scratch one */
    int lease_ms, first, block_fd;
    atomic_int *compiles;
    pthread_barrier_t *start; /* NULL: start at once */
    sj_remote_stats remote;
    sj_bucketed_cache_stats cache;
    double ms;
    int bad;
} member;

static int run_member(member *m) {
    char dir[64], path[96];
    if (m->dir)
        snprintf(dir, sizeof dir, "%s", m->dir);
    else if (!scratch_dir_create(dir, sizeof dir, "lease"))
        return 1;
    snprintf(path, sizeof path, "%s/store.db", dir);
    sj_ctx *ctx = NULL;
    sj_store *local = NULL;
    sj_remote *remote = NULL;
    sj_graph *g = NULL;
    sj_ladder *l = NULL;
    sj_bucketed_cache *c = NULL;
    sj_store_config sc;
    sj_store_config_init(&sc);
    sc.path = path;
    int bad = sj_ctx_create(NULL, &ctx) != SJ_OK || sj_store_open(ctx, &sc, &local) != SJ_OK ||
              !(remote = open_tier(ctx, m->url, m->lease_ms));
    slow_compiler comp_state = {ctx, m->compiles, 40, m->block_fd};
    sj_compiler comp = {.ctx = &comp_state, .target_triple = "test", .target_cpu = "generic",
                        .artifact_version = 1, .compiler_version = "slow-1",
                        .compile = sc_compile, .load = sc_load, .run = sc_run,
                        .destroy = sc_destroy};
    int64_t xd[] = {SJ_DIM_SYM, 4};
    sj_value x, y;
    if (!bad)
        bad = sj_graph_create(ctx, "N", &g) != SJ_OK || sj_graph_input(g, "x", 2, xd, &x) != SJ_OK ||
              sj_graph_unary(g, SJ_OP_RELU, x, &y) != SJ_OK || sj_graph_output(g, y, "y") != SJ_OK ||
              sj_ladder_pow2(ctx, 8, 256, &l) != SJ_OK;
    sj_bucketed_cache_config cfg;
    sj_bucketed_cache_config_init(&cfg);
    cfg.remote = remote;
    if (!bad) bad = sj_bucketed_cache_create(g, l, &comp, local, &cfg, &c) != SJ_OK;
    if (m->start) pthread_barrier_wait(m->start);
    double t0 = sj_test_now_ms();
    for (int k = 0; !bad && k < LADDER_BUCKETS; k++) {
        int64_t want = (int64_t)8 << ((m->first + k) % LADDER_BUCKETS), extent;
        void *exe;
        bad = sj_bucketed_cache_get_or_compile(c, want, &extent, &exe) != SJ_OK || extent != want ||
              *(int64_t *)exe != extent;
    }
    m->ms = sj_test_now_ms() - t0;
    if (c) sj_bucketed_cache_stats_get(c, &m->cache);
    sj_bucketed_cache_destroy(c);
    if (remote) sj_remote_flush(remote);
    sj_remote_stats_get(remote, &m->remote);
    sj_remote_destroy(remote);
    sj_ladder_destroy(l);
    sj_graph_destroy(g);
    sj_store_close(local);
    sj_ctx_destroy(ctx);
    if (!m->dir) remove_tree(dir);
    return bad;
}

static void *member_main(void *p) {
    member *m = p;
    m->bad = run_member(m);
    return NULL;
}

/* 4 engines with separate stores in threads, started together: each bucket
 * compiled once in all, the rest fetched (or waited for). */
static void test_fleet_threads(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    atomic_int compiles = 0;
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, FLEET);
    member m[FLEET];
    pthread_t th[FLEET];
    for (int i = 0; i < FLEET; i++) {
        m[i] = (member){.url = f->url, .lease_ms = 10000, .first = i % 2 ? 0 : 3, .block_fd = -1,
                        .compiles = &compiles, .start = &start};
        assert_int_equal(pthread_create(&th[i], NULL, member_main, &m[i]), 0);
    }
    uint64_t won = 0, waits = 0, cache_compiles = 0, remote_hits = 0;
    for (int i = 0; i < FLEET; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(m[i].bad, 0);
        won += m[i].remote.leases_won;
        waits += m[i].remote.lease_waits;
        cache_compiles += m[i].cache.compiles;
        remote_hits += m[i].cache.remote_hits;
        assert_int_equal(m[i].remote.lease_errors, 0);
    }
    pthread_barrier_destroy(&start);
    assert_int_equal(atomic_load(&compiles), LADDER_BUCKETS);
    assert_int_equal(cache_compiles, LADDER_BUCKETS);
    assert_int_equal(won, LADDER_BUCKETS);
    assert_int_equal(remote_hits, (FLEET - 1) * LADDER_BUCKETS);
    assert_true(waits >= 1); /* started together: some found a lease held */
}

/* What a forked member reports through its pipe. */
typedef struct member_report {
    int bad, compiles;
    sj_remote_stats remote;
} member_report;

/* Forks a member process; it waits for a byte on go_fd before starting. */
static pid_t fork_member(const char *url, const char *dir, int lease_ms, int first, int go_fd,
                         int report_fd, int block_fd) {
    pid_t pid = fork();
    if (pid != 0) return pid;
    char go;
    if (go_fd >= 0 && read(go_fd, &go, 1) != 1) _exit(6);
    atomic_int compiles = 0;
    member m = {.url = url, .dir = dir, .lease_ms = lease_ms, .first = first, .block_fd = block_fd,
                .compiles = &compiles};
    member_report rep = {.bad = run_member(&m)};
    rep.compiles = atomic_load(&compiles);
    rep.remote = m.remote;
    if (report_fd >= 0 && write(report_fd, &rep, sizeof rep) != (ssize_t)sizeof rep) _exit(7);
    _exit(rep.bad ? 4 : 0);
}

static void reap(pid_t pid, bool killed) {
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (killed) {
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    } else {
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
}

/* 4 processes, empty stores, started together: total compiles across all
 * four = number of buckets. */
static void test_fleet_processes(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    int go[2], rep[2];
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(rep), 0);
    pid_t pids[FLEET];
    for (int i = 0; i < FLEET; i++) {
        pids[i] = fork_member(f->url, NULL, 10000, i, go[0], rep[1], -1);
        assert_true(pids[i] > 0);
    }
    close(go[0]);
    close(rep[1]);
    char bytes[FLEET] = {0};
    assert_int_equal(write(go[1], bytes, FLEET), FLEET); /* all start now */
    close(go[1]);
    int compiles = 0;
    uint64_t won = 0;
    for (int i = 0; i < FLEET; i++) {
        member_report r;
        assert_int_equal(read(rep[0], &r, sizeof r), (ssize_t)sizeof r);
        assert_int_equal(r.bad, 0);
        compiles += r.compiles;
        won += r.remote.leases_won;
    }
    close(rep[0]);
    for (int i = 0; i < FLEET; i++) reap(pids[i], false);
    assert_int_equal(compiles, LADDER_BUCKETS);
    assert_int_equal(won, LADDER_BUCKETS);
}

/* A holder killed with SIGKILL mid-compile: its lease is renewed no more
 * and expires; the fleet waits at most about the lease time, then one
 * member compiles that bucket and every bucket is still compiled once. */
static void test_holder_killed(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    enum { LEASE_MS = 1000 };
    int block[2];
    assert_int_equal(pipe(block), 0);
    char dir[64]; /* the killed holder cannot remove its store */
    assert_true(scratch_dir_create(dir, sizeof dir, "lease"));
    pid_t holder = fork_member(f->url, dir, LEASE_MS, 0, -1, -1, block[1]);
    assert_true(holder > 0);
    close(block[1]);
    char one;
    assert_int_equal(read(block[0], &one, 1), 1); /* it holds bucket 8's lease, compiling */
    close(block[0]);
    sj_test_sleep_ms(LEASE_MS / 2); /* renewed meanwhile: the lease has its full time left */
    assert_int_equal(kill(holder, SIGKILL), 0);
    reap(holder, true);
    remove_tree(dir);

    atomic_int compiles = 0;
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, FLEET - 1);
    member m[FLEET - 1];
    pthread_t th[FLEET - 1];
    for (int i = 0; i < FLEET - 1; i++) {
        m[i] = (member){.url = f->url, .lease_ms = LEASE_MS, .first = 0, .block_fd = -1,
                        .compiles = &compiles, .start = &start};
        assert_int_equal(pthread_create(&th[i], NULL, member_main, &m[i]), 0);
    }
    uint64_t waited_compiles = 0;
    for (int i = 0; i < FLEET - 1; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(m[i].bad, 0);
        /* the lease time, plus six 40 ms compiles in the worst order */
        assert_true(m[i].ms < LEASE_MS + SLACK_MS);
        assert_true(m[i].remote.lease_waits >= 1);
        waited_compiles += m[i].remote.lease_waited_compiles;
    }
    pthread_barrier_destroy(&start);
    assert_true(waited_compiles >= 1);
    /* Waiters woken together by the expiry: one takes the lease over, the
     * others wait for its value. */
    assert_int_equal(atomic_load(&compiles), LADDER_BUCKETS);
}

typedef struct cache_call {
    sj_bucketed_cache *c;
    int64_t key;
    sj_status st;
    atomic_bool done;
} cache_call;

static void *cache_call_main(void *p) {
    cache_call *cc = p;
    int64_t extent;
    void *exe;
    cc->st = sj_bucketed_cache_get_or_compile(cc->c, cc->key, &extent, &exe);
    atomic_store(&cc->done, true);
    return NULL;
}

/* While one bucket waits for another node's lease, the same cache serves
 * and compiles other buckets: the wait holds no lock they need. */
static void test_wait_blocks_no_other_bucket(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    enum { LEASE_MS = 2000 };
    sj_remote *r = open_tier(f->ctx, f->url, LEASE_MS);
    assert_non_null(r);
    atomic_int compiles = 0;
    slow_compiler comp_state = {f->ctx, &compiles, 20, -1};
    sj_compiler comp = {.ctx = &comp_state, .target_triple = "test", .target_cpu = "generic",
                        .artifact_version = 1, .compiler_version = "slow-1",
                        .compile = sc_compile, .load = sc_load, .run = sc_run,
                        .destroy = sc_destroy};
    sj_graph *g;
    sj_ladder *l;
    sj_bucketed_cache *c;
    int64_t xd[] = {SJ_DIM_SYM, 4};
    sj_value x, y;
    assert_int_equal(sj_graph_create(f->ctx, "N", &g), SJ_OK);
    assert_int_equal(sj_graph_input(g, "x", 2, xd, &x), SJ_OK);
    assert_int_equal(sj_graph_unary(g, SJ_OP_RELU, x, &y), SJ_OK);
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    assert_int_equal(sj_ladder_pow2(f->ctx, 8, 256, &l), SJ_OK);
    sj_bucketed_cache_config cfg;
    sj_bucketed_cache_config_init(&cfg);
    cfg.remote = r;
    assert_int_equal(sj_bucketed_cache_create(g, l, &comp, NULL, &cfg, &c), SJ_OK);
    /* Another node holds bucket 8's lease and is compiling it. */
    sj_store_key sk;
    sj_bucketed_cache_key(g, &comp, 8, &sk);
    uint8_t digest[SJ_REMOTE_KEY_SIZE];
    sj_tiered_key_digest(&sk, digest);
    char name[160];
    lease_name(r, digest, name, sizeof name);
    raw_ok(f->srv.port, "SET %s %s PX 2000", name, "other-node");

    cache_call waiting = {.c = c, .key = 5};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, cache_call_main, &waiting), 0);
    sj_test_sleep_ms(100);
    double t0 = sj_test_now_ms();
    for (int64_t key = 9; key <= 256; key *= 2) {
        int64_t extent;
        void *exe;
        assert_int_equal(sj_bucketed_cache_get_or_compile(c, key, &extent, &exe), SJ_OK);
    }
    double others_ms = sj_test_now_ms() - t0;
    assert_false(atomic_load(&waiting.done)); /* still waiting for the other node */
    assert_true(others_ms < LEASE_MS / 2);
    assert_int_equal(atomic_load(&compiles), 5);
    pthread_join(th, NULL);
    assert_int_equal(waiting.st, SJ_OK);
    assert_int_equal(atomic_load(&compiles), 6); /* the lease expired: compiled here */
    sj_bucketed_cache_destroy(c);
    sj_ladder_destroy(l);
    sj_graph_destroy(g);
    sj_remote_destroy(r);
}

/* lease_ms 0: no lease is taken; every member compiles what it misses. */
static void test_leases_off(void **state) {
    fixture *f = *state;
    NEED_SERVER(f);
    atomic_int compiles = 0;
    member m = {.url = f->url, .lease_ms = 0, .block_fd = -1, .compiles = &compiles};
    assert_int_equal(run_member(&m), 0);
    assert_int_equal(atomic_load(&compiles), LADDER_BUCKETS);
    assert_int_equal(m.remote.leases_won, 0);
    redisReply *rep = raw(f->srv.port, "KEYS %s", "sjlease:lease:*");
    assert_int_equal(rep->elements, 0);
    freeReplyObject(rep);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_config, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_take_renew_drop, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_never_touches_another_owner, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_release_after_publish, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_waiter_gets_value, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hand_lease_expires, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_holder_never_publishes, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_redis_dies_mid_wait, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_fleet_threads, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_fleet_processes, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_holder_killed, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_wait_blocks_no_other_bucket, redis_fixture_server, redis_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_leases_off, redis_fixture_server, redis_fixture_teardown),
    };
    return sj_run_tests(tests, NULL, NULL);
}
