/* Ladders: the reference pow2 example, edges, geo and list ladders, the
 * spec parser and its errors, out-of-range keys, padding waste; ladders
 * fitted to a trace, checked against exhaustive search. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "shapejit/ladder.h"
#include "tests/test_util.h"

static sj_ctx *ctx;

static int setup(void **state) {
    (void)state;
    return sj_ctx_create(NULL, &ctx) == SJ_OK ? 0 : -1;
}
static int teardown(void **state) {
    (void)state;
    sj_ctx_destroy(ctx);
    return 0;
}

static void expect_extents(const sj_ladder *l, const int64_t *want, int n) {
    assert_int_equal(sj_ladder_num_buckets(l), n);
    for (int i = 0; i < n; i++) assert_int_equal(sj_ladder_extent(l, i), want[i]);
}

/* pow2(8, 256): buckets [1,8] [9,16] [17,32] [33,64] [65,128] [129,256]. */
static void test_reference_example(void **state) {
    (void)state;
    sj_ladder *l;
    assert_int_equal(sj_ladder_pow2(ctx, 8, 256, &l), SJ_OK);
    const int64_t ext[] = {8, 16, 32, 64, 128, 256}, lo[] = {1, 9, 17, 33, 65, 129};
    expect_extents(l, ext, 6);
    for (int i = 0; i < 6; i++) assert_int_equal(sj_ladder_lower(l, i), lo[i]);
    int b;
    assert_int_equal(sj_ladder_bucket_for(l, 17, &b), SJ_OK);
    assert_int_equal(sj_ladder_extent(l, b), 32);
    /* every key lands in the bucket whose range holds it */
    for (int64_t k = 1; k <= 256; k++) {
        int i = sj_ladder_find(l, k);
        assert_true(i >= 0);
        assert_true(k >= sj_ladder_lower(l, i) && k <= sj_ladder_extent(l, i));
    }
    assert_true(sj_ladder_max_waste(l) <= 2.0);
    assert_int_equal(sj_ladder_max(l), 256);
    assert_int_equal(sj_ladder_get_kind(l), SJ_LADDER_POW2);
    char buf[64];
    sj_ladder_format(l, buf, sizeof buf);
    assert_string_equal(buf, "pow2:8:256");
    sj_ladder_destroy(l);
    sj_ladder_destroy(NULL);
}

static void test_pow2_edges(void **state) {
    (void)state;
    sj_ladder *l;
    static const struct {
        int64_t min, max;
        int n;
        int64_t extents[5];
    } cases[] = {
        {5, 100, 5, {8, 16, 32, 64, 128}}, /* MIN and MAX round up to powers of two */
        {1, 1, 1, {1}},
        {3, 4, 1, {4}}, /* MIN and MAX rounding to the same power */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(sj_ladder_pow2(ctx, cases[i].min, cases[i].max, &l), SJ_OK);
        expect_extents(l, cases[i].extents, cases[i].n);
        sj_ladder_destroy(l);
    }
    assert_int_equal(sj_ladder_pow2(ctx, 1, 1, &l), SJ_OK);
    assert_int_equal(sj_ladder_find(l, 1), 0);
    assert_int_equal(sj_ladder_find(l, 2), -1);
    assert_true(sj_ladder_max_waste(l) == 1.0);
    sj_ladder_destroy(l);
    assert_int_equal(sj_ladder_pow2(ctx, 1, SJ_MAX_EXTENT, &l), SJ_OK);
    assert_int_equal(sj_ladder_num_buckets(l), 31);
    assert_int_equal(sj_ladder_find(l, SJ_MAX_EXTENT), 30);
    assert_int_equal(sj_ladder_find(l, 3), 2);
    sj_ladder_destroy(l);
}

static void test_bad_pow2(void **state) {
    (void)state;
    sj_ladder *l = (sj_ladder *)&l;
    assert_int_equal(sj_ladder_pow2(ctx, 0, 8, &l), SJ_E_INVALID_ARG);
    assert_null(l);
    assert_error_contains(ctx, "MIN 0");
    assert_int_equal(sj_ladder_pow2(ctx, 16, 8, &l), SJ_E_INVALID_ARG);
    assert_error_contains(ctx, "greater than MAX");
    assert_int_equal(sj_ladder_pow2(ctx, 1, SJ_MAX_EXTENT + 1, &l), SJ_E_INVALID_ARG);
    assert_int_equal(sj_ladder_pow2(ctx, -4, 8, &l), SJ_E_INVALID_ARG);
}

static void test_geo(void **state) {
    (void)state;
    sj_ladder *l;
    assert_int_equal(sj_ladder_geo(ctx, 1, 1000, 1.5, &l), SJ_OK);
    int n = sj_ladder_num_buckets(l);
    assert_int_equal(sj_ladder_extent(l, 0), 1);
    assert_int_equal(sj_ladder_extent(l, n - 1), 1000);
    for (int i = 1; i < n; i++) {
        int64_t prev = sj_ladder_extent(l, i - 1), e = sj_ladder_extent(l, i);
        assert_true(e > prev);
        /* each extent at most RATIO times the last, or just one more */
        assert_true((double)e <= 1.5 * (double)prev || e == prev + 1);
    }
    assert_true(sj_ladder_max_waste(l) <= 1.5);
    char buf[64];
    sj_ladder_format(l, buf, sizeof buf);
    assert_string_equal(buf, "geo:1:1000:1.5");
    sj_ladder_destroy(l);
    /* a ratio that 15 digits cannot hold still formats to a spec of the same
     * ladder (found by fuzz_ladder: %.15g made geo:1:10000:1.11111111111111) */
    assert_int_equal(sj_ladder_parse(ctx, "geo:1:10000:1.1111111111111111111", &l), SJ_OK);
    sj_ladder_format(l, buf, sizeof buf);
    sj_ladder *again;
    assert_int_equal(sj_ladder_parse(ctx, buf, &again), SJ_OK);
    assert_int_equal(sj_ladder_num_buckets(again), sj_ladder_num_buckets(l));
    for (int i = 0; i < sj_ladder_num_buckets(l); i++)
        assert_int_equal(sj_ladder_extent(again, i), sj_ladder_extent(l, i));
    sj_ladder_destroy(again);
    sj_ladder_destroy(l);
    /* waste bound for every key of a geo:16:4096:1.25 ladder */
    assert_int_equal(sj_ladder_geo(ctx, 16, 4096, 1.25, &l), SJ_OK);
    for (int64_t k = 17; k <= 4096; k++) {
        int64_t padded, real;
        assert_int_equal(sj_ladder_padding(l, k, 3, &padded, &real), SJ_OK);
        assert_int_equal(real, 3 * k);
        assert_true((double)padded / (double)real < 1.25);
    }
    sj_ladder_destroy(l);
    sj_ladder *bad = NULL;
    assert_int_equal(sj_ladder_geo(ctx, 1, 100, 1.0, &bad), SJ_E_INVALID_ARG);
    assert_error_contains(ctx, "RATIO");
    assert_int_equal(sj_ladder_geo(ctx, 1, SJ_MAX_EXTENT, 1.0001, &bad), SJ_E_INVALID_ARG);
    assert_error_contains(ctx, "buckets");
    assert_null(bad);
}

static void test_list(void **state) {
    (void)state;
    sj_ladder *l;
    const int64_t e[] = {3, 10, 11, 50};
    assert_int_equal(sj_ladder_list(ctx, e, 4, &l), SJ_OK);
    expect_extents(l, e, 4);
    assert_int_equal(sj_ladder_find(l, 1), 0);
    assert_int_equal(sj_ladder_find(l, 3), 0);
    assert_int_equal(sj_ladder_find(l, 4), 1);
    assert_int_equal(sj_ladder_find(l, 11), 2);
    assert_int_equal(sj_ladder_find(l, 12), 3);
    assert_int_equal(sj_ladder_find(l, 50), 3);
    assert_int_equal(sj_ladder_lower(l, 3), 12);
    char buf[64];
    sj_ladder_format(l, buf, sizeof buf);
    assert_string_equal(buf, "list:3,10,11,50");
    sj_ladder_destroy(l);

    sj_ladder *bad = NULL;
    const int64_t desc[] = {4, 8, 8}, neg[] = {4, -8};
    assert_int_equal(sj_ladder_list(ctx, desc, 3, &bad), SJ_E_INVALID_ARG);
    assert_error_contains(ctx, "extent #3 (8)");
    assert_int_equal(sj_ladder_list(ctx, neg, 2, &bad), SJ_E_INVALID_ARG);
    assert_error_contains(ctx, "extent #2 (-8)");
    assert_int_equal(sj_ladder_list(ctx, e, 0, &bad), SJ_E_INVALID_ARG);
    assert_null(bad);
}

/* Explicit ranges with gaps and a first range above 1: a key in a gap or
 * below the first range is in no bucket, and the message names the gap. */
static void test_ranges(void **state) {
    (void)state;
    sj_ladder *l;
    assert_int_equal(sj_ladder_parse(ctx, "ranges:4-8,17-64,65-100", &l), SJ_OK);
    assert_int_equal(sj_ladder_get_kind(l), SJ_LADDER_RANGES);
    const int64_t e[] = {8, 64, 100};
    expect_extents(l, e, 3);
    assert_int_equal(sj_ladder_lower(l, 0), 4);
    assert_int_equal(sj_ladder_lower(l, 1), 17);
    assert_int_equal(sj_ladder_lower(l, 2), 65);
    assert_int_equal(sj_ladder_find(l, 3), -1);
    assert_int_equal(sj_ladder_find(l, 4), 0);
    assert_int_equal(sj_ladder_find(l, 8), 0);
    assert_int_equal(sj_ladder_find(l, 9), -1);
    assert_int_equal(sj_ladder_find(l, 16), -1);
    assert_int_equal(sj_ladder_find(l, 17), 1);
    assert_int_equal(sj_ladder_find(l, 65), 2);
    assert_int_equal(sj_ladder_find(l, 101), -1);
    int b = 77;
    assert_int_equal(sj_ladder_bucket_for(l, 12, &b), SJ_E_OUT_OF_RANGE);
    assert_int_equal(b, 77);
    assert_error_contains(ctx, "key 12 falls in the gap between buckets [4, 8] and [17, 64]");
    assert_int_equal(sj_ladder_bucket_for(l, 2, &b), SJ_E_OUT_OF_RANGE);
    assert_error_contains(ctx, "below the ladder's first bucket [4, 8]");
    assert_int_equal(sj_ladder_bucket_for(l, 101, &b), SJ_E_OUT_OF_RANGE);
    int64_t p, r;
    assert_int_equal(sj_ladder_padding(l, 20, 2, &p, &r), SJ_OK);
    assert_int_equal(p, 128);
    assert_true(sj_ladder_max_waste(l) > 3.7 && sj_ladder_max_waste(l) < 3.8); /* 64 / 17 */
    char buf[64];
    sj_ladder_format(l, buf, sizeof buf);
    assert_string_equal(buf, "ranges:4-8,17-64,65-100");
    sj_ladder_destroy(l);
}

static void test_out_of_range(void **state) {
    (void)state;
    sj_ladder *l;
    assert_int_equal(sj_ladder_pow2(ctx, 8, 256, &l), SJ_OK);
    int b = 77;
    assert_int_equal(sj_ladder_bucket_for(l, 257, &b), SJ_E_OUT_OF_RANGE);
    assert_int_equal(b, 77);
    assert_error_contains(ctx, "257");
    assert_int_equal(sj_ladder_bucket_for(l, 0, &b), SJ_E_OUT_OF_RANGE);
    assert_int_equal(sj_ladder_bucket_for(l, -5, &b), SJ_E_OUT_OF_RANGE);
    assert_int_equal(sj_ladder_find(l, INT64_MAX), -1);
    int64_t p, r;
    assert_int_equal(sj_ladder_padding(l, 300, 1, &p, &r), SJ_E_OUT_OF_RANGE);
    assert_int_equal(sj_ladder_padding(l, 17, 64, &p, &r), SJ_OK);
    assert_int_equal(p, 32 * 64);
    assert_int_equal(r, 17 * 64);
    sj_ladder_destroy(l);
}

static void test_specs(void **state) {
    (void)state;
    sj_ladder *l;
    static const struct {
        const char *spec;
        int n;
        int64_t extents[9];
    } good[] = {
        {"pow2:8:256", 6, {8, 16, 32, 64, 128, 256}},
        {"geo:2:300:2", 9, {2, 4, 8, 16, 32, 64, 128, 256, 300}},
        {"list:1,7,64", 3, {1, 7, 64}},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        if (sj_ladder_parse(ctx, good[i].spec, &l) != SJ_OK)
            fail_msg("spec '%s': %s", good[i].spec, sj_ctx_last_error(ctx));
        expect_extents(l, good[i].extents, good[i].n);
        sj_ladder_destroy(l);
    }

    struct {
        const char *spec;
        sj_status st;
        const char *says;
    } bad[] = {
        {"", SJ_E_PARSE, "expected pow2"},
        {"cube:1:8", SJ_E_PARSE, "expected pow2"},
        {"pow2:8", SJ_E_PARSE, "expected ':' after MIN"},
        {"pow2:8:x", SJ_E_PARSE, "MAX at column 8"},
        {"pow2:8:256:1", SJ_E_PARSE, "unexpected ':1' after MAX"},
        {"pow2:-1:8", SJ_E_PARSE, "MIN at column 6"},
        {"pow2:0:8", SJ_E_INVALID_ARG, "MIN 0"},
        {"pow2:64:8", SJ_E_INVALID_ARG, "greater than MAX"},
        {"pow2:1:99999999999999999999", SJ_E_INVALID_ARG, "above the largest extent"},
        {"geo:1:100", SJ_E_PARSE, "expected ':' after MAX"},
        {"geo:1:100:abc", SJ_E_PARSE, "RATIO at column 11"},
        {"geo:1:100:0.5", SJ_E_INVALID_ARG, "RATIO 0.5"},
        {"geo:1:100:1.5x", SJ_E_PARSE, "unexpected 'x' after RATIO"},
        {"list:", SJ_E_PARSE, "extent #1"},
        {"list:4,2", SJ_E_INVALID_ARG, "extent #2 (2)"},
        {"list:4,,8", SJ_E_PARSE, "extent #2"},
        {"list:4,8,", SJ_E_PARSE, "extent #3"},
        {"list:0", SJ_E_INVALID_ARG, "extent #1 (0)"},
{"ranges:", SJ_E_PARSE, "range #1's start"},
        {"ranges:1-8,8-16", SJ_E_INVALID_ARG, "range #2 (8-16) overlaps"},
        {"ranges:9-16,1-8", SJ_E_INVALID_ARG, "range #2 (1-8) overlaps or precedes"},
        {"ranges:8-4", SJ_E_INVALID_ARG, "range #1 (8-4) is empty"},
        {"ranges:0-4", SJ_E_INVALID_ARG, "range #1 starts at 0"},
        {"ranges:1-8,", SJ_E_PARSE, "range #2's start"},
        {"ranges:1:8", SJ_E_PARSE, "expected '-' after range #1's start"},
        {"ranges:1-8;17-20", SJ_E_PARSE, "expected ',' after range #1's end"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        l = (sj_ladder *)&l;
        sj_status st = sj_ladder_parse(ctx, bad[i].spec, &l);
        if (st != bad[i].st || !strstr(sj_ctx_last_error(ctx), bad[i].says))
            fail_msg("spec '%s': got %d '%s'", bad[i].spec, st, sj_ctx_last_error(ctx));
        assert_null(l);
    }
}

static int cmp64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The least mean cost of any ladder of at most k buckets drawn from the
 * distinct sizes (every subset holding the largest, tried in turn). */
static double brute_force(const int64_t *sizes, size_t n, const sj_ladder_cost *m, int k) {
    int64_t cand[16];
    int M = 0;
    int64_t sorted[64];
    memcpy(sorted, sizes, n * sizeof *sizes);
    qsort(sorted, n, sizeof *sorted, cmp64);
    for (size_t i = 0; i < n; i++)
        if (i == 0 || sorted[i] != sorted[i - 1]) cand[M++] = sorted[i];
    double best = INFINITY;
    for (unsigned mask = 0; mask < (1u << (M - 1)); mask++) {
        if (__builtin_popcount(mask) + 1 > k) continue;
        double total = 0;
        for (size_t i = 0; i < n; i++) {
            int64_t e = cand[M - 1];
            for (int j = 0; j < M - 1; j++)
                if ((mask >> j & 1) && cand[j] >= sorted[i]) {
                    e = cand[j];
                    break;
                }
            total += sj_ladder_cost_at(m, sorted[i], e);
        }
        if (total / (double)n < best) best = total / (double)n;
    }
    return best;
}

static void test_fit_matches_exhaustive_search(void **state) {
    (void)state;
    unsigned seed = 7;
    for (int trial = 0; trial < 200; trial++) {
        int64_t sizes[40];
        size_t n = 1 + (size_t)(rand_r(&seed) % 40);
        for (size_t i = 0; i < n; i++) sizes[i] = 1 + rand_r(&seed) % 12;
        sj_ladder_cost m = {.a = rand_r(&seed) % 5, .b = rand_r(&seed) % 3, .c = rand_r(&seed) % 4,
                            .d = (rand_r(&seed) % 3) * 0.1, .e = (rand_r(&seed) % 3) * 0.05};
        int k = 1 + rand_r(&seed) % 5;
        sj_ladder *l;
        sj_ladder_fit_result r, again;
        assert_int_equal(sj_ladder_fit(ctx, sizes, n, &m, k, 0, &l, &r), SJ_OK);
        assert_true(r.buckets <= k);
        assert_true(fabs(r.expected_cost - brute_force(sizes, n, &m, k)) < 1e-9);
        /* the figures say what the ladder costs */
        assert_int_equal(sj_ladder_expected(ctx, l, sizes, n, &m, &again), SJ_OK);
        assert_true(fabs(again.expected_cost - r.expected_cost) < 1e-9);
        sj_ladder_destroy(l);
    }
}

/* Two clusters of sizes and a cost of rows computed (c): a bucket at the
 * top of each cluster. One size only: one bucket, whatever k. */
static void test_fit_bimodal_and_degenerate(void **state) {
    (void)state;
    int64_t sizes[200];
    for (int i = 0; i < 100; i++) sizes[i] = 1 + i % 8;      /* 1..8 */
    for (int i = 100; i < 200; i++) sizes[i] = 500 + i % 13; /* 500..512 */
    sj_ladder_cost rows = {.c = 1};
    sj_ladder *l;
    sj_ladder_fit_result r;
    assert_int_equal(sj_ladder_fit(ctx, sizes, 200, &rows, 2, 0, &l, &r), SJ_OK);
    expect_extents(l, (int64_t[]){8, 512}, 2);
    assert_true(fabs(r.expected_cost - (100 * 8 + 100 * 512) / 200.0) < 1e-9);
    sj_ladder_destroy(l);
    int64_t one[5] = {37, 37, 37, 37, 37};
    assert_int_equal(sj_ladder_fit(ctx, one, 5, &rows, 8, 0, &l, &r), SJ_OK);
    expect_extents(l, (int64_t[]){37}, 1);
    sj_ladder_destroy(l);
}

/* cost(n, E) = E, memory(E) = E bytes, three buckets: unbounded, {8, 300,
 * 512} (cost 844, 820 bytes); within 600 bytes, {2, 8, 512} (1044, 522
 * bytes); within 512 only the top bucket; 511 cannot hold the largest size. */
static void test_fit_memory_budget(void **state) {
    (void)state;
    int64_t sizes[] = {1, 2, 8, 8, 300, 512};
    sj_ladder_cost m = {.c = 1, .m1 = 1};
    sj_ladder *l;
    sj_ladder_fit_result r;
    assert_int_equal(sj_ladder_fit(ctx, sizes, 6, &m, 3, 0, &l, &r), SJ_OK);
    expect_extents(l, (int64_t[]){8, 300, 512}, 3);
    assert_true(fabs(r.memory_bytes - 820) < 1e-9 && fabs(r.expected_cost * 6 - 844) < 1e-9);
    sj_ladder_destroy(l);
    assert_int_equal(sj_ladder_fit(ctx, sizes, 6, &m, 3, 600, &l, &r), SJ_OK);
    expect_extents(l, (int64_t[]){2, 8, 512}, 3);
    assert_true(fabs(r.memory_bytes - 522) < 1e-9 && fabs(r.expected_cost * 6 - 1044) < 1e-9);
    sj_ladder_destroy(l);
    assert_int_equal(sj_ladder_fit(ctx, sizes, 6, &m, 3, 512, &l, &r), SJ_OK);
    expect_extents(l, (int64_t[]){512}, 1);
    sj_ladder_destroy(l);
    assert_int_equal(sj_ladder_fit(ctx, sizes, 6, &m, 3, 511, &l, &r), SJ_E_INVALID_ARG);
    assert_error_contains(ctx, "the largest size (512) alone needs 512 bytes in its bucket, more than the budget of 511");
    assert_null(l);
}

/* More distinct sizes than candidates: quantiles stand in for them; the
 * top bucket still holds the largest size, and on a uniform trace with a
 * cost of rows computed the fit is within 1% of the even split. */
static void test_fit_many_sizes(void **state) {
    (void)state;
    enum { N = 5000 };
    int64_t *sizes = malloc(N * sizeof *sizes);
    for (int i = 0; i < N; i++) sizes[i] = N - i;
    sj_ladder_cost rows = {.c = 1};
    sj_ladder *l, *even;
    sj_ladder_fit_result r, e;
    assert_int_equal(sj_ladder_fit(ctx, sizes, N, &rows, 4, 0, &l, &r), SJ_OK);
    assert_true(r.candidates <= 512 && r.buckets == 4);
    assert_int_equal(sj_ladder_max(l), N);
    assert_int_equal(sj_ladder_list(ctx, (int64_t[]){1250, 2500, 3750, 5000}, 4, &even), SJ_OK);
    assert_int_equal(sj_ladder_expected(ctx, even, sizes, N, &rows, &e), SJ_OK);
    assert_true(r.expected_cost <= e.expected_cost * 1.01);
    sj_ladder_destroy(even);
    sj_ladder_destroy(l);
    free(sizes);
}

static void test_fit_bad_input(void **state) {
    (void)state;
    int64_t sizes[] = {3, 9};
    sj_ladder_cost m = {.c = 1};
    sj_ladder *l;
    assert_int_equal(sj_ladder_fit(ctx, sizes, 0, &m, 2, 0, &l, NULL), SJ_E_INVALID_ARG);
    assert_error_contains(ctx, "the trace is empty");
    assert_int_equal(sj_ladder_fit(ctx, sizes, 2, &m, 0, 0, &l, NULL), SJ_E_INVALID_ARG);
    assert_error_contains(ctx, "0 buckets asked for");
    int64_t bad[] = {3, 0};
    assert_int_equal(sj_ladder_fit(ctx, bad, 2, &m, 2, 0, &l, NULL), SJ_E_INVALID_ARG);
    assert_error_contains(ctx, "size #2 (0) is outside 1..");
    sj_ladder_cost neg = {.b = -1};
    assert_int_equal(sj_ladder_fit(ctx, sizes, 2, &neg, 2, 0, &l, NULL), SJ_E_INVALID_ARG);
    assert_error_contains(ctx, "must be finite and >= 0");
    assert_int_equal(sj_ladder_fit(ctx, sizes, 2, &m, 2, -5, &l, NULL), SJ_E_INVALID_ARG);
    assert_error_contains(ctx, "memory budget must be >= 0");
    /* costs past what a double holds: refused, never a ladder of garbage */
    sj_ladder_cost huge = {.a = 1e308, .b = 1e308};
    int64_t big[] = {1000000, 1000000, 999999};
    assert_int_equal(sj_ladder_fit(ctx, big, 3, &huge, 2, 0, &l, NULL), SJ_E_OUT_OF_RANGE);
    assert_error_contains(ctx, "the cost model overflows");
    assert_null(l);
    /* a size above the ladder's top */
    sj_ladder *small;
    assert_int_equal(sj_ladder_list(ctx, (int64_t[]){4}, 1, &small), SJ_OK);
    sj_ladder_fit_result r;
    assert_int_equal(sj_ladder_expected(ctx, small, sizes, 2, &m, &r), SJ_E_OUT_OF_RANGE);
    sj_ladder_destroy(small);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_example), cmocka_unit_test(test_pow2_edges),
        cmocka_unit_test(test_bad_pow2),          cmocka_unit_test(test_geo),
        cmocka_unit_test(test_list),              cmocka_unit_test(test_out_of_range),
        cmocka_unit_test(test_specs),             cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_fit_matches_exhaustive_search), cmocka_unit_test(test_fit_bimodal_and_degenerate),
        cmocka_unit_test(test_fit_memory_budget), cmocka_unit_test(test_fit_many_sizes),
        cmocka_unit_test(test_fit_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
