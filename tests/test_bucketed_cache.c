/* The bucketed compile cache over the interpreter backend: many threads,
 * one compile per bucket, warm restarts from the store, run_padded
 * slicing, mixed inputs, out-of-range keys, corrupt rows, failing
 * compiles, two processes precompiling into one store, a hit path
 * that allocates nothing, native_after and tiered compilation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shapejit/ext/bucketed_cache.h"
#include "shapejit/ext/interp.h"
#include "core/core_impl.h"
#include "tests/test_util.h"

/* --- a counting compiler around the interpreter backend --- */

#define MAX_EXTENT_COUNTED 1024
typedef struct counting_compiler {
    sj_compiler inner;
    _Atomic int compiles[MAX_EXTENT_COUNTED + 1];
    _Atomic int total;
    _Atomic int destroyed; /* executables destroyed */
    int64_t fail_extent; /* compile fails at this extent (0 = never) */
    int delay_ms;        /* widens the window in which other threads pile up */
    _Atomic bool hold;   /* compiles wait while set (a test holds a background compile) */
} counting_compiler;

static sj_status cc_compile(void *self, const sj_graph *g, int64_t extent, void **art, size_t *len) {
    counting_compiler *cc = self;
    if (cc->delay_ms) {
        struct timespec ts = {0, cc->delay_ms * 1000000L};
        nanosleep(&ts, NULL);
    }
    while (atomic_load(&cc->hold)) {
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
    if (extent == cc->fail_extent)
        return sj_fail(sj_graph_ctx(g), SJ_E_COMPILE, "test compiler: refusing extent %lld", (long long)extent);
    atomic_fetch_add(&cc->total, 1);
    if (extent <= MAX_EXTENT_COUNTED) atomic_fetch_add(&cc->compiles[extent], 1);
    return cc->inner.compile(cc->inner.ctx, g, extent, art, len);
}
static sj_status cc_load(void *self, const sj_graph *g, int64_t extent, const void *a, size_t n, void **exe) {
    counting_compiler *cc = self;
    return cc->inner.load(cc->inner.ctx, g, extent, a, n, exe);
}
static sj_status cc_run(void *self, void *exe, int64_t active, const sj_tensor *in, sj_tensor *out) {
    counting_compiler *cc = self;
    return cc->inner.run(cc->inner.ctx, exe, active, in, out);
}
static void cc_destroy(void *self, void *exe) {
    counting_compiler *cc = self;
    atomic_fetch_add(&cc->destroyed, 1);
    cc->inner.destroy(cc->inner.ctx, exe);
}

static sj_compiler counting(counting_compiler *cc) {
    memset(cc, 0, sizeof *cc);
    sj_interp_compiler(&cc->inner);
    sj_compiler c = cc->inner;
    c.ctx = cc;
    c.compile = cc_compile;
    c.load = cc_load;
    c.run = cc_run;
    c.destroy = cc_destroy;
    return c;
}

/* --- fixtures --- */

static sj_ctx *ctx;
static sj_graph *g; /* x [N, 8] -> relu(x @ w + b) = y [N, 4]; pooled = sum_N y [4] */
static char dir[64], path[128];

static void build_graph(void) {
    assert_int_equal(sj_graph_create(ctx, "N", &g), SJ_OK);
    int64_t xd[] = {SJ_DIM_SYM, 8}, wd[] = {8, 4}, bd[] = {4};
    float w[32], b[4];
    for (int i = 0; i < 32; i++) w[i] = (float)((i * 7) % 11) / 10.0f - 0.4f;
    for (int i = 0; i < 4; i++) b[i] = 0.1f * (float)i - 0.1f;
    sj_value x, wv, bv, m, a, y, pooled;
    assert_int_equal(sj_graph_input(g, "x", 2, xd, &x), SJ_OK);
    assert_int_equal(sj_graph_param(g, "w", 2, wd, w, &wv), SJ_OK);
    assert_int_equal(sj_graph_param(g, "b", 1, bd, b, &bv), SJ_OK);
    assert_int_equal(sj_graph_matmul(g, x, wv, &m), SJ_OK);
    assert_int_equal(sj_graph_binary(g, SJ_OP_ADD, m, bv, &a), SJ_OK);
    assert_int_equal(sj_graph_unary(g, SJ_OP_RELU, a, &y), SJ_OK);
    int axis0 = 0;
    assert_int_equal(sj_graph_reduce(g, SJ_OP_REDUCE_SUM, y, 1, &axis0, false, &pooled), SJ_OK);
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    assert_int_equal(sj_graph_output(g, pooled, "pooled"), SJ_OK);
}

static int setup(void **state) {
    (void)state;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return -1;
    build_graph();
    if (!scratch_dir_create(dir, sizeof dir, "test_cache")) return -1;
    snprintf(path, sizeof path, "%s/store.db", dir);
    return 0;
}
static int teardown(void **state) {
    (void)state;
    remove_tree(dir);
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
    return 0;
}
static int fresh(void **state) {
    (void)state;
    remove_sqlite_files(path);
    return 0;
}

static sj_store *open_store(void) {
    sj_store_config cfg;
    sj_store_config_init(&cfg);
    cfg.path = path;
    sj_store *s;
    if (sj_store_open(ctx, &cfg, &s) != SJ_OK) fail_msg("%s", sj_ctx_last_error(ctx));
    return s;
}

static void input_rows(float *x, int64_t rows, unsigned seed) {
    for (int64_t i = 0; i < rows * 8; i++) x[i] = (float)((i * 13 + seed * 5) % 17) / 8.0f - 1.0f;
}

/* run_padded at `rows` must equal the interpreter run unpadded at `rows`. */
static void check_run(sj_bucketed_cache *c, int64_t rows, unsigned seed) {
    float x[64 * 8];
    input_rows(x, rows, seed);
    sj_cache_input in = {"x", x, 8, true};
    const int64_t inners[] = {4, 0};
    sj_tensor out[2];
    int64_t extent;
    sj_status st = sj_bucketed_cache_run_padded(c, rows, rows, &in, 1, inners, 2, out, 2, &extent);
    if (st != SJ_OK) fail_msg("run_padded %lld: %s", (long long)rows, sj_ctx_last_error(ctx));
    int64_t want_extent = 1;
    while (want_extent < rows) want_extent *= 2;
    assert_int_equal(extent, want_extent);
    sj_tensor xin = {.rank = 2, .dims = {rows, 8}, .data = x}, ref[2];
    assert_int_equal(sj_interp_run(g, rows, &xin, ref), SJ_OK);
    assert_int_equal(out[0].rank, 2);
    assert_int_equal(out[0].dims[0], rows);
    assert_int_equal(out[0].dims[1], 4);
    assert_int_equal(out[1].rank, 1);
    assert_int_equal(out[1].dims[0], 4);
    assert_memory_equal(out[0].data, ref[0].data, (size_t)rows * 4 * sizeof(float));
    assert_memory_equal(out[1].data, ref[1].data, 4 * sizeof(float));
    for (int i = 0; i < 2; i++) {
        sj_tensor_free(ctx, &out[i]);
        sj_tensor_free(ctx, &ref[i]);
    }
}

/* --- tests --- */

typedef struct hammer {
    sj_bucketed_cache *c;
    unsigned seed;
} hammer;

static void *hammer_thread(void *arg) {
    hammer *h = arg;
    unsigned r = h->seed;
    for (int i = 0; i < 150; i++) {
        r = r * 1103515245u + 12345u;
        int64_t rows = 1 + (int64_t)((r >> 16) % 64);
        check_run(h->c, rows, r);
    }
    return NULL;
}

/* Four threads hammering c at once (seeds from seed0), joined. */
static void hammer_four(sj_bucketed_cache *c, unsigned seed0) {
    pthread_t th[4];
    hammer h[4];
    for (int i = 0; i < 4; i++) {
        h[i] = (hammer){c, (unsigned)i * 104729u + seed0};
        assert_int_equal(pthread_create(&th[i], NULL, hammer_thread, &h[i]), 0);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
}

static void test_threads_one_compile_per_bucket(void **state) {
    (void)state;
    counting_compiler cc;
    sj_compiler comp = counting(&cc);
    cc.delay_ms = 3;
    sj_ladder *l;
    assert_int_equal(sj_ladder_pow2(ctx, 1, 64, &l), SJ_OK);
    sj_bucketed_cache *c;
    assert_int_equal(sj_bucketed_cache_create(g, l, &comp, NULL, NULL, &c), SJ_OK);
    assert_int_equal(sj_bucketed_cache_num_buckets(c), 7);
    assert_int_equal(sj_bucketed_cache_num_ready(c), 0);
    pthread_t th[8];
    hammer h[8];
    for (int i = 0; i < 8; i++) {
        h[i] = (hammer){c, (unsigned)i * 7919u + 1};
        assert_int_equal(pthread_create(&th[i], NULL, hammer_thread, &h[i]), 0);
    }
    for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
    assert_int_equal(sj_bucketed_cache_num_ready(c), 7);
    for (int64_t e = 1; e <= 64; e *= 2) assert_int_equal(atomic_load(&cc.compiles[e]), 1);
    assert_int_equal(atomic_load(&cc.total), 7);
    sj_bucketed_cache_stats st;
    sj_bucketed_cache_stats_get(c, &st);
    assert_int_equal(st.compiles, 7);
    assert_int_equal(st.memory_hits + st.compiles, 8 * 150);
    assert_int_equal(st.store_hits, 0);
    assert_true(st.compile_ms > 0);
    for (int i = 0; i < 7; i++) {
        int64_t lo, hi;
        bool ready;
        assert_int_equal(sj_bucketed_cache_bucket(c, i, &lo, &hi, &ready), SJ_OK);
        assert_int_equal(hi, (int64_t)1 << i);
        assert_int_equal(lo, i == 0 ? 1 : ((int64_t)1 << (i - 1)) + 1);
        assert_true(ready);
    }
    assert_int_equal(sj_bucketed_cache_bucket(c, 7, NULL, NULL, NULL), SJ_E_OUT_OF_RANGE);
    assert_int_equal(sj_bucketed_cache_bucket_for(c, 17), 5);
    sj_bucketed_cache_destroy(c);
    sj_bucketed_cache_destroy(NULL);
    sj_ladder_destroy(l);
}

static void test_restart_compiles_nothing(void **state) {
    (void)state;
    sj_ladder *l;
    assert_int_equal(sj_ladder_pow2(ctx, 1, 64, &l), SJ_OK);
    for (int run = 0; run < 2; run++) {
        counting_compiler cc;
        sj_compiler comp = counting(&cc);
        sj_store *s = open_store();
        sj_bucketed_cache *c;
        assert_int_equal(sj_bucketed_cache_create(g, l, &comp, s, NULL, &c), SJ_OK);
        assert_int_equal(sj_bucketed_cache_precompile(c, 2, NULL, NULL), SJ_OK);
        for (int64_t rows = 1; rows <= 64; rows += 9) check_run(c, rows, 3);
        sj_bucketed_cache_stats st;
        sj_bucketed_cache_stats_get(c, &st);
        if (run == 0) {
            assert_int_equal(st.compiles, 7);
            assert_int_equal(st.store_hits, 0);
        } else {
            assert_int_equal(st.compiles, 0);
            assert_int_equal(atomic_load(&cc.total), 0);
            assert_int_equal(st.store_hits, 7);
        }
        sj_bucketed_cache_destroy(c);
        sj_store_close(s);
    }
    sj_ladder_destroy(l);
}

static void test_run_padded_shapes(void **state) {
    (void)state;
    counting_compiler cc;
    sj_compiler comp = counting(&cc);
    sj_ladder *l;
    const int64_t ext[] = {10, 40};
    assert_int_equal(sj_ladder_list(ctx, ext, 2, &l), SJ_OK);
    sj_bucketed_cache *c;
    assert_int_equal(sj_bucketed_cache_create(g, l, &comp, NULL, NULL, &c), SJ_OK);
    float x[40 * 8];
    input_rows(x, 40, 1);
    sj_cache_input in = {"x", x, 8, true};
    sj_tensor out[2];
    int64_t extent;
    /* no inners at all: both outputs whole, rows still only the real ones */
    assert_int_equal(sj_bucketed_cache_run_padded(c, 13, 13, &in, 1, NULL, 0, out, 2, &extent), SJ_OK);
    assert_int_equal(extent, 40);
    assert_int_equal(out[0].dims[0], 13);
    sj_tensor xin = {.rank = 2, .dims = {13, 8}, .data = x}, ref[2];
    assert_int_equal(sj_interp_run(g, 13, &xin, ref), SJ_OK);
    /* the pooled sum covers 13 rows, not the 40 of the bucket */
    assert_memory_equal(out[1].data, ref[1].data, 4 * sizeof(float));
    for (int i = 0; i < 2; i++) {
        sj_tensor_free(ctx, &out[i]);
        sj_tensor_free(ctx, &ref[i]);
    }
    /* wrong inner strides name the input / output */
    sj_cache_input bad = {"x", x, 7, true};
    assert_int_equal(sj_bucketed_cache_run_padded(c, 13, 13, &bad, 1, NULL, 0, out, 2, NULL), SJ_E_SHAPE);
    assert_error_contains(ctx, "'x'");
    const int64_t wrong[] = {4, 4};
    assert_int_equal(sj_bucketed_cache_run_padded(c, 13, 13, &in, 1, wrong, 2, out, 2, NULL), SJ_E_SHAPE);
    assert_error_contains(ctx, "pooled");
    /* rows beyond the bucket, unknown and missing inputs */
    assert_int_equal(sj_bucketed_cache_run_padded(c, 5, 11, &in, 1, NULL, 0, out, 2, NULL), SJ_E_OUT_OF_RANGE);
    sj_cache_input unknown = {"z", x, 8, true};
    assert_int_equal(sj_bucketed_cache_run_padded(c, 5, 5, &unknown, 1, NULL, 0, out, 2, NULL), SJ_E_NOT_FOUND);
    assert_int_equal(sj_bucketed_cache_run_padded(c, 5, 5, NULL, 0, NULL, 0, out, 2, NULL), SJ_E_INVALID_ARG);
    assert_error_contains(ctx, "'x' not given");
    assert_int_equal(sj_bucketed_cache_run_padded(c, 5, 5, &in, 1, NULL, 0, out, 1, NULL), SJ_E_INVALID_ARG);
    sj_bucketed_cache_destroy(c);
    sj_ladder_destroy(l);
}

static void test_mixed_inputs(void **state) {
    (void)state;
    sj_graph *h;
    assert_int_equal(sj_graph_create(ctx, "T", &h), SJ_OK);
    int64_t xd[] = {SJ_DIM_SYM, 3}, wd[] = {3, 2};
    sj_value x, w, y;
    assert_int_equal(sj_graph_input(h, "x", 2, xd, &x), SJ_OK);
    assert_int_equal(sj_graph_input(h, "w", 2, wd, &w), SJ_OK);
    assert_int_equal(sj_graph_matmul(h, x, w, &y), SJ_OK);
    assert_int_equal(sj_graph_output(h, y, "y"), SJ_OK);
    counting_compiler cc;
    sj_compiler comp = counting(&cc);
    sj_ladder *l;
    assert_int_equal(sj_ladder_pow2(ctx, 4, 16, &l), SJ_OK);
    sj_bucketed_cache *c;
    assert_int_equal(sj_bucketed_cache_create(h, l, &comp, NULL, NULL, &c), SJ_OK);
    float xv[5 * 3] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, wv[6] = {1, 0, 0, 1, 1, 1};
    sj_cache_input in[2] = {{"w", wv, 0, false}, {"x", xv, 3, true}};
    sj_tensor out[1];
    const int64_t inner = 2;
    /* plain run_padded insists every input's outer dim is the key */
    assert_int_equal(sj_bucketed_cache_run_padded(c, 5, 5, in, 2, &inner, 1, out, 1, NULL), SJ_E_SHAPE);
    assert_error_contains(ctx, "'w'");
    int64_t extent;
    assert_int_equal(sj_bucketed_cache_run_padded_mixed(c, 5, 5, in, 2, &inner, 1, out, 1, &extent), SJ_OK);
    assert_int_equal(extent, 8);
    assert_int_equal(out[0].dims[0], 5);
    for (int r = 0; r < 5; r++) {
        assert_true(out[0].data[r * 2] == xv[r * 3] + xv[r * 3 + 2]);
        assert_true(out[0].data[r * 2 + 1] == xv[r * 3 + 1] + xv[r * 3 + 2]);
    }
    sj_tensor_free(ctx, &out[0]);
    sj_bucketed_cache_destroy(c);
    sj_ladder_destroy(l);
    sj_graph_destroy(h);
}

static void test_out_of_range(void **state) {
    (void)state;
    counting_compiler cc;
    sj_compiler comp = counting(&cc);
    sj_ladder *l;
    assert_int_equal(sj_ladder_pow2(ctx, 8, 32, &l), SJ_OK);
    sj_bucketed_cache *c;
    assert_int_equal(sj_bucketed_cache_create(g, l, &comp, NULL, NULL, &c), SJ_OK);
    int64_t extent = -1;
    void *exe = NULL;
    assert_int_equal(sj_bucketed_cache_get_or_compile(c, 33, &extent, &exe), SJ_E_OUT_OF_RANGE);
    assert_error_contains(ctx, "33");
    assert_int_equal(sj_bucketed_cache_get_or_compile(c, 0, &extent, &exe), SJ_E_OUT_OF_RANGE);
    assert_int_equal(sj_bucketed_cache_bucket_for(c, 33), -1);
    assert_int_equal(atomic_load(&cc.total), 0);
    sj_bucketed_cache_destroy(c);

    sj_bucketed_cache_config cfg;
    sj_bucketed_cache_config_init(&cfg);
    cfg.one_off_out_of_range = true;
    assert_int_equal(sj_bucketed_cache_create(g, l, &comp, NULL, &cfg, &c), SJ_OK);
    assert_int_equal(sj_bucketed_cache_get_or_compile(c, 33, &extent, &exe), SJ_OK);
    assert_int_equal(extent, 33);
    assert_int_equal(atomic_load(&cc.compiles[33]), 1);
    void *again;
    assert_int_equal(sj_bucketed_cache_get_or_compile(c, 33, &extent, &again), SJ_OK);
    assert_ptr_equal(exe, again);
    float x[33 * 8];
    input_rows(x, 33, 4);
    sj_cache_input in = {"x", x, 8, true};
    sj_tensor out[2];
    assert_int_equal(sj_bucketed_cache_run_padded(c, 33, 33, &in, 1, NULL, 0, out, 2, &extent), SJ_OK);
    assert_int_equal(out[0].dims[0], 33);
    sj_tensor_free(ctx, &out[0]);
    sj_tensor_free(ctx, &out[1]);
    sj_bucketed_cache_stats st;
    sj_bucketed_cache_stats_get(c, &st);
    assert_int_equal(st.one_offs, 1);
    assert_int_equal(st.compiles, 1);
    assert_int_equal(sj_bucketed_cache_num_ready(c), 0);
    sj_bucketed_cache_destroy(c);
    sj_ladder_destroy(l);
}

typedef struct one_off_arg {
    sj_bucketed_cache *c;
    int64_t key;
    sj_status st;
} one_off_arg;

static void *one_off_thread(void *p) {
    one_off_arg *a = p;
    int64_t extent;
    void *exe;
    a->st = sj_bucketed_cache_get_or_compile(a->c, a->key, &extent, &exe);
    return NULL;
}

/* One-offs: a compile of a new one never holds up a memory hit on another
 * (it used to run under the list's mutex), and the list is bounded: distinct
 * out-of-range keys evict the least recently used instead of piling up. */
static void test_one_offs_bounded_and_unblocked(void **state) {
    (void)state;
    counting_compiler cc;
    sj_compiler comp = counting(&cc);
    sj_ladder *l;
    assert_int_equal(sj_ladder_pow2(ctx, 8, 32, &l), SJ_OK);
    sj_bucketed_cache_config cfg;
    sj_bucketed_cache_config_init(&cfg);
    cfg.one_off_out_of_range = true;
    cfg.one_off_capacity = 3;
    sj_bucketed_cache *c;
    assert_int_equal(sj_bucketed_cache_create(g, l, &comp, NULL, &cfg, &c), SJ_OK);
    int64_t extent;
    void *exe;
    assert_int_equal(sj_bucketed_cache_get_or_compile(c, 40, &extent, &exe), SJ_OK);

    cc.delay_ms = 600; /* the next compile is slow */
    one_off_arg slow = {c, 41, SJ_E_INTERNAL};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, one_off_thread, &slow), 0);
    nanosleep(&(struct timespec){0, 100 * 1000000L}, NULL); /* the slow compile is under way */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(sj_bucketed_cache_get_or_compile(c, 40, &extent, &exe), SJ_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double hit_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    pthread_join(th, NULL);
    assert_int_equal(slow.st, SJ_OK);
    if (hit_ms > 300) fail_msg("a memory hit on one-off 40 waited %.0f ms for 41's compile", hit_ms);
    cc.delay_ms = 0;

    /* 3 kept: 40, then 41 (listed after the hit on 40), 42; 43 evicts the
     * least recently used: 40 */
    for (int64_t k = 42; k <= 43; k++) assert_int_equal(sj_bucketed_cache_get_or_compile(c, k, &extent, &exe), SJ_OK);
    sj_bucketed_cache_stats st;
    sj_bucketed_cache_stats_get(c, &st);
    assert_int_equal(st.one_offs, 4);
    assert_int_equal(st.one_off_evictions, 1);
    assert_int_equal(sj_bucketed_cache_get_or_compile(c, 41, &extent, &exe), SJ_OK); /* kept */
    assert_int_equal(atomic_load(&cc.compiles[41]), 1);
    assert_int_equal(sj_bucketed_cache_get_or_compile(c, 40, &extent, &exe), SJ_OK); /* evicted */
    assert_int_equal(atomic_load(&cc.compiles[40]), 2);
    /* many distinct keys: memory stays at the capacity, runs stay right */
    for (int64_t k = 100; k < 140; k++) {
        float x[140 * 8];
        input_rows(x, k, 5);
        sj_cache_input in = {"x", x, 8, true};
        sj_tensor out[2];
        assert_int_equal(sj_bucketed_cache_run_padded(c, k, k, &in, 1, NULL, 0, out, 2, &extent), SJ_OK);
        assert_int_equal(out[0].dims[0], k);
        sj_tensor_free(ctx, &out[0]);
        sj_tensor_free(ctx, &out[1]);
    }
    sj_bucketed_cache_stats_get(c, &st);
    assert_int_equal(st.one_offs, 45);
    assert_int_equal(st.one_off_evictions, 42);
    sj_bucketed_cache_destroy(c);
    sj_ladder_destroy(l);
}

static void flip_stored_byte(int64_t extent) {
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char sql[160];
    /* the interp artifact is tiny: changing its stored size field breaks the frame check */
    snprintf(sql, sizeof sql, "UPDATE artifacts SET blob = substr(blob, 1, length(blob) - 1) || x'00' "
                              "WHERE extent = %lld", (long long)extent);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

static void test_corrupt_row_recompiled(void **state) {
    (void)state;
    sj_ladder *l;
    assert_int_equal(sj_ladder_pow2(ctx, 1, 8, &l), SJ_OK);
    counting_compiler cc;
    sj_compiler comp = counting(&cc);
    sj_store *s = open_store();
    sj_bucketed_cache *c;
    assert_int_equal(sj_bucketed_cache_create(g, l, &comp, s, NULL, &c), SJ_OK);
    assert_int_equal(sj_bucketed_cache_precompile(c, 1, NULL, NULL), SJ_OK);
    sj_bucketed_cache_destroy(c);
    sj_store_close(s);
    flip_stored_byte(4);

    s = open_store();
    comp = counting(&cc);
    assert_int_equal(sj_bucketed_cache_create(g, l, &comp, s, NULL, &c), SJ_OK);
    check_run(c, 3, 1); /* bucket 4: corrupt row -> compiled again, result right */
    check_run(c, 7, 1); /* bucket 8: from the store */
    sj_bucketed_cache_stats st;
    sj_bucketed_cache_stats_get(c, &st);
    assert_int_equal(st.corrupt, 1);
    assert_int_equal(st.compiles, 1);
    assert_int_equal(atomic_load(&cc.compiles[4]), 1);
    assert_int_equal(st.store_hits, 1);
    int64_t checked, bad;
    assert_int_equal(sj_store_verify(s, NULL, NULL, &checked, &bad), SJ_OK);
    assert_int_equal(checked, 4);
    assert_int_equal(bad, 0); /* overwritten */
    sj_bucketed_cache_destroy(c);
    sj_store_close(s);
    sj_ladder_destroy(l);
}

/* A store that refuses every put (here: artifacts above its size bound, as
 * a full disk would refuse them) makes precompile fail naming the buckets it
 * lacks, not report success over an incomplete store. */
static void test_precompile_reports_unstored_buckets(void **state) {
    (void)state;
    sj_ladder *l;
    assert_int_equal(sj_ladder_pow2(ctx, 1, 8, &l), SJ_OK);
    counting_compiler cc;
    sj_compiler comp = counting(&cc);
    sj_store_config cfg;
    sj_store_config_init(&cfg);
    cfg.path = path;
    cfg.max_artifact_bytes = 1;
    sj_store *s;
    assert_int_equal(sj_store_open(ctx, &cfg, &s), SJ_OK);
    sj_bucketed_cache *c;
    assert_int_equal(sj_bucketed_cache_create(g, l, &comp, s, NULL, &c), SJ_OK);
    assert_int_equal(sj_bucketed_cache_precompile(c, 2, NULL, NULL), SJ_E_IO);
    assert_error_contains(ctx, "precompile: 4 of 4 buckets were compiled but not stored (extents 1, 2, 4, 8)");
    assert_error_contains(ctx, "exceeds the 1-byte cap"); /* the store's reason */
    sj_bucketed_cache_stats st;
    sj_bucketed_cache_stats_get(c, &st);
    assert_int_equal(st.not_stored, 4);
    assert_int_equal(st.store_errors, 4);
    assert_int_equal(st.compiles, 4);
    sj_bucketed_cache_destroy(c);
    sj_store_close(s);
    /* a store that takes them: success, nothing left unstored */
    s = open_store();
    comp = counting(&cc);
    assert_int_equal(sj_bucketed_cache_create(g, l, &comp, s, NULL, &c), SJ_OK);
    assert_int_equal(sj_bucketed_cache_precompile(c, 2, NULL, NULL), SJ_OK);
    sj_bucketed_cache_stats_get(c, &st);
    assert_int_equal(st.not_stored, 0);
    sj_bucketed_cache_destroy(c);
    sj_store_close(s);
    sj_ladder_destroy(l);
}

typedef struct getter {
    sj_bucketed_cache *c;
    sj_status st;
    char msg[256];
} getter;
static void *get_thread(void *arg) {
    getter *t = arg;
    int64_t e;
    void *exe;
    t->st = sj_bucketed_cache_get_or_compile(t->c, 3, &e, &exe);
    snprintf(t->msg, sizeof t->msg, "%s", sj_ctx_last_error(ctx));
    return NULL;
}

static void test_failed_compile_reaches_waiters(void **state) {
    (void)state;
    sj_ladder *l;
    assert_int_equal(sj_ladder_pow2(ctx, 1, 8, &l), SJ_OK);
    counting_compiler cc;
    sj_compiler comp = counting(&cc);
    cc.fail_extent = 4;
    cc.delay_ms = 20;
    sj_bucketed_cache *c;
    assert_int_equal(sj_bucketed_cache_create(g, l, &comp, NULL, NULL, &c), SJ_OK);
    pthread_t th[4];
    getter t[4];
    for (int i = 0; i < 4; i++) {
        t[i] = (getter){c, SJ_OK, ""};
        pthread_create(&th[i], NULL, get_thread, &t[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(t[i].st, SJ_E_COMPILE);
        assert_non_null(strstr(t[i].msg, "refusing extent 4"));
    }
    /* the next call tries again */
    cc.fail_extent = 0;
    cc.delay_ms = 0;
    int64_t e;
    void *exe;
    assert_int_equal(sj_bucketed_cache_get_or_compile(c, 3, &e, &exe), SJ_OK);
    assert_int_equal(e, 4);
    sj_bucketed_cache_destroy(c);
    sj_ladder_destroy(l);
}

static void test_two_processes_precompile(void **state) {
    (void)state;
    sj_ladder *l;
    assert_int_equal(sj_ladder_pow2(ctx, 1, 256, &l), SJ_OK);
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        assert_true(kids[k] >= 0);
        if (kids[k] == 0) {
            counting_compiler cc;
            sj_compiler comp = counting(&cc);
            sj_store_config cfg;
            sj_store_config_init(&cfg);
            cfg.path = path;
            sj_store *s;
            sj_bucketed_cache *c;
            if (sj_store_open(ctx, &cfg, &s) != SJ_OK || sj_bucketed_cache_create(g, l, &comp, s, NULL, &c) != SJ_OK ||
                sj_bucketed_cache_precompile(c, 2, NULL, NULL) != SJ_OK) {
                fprintf(stderr, "child %d: %s\n", k, sj_ctx_last_error(ctx));
                _exit(1);
            }
            sj_bucketed_cache_destroy(c);
            sj_store_close(s);
            _exit(0);
        }
    }
    for (int k = 0; k < 2; k++) {
        int ws;
        waitpid(kids[k], &ws, 0);
        assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    }
    sj_store *s = open_store();
    int64_t checked, bad;
    assert_int_equal(sj_store_verify(s, NULL, NULL, &checked, &bad), SJ_OK);
    assert_int_equal(checked, 9); /* one row per key */
    assert_int_equal(bad, 0);
    sj_store_close(s);
    sj_ladder_destroy(l);
}

/* --- the hit path allocates nothing --- */

static void test_hit_path_allocates_nothing(void **state) {
    (void)state;
    alloc_counter counts;
    sj_ctx *cx = ctx_with_counter(&counts);
    sj_graph *h;
    assert_int_equal(sj_graph_create(cx, "N", &h), SJ_OK);
    int64_t xd[] = {SJ_DIM_SYM, 2};
    sj_value x, y;
    assert_int_equal(sj_graph_input(h, "x", 2, xd, &x), SJ_OK);
    assert_int_equal(sj_graph_unary(h, SJ_OP_EXP, x, &y), SJ_OK);
    assert_int_equal(sj_graph_output(h, y, "y"), SJ_OK);
    sj_ladder *l;
    assert_int_equal(sj_ladder_pow2(cx, 1, 1024, &l), SJ_OK);
    counting_compiler cc;
    sj_compiler comp = counting(&cc);
    sj_bucketed_cache *c;
    assert_int_equal(sj_bucketed_cache_create(h, l, &comp, NULL, NULL, &c), SJ_OK);
    assert_int_equal(sj_bucketed_cache_precompile(c, 1, NULL, NULL), SJ_OK);
    long before = atomic_load(&counts.calls);
    int64_t e;
    void *exe;
    for (int64_t k = 1; k <= 1024; k++) assert_int_equal(sj_bucketed_cache_get_or_compile(c, k, &e, &exe), SJ_OK);
    assert_int_equal(atomic_load(&counts.calls), before);
    sj_bucketed_cache_destroy(c);
    sj_ladder_destroy(l);
    sj_graph_destroy(h);
    sj_ctx_destroy(cx);
}

/* --- native_after: buckets served from a fallback target (a CPU level)
 * are made for the own target in the background and swapped in --- */

/* A counting compiler whose key calls its CPU `cpu`; with `level`, it
 * also loads what a cache for that CPU stored. */
static sj_compiler cpu_compiler(counting_compiler *cc, const char *cpu, const sj_compiler *level,
                                sj_compiler_target *fallback) {
    sj_compiler comp = counting(cc);
    comp.target_cpu = cpu;
    if (level) {
        *fallback = (sj_compiler_target){.cpu = level->target_cpu, .features = level->target_features,
                                         .options = level->options, .options_len = level->options_len};
        comp.fallbacks = fallback;
        comp.n_fallbacks = 1;
    }
    return comp;
}

static sj_bucketed_cache *cache_after(const sj_ladder *l, const sj_compiler *comp, sj_store *s, int native_after) {
    sj_bucketed_cache_config cfg;
    sj_bucketed_cache_config_init(&cfg);
    cfg.native_after = native_after;
    sj_bucketed_cache *c;
    if (sj_bucketed_cache_create(g, l, comp, s, &cfg, &c) != SJ_OK) fail_msg("%s", sj_ctx_last_error(ctx));
    return c;
}

/* The store holds every bucket of l for the CPU "level" only. */
static void store_level(const sj_ladder *l, sj_store *s, sj_compiler *level, counting_compiler *lc) {
    *level = cpu_compiler(lc, "level", NULL, NULL);
    sj_bucketed_cache *c = cache_after(l, level, s, 0);
    assert_int_equal(sj_bucketed_cache_precompile_stored(c, 1, NULL, NULL), SJ_OK);
    sj_bucketed_cache_destroy(c);
}

static void test_native_after_swaps_level_buckets(void **state) {
    (void)state;
    sj_ladder *l;
    assert_int_equal(sj_ladder_pow2(ctx, 1, 64, &l), SJ_OK);
    sj_store *s = open_store();
    counting_compiler lc, nc;
    sj_compiler level, native;
    sj_compiler_target fb;
    store_level(l, s, &level, &lc);
    native = cpu_compiler(&nc, "native", &level, &fb);
    nc.fail_extent = 16; /* bucket 16's recompile fails */
    sj_bucketed_cache *c = cache_after(l, &native, s, 3);

    /* Two runs on the level: nothing asked yet. */
    check_run(c, 3, 1);
    check_run(c, 4, 2);
    assert_string_equal(sj_bucketed_cache_bucket_target(c, 2), "level");
    assert_int_equal(sj_bucketed_cache_bucket_specialise(c, 2), SJ_SPECIALISE_NONE);
    /* The third queues it; the next runs are exact before, during and after the swap. */
    check_run(c, 4, 3);
    assert_int_not_equal(sj_bucketed_cache_bucket_specialise(c, 2), SJ_SPECIALISE_NONE);
    check_run(c, 3, 4);
    sj_bucketed_cache_specialise_wait(c);
    assert_int_equal(sj_bucketed_cache_bucket_specialise(c, 2), SJ_SPECIALISE_DONE);
    assert_string_equal(sj_bucketed_cache_bucket_target(c, 2), "native");
    assert_int_equal(atomic_load(&nc.compiles[4]), 1);
    assert_int_equal(atomic_load(&nc.destroyed), 1); /* the level's executable, once no run held it */
    for (int i = 0; i < 5; i++) check_run(c, 4, 5 + (unsigned)i);
    assert_int_equal(atomic_load(&nc.total), 1); /* asked once */

    /* A failed recompile is counted and never fails a run: the level serves on. */
    for (int i = 0; i < 5; i++) check_run(c, 9 + i, 20 + (unsigned)i);
    sj_bucketed_cache_specialise_wait(c);
    assert_int_equal(sj_bucketed_cache_bucket_specialise(c, 4), SJ_SPECIALISE_FAILED);
    assert_string_equal(sj_bucketed_cache_bucket_target(c, 4), "level");
    char why[256];
    sj_bucketed_cache_specialise_error(c, why, sizeof why);
    assert_non_null(strstr(why, "bucket 16"));
    assert_non_null(strstr(why, "refusing extent 16"));
    sj_bucketed_cache_stats st;
    sj_bucketed_cache_stats_get(c, &st);
    assert_int_equal(st.specialised, 1);
    assert_int_equal(st.specialise_failures, 1);
    assert_int_equal(st.fallback_hits, 2);
    sj_bucketed_cache_destroy(c);
    assert_int_equal(atomic_load(&nc.destroyed), 3); /* and the two buckets' own, at the end */

    /* A restart takes the stored own-target row: no fallback, no compile. */
    counting_compiler rc;
    sj_compiler again = cpu_compiler(&rc, "native", &level, &fb);
    c = cache_after(l, &again, s, 3);
    check_run(c, 4, 30);
    assert_string_equal(sj_bucketed_cache_bucket_target(c, 2), "native");
    sj_bucketed_cache_stats_get(c, &st);
    assert_int_equal(st.store_hits, 1);
    assert_int_equal(st.fallback_hits, 0);
    assert_int_equal(st.compiles, 0);
    sj_bucketed_cache_destroy(c);

    /* Off (0): a level bucket stays on the level however hot. */
    c = cache_after(l, &again, s, 0);
    for (int i = 0; i < 10; i++) check_run(c, 30, 40 + (unsigned)i);
    sj_bucketed_cache_specialise_wait(c);
    assert_string_equal(sj_bucketed_cache_bucket_target(c, 5), "level");
    assert_int_equal(sj_bucketed_cache_bucket_specialise(c, 5), SJ_SPECIALISE_NONE);
    sj_bucketed_cache_stats_get(c, &st);
    assert_int_equal(st.specialised + st.specialise_failures + st.compiles, 0);
    sj_bucketed_cache_destroy(c);

    sj_bucketed_cache_config cfg;
    sj_bucketed_cache_config_init(&cfg);
    cfg.native_after = -1;
    assert_int_equal(sj_bucketed_cache_create(g, l, &again, s, &cfg, &c), SJ_E_INVALID_ARG);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "native_after -1 is negative"));
    sj_store_close(s);
    sj_ladder_destroy(l);
}

/* Threads run every bucket while each is swapped (compiles slowed so the
 * swaps land among the runs): every result exact, every level bucket swapped,
 * and a close with recompiles still queued ends cleanly. */
static void test_native_after_threads(void **state) {
    (void)state;
    sj_ladder *l;
    assert_int_equal(sj_ladder_pow2(ctx, 1, 64, &l), SJ_OK);
    sj_store *s = open_store();
    counting_compiler lc, nc;
    sj_compiler level, native;
    sj_compiler_target fb;
    store_level(l, s, &level, &lc);
    native = cpu_compiler(&nc, "native", &level, &fb);
    nc.delay_ms = 5;
    sj_bucketed_cache *c = cache_after(l, &native, s, 2);
    hammer_four(c, 3);
    sj_bucketed_cache_specialise_wait(c);
    sj_bucketed_cache_stats st;
    sj_bucketed_cache_stats_get(c, &st);
    assert_int_equal(st.specialised, 7);
    assert_int_equal(st.specialise_failures, 0);
    for (int i = 0; i < 7; i++) assert_string_equal(sj_bucketed_cache_bucket_target(c, i), "native");
    assert_int_equal(atomic_load(&nc.destroyed), 7);
    sj_bucketed_cache_destroy(c);

    /* Closed with recompiles queued: the one running ends, the rest are dropped. */
    remove_sqlite_files(path);
    sj_store_close(s);
    s = open_store();
    store_level(l, s, &level, &lc);
    native = cpu_compiler(&nc, "native", &level, &fb);
    nc.delay_ms = 20;
    c = cache_after(l, &native, s, 1);
    for (int64_t rows = 1; rows <= 64; rows *= 2) check_run(c, rows, 7);
    sj_bucketed_cache_destroy(c);
    assert_true(atomic_load(&nc.total) < 7);
    /* each bucket's executable, and the level's one each finished recompile replaced */
    assert_int_equal(atomic_load(&nc.destroyed), 7 + atomic_load(&nc.total));
    sj_store_close(s);
    sj_ladder_destroy(l);
}

/* --- tiered compilation: a quick compiler serves a bucket no store tier
 * holds; the full code is compiled in the background, stored, swapped in --- */

static const char quick_options[] = "quick";

/* A counting compiler standing for the quick one: its own options (what
 * its code would be keyed by, were it ever stored). */
static sj_compiler quick_compiler(counting_compiler *qc) {
    sj_compiler q = counting(qc);
    q.options = quick_options;
    q.options_len = sizeof quick_options;
    return q;
}

static sj_bucketed_cache *cache_tiered(const sj_ladder *l, const sj_compiler *comp, sj_store *s,
                                       const sj_compiler *quick) {
    sj_bucketed_cache_config cfg;
    sj_bucketed_cache_config_init(&cfg);
    cfg.quick = quick;
    sj_bucketed_cache *c;
    if (sj_bucketed_cache_create(g, l, comp, s, &cfg, &c) != SJ_OK) fail_msg("%s", sj_ctx_last_error(ctx));
    return c;
}

/* Whether the store holds comp's row for extent. */
static bool stored(sj_store *s, const sj_compiler *comp, int64_t extent) {
    sj_store_key key;
    sj_bucketed_cache_key(g, comp, extent, &key);
    void *bytes;
    size_t len;
    if (sj_store_get(s, &key, &bytes, &len) != SJ_OK) return false;
    sj_free(ctx, bytes);
    return true;
}

static void test_tiered_quick_first_then_full(void **state) {
    (void)state;
    sj_ladder *l;
    assert_int_equal(sj_ladder_pow2(ctx, 1, 64, &l), SJ_OK);
    sj_store *s = open_store();
    counting_compiler fc, qc;
    sj_compiler full = counting(&fc), quick = quick_compiler(&qc);
    atomic_store(&fc.hold, true); /* the background's full compile waits */
    sj_bucketed_cache *c = cache_tiered(l, &full, s, &quick);

    /* The first run is served quick code at once; the full compile is queued. */
    check_run(c, 3, 1);
    assert_int_equal(atomic_load(&qc.compiles[4]), 1);
    assert_int_equal(sj_bucketed_cache_bucket_tier(c, 2), SJ_SPECIALISE_PENDING);
    assert_int_equal(sj_bucketed_cache_bucket_specialise(c, 2), SJ_SPECIALISE_NONE); /* not native_after's */
    check_run(c, 4, 2); /* quick code serves on, exact */
    sj_bucketed_cache_stats st;
    sj_bucketed_cache_stats_get(c, &st);
    assert_int_equal(st.quick_compiles, 1);
    assert_int_equal(st.compiles, 0);
    assert_int_equal(st.tier_ups, 0);
    assert_false(stored(s, &full, 4));
    atomic_store(&fc.hold, false);
    sj_bucketed_cache_specialise_wait(c);
    assert_int_equal(sj_bucketed_cache_bucket_tier(c, 2), SJ_SPECIALISE_DONE);
    assert_int_equal(atomic_load(&fc.compiles[4]), 1);
    assert_int_equal(atomic_load(&fc.destroyed), 1); /* the quick executable, once no run held it */
    for (int i = 0; i < 3; i++) check_run(c, 4, 3 + (unsigned)i);
    /* The store holds the full code only: never the quick code's row. */
    assert_true(stored(s, &full, 4));
    assert_false(stored(s, &quick, 4));
    sj_bucketed_cache_stats_get(c, &st);
    assert_int_equal(st.tier_ups, 1);
    assert_int_equal(st.tier_up_failures, 0);
    assert_int_equal(st.compiles, 1);
    assert_int_equal(st.specialised, 0);

    /* A failed full compile is counted and never fails a run: quick code serves on. */
    fc.fail_extent = 16;
    for (int i = 0; i < 4; i++) check_run(c, 9 + i, 20 + (unsigned)i);
    sj_bucketed_cache_specialise_wait(c);
    assert_int_equal(sj_bucketed_cache_bucket_tier(c, 4), SJ_SPECIALISE_FAILED);
    check_run(c, 16, 30);
    char why[256];
    sj_bucketed_cache_specialise_error(c, why, sizeof why);
    assert_non_null(strstr(why, "tier-up: bucket 16"));
    assert_non_null(strstr(why, "refusing extent 16"));
    sj_bucketed_cache_stats_get(c, &st);
    assert_int_equal(st.tier_up_failures, 1);
    assert_int_equal(st.quick_compiles, 2);
    assert_false(stored(s, &full, 16));
    assert_false(stored(s, &quick, 16));

    /* get_or_compile (and so precompile) makes the full code directly. */
    int64_t extent;
    void *exe;
    assert_int_equal(sj_bucketed_cache_get_or_compile(c, 30, &extent, &exe), SJ_OK);
    assert_int_equal(atomic_load(&qc.compiles[32]), 0);
    assert_int_equal(atomic_load(&fc.compiles[32]), 1);
    assert_int_equal(sj_bucketed_cache_bucket_tier(c, 5), SJ_SPECIALISE_NONE);
    sj_bucketed_cache_destroy(c);

    /* A restart loads the full code from the store: no compile of either kind. */
    counting_compiler fc2, qc2;
    sj_compiler full2 = counting(&fc2), quick2 = quick_compiler(&qc2);
    c = cache_tiered(l, &full2, s, &quick2);
    check_run(c, 4, 40);
    check_run(c, 30, 41);
    sj_bucketed_cache_specialise_wait(c);
    sj_bucketed_cache_stats_get(c, &st);
    assert_int_equal(st.store_hits, 2);
    assert_int_equal(st.compiles + st.quick_compiles + st.tier_ups, 0);
    assert_int_equal(sj_bucketed_cache_bucket_tier(c, 2), SJ_SPECIALISE_NONE);

    /* A quick compile that fails costs the request a full compile, not its result. */
    qc2.fail_extent = 8;
    check_run(c, 7, 42);
    sj_bucketed_cache_specialise_wait(c);
    sj_bucketed_cache_stats_get(c, &st);
    assert_int_equal(st.compiles, 1);
    assert_int_equal(st.quick_compiles, 0);
    assert_int_equal(sj_bucketed_cache_bucket_tier(c, 3), SJ_SPECIALISE_NONE);
    assert_true(stored(s, &full2, 8));
    sj_bucketed_cache_destroy(c);

    sj_bucketed_cache_config cfg;
    sj_bucketed_cache_config_init(&cfg);
    sj_compiler no_compile = quick;
    no_compile.compile = NULL;
    cfg.quick = &no_compile;
    assert_int_equal(sj_bucketed_cache_create(g, l, &full, s, &cfg, &c), SJ_E_INVALID_ARG);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "quick compiler"));
    sj_store_close(s);
    sj_ladder_destroy(l);
}

/* Threads run every bucket while each is tiered up (full compiles slowed
 * so the swaps land among the runs): every result exact, every bucket on
 * its full code; a close with tier-ups queued and one held mid-compile
 * ends cleanly, every executable destroyed once. */
static void test_tiered_threads_and_close(void **state) {
    (void)state;
    sj_ladder *l;
    assert_int_equal(sj_ladder_pow2(ctx, 1, 64, &l), SJ_OK);
    counting_compiler fc, qc;
    sj_compiler full = counting(&fc), quick = quick_compiler(&qc);
    fc.delay_ms = 5;
    sj_bucketed_cache *c = cache_tiered(l, &full, NULL, &quick);
    hammer_four(c, 5);
    sj_bucketed_cache_specialise_wait(c);
    sj_bucketed_cache_stats st;
    sj_bucketed_cache_stats_get(c, &st);
    assert_int_equal(st.quick_compiles, 7);
    assert_int_equal(st.tier_ups, 7);
    assert_int_equal(atomic_load(&fc.total), 7);
    assert_int_equal(atomic_load(&fc.destroyed), 7); /* the quick executables */
    sj_bucketed_cache_destroy(c);
    assert_int_equal(atomic_load(&fc.destroyed), 14);

    /* Closed with one full compile in flight and the rest queued. */
    full = counting(&fc);
    quick = quick_compiler(&qc);
    fc.delay_ms = 20;
    c = cache_tiered(l, &full, NULL, &quick);
    for (int64_t rows = 1; rows <= 64; rows *= 2) check_run(c, rows, 7);
    sj_bucketed_cache_destroy(c);
    assert_true(atomic_load(&fc.total) < 7);
    /* each bucket's executable, and the quick one each finished tier-up replaced */
    assert_int_equal(atomic_load(&fc.destroyed), 7 + atomic_load(&fc.total));
    sj_ladder_destroy(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_one_compile_per_bucket),
        cmocka_unit_test_setup(test_restart_compiles_nothing, fresh),
        cmocka_unit_test(test_run_padded_shapes),
        cmocka_unit_test(test_mixed_inputs),
        cmocka_unit_test(test_out_of_range),
        cmocka_unit_test(test_one_offs_bounded_and_unblocked),
        cmocka_unit_test_setup(test_corrupt_row_recompiled, fresh),
        cmocka_unit_test_setup(test_precompile_reports_unstored_buckets, fresh),
        cmocka_unit_test(test_failed_compile_reaches_waiters),
        cmocka_unit_test_setup(test_two_processes_precompile, fresh),
        cmocka_unit_test(test_hit_path_allocates_nothing),
        cmocka_unit_test_setup(test_native_after_swaps_level_buckets, fresh),
        cmocka_unit_test_setup(test_native_after_threads, fresh),
        cmocka_unit_test_setup(test_tiered_quick_first_then_full, fresh),
        cmocka_unit_test(test_tiered_threads_and_close),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
