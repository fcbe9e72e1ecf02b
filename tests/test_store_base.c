/* Bases in the artifact store (issue #33): the rows of one graph are
 * compressed against a base, the inline bytes of an earlier row, kept
 * once. Round trips of many rows alike, rows of another shape starting a
 * base of their own, graphs never sharing one, a base outliving the row
 * it was made of (rm, eviction, gc) and going with the last row using it,
 * a damaged or missing base a miss for every row using it and named by
 * verify, a put repairing it, export and import, an older schema rebuilt,
 * and gets in one process while others put and remove rows. The file is
 * checked with plain SQLite queries beside the API. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shapejit/store.h"
#include "tests/store_fixture.h"

static int setup(void **state) {
    (void)state;
    return store_fixture_setup("test_store_base", "s/store.db");
}

/* Graph `graph` compiled with options `options`, at `extent`. */
static sj_store_key key_of(int graph, int options, int64_t extent) {
    sj_store_key k = store_key(graph, extent);
    k.options_hash[0] = (uint8_t)options;
    return k;
}
static sj_store *open_max(int64_t max_bytes) { return store_open_at(path, max_bytes); }

/* --- artifacts alike within a shape --- */

#define PLAN_BYTES 20000
#define KERNEL_AT 6000
#define KERNEL_LEN 3000

/* A bucket's bytes: incompressible bytes fixed by (graph, shape), so a
 * row compresses only against a base of its own shape, with the extent
 * written every 256 bytes, as a plan's extents and strides are. */
typedef struct plan {
    uint8_t bytes[PLAN_BYTES];
} plan;

static void make_plan(plan *p, int graph, int shape, int64_t extent) {
    uint32_t x = (uint32_t)(graph * 7919 + shape * 104729) * 2654435761u + 1;
    for (size_t i = 0; i < PLAN_BYTES; i++) {
        x = x * 1664525u + 1013904223u;
        p->bytes[i] = (uint8_t)(x >> 24);
    }
    for (size_t i = 0; i + 8 <= PLAN_BYTES; i += 256) {
        uint64_t v = (uint64_t)(extent * 40503 + (int64_t)i);
        for (int j = 0; j < 8; j++) p->bytes[i + (size_t)j] = (uint8_t)(v >> (8 * j));
    }
}

static void put_plan(sj_store *s, int graph, int shape, int64_t extent) {
    static plan p;
    make_plan(&p, graph, shape, extent);
    sj_store_key k = key_of(graph, 0, extent);
    if (sj_store_put(s, &k, p.bytes, PLAN_BYTES) != SJ_OK)
        fail_msg("put %d/%lld: %s", graph, (long long)extent, sj_ctx_last_error(ctx));
}

/* The row's status; its bytes checked against the plan when found. */
static sj_status get_plan(sj_store *s, int graph, int shape, int64_t extent) {
    static plan want;
    make_plan(&want, graph, shape, extent);
    sj_store_key k = key_of(graph, 0, extent);
    return store_get_check(s, &k, want.bytes, PLAN_BYTES);
}

static void expect_plan(sj_store *s, int graph, int shape, int64_t extent) {
    if (get_plan(s, graph, shape, extent) != SJ_OK)
        fail_msg("get %d/%lld: %s", graph, (long long)extent, sj_ctx_last_error(ctx));
}

/* --- the file, read and changed with plain SQLite --- */

static int64_t n_bases(void) { return count_sql(path, "SELECT count(*) FROM bases"); }

/* The base key of the row at (graph, extent), in hex; "" when none. */
static void base_hex(int graph, int64_t extent, char hex[65]) {
    char sql[160];
    snprintf(sql, sizeof sql,
             "SELECT coalesce(lower(hex(base_key)), '') FROM artifacts WHERE extent = %lld AND graph_hash LIKE "
             "'%02x%%'",
             (long long)extent, graph * 31);
    sqlite3 *db;
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    snprintf(hex, 65, "%s", (const char *)sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
    sqlite3_close(db);
}

/* Damages the base whose key is `hex`: `sql` (an UPDATE or DELETE of
 * bases) run on its row, or its blob's middle byte flipped when NULL. */
static void damage_base(const char *hex, const char *sql) {
    char where[96], stmt[256];
    snprintf(where, sizeof where, "key = x'%s'", hex);
    if (!sql) {
        flip_blob("bases", where);
        return;
    }
    snprintf(stmt, sizeof stmt, "%s WHERE %s", sql, where);
    raw_sql(stmt);
}

static int64_t stored_bytes(sj_store *s) {
    sj_store_stats st;
    assert_int_equal(sj_store_stats_get(s, &st), SJ_OK);
    return st.stored_bytes;
}

static int64_t sum_stored_sql(void) {
    return count_sql(path, "SELECT (SELECT coalesce(sum(stored_size), 0) FROM artifacts) + "
                     "(SELECT coalesce(sum(stored_size), 0) FROM parts) + "
                     "(SELECT coalesce(sum(stored_size), 0) FROM bases)");
}

/* --- tests --- */

static const int64_t ladder[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
#define N_LADDER 10

static void test_rows_alike_share_one_base(void **state) {
    (void)state;
    sj_store *s = open_max(0);
    for (int i = 0; i < N_LADDER; i++) put_plan(s, 1, 0, ladder[i]);
    for (int i = 0; i < N_LADDER; i++) expect_plan(s, 1, 0, ladder[i]);
    assert_int_equal(n_bases(), 1);
    assert_int_equal(count_sql(path, "SELECT count(DISTINCT base_key) FROM artifacts"), 1);
    assert_int_equal(count_sql(path, "SELECT count(*) FROM artifacts WHERE base_key IS NULL"), 0);
    /* the base is a whole plan's bytes; each row's own blob a fraction */
    int64_t base = count_sql(path, "SELECT stored_size FROM bases");
    assert_true(base > PLAN_BYTES * 9 / 10);
    assert_int_equal(
        count_sql(path, "SELECT count(*) FROM artifacts WHERE stored_size * 8 > (SELECT stored_size FROM bases)"), 0);
    /* counted once: the stats are the three tables' stored sizes */
    int64_t total = stored_bytes(s);
    assert_int_equal(total, sum_stored_sql());
    assert_true(total < 2 * base);
    assert_int_equal(count_sql(path, "SELECT count(*) FROM artifacts WHERE stored_size <> length(blob)"), 0);
    /* a row put again with the same bytes keeps the base */
    put_plan(s, 1, 0, 1);
    assert_int_equal(n_bases(), 1);
    expect_plan(s, 1, 0, 1);

    /* with parts cut out, the rest still compresses against a base */
    static plan p;
    sj_store_part part = {.offset = KERNEL_AT, .len = KERNEL_LEN, .key = {9}};
    for (int64_t e = 1; e <= 4; e++) {
        make_plan(&p, 2, 0, e);
        memset(p.bytes + KERNEL_AT, 0x5a, KERNEL_LEN); /* one kernel in every bucket */
        sj_store_key k = key_of(2, 0, e);
        assert_int_equal(sj_store_put_parts(s, &k, p.bytes, PLAN_BYTES, &part, 1), SJ_OK);
    }
    for (int64_t e = 1; e <= 4; e++) {
        make_plan(&p, 2, 0, e);
        memset(p.bytes + KERNEL_AT, 0x5a, KERNEL_LEN);
        sj_store_key k = key_of(2, 0, e);
        void *got;
        size_t n;
        assert_int_equal(sj_store_get(s, &k, &got, &n), SJ_OK);
        assert_int_equal(n, PLAN_BYTES);
        assert_memory_equal(got, p.bytes, n);
        sj_free(ctx, got);
    }
    assert_int_equal(n_bases(), 2);
    assert_int_equal(count_sql(path, "SELECT raw_size FROM bases WHERE extent = 1 AND raw_size < 20000"),
                     PLAN_BYTES - KERNEL_LEN);

    /* small rows are kept plain: a base would cost what it saves */
    uint8_t small[600];
    memset(small, 3, sizeof small);
    for (int64_t e = 1; e <= 3; e++) {
        sj_store_key k = key_of(3, 0, e);
        assert_int_equal(sj_store_put(s, &k, small, sizeof small), SJ_OK);
    }
    assert_int_equal(count_sql(path, "SELECT count(*) FROM artifacts WHERE base_key IS NULL"), 3);
    assert_int_equal(n_bases(), 2);
    sj_store_close(s);
}

static void test_graphs_and_shapes_get_bases_of_their_own(void **state) {
    (void)state;
    sj_store *s = open_max(0);
    /* graphs 1 and 2 with the same bytes, and graph 1 under other options */
    put_plan(s, 1, 0, 8);
    put_plan(s, 1, 0, 16);
    static plan p;
    make_plan(&p, 1, 0, 8);
    sj_store_key k2 = key_of(2, 0, 8), k1o = key_of(1, 5, 8);
    assert_int_equal(sj_store_put(s, &k2, p.bytes, PLAN_BYTES), SJ_OK);
    assert_int_equal(sj_store_put(s, &k1o, p.bytes, PLAN_BYTES), SJ_OK);
    assert_int_equal(n_bases(), 3);
    char a[65], b[65];
    base_hex(1, 8, a);
    base_hex(2, 8, b);
    assert_string_not_equal(a, b);
    assert_int_equal(count_sql(path, "SELECT count(DISTINCT family) FROM bases"), 3);
    expect_plan(s, 1, 0, 8);
    expect_plan(s, 1, 0, 16);

    /* rows of another shape (small buckets and large ones compile to
     * different plans) start a base of their own; each row compresses
     * against the base nearest its extent */
    sj_store_close(s);
    store_fixture_fresh(NULL);
    s = open_max(0);
    for (int64_t e = 1; e <= 8; e *= 2) put_plan(s, 1, 0, e);
    for (int64_t e = 512; e >= 16; e /= 2) put_plan(s, 1, 1, e);
    assert_int_equal(n_bases(), 2);
    for (int64_t e = 1; e <= 8; e *= 2) expect_plan(s, 1, 0, e);
    for (int64_t e = 16; e <= 512; e *= 2) expect_plan(s, 1, 1, e);
    assert_int_equal(count_sql(path, "SELECT count(*) FROM artifacts a JOIN bases b ON b.key = a.base_key "
                               "WHERE (a.extent <= 8) <> (b.extent <= 8)"),
                     0);
    /* a row put again in the other shape moves to the other base; a
     * base no row uses any more goes */
    put_plan(s, 1, 1, 1);
    expect_plan(s, 1, 1, 1);
    assert_int_equal(count_sql(path, "SELECT count(*) FROM bases WHERE extent = 1"), 1); /* 2, 4, 8 use it */
    for (int64_t e = 2; e <= 8; e *= 2) put_plan(s, 1, 1, e);
    assert_int_equal(count_sql(path, "SELECT count(*) FROM bases WHERE extent = 1"), 0);
    assert_int_equal(n_bases(), 1);
    assert_int_equal(stored_bytes(s), sum_stored_sql());
    sj_store_close(s);
}

static void test_base_outlives_the_row_it_was_made_of(void **state) {
    (void)state;
    sj_store *s = open_max(0);
    for (int64_t e = 1; e <= 5; e++) put_plan(s, 1, 0, e); /* 1 made the base */
    char made[65];
    base_hex(1, 1, made);
    assert_int_equal(count_sql(path, "SELECT extent FROM bases"), 1);
    /* rm the row the base was made of: the others read, the base stays */
    sj_store_key k = key_of(1, 0, 1);
    int64_t removed;
    assert_int_equal(sj_store_rm(s, &k, &removed), SJ_OK);
    assert_int_equal(removed, 1);
    assert_int_equal(n_bases(), 1);
    for (int64_t e = 2; e <= 5; e++) expect_plan(s, 1, 0, e);

    /* eviction (least recently used first: 2) frees only the row's blob
     * while others use the base */
    int64_t row2 = count_sql(path, "SELECT stored_size FROM artifacts WHERE extent = 2");
    for (int64_t e = 3; e <= 5; e++) expect_plan(s, 1, 0, e);
    int64_t total = stored_bytes(s);
    sj_store_gc_result r;
    assert_int_equal(sj_store_gc(s, total - 1, false, &r), SJ_OK);
    assert_int_equal(r.evicted, 1);
    assert_int_equal(r.bytes_freed, row2);
    assert_int_equal(get_plan(s, 1, 0, 2), SJ_E_NOT_FOUND);
    assert_int_equal(n_bases(), 1);
    /* gc keeps a base rows use, corrupt-row removal included */
    assert_int_equal(sj_store_gc(s, -1, true, &r), SJ_OK);
    assert_int_equal(r.corrupt_removed, 0);
    assert_int_equal(n_bases(), 1);
    for (int64_t e = 3; e <= 5; e++) expect_plan(s, 1, 0, e);
    /* a put's eviction counts the base once: a bound of the base and
     * three rows keeps three rows */
    int64_t three = stored_bytes(s);
    sj_store_close(s);
    s = open_max(three + 300);
    put_plan(s, 1, 0, 6); /* 3 goes */
    assert_int_equal(get_plan(s, 1, 0, 3), SJ_E_NOT_FOUND);
    for (int64_t e = 4; e <= 6; e++) expect_plan(s, 1, 0, e);
    assert_true(stored_bytes(s) <= three + 300);
    assert_int_equal(n_bases(), 1);
    /* the base goes with the last row using it; gc to nothing frees every
     * stored byte */
    total = stored_bytes(s);
    assert_int_equal(sj_store_gc(s, 0, false, &r), SJ_OK);
    assert_int_equal(r.evicted, 3);
    assert_int_equal(r.bytes_freed, total);
    assert_int_equal(n_bases(), 0);
    assert_int_equal(stored_bytes(s), 0);
    /* and so does rm */
    for (int64_t e = 1; e <= 3; e++) put_plan(s, 1, 0, e);
    char prefix[8];
    snprintf(prefix, sizeof prefix, "%02x", 31);
    assert_int_equal(sj_store_rm_prefix(s, prefix, &removed), SJ_OK);
    assert_int_equal(removed, 3);
    assert_int_equal(n_bases(), 0);
    sj_store_close(s);
}

/* Every row of 1..n is corrupt naming base hex with `says`, and verify
 * names each; rows of graph 2 read. */
static void expect_base_broken(sj_store *s, int n, const char *hex, const char *says) {
    for (int64_t e = 1; e <= n; e++) {
        assert_int_equal(get_plan(s, 1, 0, e), SJ_E_CORRUPT);
        assert_error_contains(ctx, hex);
        assert_error_contains(ctx, says);
    }
    expect_plan(s, 2, 0, 1);
    problems p = {0};
    int64_t checked, bad;
    assert_int_equal(sj_store_verify(s, problem, &p, &checked, &bad), SJ_OK);
    assert_int_equal(checked, n + 1);
    assert_int_equal(bad, n);
    for (int i = 0; i < n; i++)
        if (!strstr(p.why[i], hex) || !strstr(p.why[i], "base"))
            fail_msg("verify's reason '%s' does not name base %s", p.why[i], hex);
}

static void test_damaged_base(void **state) {
    (void)state;
    sj_store *s = open_max(0);
    for (int64_t e = 1; e <= 4; e++) put_plan(s, 1, 0, e);
    put_plan(s, 2, 0, 1);
    char hex[65];
    base_hex(1, 1, hex);

    /* a flipped byte: a miss for every row using it */
    damage_base(hex, NULL);
    expect_base_broken(s, 4, hex, "is corrupt: base");
    sj_store_stats st;
    assert_int_equal(sj_store_stats_get(s, &st), SJ_OK);
    assert_int_equal(st.corrupt, 4);
    /* a put of the bytes it was made of writes it again: all read */
    put_plan(s, 1, 0, 1);
    for (int64_t e = 1; e <= 4; e++) expect_plan(s, 1, 0, e);
    int64_t checked, bad;
    assert_int_equal(sj_store_verify(s, NULL, NULL, &checked, &bad), SJ_OK);
    assert_int_equal(bad, 0);
    assert_int_equal(n_bases(), 2);

    /* its digest alone changed */
    damage_base(hex, "UPDATE bases SET digest = zeroblob(32)");
    expect_base_broken(s, 4, hex, "BLAKE3 digest mismatch");
    put_plan(s, 1, 0, 1);
    expect_plan(s, 1, 0, 3);

    /* missing: a put of another row writes a fresh base; the rows still
     * on the missing one are misses until put again */
    damage_base(hex, "DELETE FROM bases");
    expect_base_broken(s, 4, hex, "missing from the bases table");
    put_plan(s, 1, 0, 3);
    expect_plan(s, 1, 0, 3);
    char fresh_hex[65];
    base_hex(1, 3, fresh_hex);
    assert_string_not_equal(fresh_hex, hex);
    assert_int_equal(get_plan(s, 1, 0, 2), SJ_E_CORRUPT);
    put_plan(s, 1, 0, 2);
    put_plan(s, 1, 0, 4);
    expect_plan(s, 1, 0, 2);
    base_hex(1, 2, fresh_hex);
    assert_string_not_equal(fresh_hex, hex);
    /* gc removes the one row left on it */
    sj_store_gc_result r;
    assert_int_equal(sj_store_gc(s, -1, true, &r), SJ_OK);
    assert_int_equal(r.corrupt_removed, 1);
    assert_int_equal(get_plan(s, 1, 0, 1), SJ_E_NOT_FOUND);

    /* damaged with no put of its own bytes to come: gc removes the rows
     * using it, and it goes with the last of them */
    base_hex(1, 2, hex);
    damage_base(hex, NULL);
    int64_t total = stored_bytes(s);
    assert_int_equal(sj_store_gc(s, -1, true, &r), SJ_OK);
    assert_int_equal(r.corrupt_removed, 3);
    assert_int_equal(r.bytes_freed, total - count_sql(path, "SELECT stored_size FROM artifacts") -
                                        count_sql(path, "SELECT stored_size FROM bases"));
    assert_int_equal(n_bases(), 1);
    expect_plan(s, 2, 0, 1);
    sj_store_close(s);
}

static void test_export_import_and_old_schema(void **state) {
    (void)state;
    sj_store *s = open_max(0);
    for (int64_t e = 1; e <= 4; e++) put_plan(s, 1, 0, e);
    put_plan(s, 2, 0, 1);
    int64_t total = stored_bytes(s), n;
    char exp[160], hex[65];
    /* an import puts the rows again, making their bases anew */
    s = store_export_reimport(s, 5, exp);
    for (int64_t e = 1; e <= 4; e++) expect_plan(s, 1, 0, e);
    expect_plan(s, 2, 0, 1);
    assert_int_equal(n_bases(), 2);
    assert_int_equal(stored_bytes(s), total);

    /* a row whose base fails its check is left out of an export */
    base_hex(2, 1, hex);
    damage_base(hex, NULL);
    assert_int_equal(sj_store_export(s, exp, NULL, &n), SJ_OK);
    assert_int_equal(n, 4);
    sj_store_close(s);

    /* a version-2 store (before bases) is rebuilt: its rows are gone */
    s = store_open_older(2, "DROP TABLE bases", 4);
    assert_int_equal(get_plan(s, 1, 0, 1), SJ_E_NOT_FOUND);
    put_plan(s, 1, 0, 1);
    expect_plan(s, 1, 0, 1);
    assert_int_equal(n_bases(), 1);
    sj_store_close(s);
}

/* --- one process reads while others put and remove rows --- */

#define CHURN_ROWS 4

static sj_status put_row(sj_store *s, int64_t extent) {
    static plan p;
    make_plan(&p, 1, 0, extent);
    sj_store_key k = key_of(1, 0, extent);
    return sj_store_put(s, &k, p.bytes, PLAN_BYTES);
}
static sj_status get_row(sj_store *s, int64_t extent) { return get_plan(s, 1, 0, extent); }

static void test_reads_while_others_put_and_remove(void **state) {
    (void)state;
    sj_store *s = open_max(0);
    store_churn_both_ways(s, CHURN_ROWS, put_row, get_row);
    int64_t checked, bad;
    assert_int_equal(sj_store_verify(s, NULL, NULL, &checked, &bad), SJ_OK);
    assert_int_equal(checked, CHURN_ROWS);
    assert_int_equal(bad, 0);
    /* no base is left without a row using it */
    assert_int_equal(count_sql(path, "SELECT count(*) FROM bases WHERE key NOT IN (SELECT base_key FROM artifacts "
                                     "WHERE base_key IS NOT NULL)"),
                     0);
    sj_store_close(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_rows_alike_share_one_base, store_fixture_fresh),
        cmocka_unit_test_setup(test_graphs_and_shapes_get_bases_of_their_own, store_fixture_fresh),
        cmocka_unit_test_setup(test_base_outlives_the_row_it_was_made_of, store_fixture_fresh),
        cmocka_unit_test_setup(test_damaged_base, store_fixture_fresh),
        cmocka_unit_test_setup(test_export_import_and_old_schema, store_fixture_fresh),
        cmocka_unit_test_setup(test_reads_while_others_put_and_remove, store_fixture_fresh),
    };
    return cmocka_run_group_tests(tests, setup, store_fixture_teardown);
}
