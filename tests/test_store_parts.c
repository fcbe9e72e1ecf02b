/* Shared parts in the artifact store (issue #33): a part several rows hold
 * is kept and counted once, a damaged or missing part is a miss for every
 * row holding it and a put repairs it for all of them, parts go with the
 * last row holding them (rm, eviction, gc), export and import keep the
 * sharing, sj_store_get_part, refused part lists, and gets in one process
 * while another removes and puts rows. The files are checked with plain
 * SQLite queries beside the API. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <signal.h>
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
    return store_fixture_setup("test_store_parts", "s/store.db");
}
static sj_store *open_store(int64_t max_bytes) { return store_open_at(path, max_bytes); }

/* --- artifacts made of kernels --- */

#define KERNEL_BYTES(id) ((size_t)3000 + (size_t)(id) * 100)

/* Kernel `id`'s bytes: incompressible, so sharing shows in the sizes. */
static void kernel_fill(int id, uint8_t *b) {
    uint32_t x = (uint32_t)id * 2654435761u + 7;
    for (size_t i = 0; i < KERNEL_BYTES(id); i++) {
        x = x * 1664525u + 1013904223u;
        b[i] = (uint8_t)(x >> 24);
    }
}
static void kernel_key(int id, uint8_t key[32]) {
    for (int i = 0; i < 32; i++) key[i] = (uint8_t)(id * 7 + i);
}

/* An artifact: a head, then each kernel with inline bytes after it (all
 * inline bytes a function of the graph), the kernels named as parts. */
typedef struct art {
    uint8_t bytes[32768];
    size_t len;
    sj_store_part parts[4];
    int n_parts;
} art;

static void make_art(art *a, int graph, const int *kernels, int n) {
    a->len = 0;
    a->n_parts = n;
    for (int i = 0; i <= n; i++) {
        size_t gap = 40 + (size_t)graph + (size_t)i;
        for (size_t j = 0; j < gap; j++) a->bytes[a->len++] = (uint8_t)(graph * 13 + i * 5 + (int)(j % 7));
        if (i == n) break;
        sj_store_part *p = &a->parts[i];
        p->offset = a->len;
        p->len = KERNEL_BYTES(kernels[i]);
        kernel_key(kernels[i], p->key);
        kernel_fill(kernels[i], a->bytes + a->len);
        a->len += p->len;
    }
}

static void put_art(sj_store *s, int graph, int64_t extent, const art *a) {
    sj_store_key k = store_key(graph, extent);
    sj_status st = sj_store_put_parts(s, &k, a->bytes, a->len, a->parts, a->n_parts);
    if (st != SJ_OK) fail_msg("put %d/%lld: %s", graph, (long long)extent, sj_ctx_last_error(ctx));
}

static void expect_art(sj_store *s, int graph, int64_t extent, const art *a) {
    sj_store_key k = store_key(graph, extent);
    void *got;
    size_t n;
    sj_status st = sj_store_get(s, &k, &got, &n);
    if (st != SJ_OK) fail_msg("get %d/%lld: %s", graph, (long long)extent, sj_ctx_last_error(ctx));
    assert_int_equal(n, a->len);
    assert_memory_equal(got, a->bytes, n);
    sj_free(ctx, got);
}

static sj_status try_get(sj_store *s, int graph, int64_t extent) {
    sj_store_key k = store_key(graph, extent);
    void *got = (void *)&got;
    size_t n;
    sj_status st = sj_store_get(s, &k, &got, &n);
    if (st == SJ_OK) sj_free(ctx, got);
    else assert_null(got);
    return st;
}

/* --- the file, read and changed with plain SQLite --- */

static int64_t n_parts_in(const char *db_path) { return count_sql(db_path, "SELECT count(*) FROM parts"); }

/* Runs sql on the store file with ?1 bound to the part key of kernel id. */
static void part_sql(int id, const char *sql) {
    sqlite3 *db;
    sqlite3_stmt *q;
    uint8_t key[32];
    kernel_key(id, key);
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK) fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    sqlite3_bind_blob(q, 1, key, 32, SQLITE_STATIC);
    assert_int_equal(sqlite3_step(q), SQLITE_DONE);
    assert_int_equal(sqlite3_changes(db), 1);
    sqlite3_finalize(q);
    sqlite3_close(db);
}

static void kernel_hex(int id, char hex[65]) {
    uint8_t key[32];
    kernel_key(id, key);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", key[i]);
}

/* Flips one bit in the middle of kernel id's stored frame. */
static void damage_part(int id) {
    char hex[65], where[80];
    kernel_hex(id, hex);
    snprintf(where, sizeof where, "key = x'%s'", hex);
    flip_blob("parts", where);
}


/* --- tests --- */

static void test_shared_part_kept_once(void **state) {
    (void)state;
    static art a, b, c;
    make_art(&a, 1, (int[]){1, 2}, 2); /* kernel 1 shared, 2 its own */
    make_art(&b, 2, (int[]){1, 3}, 2);
    make_art(&c, 3, (int[]){0}, 0); /* no parts: a plain put */
    sj_store *s = open_store(0);
    put_art(s, 1, 8, &a);
    put_art(s, 2, 8, &b);
    put_art(s, 3, 8, &c);
    put_art(s, 1, 8, &a); /* again: the parts are kept, not doubled */
    expect_art(s, 1, 8, &a);
    expect_art(s, 2, 8, &b);
    expect_art(s, 3, 8, &c);
    assert_int_equal(n_parts_in(path), 3);
    assert_int_equal(count_sql(path, "SELECT count(*) FROM artifact_parts"), 4);
    sj_store_stats st;
    assert_int_equal(sj_store_stats_get(s, &st), SJ_OK);
    assert_int_equal(st.entries, 3);
    assert_int_equal(st.raw_bytes, (int64_t)(a.len + b.len + c.len));
    assert_int_equal(st.stored_bytes, count_sql(path, "SELECT (SELECT sum(stored_size) FROM artifacts) + "
                                                      "(SELECT sum(stored_size) FROM parts)"));
    /* the same rows put whole keep kernel 1 twice */
    sj_store_config cfg;
    sj_store_config_init(&cfg);
    sj_store *whole;
    assert_int_equal(sj_store_open(ctx, &cfg, &whole), SJ_OK);
    const art *arts[] = {&a, &b, &c};
    for (int i = 0; i < 3; i++) {
        sj_store_key k = store_key(i + 1, 8);
        assert_int_equal(sj_store_put(whole, &k, arts[i]->bytes, arts[i]->len), SJ_OK);
    }
    sj_store_stats ws;
    assert_int_equal(sj_store_stats_get(whole, &ws), SJ_OK);
    if (st.stored_bytes + (int64_t)KERNEL_BYTES(1) * 9 / 10 > ws.stored_bytes)
        fail_msg("shared: %lld stored bytes, whole: %lld; kernel 1 is %zu bytes", (long long)st.stored_bytes,
                 (long long)ws.stored_bytes, KERNEL_BYTES(1));
    sj_store_close(whole);
    /* a row put again without parts lets its own parts go */
    sj_store_key k = store_key(2, 8);
    assert_int_equal(sj_store_put(s, &k, b.bytes, b.len), SJ_OK);
    expect_art(s, 2, 8, &b);
    assert_int_equal(n_parts_in(path), 2); /* kernel 3 went, 1 stays for row 1 */
    sj_store_close(s);
    /* and an in-memory store holds parts too */
    assert_int_equal(sj_store_open(ctx, &cfg, &s), SJ_OK);
    put_art(s, 1, 8, &a);
    expect_art(s, 1, 8, &a);
    sj_store_close(s);
}

static void test_damaged_part_repaired_by_one_put(void **state) {
    (void)state;
    static art a, b, c;
    make_art(&a, 1, (int[]){1, 2}, 2);
    make_art(&b, 2, (int[]){2, 1}, 2);
    make_art(&c, 3, (int[]){3}, 1);
    sj_store *s = open_store(0);
    put_art(s, 1, 8, &a);
    put_art(s, 2, 8, &b);
    put_art(s, 3, 8, &c);
    damage_part(1);
    char hex[65];
    kernel_hex(1, hex);
    assert_int_equal(try_get(s, 1, 8), SJ_E_CORRUPT);
    assert_error_contains(ctx, hex);
    assert_error_contains(ctx, "is corrupt: part");
    assert_int_equal(try_get(s, 2, 8), SJ_E_CORRUPT);
    assert_error_contains(ctx, hex);
    expect_art(s, 3, 8, &c);
    problems p = {0};
    int64_t checked, bad;
    assert_int_equal(sj_store_verify(s, problem, &p, &checked, &bad), SJ_OK);
    assert_int_equal(checked, 3);
    assert_int_equal(bad, 2);
    assert_int_equal(p.graphs[0], 1);
    assert_int_equal(p.graphs[1], 2);
    for (int i = 0; i < 2; i++)
        if (!strstr(p.why[i], hex)) fail_msg("verify's reason '%s' does not name part %s", p.why[i], hex);
    sj_store_stats st;
    assert_int_equal(sj_store_stats_get(s, &st), SJ_OK);
    assert_int_equal(st.corrupt, 2);
    /* a recompile of either row puts the part again: both read again */
    put_art(s, 2, 8, &b);
    expect_art(s, 1, 8, &a);
    expect_art(s, 2, 8, &b);
    assert_int_equal(sj_store_verify(s, NULL, NULL, &checked, &bad), SJ_OK);
    assert_int_equal(bad, 0);
    assert_int_equal(n_parts_in(path), 3);

    /* the part's digest alone changed: its bytes no longer match it */
    part_sql(3, "UPDATE parts SET digest = zeroblob(32) WHERE key = ?1");
    assert_int_equal(try_get(s, 3, 8), SJ_E_CORRUPT);
    assert_error_contains(ctx, "BLAKE3 digest mismatch (its bytes changed)");
    /* gc removes the corrupt row and the damaged part with it */
    sj_store_gc_result r;
    assert_int_equal(sj_store_gc(s, -1, true, &r), SJ_OK);
    assert_int_equal(r.corrupt_removed, 1);
    assert_true(r.bytes_freed > (int64_t)KERNEL_BYTES(3) * 9 / 10);
    assert_int_equal(n_parts_in(path), 2);
    assert_int_equal(try_get(s, 3, 8), SJ_E_NOT_FOUND);
    expect_art(s, 1, 8, &a);
    sj_store_close(s);
}

static void test_missing_part(void **state) {
    (void)state;
    static art a;
    make_art(&a, 1, (int[]){1, 2}, 2);
    sj_store *s = open_store(0);
    put_art(s, 1, 8, &a);
    part_sql(2, "DELETE FROM parts WHERE key = ?1");
    char hex[65];
    kernel_hex(2, hex);
    assert_int_equal(try_get(s, 1, 8), SJ_E_CORRUPT);
    assert_error_contains(ctx, hex);
    assert_error_contains(ctx, "missing from the parts table");
    problems p = {0};
    int64_t checked, bad;
    assert_int_equal(sj_store_verify(s, problem, &p, &checked, &bad), SJ_OK);
    assert_int_equal(bad, 1);
    if (!strstr(p.why[0], hex) || !strstr(p.why[0], "missing"))
        fail_msg("verify's reason '%s' does not name the missing part %s", p.why[0], hex);
    /* gc takes the row, its references and its other part */
    sj_store_gc_result r;
    assert_int_equal(sj_store_gc(s, -1, true, &r), SJ_OK);
    assert_int_equal(r.corrupt_removed, 1);
    assert_int_equal(n_parts_in(path), 0);
    assert_int_equal(count_sql(path, "SELECT count(*) FROM artifact_parts"), 0);
    /* a recompile puts it back whole */
    put_art(s, 1, 8, &a);
    expect_art(s, 1, 8, &a);
    sj_store_close(s);
}

static void test_parts_go_with_their_last_row(void **state) {
    (void)state;
    static art a, b, c, d;
    make_art(&a, 1, (int[]){1, 2}, 2); /* kernel 1 shared by a and b */
    make_art(&b, 2, (int[]){1, 3}, 2);
    make_art(&c, 3, (int[]){4}, 1);
    make_art(&d, 4, (int[]){1, 5}, 2);
    sj_store *s = open_store(0);
    put_art(s, 1, 8, &a);
    put_art(s, 2, 8, &b);
    assert_int_equal(n_parts_in(path), 3);
    /* rm: a's own part goes, the shared one stays for b */
    sj_store_key k = store_key(1, 8);
    int64_t removed;
    assert_int_equal(sj_store_rm(s, &k, &removed), SJ_OK);
    assert_int_equal(removed, 1);
    assert_int_equal(n_parts_in(path), 2);
    expect_art(s, 2, 8, &b);
    char prefix[8];
    snprintf(prefix, sizeof prefix, "%02x", 2 * 31);
    assert_int_equal(sj_store_rm_prefix(s, prefix, &removed), SJ_OK);
    assert_int_equal(removed, 1);
    assert_int_equal(n_parts_in(path), 0);
    assert_int_equal(count_sql(path, "SELECT count(*) FROM artifact_parts"), 0);

    /* eviction: room for two rows; the least recently used goes with
     * the parts only it held, shared ones stay */
    put_art(s, 1, 8, &a);
    put_art(s, 2, 8, &b);
    sj_store_stats st;
    assert_int_equal(sj_store_stats_get(s, &st), SJ_OK);
    int64_t two = st.stored_bytes;
    sj_store_close(s);
    s = open_store(two + 1000);
    expect_art(s, 2, 8, &b); /* b is newer than a now */
    put_art(s, 3, 8, &c);    /* over the bound: a goes, with kernel 2 */
    assert_int_equal(try_get(s, 1, 8), SJ_E_NOT_FOUND);
    assert_int_equal(n_parts_in(path), 3); /* 1 (b's too), 3, 4 */
    assert_int_equal(sj_store_stats_get(s, &st), SJ_OK);
    assert_int_equal(st.evictions, 1);
    assert_true(st.stored_bytes <= two + 1000);
    expect_art(s, 3, 8, &c); /* c is newer than b now */
    put_art(s, 4, 8, &d);    /* b goes, with kernel 3; kernel 1 stays for d */
    assert_int_equal(try_get(s, 2, 8), SJ_E_NOT_FOUND);
    expect_art(s, 3, 8, &c);
    expect_art(s, 4, 8, &d);
    assert_int_equal(n_parts_in(path), 3); /* 4, 1, 5 */

    /* gc to nothing frees every stored byte, parts included */
    assert_int_equal(sj_store_stats_get(s, &st), SJ_OK);
    sj_store_gc_result r;
    assert_int_equal(sj_store_gc(s, 0, false, &r), SJ_OK);
    assert_int_equal(r.evicted, 2);
    assert_int_equal(r.bytes_freed, st.stored_bytes);
    assert_int_equal(n_parts_in(path), 0);
    assert_int_equal(count_sql(path, "SELECT count(*) FROM artifact_parts"), 0);
    assert_int_equal(sj_store_stats_get(s, &st), SJ_OK);
    assert_int_equal(st.stored_bytes, 0);
    sj_store_close(s);
}

static void test_export_import_keeps_sharing(void **state) {
    (void)state;
    static art a, b, c;
    make_art(&a, 1, (int[]){1, 2}, 2);
    make_art(&b, 2, (int[]){1, 2, 3}, 3);
    make_art(&c, 3, (int[]){0}, 0);
    sj_store *s = open_store(0);
    put_art(s, 1, 8, &a);
    put_art(s, 2, 8, &b);
    put_art(s, 3, 8, &c);
    char exp[160], other[160];
    snprintf(exp, sizeof exp, "%s/s/export.sjs", dir);
    snprintf(other, sizeof other, "%s/s/other.db", dir);
    int64_t n, imported, rejected;
    assert_int_equal(sj_store_export(s, exp, NULL, &n), SJ_OK);
    assert_int_equal(n, 3);
    sj_store_stats st;
    assert_int_equal(sj_store_stats_get(s, &st), SJ_OK);
    sj_store_close(s);

    sj_store *t = store_open_at(other, 0);
    assert_int_equal(sj_store_import(t, exp, &imported, &rejected), SJ_OK);
    assert_int_equal(imported, 3);
    assert_int_equal(rejected, 0);
    expect_art(t, 1, 8, &a);
    expect_art(t, 2, 8, &b);
    expect_art(t, 3, 8, &c);
    assert_int_equal(n_parts_in(other), 3);
    assert_int_equal(count_sql(other, "SELECT count(*) FROM artifact_parts"), 5);
    sj_store_stats ts;
    assert_int_equal(sj_store_stats_get(t, &ts), SJ_OK);
    assert_int_equal(ts.stored_bytes, st.stored_bytes);
    sj_store_close(t);

    /* A record whose part runs past its bytes is rejected naming it; the
     * others are imported. Row 1's record comes first: magic, "SJR2", the
     * key, raw size and digest, the part count, then its first part. */
    sj_store_key k = store_key(1, 8);
    long at = 8 + 4 + 32 + 8 + 32 + 4 + 8 + 32 + 4;
    const char *strs[] = {k.target_triple, k.target_cpu, "", k.shapejit_version, k.compiler_version};
    for (int i = 0; i < 5; i++) at += 4 + (long)strlen(strs[i]);
    FILE *f = fopen(exp, "r+b");
    assert_non_null(f);
    uint8_t far[8] = {0xff, 0xff, 0, 0, 0, 0, 0, 0}; /* offset 65535 of a ~6 kB artifact */
    assert_int_equal(fseek(f, at, SEEK_SET), 0);
    assert_int_equal(fwrite(far, 1, 8, f), 8);
    fclose(f);
    remove_sqlite_files(other);
    t = store_open_at(other, 0);
    problems p = {0};
    assert_int_equal(sj_store_import_report(t, exp, problem, &p, &imported, &rejected), SJ_OK);
    assert_int_equal(imported, 2);
    assert_int_equal(rejected, 1);
    if (!strstr(p.why[0], "part 0 (offset 65535") || !strstr(p.why[0], "runs past the end"))
        fail_msg("the rejection says '%s'", p.why[0]);
    assert_int_equal(try_get(t, 1, 8), SJ_E_NOT_FOUND);
    expect_art(t, 2, 8, &b);
    sj_store_close(t);

    /* a row whose part fails its check is left out of an export */
    s = open_store(0);
    damage_part(2); /* a's and b's */
    assert_int_equal(sj_store_export(s, exp, NULL, &n), SJ_OK);
    assert_int_equal(n, 1);
    sj_store_close(s);

    /* an export written before parts existed ("SJR1" records) still imports */
    char seed[512];
    snprintf(seed, sizeof seed, "%s/fuzz/corpus/fuzz_store_import/mlp_one_row.sjstore", SJ_SOURCE_DIR);
    sj_store_config cfg;
    sj_store_config_init(&cfg);
    assert_int_equal(sj_store_open(ctx, &cfg, &t), SJ_OK);
    assert_int_equal(sj_store_import(t, seed, &imported, &rejected), SJ_OK);
    assert_int_equal(imported, 1);
    assert_int_equal(rejected, 0);
    int64_t checked, bad;
    assert_int_equal(sj_store_verify(t, NULL, NULL, &checked, &bad), SJ_OK);
    assert_int_equal(checked, 1);
    assert_int_equal(bad, 0);
    sj_store_close(t);
}

static void test_get_part(void **state) {
    (void)state;
    static art a;
    make_art(&a, 1, (int[]){1, 2}, 2);
    sj_store *s = open_store(0);
    put_art(s, 1, 8, &a);
    uint8_t key[32];
    kernel_key(2, key);
    void *got;
    size_t n;
    assert_int_equal(sj_store_get_part(s, key, &got, &n), SJ_OK);
    assert_int_equal(n, KERNEL_BYTES(2));
    assert_memory_equal(got, a.bytes + a.parts[1].offset, n);
    sj_free(ctx, got);
    char hex[65];
    kernel_hex(9, hex);
    kernel_key(9, key);
    got = (void *)&got;
    assert_int_equal(sj_store_get_part(s, key, &got, &n), SJ_E_NOT_FOUND);
    assert_null(got);
    assert_error_contains(ctx, hex);
    damage_part(1);
    kernel_key(1, key);
    kernel_hex(1, hex);
    got = (void *)&got;
    assert_int_equal(sj_store_get_part(s, key, &got, &n), SJ_E_CORRUPT);
    assert_null(got);
    assert_error_contains(ctx, hex);
    assert_error_contains(ctx, "is corrupt");
    assert_int_equal(sj_store_get_part(s, NULL, &got, &n), SJ_E_INVALID_ARG);
    sj_store_close(s);
}

static void test_bad_part_lists_refused(void **state) {
    (void)state;
    static art a;
    make_art(&a, 1, (int[]){1, 2}, 2);
    sj_store *s = open_store(0);
    sj_store_key k = store_key(1, 8);
    const sj_store_part p0 = a.parts[0], p1 = a.parts[1];
    sj_store_part dup = p1;
    memcpy(dup.key, p0.key, 32);
    char end_past[64], overlap[64];
    snprintf(end_past, sizeof end_past, "runs past the end of the %zu bytes", a.len);
    snprintf(overlap, sizeof overlap, "starts before part 0 ends (at %llu)",
             (unsigned long long)(p0.offset + p0.len));
    const struct {
        sj_store_part parts[2];
        int n;
        bool null_parts;
        const char *says[2];
    } cases[] = {
        {{p0, {.offset = p1.offset, .len = a.len - p1.offset + 1}}, 2, false, {"part 1 (offset", end_past}},
        {{p0, {.offset = UINT64_MAX - 2, .len = 8}},
         2,
         false,
         {"part 1 (offset 18446744073709551613, len 8)", end_past}},
        {{p0, {.offset = p0.offset + 1, .len = 4}}, 2, false, {"part 1", overlap}},
        {{p1, p0}, 2, false, {"part 1", "increasing offset order"}},
        {{p0, {.offset = p1.offset, .len = 0}}, 2, false, {"part 1", "has len 0"}},
        {{p0, p1}, -1, false, {"n_parts -1 is negative", "store put"}},
        {{p0, p1}, 2, true, {"parts is NULL with n_parts 2", "store put"}},
        {{p0, dup}, 2, false, {"parts 0 and 1 have the same key but different bytes", "len 3100"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const sj_store_part *parts = cases[i].null_parts ? NULL : cases[i].parts;
        assert_int_equal(sj_store_put_parts(s, &k, a.bytes, a.len, parts, cases[i].n), SJ_E_INVALID_ARG);
        for (int j = 0; j < 2; j++) assert_error_contains(ctx, cases[i].says[j]);
        assert_int_equal(try_get(s, 1, 8), SJ_E_NOT_FOUND);
        assert_int_equal(n_parts_in(path), 0);
        assert_int_equal(count_sql(path, "SELECT count(*) FROM artifacts"), 0);
    }
    /* NULL parts with none is a plain put; the same key twice with the
     * same bytes is one part */
    assert_int_equal(sj_store_put_parts(s, &k, a.bytes, a.len, NULL, 0), SJ_OK);
    expect_art(s, 1, 8, &a);
    static art twice;
    make_art(&twice, 2, (int[]){1, 1}, 2);
    put_art(s, 2, 8, &twice);
    expect_art(s, 2, 8, &twice);
    assert_int_equal(n_parts_in(path), 1);
    sj_store_close(s);
}

/* --- one process reads while another removes and puts rows --- */

#define READ_ROWS 3
static art reader_arts[READ_ROWS];

static sj_status put_reader_arts(sj_store *s) {
    sj_status st = SJ_OK;
    for (int g = 0; st == SJ_OK && g < READ_ROWS; g++) {
        sj_store_key k = store_key(g + 1, 8);
        const art *a = &reader_arts[g];
        st = sj_store_put_parts(s, &k, a->bytes, a->len, a->parts, a->n_parts);
    }
    return st;
}

static bool read_art(sj_store *s, int i) {
    int g = i % READ_ROWS;
    sj_store_key k = store_key(g + 1, 8);
    void *got = NULL;
    size_t n = 0;
    sj_status st = sj_store_get(s, &k, &got, &n);
    /* one snapshot per get: never a row whose parts are half gone */
    if (st != SJ_OK && st != SJ_E_NOT_FOUND) fail_msg("read %d: %s (%d)", i, sj_ctx_last_error(ctx), (int)st);
    if (st == SJ_OK && (n != reader_arts[g].len || memcmp(got, reader_arts[g].bytes, n) != 0))
        fail_msg("read %d: wrong bytes", i);
    sj_free(ctx, got);
    return st == SJ_OK;
}

static void test_reads_while_another_process_removes(void **state) {
    (void)state;
    for (int g = 0; g < READ_ROWS; g++) make_art(&reader_arts[g], g + 1, (int[]){1, 2 + g, 5}, 3);
    sj_store *s = open_store(0);
    assert_int_equal(put_reader_arts(s), SJ_OK);
    sj_store_key keys[READ_ROWS];
    for (int g = 0; g < READ_ROWS; g++) keys[g] = store_key(g + 1, 8);
    pid_t kid = store_churn(150, true, keys, READ_ROWS, put_reader_arts);
    assert_true(store_read_while(s, &kid, 1, 200000, read_art) > 0);
    int64_t checked, bad;
    assert_int_equal(sj_store_verify(s, NULL, NULL, &checked, &bad), SJ_OK);
    assert_int_equal(checked, READ_ROWS);
    assert_int_equal(bad, 0);
    assert_int_equal(n_parts_in(path), 2 + READ_ROWS);
    sj_store_close(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_shared_part_kept_once, store_fixture_fresh),
        cmocka_unit_test_setup(test_damaged_part_repaired_by_one_put, store_fixture_fresh),
        cmocka_unit_test_setup(test_missing_part, store_fixture_fresh),
        cmocka_unit_test_setup(test_parts_go_with_their_last_row, store_fixture_fresh),
        cmocka_unit_test_setup(test_export_import_keeps_sharing, store_fixture_fresh),
        cmocka_unit_test_setup(test_get_part, store_fixture_fresh),
        cmocka_unit_test_setup(test_bad_part_lists_refused, store_fixture_fresh),
        cmocka_unit_test_setup(test_reads_while_another_process_removes, store_fixture_fresh),
    };
    return cmocka_run_group_tests(tests, setup, store_fixture_teardown);
}
