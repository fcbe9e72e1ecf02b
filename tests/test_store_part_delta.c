/* Parts compressed against parts in the artifact store (issue #33): a
 * kernel compiled at another bucket extent is nearly the same bytes, so a
 * part is kept as a small frame against a similar stored part of its
 * graph (its reference) or against an earlier part of the same put.
 * Round trips; a reference outliving the rows placing it (rm, eviction,
 * gc) and going with the last part compressed against it, the stored
 * bytes counted once; a damaged or missing reference a miss for every
 * part and row depending on it, named by verify and sj_store_get_part,
 * repaired by a put; a reference kept plain (no chains); named parts; an
 * older schema rebuilt; export and import; gets in one process while
 * others put and remove rows. The file is checked with plain SQLite
 * queries beside the API. */
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
    return store_fixture_setup("test_store_part_delta", "s/store.db");
}
static sj_store *open_max(int64_t max_bytes) { return store_open_at(path, max_bytes); }

/* --- kernels compiled at bucket extents --- */

/* Kernel families: 1 and 2 differ by extent (their bytes carry it),
 * SHARED compiles alike at every extent. */
#define SHARED 9
#define KERNEL_LEN(fam) ((size_t)2000 + (size_t)(fam) * 300)

/* Kernel `fam` at `extent`: incompressible bytes fixed by the family,
 * the extent written every 128 bytes (as immediates: strides, bounds),
 * so two extents of one family are nearly the same bytes. */
static void kernel_fill(int fam, int64_t extent, uint8_t *b) {
    uint32_t x = (uint32_t)fam * 2654435761u + 17;
    for (size_t i = 0; i < KERNEL_LEN(fam); i++) {
        x = x * 1664525u + 1013904223u;
        b[i] = (uint8_t)(x >> 24);
    }
    if (fam == SHARED) return;
    for (size_t i = 0; i + 8 <= KERNEL_LEN(fam); i += 128)
        for (int j = 0; j < 8; j++) b[i + (size_t)j] = (uint8_t)((uint64_t)(extent * 977 + (int64_t)i) >> (8 * j));
}
static void kernel_key(int fam, int64_t extent, uint8_t key[32]) {
    memset(key, 0xa5, 32);
    key[0] = (uint8_t)fam;
    for (int j = 0; j < 8; j++) key[1 + j] = fam == SHARED ? 0 : (uint8_t)((uint64_t)extent >> (8 * j));
}
static void kernel_hex(int fam, int64_t extent, char hex[65]) {
    uint8_t key[32];
    kernel_key(fam, extent, key);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", key[i]);
}

/* A bucket's artifact: inline bytes, then its kernels (families fams[],
 * at extent ext[]) with inline bytes after each, named as parts. */
typedef struct art {
    uint8_t bytes[16384];
    size_t len;
    sj_store_part parts[4];
    int n_parts;
} art;

static void make_art_of(art *a, int64_t extent, const int *fams, const int64_t *ext, int n) {
    a->len = 0;
    a->n_parts = n;
    for (int i = 0; i <= n; i++) {
        for (size_t j = 0; j < 60; j++) a->bytes[a->len++] = (uint8_t)(extent * 3 + i * 5 + (int)(j % 11));
        if (i == n) break;
        sj_store_part *p = &a->parts[i];
        p->offset = a->len;
        p->len = KERNEL_LEN(fams[i]);
        kernel_key(fams[i], ext[i], p->key);
        kernel_fill(fams[i], ext[i], a->bytes + a->len);
        a->len += p->len;
    }
}

/* The bucket at `extent`: kernels SHARED, 1 and 2, at that extent. */
static void make_art(art *a, int64_t extent) {
    make_art_of(a, extent, (int[]){SHARED, 1, 2}, (int64_t[]){extent, extent, extent}, 3);
}

static void put_art(sj_store *s, int graph, int64_t extent, const art *a) {
    sj_store_key k = store_key(graph, extent);
    sj_status st = sj_store_put_parts(s, &k, a->bytes, a->len, a->parts, a->n_parts);
    if (st != SJ_OK) fail_msg("put %d/%lld: %s", graph, (long long)extent, sj_ctx_last_error(ctx));
}
static void put_at(sj_store *s, int64_t extent) {
    static art a;
    make_art(&a, extent);
    put_art(s, 1, extent, &a);
}

/* The row's status; its bytes checked when found. */
static sj_status get_at(sj_store *s, int64_t extent) {
    static art want;
    make_art(&want, extent);
    sj_store_key k = store_key(1, extent);
    return store_get_check(s, &k, want.bytes, want.len);
}
static void expect_at(sj_store *s, int64_t extent) {
    if (get_at(s, extent) != SJ_OK) fail_msg("get %lld: %s", (long long)extent, sj_ctx_last_error(ctx));
}

/* sj_store_get_part of kernel fam at extent: its status, bytes checked. */
static sj_status get_kernel(sj_store *s, int fam, int64_t extent) {
    static uint8_t want[8192];
    uint8_t key[32];
    kernel_fill(fam, extent, want);
    kernel_key(fam, extent, key);
    void *got = (void *)&got;
    size_t n = 0;
    sj_status st = sj_store_get_part(s, key, &got, &n);
    return read_check(st, got, n, want, (size_t)KERNEL_LEN(fam), "get_part");
}

/* --- the file, read and changed with plain SQLite --- */

/* "key = x'...'" for kernel fam at extent. */
static void where_kernel(int fam, int64_t extent, char where[80]) {
    char hex[65];
    kernel_hex(fam, extent, hex);
    snprintf(where, 80, "key = x'%s'", hex);
}

/* The parts column `col` (an SQL expression) of kernel fam at extent. */
static int64_t kernel_sql(int fam, int64_t extent, const char *col) {
    char where[80], sql[256];
    where_kernel(fam, extent, where);
    snprintf(sql, sizeof sql, "SELECT %s FROM parts WHERE %s", col, where);
    return count_sql(path, sql);
}

/* Whether kernel fam at extent is stored against kernel rfam at rext. */
static bool against(int fam, int64_t extent, int rfam, int64_t rext) {
    char hex[65], sql[96];
    kernel_hex(rfam, rext, hex);
    snprintf(sql, sizeof sql, "coalesce(dict_key = x'%s', 0)", hex);
    return kernel_sql(fam, extent, sql) == 1;
}

static int64_t n_parts(void) { return count_sql(path, "SELECT count(*) FROM parts"); }
static int64_t n_deltas(void) { return count_sql(path, "SELECT count(*) FROM parts WHERE dict_key IS NOT NULL"); }

static int64_t stored_bytes(sj_store *s) {
    sj_store_stats st;
    assert_int_equal(sj_store_stats_get(s, &st), SJ_OK);
    return st.stored_bytes;
}

/* What every change must leave: each part's reference stored and plain,
 * no part kept that no row places and no part is compressed against, and
 * the stored bytes each part counted once. */
static void expect_whole(sj_store *s) {
    assert_int_equal(count_sql(path, "SELECT count(*) FROM parts p WHERE dict_key IS NOT NULL AND NOT EXISTS "
                                     "(SELECT 1 FROM parts d WHERE d.key = p.dict_key AND d.dict_key IS NULL)"),
                     0);
    assert_int_equal(count_sql(path, "SELECT count(*) FROM parts p WHERE NOT EXISTS (SELECT 1 FROM artifact_parts r "
                                     "WHERE r.part_key = p.key) AND NOT EXISTS (SELECT 1 FROM parts d WHERE "
                                     "d.dict_key = p.key)"),
                     0);
    assert_int_equal(stored_bytes(s), count_sql(path, "SELECT (SELECT coalesce(sum(stored_size), 0) FROM artifacts) + "
                                                      "(SELECT coalesce(sum(stored_size), 0) FROM parts) + "
                                                      "(SELECT coalesce(sum(stored_size), 0) FROM bases)"));
    assert_int_equal(count_sql(path, "SELECT count(*) FROM parts WHERE stored_size <> length(blob)"), 0);
}

static void expect_verify(sj_store *s, int64_t checked, int64_t bad, problems *p) {
    int64_t c, b;
    assert_int_equal(sj_store_verify(s, p ? problem : NULL, p, &c, &b), SJ_OK);
    assert_int_equal(c, checked);
    assert_int_equal(b, bad);
}

/* --- tests --- */

static void test_near_duplicates_round_trip(void **state) {
    (void)state;
    sj_store *s = open_max(0);
    for (int64_t e = 1; e <= 32; e *= 2) put_at(s, e);
    for (int64_t e = 1; e <= 32; e *= 2) expect_at(s, e);
    /* the first bucket's kernels are plain (nothing like them before);
     * each later extent's against a stored one of its family */
    assert_int_equal(n_parts(), 1 + 2 * 6);
    assert_int_equal(n_deltas(), 2 * 5);
    assert_int_equal(kernel_sql(1, 1, "dict_key IS NULL"), 1);
    assert_int_equal(kernel_sql(SHARED, 1, "dict_key IS NULL"), 1);
    for (int64_t e = 2; e <= 32; e *= 2) {
        assert_true(against(1, e, 1, 1));
        assert_true(against(2, e, 2, 1));
        /* a fraction of the plain frame (the kernel, incompressible) */
        assert_true(kernel_sql(1, e, "stored_size") * 4 < (int64_t)KERNEL_LEN(1));
        sj_status st = get_kernel(s, 2, e);
        if (st != SJ_OK) fail_msg("kernel 2 at %lld: %s", (long long)e, sj_ctx_last_error(ctx));
    }
    expect_whole(s);
    expect_verify(s, 6, 0, NULL);
    /* the ladder's parts take about two kernels' bytes and a bit, not 13 */
    int64_t parts_bytes = count_sql(path, "SELECT sum(stored_size) FROM parts");
    assert_true(parts_bytes < (int64_t)(KERNEL_LEN(SHARED) + KERNEL_LEN(1) + KERNEL_LEN(2)) * 3 / 2);
    /* a row put again keeps its parts as they are */
    int64_t before = stored_bytes(s);
    put_at(s, 8);
    assert_int_equal(stored_bytes(s), before);
    expect_at(s, 8);

    /* unrelated kernels stay plain: kernel 3 is like none stored */
    static art a;
    make_art_of(&a, 64, (int[]){3}, (int64_t[]){64}, 1);
    put_art(s, 1, 64, &a);
    assert_int_equal(kernel_sql(3, 64, "dict_key IS NULL"), 1);
    /* another graph's parts are no candidates */
    make_art(&a, 64);
    put_art(s, 2, 64, &a);
    assert_int_equal(kernel_sql(1, 64, "dict_key IS NULL"), 1);
    sj_store_close(s);

    /* two of one put's own new parts: the later against the earlier */
    store_fixture_fresh(NULL);
    s = open_max(0);
    make_art_of(&a, 1, (int[]){1, 2, 1}, (int64_t[]){1, 1, 2}, 3);
    put_art(s, 1, 1, &a);
    assert_true(against(1, 2, 1, 1));
    assert_int_equal(kernel_sql(1, 1, "dict_key IS NULL"), 1);
    sj_store_key k = store_key(1, 1);
    assert_int_equal(store_get_check(s, &k, a.bytes, a.len), SJ_OK);
    assert_int_equal(get_kernel(s, 1, 2), SJ_OK);
    expect_whole(s);
    sj_store_close(s);
}

static void test_reference_outlives_its_rows(void **state) {
    (void)state;
    sj_store *s = open_max(0);
    for (int64_t e = 1; e <= 4; e++) put_at(s, e);
    /* rm the row placing the references: they stay for the parts
     * compressed against them, and every other row reads */
    sj_store_key k = store_key(1, 1);
    int64_t removed;
    assert_int_equal(sj_store_rm(s, &k, &removed), SJ_OK);
    assert_int_equal(removed, 1);
    for (int64_t e = 2; e <= 4; e++) expect_at(s, e);
    assert_int_equal(kernel_sql(1, 1, "count(*)"), 1);
    assert_int_equal(count_sql(path, "SELECT count(*) FROM parts p WHERE NOT EXISTS (SELECT 1 FROM artifact_parts r "
                                     "WHERE r.part_key = p.key)"),
                     2);
    assert_int_equal(get_kernel(s, 1, 1), SJ_OK); /* still a part: found by its key */
    expect_whole(s);
    expect_verify(s, 3, 0, NULL);

    /* eviction frees what goes and no more: the stored bytes fall by
     * bytes_freed; the references stay while a part needs them */
    sj_store_gc_result r;
    for (int64_t e = 2; e <= 3; e++) {
        int64_t total = stored_bytes(s);
        assert_int_equal(sj_store_gc(s, total - 1, false, &r), SJ_OK);
        assert_int_equal(r.evicted, 1);
        assert_int_equal(stored_bytes(s), total - r.bytes_freed);
        assert_int_equal(get_at(s, e), SJ_E_NOT_FOUND);
        expect_whole(s);
    }
    expect_at(s, 4);
    assert_int_equal(kernel_sql(1, 1, "count(*)"), 1);
    /* the references go with the last part compressed against them */
    int64_t total = stored_bytes(s);
    assert_int_equal(sj_store_gc(s, 0, false, &r), SJ_OK);
    assert_int_equal(r.evicted, 1);
    assert_int_equal(r.bytes_freed, total);
    assert_int_equal(n_parts(), 0);
    assert_int_equal(stored_bytes(s), 0);

    /* a put's eviction counts each part once: under a bound of the
     * store's bytes now, the oldest rows go (1 first: its references stay
     * for the rows left), and what stays reads */
    for (int64_t e = 1; e <= 4; e++) put_at(s, e);
    int64_t four = stored_bytes(s);
    sj_store_close(s);
    s = open_max(four);
    put_at(s, 5);
    assert_int_equal(get_at(s, 1), SJ_E_NOT_FOUND);
    expect_at(s, 5);
    int64_t rows = count_sql(path, "SELECT count(*) FROM artifacts");
    assert_true(rows >= 2);
    for (int64_t e = 6 - rows; e <= 5; e++) expect_at(s, e);
    assert_true(stored_bytes(s) <= four);
    assert_int_equal(kernel_sql(1, 1, "count(*)"), 1);
    expect_whole(s);
    /* rm by prefix takes everything */
    char prefix[8];
    snprintf(prefix, sizeof prefix, "%02x", 31);
    assert_int_equal(sj_store_rm_prefix(s, prefix, &removed), SJ_OK);
    assert_int_equal(removed, rows);
    assert_int_equal(n_parts(), 0);
    assert_int_equal(stored_bytes(s), 0);
    sj_store_close(s);
}

/* Rows 1..4 are corrupt naming kernel 1 at 1 (the reference of kernel 1
 * at 2..4) with `says`, so is sj_store_get_part of kernel 1 at 3, and
 * verify names it for each row. */
static void expect_reference_broken(sj_store *s, const char *says) {
    char hex[65];
    kernel_hex(1, 1, hex);
    for (int64_t e = 1; e <= 4; e++) {
        assert_int_equal(get_at(s, e), SJ_E_CORRUPT);
        assert_error_contains(ctx, hex);
        assert_error_contains(ctx, says);
    }
    assert_int_equal(get_kernel(s, 1, 3), SJ_E_CORRUPT);
    assert_error_contains(ctx, hex);
    assert_error_contains(ctx, "its reference part");
    assert_int_equal(get_kernel(s, 2, 3), SJ_OK); /* kernel 2's reference is sound */
    problems p = {0};
    expect_verify(s, 4, 4, &p);
    for (int i = 0; i < 4; i++)
        if (!strstr(p.why[i], hex)) fail_msg("verify's reason '%s' does not name part %s", p.why[i], hex);
}

static void test_damaged_reference(void **state) {
    (void)state;
    sj_store *s = open_max(0);
    for (int64_t e = 1; e <= 4; e++) put_at(s, e);
    char where[80];
    where_kernel(1, 1, where);

    /* a flipped byte: a miss for every row and part depending on it */
    flip_blob("parts", where);
    expect_reference_broken(s, "zstd");
    /* a put of the row placing it rewrites it: all read */
    put_at(s, 1);
    for (int64_t e = 1; e <= 4; e++) expect_at(s, e);
    expect_verify(s, 4, 0, NULL);

    /* its digest alone changed */
    char sql[256];
    snprintf(sql, sizeof sql, "UPDATE parts SET digest = zeroblob(32) WHERE %s", where);
    raw_sql(sql);
    expect_reference_broken(s, "BLAKE3 digest mismatch");
    put_at(s, 1);
    expect_at(s, 3);

    /* compressed against another part itself (no sound store holds a
     * chain): refused as damage */
    char other[65];
    kernel_hex(2, 1, other);
    snprintf(sql, sizeof sql, "UPDATE parts SET dict_key = x'%s' WHERE %s", other, where);
    raw_sql(sql);
    assert_int_equal(get_at(s, 3), SJ_E_CORRUPT);
    assert_error_contains(ctx, "itself compressed against another part");
    put_at(s, 1); /* rewritten plain */
    assert_int_equal(kernel_sql(1, 1, "dict_key IS NULL"), 1);
    expect_at(s, 3);
    expect_whole(s);

    /* missing: a put of a row depending on it writes its own part against
     * another reference or plain; the others stay misses until the row
     * placing it is put again */
    snprintf(sql, sizeof sql, "DELETE FROM parts WHERE %s", where);
    raw_sql(sql);
    expect_reference_broken(s, "missing from the parts table");
    put_at(s, 3);
    expect_at(s, 3);
    assert_false(against(1, 3, 1, 1));
    assert_int_equal(get_at(s, 2), SJ_E_CORRUPT);
    put_at(s, 1);
    for (int64_t e = 1; e <= 4; e++) expect_at(s, e);
    expect_whole(s);
    sj_store_close(s);
}

static void test_reference_stays_plain(void **state) {
    (void)state;
    sj_store *s = open_max(0);
    put_at(s, 1);
    put_at(s, 2); /* kernel 1 at 2 against kernel 1 at 1 */
    assert_true(against(1, 2, 1, 1));
    /* with kernel 1 at 1 damaged, the put at 3 finds no sound reference
     * for kernel 1 at 3 but kernel 1 at 2, itself compressed: plain */
    char where[80];
    where_kernel(1, 1, where);
    flip_blob("parts", where);
    put_at(s, 3);
    assert_int_equal(kernel_sql(1, 3, "dict_key IS NULL"), 1);
    /* the put repairing kernel 1 at 1 finds kernel 1 at 3 to compress it
     * against, but a part is compressed against it: it is written plain */
    put_at(s, 1);
    assert_int_equal(kernel_sql(1, 1, "dict_key IS NULL"), 1);
    assert_true(against(1, 2, 1, 1));
    for (int64_t e = 1; e <= 3; e++) expect_at(s, e);
    expect_whole(s);
    expect_verify(s, 3, 0, NULL);

    /* a damaged reference's dependents gone and it with them: gc of the
     * corrupt rows leaves nothing of it */
    flip_blob("parts", where);
    sj_store_gc_result r;
    int64_t total = stored_bytes(s);
    assert_int_equal(sj_store_gc(s, -1, true, &r), SJ_OK);
    assert_int_equal(r.corrupt_removed, 2); /* rows 1 and 2; 3 is plain */
    assert_int_equal(stored_bytes(s), total - r.bytes_freed);
    assert_int_equal(kernel_sql(1, 1, "count(*)"), 0);
    expect_at(s, 3);
    expect_whole(s);
    sj_store_close(s);
}

static void test_named_parts(void **state) {
    (void)state;
    sj_store *s = open_max(0);
    for (int64_t e = 1; e <= 3; e++) put_at(s, e);
    uint8_t names[3][32], keys[3][32];
    for (int e = 1; e <= 3; e++) {
        memset(names[e - 1], 0x3c, 32);
        names[e - 1][0] = (uint8_t)e;
        kernel_key(1, e, keys[e - 1]);
    }
    assert_int_equal(sj_store_name_parts(s, (const uint8_t(*)[32])names, (const uint8_t(*)[32])keys, 3), SJ_OK);
    static uint8_t want[4096];
    for (int e = 1; e <= 3; e++) {
        void *got;
        size_t n;
        assert_int_equal(sj_store_get_named_part(s, names[e - 1], &got, &n), SJ_OK);
        kernel_fill(1, e, want);
        assert_int_equal(n, KERNEL_LEN(1));
        assert_memory_equal(got, want, n);
        sj_free(ctx, got);
    }
    /* the reference outlives its row, and its name finds it */
    sj_store_key k = store_key(1, 1);
    assert_int_equal(sj_store_rm(s, &k, NULL), SJ_OK);
    void *got;
    size_t n;
    assert_int_equal(sj_store_get_named_part(s, names[0], &got, &n), SJ_OK);
    sj_free(ctx, got);
    assert_int_equal(sj_store_get_named_part(s, names[2], &got, &n), SJ_OK);
    sj_free(ctx, got);
    /* all rows gone: every name is a miss */
    sj_store_gc_result r;
    assert_int_equal(sj_store_gc(s, 0, false, &r), SJ_OK);
    for (int e = 0; e < 3; e++) assert_int_equal(sj_store_get_named_part(s, names[e], &got, &n), SJ_E_NOT_FOUND);
    sj_store_close(s);
}

static void test_export_import_and_old_schema(void **state) {
    (void)state;
    sj_store *s = open_max(0);
    for (int64_t e = 1; e <= 4; e++) put_at(s, e);
    int64_t total = stored_bytes(s), deltas = n_deltas(), n;
    char exp[160];
    /* an import puts the rows in the same order: the same parts against
     * the same references */
    s = store_export_reimport(s, 4, exp);
    for (int64_t e = 1; e <= 4; e++) expect_at(s, e);
    assert_int_equal(n_deltas(), deltas);
    assert_int_equal(stored_bytes(s), total);
    /* a row whose part's reference is damaged is left out of an export */
    char where[80];
    where_kernel(2, 1, where);
    flip_blob("parts", where);
    assert_int_equal(sj_store_export(s, exp, NULL, &n), SJ_OK);
    assert_int_equal(n, 0);
    sj_store_close(s);

    /* a version-3 store (before parts against parts) is rebuilt */
    s = store_open_older(3, NULL, 4);
    put_at(s, 1);
    put_at(s, 2);
    expect_at(s, 2);
    assert_int_equal(n_deltas(), 2);
    sj_store_close(s);
}

/* --- one process reads while others put and remove rows --- */

#define CHURN_ROWS 4

static sj_status put_row(sj_store *s, int64_t extent) {
    static art a;
    make_art(&a, extent);
    sj_store_key k = store_key(1, extent);
    return sj_store_put_parts(s, &k, a.bytes, a.len, a.parts, a.n_parts);
}

static void test_reads_while_others_put_and_remove(void **state) {
    (void)state;
    sj_store *s = open_max(0);
    store_churn_both_ways(s, CHURN_ROWS, put_row, get_at);
    expect_verify(s, CHURN_ROWS, 0, NULL);
    assert_true(n_deltas() > 0);
    expect_whole(s);
    sj_store_close(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_near_duplicates_round_trip, store_fixture_fresh),
        cmocka_unit_test_setup(test_reference_outlives_its_rows, store_fixture_fresh),
        cmocka_unit_test_setup(test_damaged_reference, store_fixture_fresh),
        cmocka_unit_test_setup(test_reference_stays_plain, store_fixture_fresh),
        cmocka_unit_test_setup(test_named_parts, store_fixture_fresh),
        cmocka_unit_test_setup(test_export_import_and_old_schema, store_fixture_fresh),
        cmocka_unit_test_setup(test_reads_while_others_put_and_remove, store_fixture_fresh),
    };
    return cmocka_run_group_tests(tests, setup, store_fixture_teardown);
}
