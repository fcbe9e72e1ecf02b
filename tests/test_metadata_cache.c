/* The metadata info cache: policy decisions, LRU eviction in O(1), pins taken
 * during capture, commit / discard / release, refcounted pins across graphs,
 * clear_unpinned, allocation-free hits and defined answers to bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "shapejit/ext/metadata_cache.h"
#include "tests/test_util.h"

/* Buffers are malloc'd ints, so a buffer used after its release is an
 * AddressSanitizer error, and the release count is exact. */
typedef struct tracker {
    int released;
} tracker;

static void release_buffer(void *user, void *buffer) {
    ((tracker *)user)->released++;
    free(buffer);
}

typedef struct fixture {
    alloc_counter counts;
    sj_ctx *ctx;
    tracker t;
    sj_mdcache *c;
} fixture;

static fixture *setup_cache(size_t max_entries, size_t max_bytes) {
    fixture *f = calloc(1, sizeof *f);
    f->ctx = ctx_with_counter(&f->counts);
    sj_mdcache_policy p = {max_entries, max_bytes, SJ_CACHE_NORMAL};
    assert_int_equal(sj_mdcache_create(f->ctx, &p, release_buffer, &f->t, &f->c), SJ_OK);
    return f;
}

static void teardown_cache(fixture *f) {
    sj_mdcache_destroy(f->c);
    sj_ctx_destroy(f->ctx);
    free(f);
}

static void *buffer_of(int v) {
    int *b = malloc(sizeof *b);
    *b = v;
    return b;
}

/* Stores value v under the one-word key k, as the launch path does after a
 * BUILD_STORE miss. */
static void put(sj_mdcache *c, int64_t k, int v) {
    void *buf = buffer_of(v);
    sj_status st = sj_mdcache_store(c, &k, 1, buf);
    if (st != SJ_OK) free(buf);
    assert_int_equal(st, SJ_OK);
}

/* The cached value for key k (a lookup, so it counts as a use), or -1. */
static int get(sj_mdcache *c, int64_t k) {
    void *buf;
    sj_mdcache_lookup_result r = sj_mdcache_lookup(c, &k, 1, &buf);
    if (r != SJ_MDCACHE_HIT) {
        assert_null(buf);
        return -1;
    }
    return *(int *)buf;
}

/* Looks up then stores on a miss: how launches touch the cache. */
static void touch(sj_mdcache *c, int64_t k, int v) {
    if (get(c, k) < 0) put(c, k, v);
}

static size_t entries(sj_mdcache *c) {
    sj_mdcache_stats s;
    sj_mdcache_stats_get(c, &s);
    return s.entries;
}

static void test_policy_decisions(void **state) {
    (void)state;
    sj_mdcache_policy p;
    sj_mdcache_policy_init(&p);
    assert_int_equal(p.max_entries, 4096);
    assert_int_equal(p.max_cached_bytes, 2048);
    p = (sj_mdcache_policy){8, 64, SJ_CACHE_NORMAL};
    assert_true(sj_mdcache_policy_should_cache(&p, 64));
    assert_false(sj_mdcache_policy_should_cache(&p, 65));
    size_t cap = 0;
    assert_true(sj_mdcache_policy_capacity(&p, &cap));
    assert_int_equal(cap, 8);
    assert_false(sj_mdcache_policy_pins_entries(&p));
    p.mode = SJ_CACHE_CAPTURE;
    assert_true(sj_mdcache_policy_should_cache(&p, 10000));
    assert_false(sj_mdcache_policy_capacity(&p, &cap));
    assert_true(sj_mdcache_policy_pins_entries(&p));
    p = (sj_mdcache_policy){0, 64, SJ_CACHE_NORMAL};
    assert_false(sj_mdcache_policy_should_cache(&p, 8));
}

static void test_normal_mode_gates_on_size(void **state) {
    (void)state;
    fixture *f = setup_cache(8, 64);
    int64_t small[8] = {0}, big[9] = {0};
    void *buf;
    assert_int_equal(sj_mdcache_lookup(f->c, small, 8, &buf), SJ_MDCACHE_BUILD_STORE);
    assert_int_equal(sj_mdcache_lookup(f->c, big, 9, &buf), SJ_MDCACHE_BUILD_FORGET);
    /* The cache never learns a key the policy would not keep. */
    void *b = buffer_of(1);
    assert_int_equal(sj_mdcache_store(f->c, big, 9, b), SJ_E_STATE);
    free(b);
    assert_int_equal(entries(f->c), 0);
    teardown_cache(f);
}

static void test_capture_mode_caches_any_size(void **state) {
    (void)state;
    fixture *f = setup_cache(8, 64);
    assert_int_equal(sj_mdcache_capture_begin(f->c), SJ_OK);
    assert_int_equal(sj_mdcache_mode(f->c), SJ_CACHE_CAPTURE);
    assert_true(sj_mdcache_policy_should_cache(sj_mdcache_policy_of(f->c), 10000));
    int64_t big[300] = {7};
    void *buf;
    assert_int_equal(sj_mdcache_lookup(f->c, big, 300, &buf), SJ_MDCACHE_BUILD_STORE);
    assert_int_equal(sj_mdcache_store(f->c, big, 300, buffer_of(5)), SJ_OK);
    assert_int_equal(sj_mdcache_lookup(f->c, big, 300, &buf), SJ_MDCACHE_HIT);
    assert_int_equal(*(int *)buf, 5);
    sj_mdcache_capture_discard(f->c);
    assert_int_equal(sj_mdcache_mode(f->c), SJ_CACHE_NORMAL);
    teardown_cache(f);
}

static void test_hit_returns_value_and_borrowed_key(void **state) {
    (void)state;
    fixture *f = setup_cache(8, 64);
    assert_int_equal(get(f->c, 1), -1);
    int64_t key[3] = {4, -1, 64};
    assert_int_equal(sj_mdcache_store(f->c, key, 3, buffer_of(42)), SJ_OK);
    /* A different array with the same words hits: the key is compared by
     * value, in place. */
    int64_t again[3];
    memcpy(again, key, sizeof key);
    key[0] = 99; /* the cache copied the words at store */
    void *buf;
    assert_int_equal(sj_mdcache_lookup(f->c, again, 3, &buf), SJ_MDCACHE_HIT);
    assert_int_equal(*(int *)buf, 42);
    /* A prefix or a longer key is another key. */
    assert_int_equal(sj_mdcache_lookup(f->c, again, 2, &buf), SJ_MDCACHE_BUILD_STORE);
    sj_mdcache_stats s;
    sj_mdcache_stats_get(f->c, &s);
    assert_int_equal(s.hits, 1);
    assert_int_equal(s.misses, 2);
    teardown_cache(f);
}

static void test_normal_mode_evicts_least_recently_used(void **state) {
    (void)state;
    fixture *f = setup_cache(2, 64);
    put(f->c, 0, 0);
    put(f->c, 1, 1);
    assert_int_equal(get(f->c, 0), 0); /* entry 1 becomes the LRU */
    put(f->c, 2, 2);
    assert_int_equal(entries(f->c), 2);
    assert_int_equal(get(f->c, 0), 0);
    assert_int_equal(get(f->c, 1), -1);
    assert_int_equal(get(f->c, 2), 2);
    assert_int_equal(f->t.released, 1);
    teardown_cache(f);
}

static void test_capture_mode_is_unbounded(void **state) {
    (void)state;
    fixture *f = setup_cache(2, 64);
    assert_int_equal(sj_mdcache_capture_begin(f->c), SJ_OK);
    for (int i = 0; i < 10; i++) put(f->c, i, i);
    assert_int_equal(entries(f->c), 10);
    assert_int_equal(f->t.released, 0);
    assert_int_equal(sj_mdcache_capture_commit(f->c, 1), SJ_OK);
    /* Back in Normal mode the next store shrinks the cache to its bound,
     * but only by unpinned entries: all ten are pinned by graph 1. */
    put(f->c, 100, 100);
    assert_int_equal(entries(f->c), 11);
    assert_int_equal(sj_mdcache_graph_release(f->c, 1), SJ_OK);
    assert_int_equal(entries(f->c), 1);
    teardown_cache(f);
}

static void test_zero_capacity_disables_caching(void **state) {
    (void)state;
    fixture *f = setup_cache(0, 64);
    int64_t k = 0;
    void *buf;
    assert_int_equal(sj_mdcache_lookup(f->c, &k, 1, &buf), SJ_MDCACHE_BUILD_FORGET);
    void *b = buffer_of(0);
    assert_int_equal(sj_mdcache_store(f->c, &k, 1, b), SJ_E_STATE);
    free(b);
    assert_int_equal(entries(f->c), 0);
    teardown_cache(f);
}

static void test_clear_unpinned_keeps_graph_pinned(void **state) {
    (void)state;
    fixture *f = setup_cache(8, 64);
    put(f->c, 0, 0);
    assert_int_equal(sj_mdcache_capture_begin(f->c), SJ_OK);
    put(f->c, 1, 1);
    assert_int_equal(sj_mdcache_capture_commit(f->c, 7), SJ_OK);
    put(f->c, 2, 2);
    assert_int_equal(entries(f->c), 3);
    sj_mdcache_clear_unpinned(f->c);
    assert_int_equal(get(f->c, 0), -1);
    assert_int_equal(get(f->c, 2), -1);
    assert_int_equal(get(f->c, 1), 1);
    assert_int_equal(f->t.released, 2);
    teardown_cache(f);
}

/* Traffic that evicts every unpinned entry of a 2-entry cache leaves key 0,
 * pinned by `graph`, in place; releasing the graph lets it go. */
static void expect_pinned_until_release(fixture *f, uint64_t graph) {
    for (int i = 1; i < 20; i++) touch(f->c, i, i);
    assert_int_equal(get(f->c, 0), 0);
    assert_int_equal(sj_mdcache_graph_release(f->c, graph), SJ_OK);
    assert_int_equal(get(f->c, 0), -1);
}

static void test_pinned_entry_survives_until_release(void **state) {
    (void)state;
    fixture *f = setup_cache(2, 64);
    assert_int_equal(sj_mdcache_capture_begin(f->c), SJ_OK);
    put(f->c, 0, 0);
    assert_int_equal(sj_mdcache_capture_commit(f->c, 1), SJ_OK);
    expect_pinned_until_release(f, 1);
    teardown_cache(f);
}

static void test_capture_hit_on_normal_entry_pins_it(void **state) {
    (void)state;
    fixture *f = setup_cache(2, 64);
    put(f->c, 0, 0);
    assert_int_equal(sj_mdcache_capture_begin(f->c), SJ_OK);
    assert_int_equal(get(f->c, 0), 0);
    assert_int_equal(get(f->c, 0), 0); /* twice in one capture: pinned once */
    assert_int_equal(sj_mdcache_capture_commit(f->c, 1), SJ_OK);
    /* One pin, so one release frees it. */
    expect_pinned_until_release(f, 1);
    teardown_cache(f);
}

static void test_pins_refcounted_across_graphs(void **state) {
    (void)state;
    fixture *f = setup_cache(8, 64);
    assert_int_equal(sj_mdcache_capture_begin(f->c), SJ_OK);
    put(f->c, 0, 0);
    put(f->c, 1, 1);
    assert_int_equal(sj_mdcache_capture_commit(f->c, 1), SJ_OK);
    assert_int_equal(sj_mdcache_capture_begin(f->c), SJ_OK);
    assert_int_equal(get(f->c, 0), 0);
    put(f->c, 2, 2);
    assert_int_equal(sj_mdcache_capture_commit(f->c, 2), SJ_OK);
    sj_mdcache_stats s;
    sj_mdcache_stats_get(f->c, &s);
    assert_int_equal(s.live_graphs, 2);
    assert_int_equal(s.pinned, 3);

    /* Releasing graph 1 frees only what graph 2 does not pin (entry 1). */
    assert_int_equal(sj_mdcache_graph_release(f->c, 1), SJ_OK);
    assert_int_equal(f->t.released, 1);
    assert_int_equal(get(f->c, 1), -1);
    assert_int_equal(get(f->c, 0), 0);
    assert_int_equal(get(f->c, 2), 2);
    assert_int_equal(sj_mdcache_graph_release(f->c, 2), SJ_OK);
    assert_int_equal(get(f->c, 0), -1);
    assert_int_equal(get(f->c, 2), -1);
    assert_int_equal(entries(f->c), 0);
    teardown_cache(f);
}

static void test_capture_discard_unpins_without_removing(void **state) {
    (void)state;
    fixture *f = setup_cache(8, 64);
    assert_int_equal(sj_mdcache_capture_begin(f->c), SJ_OK);
    put(f->c, 0, 0);
    sj_mdcache_capture_discard(f->c);
    assert_int_equal(get(f->c, 0), 0);
    sj_mdcache_stats s;
    sj_mdcache_stats_get(f->c, &s);
    assert_int_equal(s.pinned, 0);
    assert_int_equal(s.live_graphs, 0);
    for (int i = 1; i < 20; i++) touch(f->c, i, i);
    assert_int_equal(get(f->c, 0), -1);
    teardown_cache(f);
}

/* A capture abandoned after touching entries pinned by a live graph drops
 * only its own pins. */
static void test_discard_keeps_other_graphs_pins(void **state) {
    (void)state;
    fixture *f = setup_cache(2, 64);
    assert_int_equal(sj_mdcache_capture_begin(f->c), SJ_OK);
    put(f->c, 0, 0);
    assert_int_equal(sj_mdcache_capture_commit(f->c, 1), SJ_OK);
    assert_int_equal(sj_mdcache_capture_begin(f->c), SJ_OK);
    assert_int_equal(get(f->c, 0), 0);
    put(f->c, 1, 1);
    sj_mdcache_capture_discard(f->c);
    for (int i = 2; i < 30; i++) touch(f->c, i, i);
    assert_int_equal(get(f->c, 0), 0);
    assert_int_equal(get(f->c, 1), -1);
    teardown_cache(f);
}

static void test_bad_input_has_defined_results(void **state) {
    (void)state;
    fixture *f = setup_cache(8, 64);
    assert_int_equal(sj_mdcache_graph_release(f->c, 12345), SJ_E_NOT_FOUND);
    assert_int_equal(sj_mdcache_capture_commit(f->c, 1), SJ_E_STATE);
    sj_mdcache_capture_discard(f->c); /* no capture: no-op */
    assert_int_equal(sj_mdcache_capture_begin(f->c), SJ_OK);
    assert_int_equal(sj_mdcache_capture_begin(f->c), SJ_E_STATE);
    put(f->c, 0, 0);
    /* The same key twice: refused, the caller keeps its buffer. */
    void *dup = buffer_of(9);
    int64_t k = 0;
    assert_int_equal(sj_mdcache_store(f->c, &k, 1, dup), SJ_E_STATE);
    free(dup);
    assert_int_equal(sj_mdcache_capture_commit(f->c, 1), SJ_OK);
    /* A live graph id cannot be committed again. */
    assert_int_equal(sj_mdcache_capture_begin(f->c), SJ_OK);
    assert_int_equal(sj_mdcache_capture_commit(f->c, 1), SJ_E_INVALID_ARG);
    assert_int_equal(sj_mdcache_mode(f->c), SJ_CACHE_CAPTURE);
    /* An empty capture still commits a graph, released like any other. */
    assert_int_equal(sj_mdcache_capture_commit(f->c, 2), SJ_OK);
    assert_int_equal(sj_mdcache_graph_release(f->c, 2), SJ_OK);
    assert_int_equal(sj_mdcache_graph_release(f->c, 2), SJ_E_NOT_FOUND);
    assert_int_equal(sj_mdcache_graph_release(f->c, 1), SJ_OK);
    assert_int_equal(entries(f->c), 0);
    sj_mdcache *none;
    assert_int_equal(sj_mdcache_create(f->ctx, NULL, NULL, NULL, &none), SJ_E_INVALID_ARG);
    sj_mdcache_destroy(NULL);
    teardown_cache(f);
}

/* Eviction takes the LRU list's tail: one entry examined per eviction, no
 * matter how many pinned entries sit in the cache. */
static void test_eviction_is_constant_time(void **state) {
    (void)state;
    fixture *f = setup_cache(1100, 64);
    assert_int_equal(sj_mdcache_capture_begin(f->c), SJ_OK);
    for (int i = 0; i < 1000; i++) put(f->c, i, i);
    assert_int_equal(sj_mdcache_capture_commit(f->c, 1), SJ_OK);
    for (int i = 1000; i < 11000; i++) touch(f->c, i, i);
    sj_mdcache_stats s;
    sj_mdcache_stats_get(f->c, &s);
    assert_int_equal(s.entries, 1100);
    assert_int_equal(s.pinned, 1000);
    assert_int_equal(s.lru_length, 100);
    assert_int_equal(s.evictions, 10000 - 100);
    assert_int_equal(s.eviction_probes, s.evictions);
    /* The survivors are the 100 most recent. */
    assert_int_equal(get(f->c, 10899), -1);
    assert_int_equal(get(f->c, 10900 + 50), 10950);
    teardown_cache(f);
}

static void test_hits_allocate_nothing(void **state) {
    (void)state;
    fixture *f = setup_cache(64, 2048);
    int64_t words[32][16];
    for (int i = 0; i < 32; i++)
        for (int j = 0; j < 16; j++) words[i][j] = i * 1000 + j;
    for (int i = 0; i < 32; i++)
        assert_int_equal(sj_mdcache_store(f->c, words[i], 16, buffer_of(i)), SJ_OK);
    long before = f->counts.calls;
    for (int round = 0; round < 100; round++)
        for (int i = 0; i < 32; i++) {
            void *buf;
            assert_int_equal(sj_mdcache_lookup(f->c, words[i], 16, &buf), SJ_MDCACHE_HIT);
            assert_int_equal(*(int *)buf, i);
        }
    /* Hits during a capture pin through intrusive links: still nothing. */
    assert_int_equal(sj_mdcache_capture_begin(f->c), SJ_OK);
    for (int i = 0; i < 32; i++) {
        void *buf;
        assert_int_equal(sj_mdcache_lookup(f->c, words[i], 16, &buf), SJ_MDCACHE_HIT);
    }
    assert_int_equal(f->counts.calls, before);
    sj_mdcache_capture_discard(f->c);
    teardown_cache(f);
}

/* clear(): every lookup misses afterwards; unpinned buffers go at once,
 * pinned ones (a live graph, a capture in progress) are retired and freed by
 * their last graph's release or the capture's discard, never earlier. */
static void test_clear_drops_everything_and_retires_pins(void **state) {
    (void)state;
    fixture *f = setup_cache(8, 64);
    for (int i = 0; i < 3; i++) put(f->c, i, i);
    assert_int_equal(sj_mdcache_capture_begin(f->c), SJ_OK);
    assert_int_equal(get(f->c, 1), 1); /* a hit pins entry 1 to graph 7 */
    put(f->c, 10, 10);
    assert_int_equal(sj_mdcache_capture_commit(f->c, 7), SJ_OK);
    assert_int_equal(sj_mdcache_capture_begin(f->c), SJ_OK);
    put(f->c, 11, 11); /* pinned by the capture in progress */
    sj_mdcache_clear(f->c);
    sj_mdcache_stats s;
    sj_mdcache_stats_get(f->c, &s);
    assert_int_equal(s.entries, 0);
    assert_int_equal(s.retired, 3); /* 1 and 10 (graph 7), 11 (the capture) */
    assert_int_equal(f->t.released, 2); /* 0 and 2 */
    sj_mdcache_capture_discard(f->c);
    assert_int_equal(f->t.released, 3); /* 11: its only pin was the capture */
    for (int k = 0; k < 3; k++) assert_int_equal(get(f->c, k), -1);
    assert_int_equal(get(f->c, 10), -1);
    /* A key stored again after the clear is a new entry beside the retired one. */
    put(f->c, 10, 100);
    assert_int_equal(get(f->c, 10), 100);
    assert_int_equal(sj_mdcache_graph_release(f->c, 7), SJ_OK);
    assert_int_equal(f->t.released, 5);
    sj_mdcache_stats_get(f->c, &s);
    assert_int_equal(s.retired, 0);
    assert_int_equal(s.entries, 1);
    assert_int_equal(get(f->c, 10), 100);
    /* Retired entries still pinned at destroy are freed there. */
    assert_int_equal(sj_mdcache_capture_begin(f->c), SJ_OK);
    assert_int_equal(get(f->c, 10), 100);
    assert_int_equal(sj_mdcache_capture_commit(f->c, 8), SJ_OK);
    sj_mdcache_clear(f->c);
    sj_mdcache_destroy(f->c);
    f->c = NULL;
    assert_int_equal(f->t.released, 6);
    assert_int_equal(f->counts.live, 1); /* the context */
    teardown_cache(f);
}

static void test_destroy_releases_every_buffer(void **state) {
    (void)state;
    fixture *f = setup_cache(4, 64);
    for (int i = 0; i < 3; i++) put(f->c, i, i);
    assert_int_equal(sj_mdcache_capture_begin(f->c), SJ_OK);
    put(f->c, 10, 10);
    assert_int_equal(sj_mdcache_capture_commit(f->c, 5), SJ_OK);
    assert_int_equal(sj_mdcache_capture_begin(f->c), SJ_OK);
    put(f->c, 11, 11);
    tracker *t = &f->t;
    sj_mdcache_destroy(f->c); /* a graph still live and a capture open */
    f->c = NULL;
    assert_int_equal(t->released, 5);
    assert_int_equal(f->counts.live, 1); /* the context */
    teardown_cache(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_decisions),
        cmocka_unit_test(test_normal_mode_gates_on_size),
        cmocka_unit_test(test_capture_mode_caches_any_size),
        cmocka_unit_test(test_hit_returns_value_and_borrowed_key),
        cmocka_unit_test(test_normal_mode_evicts_least_recently_used),
        cmocka_unit_test(test_capture_mode_is_unbounded),
        cmocka_unit_test(test_zero_capacity_disables_caching),
        cmocka_unit_test(test_clear_unpinned_keeps_graph_pinned),
        cmocka_unit_test(test_pinned_entry_survives_until_release),
        cmocka_unit_test(test_capture_hit_on_normal_entry_pins_it),
        cmocka_unit_test(test_pins_refcounted_across_graphs),
        cmocka_unit_test(test_capture_discard_unpins_without_removing),
        cmocka_unit_test(test_discard_keeps_other_graphs_pins),
        cmocka_unit_test(test_bad_input_has_defined_results),
        cmocka_unit_test(test_eviction_is_constant_time),
        cmocka_unit_test(test_hits_allocate_nothing),
        cmocka_unit_test(test_destroy_releases_every_buffer),
        cmocka_unit_test(test_clear_drops_everything_and_retires_pins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
