/* What the store test programs (test_store, test_store_parts,
 * test_store_base) share: a context, a scratch folder holding the store
 * file at `path` (each test starting from no store at all), the key of a
 * graph at an extent, opening the store there, plain SQLite counts and
 * damage on the file, a collector of what verify reports, and gets in this process while
 * child processes remove and put rows (store_churn_both_ways: the rows of
 * one graph, put in both orders). Include after <cmocka.h>.
 *
 *   static int setup(void **state) { return store_fixture_setup("test_x", "s/store.db"); }
 *   cmocka_unit_test_setup(test_y, store_fixture_fresh)   // the group: setup, store_fixture_teardown
 */
#ifndef SJ_TEST_STORE_FIXTURE_H
#define SJ_TEST_STORE_FIXTURE_H

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shapejit/store.h"
#include "tests/test_util.h"

static sj_ctx *ctx;
static char dir[64];
static char path[128];
static char store_fixture_top[96]; /* the folder below dir the store file is in */

/* The store file at dir/rel; a test's store_fixture_fresh removes rel's
 * first folder. */
static inline int store_fixture_setup(const char *tag, const char *rel) {
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return -1;
    if (!scratch_dir_create(dir, sizeof dir, tag)) return -1;
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    snprintf(store_fixture_top, sizeof store_fixture_top, "%s/%.*s", dir, (int)strcspn(rel, "/"), rel);
    return 0;
}
static inline int store_fixture_teardown(void **state) {
    (void)state;
    remove_tree(dir);
    sj_ctx_destroy(ctx);
    return 0;
}
static inline int store_fixture_fresh(void **state) {
    (void)state;
    remove_tree(store_fixture_top);
    return 0;
}

/* Graph `graph` (its hash made of the number) at `extent`, for one target
 * and toolchain. */
static inline sj_store_key store_key(int graph, int64_t extent) {
    sj_store_key k;
    memset(&k, 0, sizeof k);
    for (int i = 0; i < 32; i++) k.graph_hash[i] = (uint8_t)(graph * 31 + i);
    k.extent = extent;
    k.target_triple = "x86_64-pc-linux-gnu";
    k.target_cpu = "znver3";
    k.artifact_version = 1;
    k.shapejit_version = "0.1.0";
    k.compiler_version = "llvm-19.1.7";
    return k;
}

/* The store at p, hits touching rows every time; stops the test when it
 * does not open. */
static inline sj_store *store_open_at(const char *p, int64_t max_bytes) {
    sj_store_config cfg;
    sj_store_config_init(&cfg);
    cfg.path = p;
    cfg.max_bytes = max_bytes;
    cfg.touch_interval_ms = 0;
    sj_store *s = NULL;
    if (sj_store_open(ctx, &cfg, &s) != SJ_OK) fail_msg("open %s: %s", p, sj_ctx_last_error(ctx));
    return s;
}

/* A read's answer st with its bytes (got, n; got was set to non-NULL
 * before the call): on a hit they must be want's len bytes (else the test
 * stops, naming what) and are freed; on a miss got must be left NULL. */
static inline sj_status read_check(sj_status st, void *got, size_t n, const void *want, size_t len,
                                   const char *what) {
    if (st != SJ_OK) {
        assert_null(got);
        return st;
    }
    if (n != len || memcmp(got, want, n) != 0) fail_msg("%s: wrong bytes", what);
    sj_free(ctx, got);
    return SJ_OK;
}

/* sj_store_get of k: its status, the bytes checked (read_check). */
static inline sj_status store_get_check(sj_store *s, const sj_store_key *k, const void *want, size_t len) {
    void *got = (void *)&got;
    size_t n = 0;
    sj_status st = sj_store_get(s, k, &got, &n);
    char what[64];
    snprintf(what, sizeof what, "get at extent %lld", (long long)k->extent);
    return read_check(st, got, n, want, len, what);
}

/* The first column of sql's first row, read with a plain connection. */
static inline int64_t count_sql(const char *db_path, const char *sql) {
    sqlite3 *db;
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK) fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    return n;
}

/* Runs sql on the store file with a plain connection (tampering). */
static inline void raw_sql(const char *sql) {
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) fail_msg("%s: %s", sql, err);
    sqlite3_close(db);
}

/* Flips one bit of the middle byte of the blob of the one row of `table`
 * that `where` (SQL) names. */
static inline void flip_blob(const char *table, const char *where) {
    char sql[256];
    sqlite3 *db;
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    snprintf(sql, sizeof sql, "SELECT blob FROM %s WHERE %s", table, where);
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK) fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    int n = sqlite3_column_bytes(q, 0);
    assert_true(n > 0);
    uint8_t *b = malloc((size_t)n);
    memcpy(b, sqlite3_column_blob(q, 0), (size_t)n);
    sqlite3_finalize(q);
    b[n / 2] ^= 0x10;
    snprintf(sql, sizeof sql, "UPDATE %s SET blob = ?1 WHERE %s", table, where);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
    sqlite3_bind_blob(q, 1, b, n, SQLITE_STATIC);
    assert_int_equal(sqlite3_step(q), SQLITE_DONE);
    assert_int_equal(sqlite3_changes(db), 1);
    sqlite3_finalize(q);
    sqlite3_close(db);
    free(b);
}

/* What sj_store_verify or an import reported, in order: each row's graph
 * (as store_key numbers it), extent and why. */
typedef struct problems {
    int n;
    int graphs[16];
    int64_t extents[16];
    char why[16][400];
} problems;
static inline void problem(void *user, const sj_store_entry *e, const char *why) {
    problems *p = user;
    assert_true(p->n < 16);
    p->graphs[p->n] = e->key.graph_hash[0] / 31;
    p->extents[p->n] = e->key.extent;
    snprintf(p->why[p->n++], sizeof p->why[0], "%s", why);
}

/* Runs sql (what schema version `old` lacked dropped; NULL: nothing) on
 * the store file and marks it version `old`, then opens it: an older
 * layout is rebuilt, so it holds no row and version `now` (this
 * shapejit's). */
static inline sj_store *store_open_older(int old, const char *sql, int now) {
    char set[64];
    if (sql) raw_sql(sql);
    snprintf(set, sizeof set, "UPDATE sj_schema SET version = %d", old);
    raw_sql(set);
    sj_store *s = store_open_at(path, 0);
    assert_int_equal(count_sql(path, "SELECT count(*) FROM artifacts"), 0);
    assert_int_equal(count_sql(path, "SELECT version FROM sj_schema"), now);
    return s;
}

/* Exports every row of s to `exp` (store_fixture_top/export.sjs), which
 * must come to n records, closes s, and imports the file into a new store
 * at path (every record taken), which is returned open. */
static inline sj_store *store_export_reimport(sj_store *s, int64_t n, char exp[160]) {
    snprintf(exp, 160, "%s/export.sjs", store_fixture_top);
    int64_t written, imported, rejected;
    assert_int_equal(sj_store_export(s, exp, NULL, &written), SJ_OK);
    assert_int_equal(written, n);
    sj_store_close(s);
    remove_sqlite_files(path);
    s = store_open_at(path, 0);
    assert_int_equal(sj_store_import(s, exp, &imported, &rejected), SJ_OK);
    assert_int_equal(imported, n);
    assert_int_equal(rejected, 0);
    return s;
}

/* --- gets in this process while children remove and put rows --- */

/* A child's puts of all its rows (s opened on its own context). */
typedef sj_status (*store_put_rows_fn)(sj_store *s);

/* Forks a child that opens the store at path and, `rounds` times, takes
 * every row away when `removes` (sj_store_rm of each of keys in even
 * rounds, gc to nothing in odd ones, every other time removing corrupt
 * rows first) and puts them back with put_rows. It exits 0, or 1 naming
 * the failure on stderr. */
static inline pid_t store_churn(int rounds, bool removes, const sj_store_key *keys, int n_keys,
                                store_put_rows_fn put_rows) {
    pid_t kid = fork();
    assert_true(kid >= 0);
    if (kid > 0) return kid;
    sj_ctx *c;
    if (sj_ctx_create(NULL, &c) != SJ_OK) _exit(2);
    sj_store_config cfg;
    sj_store_config_init(&cfg);
    cfg.path = path;
    sj_store *s;
    if (sj_store_open(c, &cfg, &s) != SJ_OK) _exit(3);
    for (int i = 0; i < rounds; i++) {
        sj_status st = SJ_OK;
        sj_store_gc_result r;
        if (removes && i % 2) st = sj_store_gc(s, 0, i % 4 == 1, &r);
        for (int k = 0; st == SJ_OK && removes && i % 2 == 0 && k < n_keys; k++) st = sj_store_rm(s, &keys[k], NULL);
        if (st == SJ_OK) st = put_rows(s);
        if (st != SJ_OK) {
            fprintf(stderr, "churn round %d: %s\n", i, sj_ctx_last_error(c));
            _exit(1);
        }
    }
    sj_store_close(s);
    sj_ctx_destroy(c);
    _exit(0);
}

/* This process's i-th get: true on a hit (its bytes checked), false on
 * SJ_E_NOT_FOUND; anything else stops the test. */
typedef bool (*store_read_fn)(sj_store *s, int i);

/* Calls read until every child has exited (at most max_reads times: no
 * clock), waits for them and stops the test unless each exited 0. Returns
 * the reads made. */
static inline int store_read_while(sj_store *s, const pid_t *kids, int n_kids, int max_reads, store_read_fn read) {
    int ws[8] = {0}, left = n_kids, i = 0;
    bool done[8] = {false};
    assert_true(n_kids <= 8);
    for (; i < max_reads && left > 0; i++) {
        read(s, i);
        for (int k = 0; k < n_kids && i % 32 == 0; k++)
            if (!done[k] && waitpid(kids[k], &ws[k], WNOHANG) == kids[k]) done[k] = true, left--;
    }
    for (int k = 0; k < n_kids; k++) {
        if (!done[k]) assert_int_equal(waitpid(kids[k], &ws[k], 0), kids[k]);
        if (!WIFEXITED(ws[k]) || WEXITSTATUS(ws[k]) != 0)
            fail_msg("churning process %d ended with status %d", k, ws[k]);
    }
    return i;
}

/* --- rows put both ways by two processes while this one reads them --- */

/* Puts the row of graph 1 at `extent` (the test's bytes for it). */
typedef sj_status (*store_put_row_fn)(sj_store *s, int64_t extent);
/* Gets it: SJ_OK with its bytes checked, or the status. */
typedef sj_status (*store_get_row_fn)(sj_store *s, int64_t extent);

static struct {
    store_put_row_fn put;
    store_get_row_fn get;
    int rows;
} store_both;

static inline sj_status store_both_put(sj_store *s, bool up) {
    sj_status st = SJ_OK;
    for (int64_t i = 1; st == SJ_OK && i <= store_both.rows; i++) st = store_both.put(s, up ? i : store_both.rows + 1 - i);
    return st;
}
static inline sj_status store_both_up(sj_store *s) { return store_both_put(s, true); }
static inline sj_status store_both_down(sj_store *s) { return store_both_put(s, false); }
static inline bool store_both_read(sj_store *s, int i) {
    sj_status st = store_both.get(s, 1 + i % store_both.rows);
    /* one snapshot per get: never a row whose base or parts are half gone */
    if (st != SJ_OK && st != SJ_E_NOT_FOUND) fail_msg("read %d: %s (%d)", i, sj_ctx_last_error(ctx), (int)st);
    return st == SJ_OK;
}

/* Puts the rows of graph 1 at extents 1..n (n <= 8) with put, then forks
 * two children that take them away and put them back 100 times each
 * (store_churn), one in rising extent order and one in falling, so each
 * end's row is put first (it makes the bases, or places the parts others
 * are compressed against), while this process gets them with get; stops
 * the test on a get that is neither a hit (its bytes checked) nor a miss,
 * or on a child that failed. Afterwards every row reads. */
static inline void store_churn_both_ways(sj_store *s, int n, store_put_row_fn put, store_get_row_fn get) {
    assert_true(n >= 1 && n <= 8);
    store_both.put = put;
    store_both.get = get;
    store_both.rows = n;
    assert_int_equal(store_both_up(s), SJ_OK);
    sj_store_key keys[8];
    for (int i = 0; i < n; i++) keys[i] = store_key(1, i + 1);
    pid_t kids[2] = {store_churn(100, true, keys, n, store_both_up), store_churn(100, false, keys, n, store_both_down)};
    assert_true(store_read_while(s, kids, 2, 100000, store_both_read) > 0);
    for (int64_t e = 1; e <= n; e++) assert_int_equal(get(s, e), SJ_OK);
}

#endif
