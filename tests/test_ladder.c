/* Ladders: the reference pow2 example, edges, geo and list ladders, the
 * spec parser and its errors, out-of-range keys, padding waste. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

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
    assert_int_equal(sj_ladder_count(l), n);
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
    assert_int_equal(sj_ladder_count(l), 31);
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
    int n = sj_ladder_count(l);
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
    assert_int_equal(sj_ladder_count(again), sj_ladder_count(l));
    for (int i = 0; i < sj_ladder_count(l); i++)
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_example), cmocka_unit_test(test_pow2_edges),
        cmocka_unit_test(test_bad_pow2),          cmocka_unit_test(test_geo),
        cmocka_unit_test(test_list),              cmocka_unit_test(test_out_of_range),
        cmocka_unit_test(test_specs),             cmocka_unit_test(test_ranges),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
