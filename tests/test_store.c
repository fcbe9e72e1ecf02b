/* The artifact store: round trips, persistence, permissions, WAL, every
 * kind of corruption read as a miss, refused files, schema versions,
 * eviction, the maintenance calls, and several processes at once
 * (including writers killed at random points). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shapejit/store.h"
#include "tests/store_fixture.h"

static int setup(void **state) {
    (void)state;
    return store_fixture_setup("test_store", "sub/dir/store.db");
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static sj_store_key make_key(int graph, int64_t extent) {
    sj_store_key k = store_key(graph, extent);
    k.options_hash[0] = 7;
    k.target_features = "+avx2,+fma";
    return k;
}

/* Deterministic, partly compressible bytes for (seed, len). */
static void fill(uint8_t *b, size_t n, unsigned seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        b[i] = (i % 8 < 5) ? (uint8_t)(i / 64) : (uint8_t)(x >> 24);
    }
}

static sj_store *open_store(int64_t max_bytes) { return store_open_at(path, max_bytes); }

static void put_n(sj_store *s, int graph, int64_t extent, size_t len) {
    uint8_t *b = malloc(len);
    fill(b, len, (unsigned)(graph * 1000 + extent));
    sj_store_key k = make_key(graph, extent);
    assert_int_equal(sj_store_put(s, &k, b, len), SJ_OK);
    free(b);
}

static void expect_get(sj_store *s, int graph, int64_t extent, size_t len) {
    sj_store_key k = make_key(graph, extent);
    void *got;
    size_t n;
    sj_status st = sj_store_get(s, &k, &got, &n);
    if (st != SJ_OK) fail_msg("get %d/%lld: %s", graph, (long long)extent, sj_ctx_last_error(ctx));
    assert_int_equal(n, len);
    uint8_t *want = malloc(len);
    fill(want, len, (unsigned)(graph * 1000 + extent));
    assert_memory_equal(got, want, len);
    free(want);
    sj_free(ctx, got);
}

static sj_status try_get(sj_store *s, int graph, int64_t extent) {
    sj_store_key k = make_key(graph, extent);
    void *got = (void *)&got;
    size_t n;
    sj_status st = sj_store_get(s, &k, &got, &n);
    if (st == SJ_OK) sj_free(ctx, got);
    else assert_null(got);
    return st;
}

static void test_put_get_restart_stats(void **state) {
    (void)state;
    sj_store *s = open_store(0);
    assert_true(sj_store_persistent(s));
    put_n(s, 1, 8, 1000);
    put_n(s, 1, 16, 70000);
    put_n(s, 2, 8, 0);
    expect_get(s, 1, 8, 1000);
    expect_get(s, 1, 16, 70000);
    expect_get(s, 2, 8, 0);
    assert_int_equal(try_get(s, 3, 8), SJ_E_NOT_FOUND);
    /* every key component separates rows */
    sj_store_key k = make_key(1, 8);
    k.target_cpu = "skylake";
    void *b;
    size_t n;
    assert_int_equal(sj_store_get(s, &k, &b, &n), SJ_E_NOT_FOUND);
    /* overwrite in place: still one row */
    put_n(s, 1, 8, 1000);
    sj_store_stats st;
    assert_int_equal(sj_store_stats_get(s, &st), SJ_OK);
    assert_int_equal(st.hits, 3);
    assert_int_equal(st.misses, 2);
    assert_int_equal(st.puts, 4);
    assert_int_equal(st.corrupt, 0);
    assert_int_equal(st.entries, 3);
    assert_int_equal(st.raw_bytes, 71000);
    assert_true(st.stored_bytes > 0 && st.stored_bytes < 71000);
    sj_store_close(s);
    sj_store_close(NULL);

    s = open_store(0); /* a restart */
    expect_get(s, 1, 16, 70000);
    assert_int_equal(sj_store_stats_get(s, &st), SJ_OK);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.entries, 3);
    sj_store_close(s);
}

static void test_files_and_wal(void **state) {
    (void)state;
    sj_store *s = open_store(0);
    put_n(s, 1, 8, 100);
    struct stat sb;
    char p[160];
    snprintf(p, sizeof p, "%s/sub", dir);
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0700);
    snprintf(p, sizeof p, "%s/sub/dir", dir);
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0700);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    snprintf(p, sizeof p, "%s-sjlock", path);
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    snprintf(p, sizeof p, "%s-wal", path);
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(sb.st_mode & 0077, 0);

    sqlite3 *db;
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(q, 0), "wal");
    sqlite3_finalize(q);
    sqlite3_close(db);
    sj_store_close(s);

    /* in memory: works, keeps nothing */
    sj_store_config cfg;
    sj_store_config_init(&cfg);
    assert_int_equal(sj_store_open(ctx, &cfg, &s), SJ_OK);
    assert_false(sj_store_persistent(s));
    put_n(s, 1, 8, 100);
    expect_get(s, 1, 8, 100);
    sj_store_close(s);
}

static void expect_corrupt(sj_store *s, int graph, int64_t extent, const char *why) {
    sj_store_key k = make_key(graph, extent);
    void *b = (void *)&b;
    size_t n;
    assert_int_equal(sj_store_get(s, &k, &b, &n), SJ_E_CORRUPT);
    assert_null(b);
    if (!strstr(sj_ctx_last_error(ctx), why)) fail_msg("expected '%s' in '%s'", why, sj_ctx_last_error(ctx));
}

/* Flips one bit of the middle byte of the blob of the row at `extent`
 * (a row compressed against its base has a blob of some 20 bytes). */
static void flip_byte(int64_t extent) {
    char where[64];
    snprintf(where, sizeof where, "extent = %lld", (long long)extent);
    flip_blob("artifacts", where);
}

static void test_corruption_is_a_miss(void **state) {
    (void)state;
    sj_store *s = open_store(0);
    put_n(s, 1, 8, 5000);
    put_n(s, 1, 16, 5000);
    put_n(s, 1, 32, 5000);
    put_n(s, 1, 64, 5000);
    put_n(s, 1, 128, 5000);
    /* a flipped byte in the middle of the frame */
    flip_byte(8);
    expect_corrupt(s, 1, 8, "corrupt");
    /* truncated */
    raw_sql("UPDATE artifacts SET blob = substr(blob, 1, length(blob) - 7) WHERE extent = 16");
    expect_corrupt(s, 1, 16, "truncated");
    /* blob (with the base it was compressed against), digest and size
     * swapped in from another key's row */
    raw_sql("UPDATE artifacts SET (blob, base_key, digest, raw_size, stored_size) = "
            "(SELECT blob, base_key, digest, raw_size, stored_size FROM artifacts WHERE extent = 64) "
            "WHERE extent = 32");
    expect_corrupt(s, 1, 32, "BLAKE3");
    /* the digest alone changed */
    raw_sql("UPDATE artifacts SET digest = zeroblob(32) WHERE extent = 64");
    expect_corrupt(s, 1, 64, "BLAKE3");
    /* a declared size beyond the cap, and one the frame disagrees with */
    raw_sql("UPDATE artifacts SET raw_size = 5001 WHERE extent = 128");
    expect_corrupt(s, 1, 128, "frame claims 5000");
    raw_sql("UPDATE artifacts SET raw_size = 1 << 40 WHERE extent = 128");
    expect_corrupt(s, 1, 128, "declared size");
    sj_store_stats st;
    assert_int_equal(sj_store_stats_get(s, &st), SJ_OK);
    assert_int_equal(st.corrupt, 6);
    assert_int_equal(st.hits, 0);

    int64_t checked, bad;
    assert_int_equal(sj_store_verify(s, NULL, NULL, &checked, &bad), SJ_OK);
    assert_int_equal(checked, 5);
    assert_int_equal(bad, 5);
    /* the caller recompiles and overwrites: good again */
    put_n(s, 1, 8, 5000);
    put_n(s, 1, 16, 5000);
    expect_get(s, 1, 8, 5000);
    expect_get(s, 1, 16, 5000);
    sj_store_gc_result r;
    assert_int_equal(sj_store_gc(s, -1, true, &r), SJ_OK);
    assert_int_equal(r.corrupt_removed, 3);
    assert_int_equal(r.evicted, 0);
    assert_int_equal(sj_store_verify(s, NULL, NULL, &checked, &bad), SJ_OK);
    assert_int_equal(checked, 2);
    assert_int_equal(bad, 0);
    sj_store_close(s);
}

static void test_artifact_cap(void **state) {
    (void)state;
    sj_store *s = open_store(0);
    put_n(s, 1, 8, 4000);
    sj_store_close(s);
    sj_store_config cfg;
    sj_store_config_init(&cfg);
    cfg.path = path;
    cfg.max_artifact_bytes = 1000;
    assert_int_equal(sj_store_open(ctx, &cfg, &s), SJ_OK);
    /* a frame claiming more than the cap is refused before decoding */
    expect_corrupt(s, 1, 8, "outside [0, 1000]");
    uint8_t big[1001] = {0};
    sj_store_key k = make_key(1, 8);
    assert_int_equal(sj_store_put(s, &k, big, sizeof big), SJ_E_INVALID_ARG);
    sj_store_close(s);
}

static void test_refused_files(void **state) {
    (void)state;
    sj_store *s = open_store(0); /* makes the directories */
    sj_store_close(s);
    remove_sqlite_files(path);
    write_text_file(path, "this is a text file, certainly not a database of any kind\n");
    sj_store_config cfg;
    sj_store_config_init(&cfg);
    cfg.path = path;
    s = (sj_store *)&s;
    assert_int_equal(sj_store_open(ctx, &cfg, &s), SJ_E_CORRUPT);
    assert_null(s);
    assert_error_contains(ctx, "not an SQLite database");
    assert_error_contains(ctx, path);
    /* configured to run without persistence instead */
    cfg.fallback_to_memory = true;
    assert_int_equal(sj_store_open(ctx, &cfg, &s), SJ_OK);
    assert_false(sj_store_persistent(s));
    assert_non_null(strstr(sj_store_warning(s), "not an SQLite database"));
    put_n(s, 1, 8, 10);
    expect_get(s, 1, 8, 10);
    sj_store_close(s);
    cfg.fallback_to_memory = false;

    /* read-only */
    unlink(path);
    s = open_store(0);
    put_n(s, 1, 8, 10);
    sj_store_close(s);
    /* A read-only file opens read-only (it used to be refused, and a
     * serving process recompiled everything): gets work, writes fail
     * naming why, and nothing is written. The mode bits decide even for
     * root, so this holds whoever runs it (issue 29 item 14). */
    assert_int_equal(chmod(path, 0400), 0);
    assert_int_equal(sj_store_open(ctx, &cfg, &s), SJ_OK);
    assert_true(sj_store_persistent(s));
    assert_true(sj_store_read_only(s));
    assert_non_null(strstr(sj_store_warning(s), "read-only"));
    assert_non_null(strstr(sj_store_warning(s), "mode 0400"));
    expect_get(s, 1, 8, 10);
    uint8_t blob[16] = {0};
    sj_store_key k2 = make_key(2, 8);
    assert_int_equal(sj_store_put(s, &k2, blob, sizeof blob), SJ_E_IO);
    assert_error_contains(ctx, "is read-only (the store file");
    assert_error_contains(ctx, "nothing is written to it");
    int64_t removed = -1;
    sj_store_key k1 = make_key(1, 8);
    assert_int_equal(sj_store_rm(s, &k1, &removed), SJ_E_IO);
    assert_error_contains(ctx, "read-only");
    sj_store_close(s);
    assert_int_equal(chmod(path, 0600), 0);
    s = open_store(0);
    assert_false(sj_store_read_only(s));
    expect_get(s, 1, 8, 10); /* still there: the rm did not happen */
    sj_store_close(s);
    /* a read-only empty file holds no store to read */
    remove_sqlite_files(path);
    write_whole_file(path, "", 0);
    assert_int_equal(chmod(path, 0400), 0);
    assert_int_equal(sj_store_open(ctx, &cfg, &s), SJ_E_IO);
    assert_error_contains(ctx, "read-only");
    assert_error_contains(ctx, "empty");
    assert_int_equal(chmod(path, 0600), 0);

    /* an SQLite file with damaged pages: said once, as what it is, with the
     * path named once (not as a failed schema rebuild) */
    unlink(path);
    cfg.fallback_to_memory = false;
    s = open_store(0);
    for (int i = 0; i < 8; i++) put_n(s, 1, 8 << i, 3000);
    sj_store_close(s);
    size_t len;
    uint8_t *bytes = read_whole_file(path, &len);
    assert_true(len > 8192);
    memset(bytes + 4096 + 100, 0x5a, len - 4096 - 100); /* page 1 (the header) intact */
    remove_sqlite_files(path);
    write_whole_file(path, bytes, len);
    free(bytes);
    assert_int_equal(sj_store_open(ctx, &cfg, &s), SJ_E_CORRUPT);
    assert_null(s);
    assert_error_contains(ctx, "is not a valid shapejit store (database disk image is malformed");
    assert_error_contains(ctx, "remove it or use another store");
    const char *msg = sj_ctx_last_error(ctx);
    const char *first = strstr(msg, path);
    assert_non_null(first);
    assert_null(strstr(first + 1, path));
    assert_null(strstr(msg, "rebuilding"));
    cfg.fallback_to_memory = true;
    assert_int_equal(sj_store_open(ctx, &cfg, &s), SJ_OK);
    assert_false(sj_store_persistent(s));
    assert_non_null(strstr(sj_store_warning(s), "not a valid shapejit store"));
    sj_store_close(s);
    remove_sqlite_files(path);

    /* another program's SQLite database is left alone */
    unlink(path);
    raw_sql("CREATE TABLE notes(x)");
    cfg.fallback_to_memory = false;
    assert_int_equal(sj_store_open(ctx, &cfg, &s), SJ_E_UNSUPPORTED);
    assert_error_contains(ctx, "not a shapejit store");
    unlink(path);
}

static void test_schema_versions(void **state) {
    (void)state;
    sj_store *s = open_store(0);
    put_n(s, 1, 8, 10);
    sj_store_close(s);
    raw_sql("UPDATE sj_schema SET version = 99");
    sj_store_config cfg;
    sj_store_config_init(&cfg);
    cfg.path = path;
    assert_int_equal(sj_store_open(ctx, &cfg, &s), SJ_E_UNSUPPORTED);
    assert_error_contains(ctx, "schema version 99");
    /* A damaged version row is refused naming it, the rows left as they
     * were: it used to read as an older layout, which is rebuilt, and a
     * `store ls` emptied the store (issue 29 item 8). */
    static const struct {
        const char *sql, *message;
    } damaged[] = {
        {"UPDATE sj_schema SET version = 'abc'", "version row holds 'abc' (text)"},
        {"UPDATE sj_schema SET version = 0", "version row holds 0 (integer)"},
        {"UPDATE sj_schema SET version = -5", "version row holds -5 (integer)"},
        {"UPDATE sj_schema SET version = 1.5", "version row holds 1.5 (real)"},
        {"DELETE FROM sj_schema", "has no version row"},
        {"INSERT INTO sj_schema VALUES(1), (1)", "has 3 version rows"},
    };
    for (size_t i = 0; i < sizeof damaged / sizeof damaged[0]; i++) {
        /* 4: the version this shapejit writes (store/store_impl.h) */
        raw_sql("DELETE FROM sj_schema; INSERT INTO sj_schema VALUES(4)");
        raw_sql(damaged[i].sql);
        s = (sj_store *)&cfg;
        assert_int_equal(sj_store_open(ctx, &cfg, &s), SJ_E_CORRUPT);
        assert_null(s);
        assert_error_contains(ctx, path);
        assert_error_contains(ctx, damaged[i].message);
        assert_error_contains(ctx, "refusing to touch it");
        raw_sql("DELETE FROM sj_schema; INSERT INTO sj_schema VALUES(4)");
        s = open_store(0);
        expect_get(s, 1, 8, 10); /* the row is still there */
        sj_store_close(s);
    }
    /* A version-1 store (before shared parts: the artifacts table alone)
     * is rebuilt: its rows are gone (a recompile puts them again) and the
     * parts tables are there. */
    raw_sql("DROP TABLE artifact_parts; DROP TABLE parts; UPDATE sj_schema SET version = 1");
    s = open_store(0);
    assert_int_equal(try_get(s, 1, 8), SJ_E_NOT_FOUND);
    uint8_t bytes[64];
    fill(bytes, sizeof bytes, 1 * 1000 + 8); /* what expect_get(1, 8) wants */
    sj_store_part part = {.offset = 8, .len = 16, .key = {1}};
    sj_store_key k = make_key(1, 8);
    assert_int_equal(sj_store_put_parts(s, &k, bytes, sizeof bytes, &part, 1), SJ_OK);
    expect_get(s, 1, 8, sizeof bytes);
    sj_store_close(s);
}

static void test_eviction_by_last_use(void **state) {
    (void)state;
    /* the bound: room for three and a half rows */
    sj_store *s = open_store(0);
    put_n(s, 1, 1, 2000);
    sj_store_stats st;
    assert_int_equal(sj_store_stats_get(s, &st), SJ_OK);
    int64_t row = st.stored_bytes;
    sj_store_close(s);
    store_fixture_fresh(NULL);
    s = open_store(row * 7 / 2);
    put_n(s, 1, 1, 2000);
    sleep_ms(3);
    put_n(s, 1, 2, 2000);
    sleep_ms(3);
    put_n(s, 1, 3, 2000);
    sleep_ms(3);
    expect_get(s, 1, 1, 2000); /* 1 is now the most recently used */
    sleep_ms(3);
    put_n(s, 1, 4, 2000); /* over the bound: 2 goes */
    assert_int_equal(try_get(s, 1, 2), SJ_E_NOT_FOUND);
    expect_get(s, 1, 1, 2000);
    expect_get(s, 1, 3, 2000);
    expect_get(s, 1, 4, 2000);
    assert_int_equal(sj_store_stats_get(s, &st), SJ_OK);
    assert_int_equal(st.evictions, 1);
    assert_true(st.stored_bytes <= row * 7 / 2);
    /* gc to a tighter bound keeps the most recently used */
    sleep_ms(3);
    expect_get(s, 1, 3, 2000);
    sj_store_gc_result r;
    assert_int_equal(sj_store_gc(s, row * 3 / 2, false, &r), SJ_OK);
    assert_int_equal(r.evicted, 2);
    expect_get(s, 1, 3, 2000);
    assert_int_equal(try_get(s, 1, 1), SJ_E_NOT_FOUND);
    sj_store_close(s);
}

typedef struct listing {
    int n;
    int64_t extents[16];
} listing;
static int visit(void *u, const sj_store_entry *e) {
    listing *l = u;
    l->extents[l->n++] = e->key.extent;
    assert_string_equal(e->key.target_cpu, "znver3");
    assert_true(e->raw_bytes == 300 && e->stored_bytes > 0 && e->last_used_ms > 0);
    return 0;
}

typedef struct near {
    int n;
    unsigned diffs[8];
    int64_t extents[8];
} near;
static void explained(void *u, const sj_store_entry *e, unsigned differs) {
    near *r = u;
    r->extents[r->n] = e->key.extent;
    r->diffs[r->n++] = differs;
}

static void test_ls_rm_export_import_explain(void **state) {
    (void)state;
    sj_store *s = open_store(0);
    put_n(s, 1, 16, 300);
    put_n(s, 1, 8, 300);
    put_n(s, 2, 8, 300);
    listing l = {0, {0}};
    assert_int_equal(sj_store_ls(s, visit, &l), SJ_OK);
    assert_int_equal(l.n, 3);

    /* explain: same graph, another cpu -> nearest rows say "target cpu" */
    sj_store_key k = make_key(1, 8);
    k.target_cpu = "skylake";
    near r = {0, {0}, {0}};
    assert_int_equal(sj_store_explain(s, &k, 2, explained, &r), SJ_OK);
    assert_int_equal(r.n, 2);
    assert_int_equal(r.extents[0], 8);
    assert_int_equal(r.diffs[0], SJ_KEY_CPU);
    assert_int_equal(r.extents[1], 16);
    assert_int_equal(r.diffs[1], SJ_KEY_CPU | SJ_KEY_EXTENT);
    assert_string_equal(sj_store_key_component_name(SJ_KEY_CPU), "target cpu");
    k = make_key(2, 8);
    r.n = 0;
    assert_int_equal(sj_store_explain(s, &k, 1, explained, &r), SJ_OK);
    assert_int_equal(r.diffs[0], 0);

    /* export graph 1 only, remove it, import it back */
    char exp[160];
    snprintf(exp, sizeof exp, "%s/export.sjs", dir);
    char prefix[8];
    snprintf(prefix, sizeof prefix, "%02x%02x", (unsigned)(1 * 31), (unsigned)(1 * 31 + 1));
    int64_t n;
    assert_int_equal(sj_store_export(s, exp, prefix, &n), SJ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(sj_store_rm_prefix(s, prefix, &n), SJ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(try_get(s, 1, 8), SJ_E_NOT_FOUND);
    int64_t imported, rejected;
    assert_int_equal(sj_store_import(s, exp, &imported, &rejected), SJ_OK);
    assert_int_equal(imported, 2);
    assert_int_equal(rejected, 0);
    expect_get(s, 1, 8, 300);
    expect_get(s, 1, 16, 300);

    /* a damaged record is rejected, the rest imported */
    FILE *f = fopen(exp, "r+b");
    assert_non_null(f);
    fseek(f, -20, SEEK_END);
    int c = fgetc(f);
    fseek(f, -20, SEEK_END);
    fputc(c ^ 0x55, f);
    fclose(f);
    assert_int_equal(sj_store_rm_prefix(s, prefix, &n), SJ_OK);
    assert_int_equal(sj_store_import(s, exp, &imported, &rejected), SJ_OK);
    assert_int_equal(imported, 1);
    assert_int_equal(rejected, 1);
    /* not an export */
    write_text_file(exp, "nope");
    assert_int_equal(sj_store_import(s, exp, &imported, &rejected), SJ_E_PARSE);

    k = make_key(2, 8);
    assert_int_equal(sj_store_rm(s, &k, &n), SJ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(sj_store_rm_prefix(s, "xyz", &n), SJ_E_INVALID_ARG);
    assert_int_equal(sj_store_rm_prefix(s, "", &n), SJ_E_INVALID_ARG);
    sj_store_close(s);
}

/* export replaces its file by rename: a FIFO, a symlink or a folder at the
 * path is refused and left as it was (rename used to replace it: as root,
 * `store export /dev/full` replaced the device node). */
static void test_export_refuses_special_files(void **state) {
    (void)state;
    sj_store *s = open_store(0);
    put_n(s, 1, 8, 300);
    char fifo[160], target[160], link[160], folder[160];
    snprintf(fifo, sizeof fifo, "%s/fifo.sjs", dir);
    snprintf(target, sizeof target, "%s/target.txt", dir);
    snprintf(link, sizeof link, "%s/link.sjs", dir);
    snprintf(folder, sizeof folder, "%s/folder.sjs", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    write_text_file(target, "keep me");
    assert_int_equal(symlink(target, link), 0);
    assert_int_equal(mkdir(folder, 0700), 0);
    const struct {
        const char *path, *kind;
        mode_t type;
    } cases[] = {{fifo, "a FIFO", S_IFIFO}, {link, "a symlink", S_IFLNK}, {folder, "a folder", S_IFDIR}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t n = -1;
        assert_int_equal(sj_store_export(s, cases[i].path, NULL, &n), SJ_E_INVALID_ARG);
        assert_error_contains(ctx, cases[i].path);
        assert_error_contains(ctx, cases[i].kind);
        assert_int_equal(n, 0);
        struct stat sb;
        assert_int_equal(lstat(cases[i].path, &sb), 0);
        assert_int_equal(sb.st_mode & S_IFMT, cases[i].type);
    }
    char kept[16] = "";
    FILE *f = fopen(target, "r");
    assert_non_null(f);
    assert_non_null(fgets(kept, sizeof kept, f));
    fclose(f);
    assert_string_equal(kept, "keep me");
    /* a regular file there is replaced as before */
    int64_t n;
    assert_int_equal(sj_store_export(s, target, NULL, &n), SJ_OK);
    assert_int_equal(n, 1);
    sj_store_close(s);
}

/* A store in a folder reached through a symlink opens and persists (SQLite's
 * NOFOLLOW used to refuse it: "unable to open database file", and a
 * symlinked $XDG_CACHE_HOME made the default store run without
 * persistence); a symlink as the store file itself is refused, by name. */
static void test_symlinked_folders(void **state) {
    (void)state;
    char real_dir[160], link_dir[160], via[200], file_link[200];
    snprintf(real_dir, sizeof real_dir, "%s/real", dir);
    snprintf(link_dir, sizeof link_dir, "%s/linked", dir);
    snprintf(via, sizeof via, "%s/sub/s.db", link_dir);
    snprintf(file_link, sizeof file_link, "%s/file_link.db", dir);
    assert_int_equal(mkdir(real_dir, 0700), 0);
    assert_int_equal(symlink(real_dir, link_dir), 0);
    for (int round = 0; round < 2; round++) {
        sj_store_config cfg;
        sj_store_config_init(&cfg);
        cfg.path = via;
        sj_store *s = NULL;
        if (sj_store_open(ctx, &cfg, &s) != SJ_OK) fail_msg("%s", sj_ctx_last_error(ctx));
        assert_true(sj_store_persistent(s));
        if (round == 0) put_n(s, 1, 8, 300);
        else expect_get(s, 1, 8, 300); /* it persisted */
        sj_store_close(s);
    }
    struct stat sb;
    char in_real[200];
    snprintf(in_real, sizeof in_real, "%s/sub/s.db", real_dir);
    assert_int_equal(stat(in_real, &sb), 0);

    assert_int_equal(symlink(in_real, file_link), 0);
    sj_store_config cfg;
    sj_store_config_init(&cfg);
    cfg.path = file_link;
    sj_store *s = (sj_store *)&s;
    assert_int_equal(sj_store_open(ctx, &cfg, &s), SJ_E_IO);
    assert_null(s);
    assert_error_contains(ctx, "file_link.db is a symlink (refused");
}

/* An allocator that holds every thread allocating RENDEZVOUS_SIZE bytes
 * (a get's output buffer, allocated after the row is read) until a second
 * thread gets there too, or 2 s pass: two gets meet there only if neither
 * holds the store's lock while it decompresses. */
#define RENDEZVOUS_SIZE 777777

typedef struct rendezvous {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int inside, most;
} rendezvous;

static void *rv_alloc(void *user, size_t n) {
    rendezvous *r = user;
    if (n == RENDEZVOUS_SIZE) {
        pthread_mutex_lock(&r->mu);
        r->inside++;
        if (r->inside > r->most) r->most = r->inside;
        pthread_cond_broadcast(&r->cv);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 2;
        while (r->most < 2 && pthread_cond_timedwait(&r->cv, &r->mu, &until) == 0) {
        }
        r->inside--;
        pthread_mutex_unlock(&r->mu);
    }
    return malloc(n);
}
static void *rv_realloc(void *user, void *p, size_t n) { return realloc(p, n); }
static void rv_free(void *user, void *p) { free(p); }

typedef struct getter {
    sj_ctx *c;
    sj_store *s;
    sj_status st;
} getter;

static void *get_thread(void *p) {
    getter *g = p;
    sj_store_key k = make_key(1, 8);
    void *got = NULL;
    size_t n;
    g->st = sj_store_get(g->s, &k, &got, &n);
    sj_free(g->c, got);
    return NULL;
}

static void test_gets_decompress_in_parallel(void **state) {
    (void)state;
    rendezvous r = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    sj_ctx_config cc;
    sj_ctx_config_init(&cc);
    cc.allocator = (sj_allocator){rv_alloc, rv_realloc, rv_free, &r};
    sj_ctx *c;
    assert_int_equal(sj_ctx_create(&cc, &c), SJ_OK);
    sj_store_config cfg;
    sj_store_config_init(&cfg);
    cfg.path = path;
    sj_store *s;
    assert_int_equal(sj_store_open(c, &cfg, &s), SJ_OK);
    uint8_t *b = malloc(RENDEZVOUS_SIZE);
    fill(b, RENDEZVOUS_SIZE, 5);
    sj_store_key k = make_key(1, 8);
    assert_int_equal(sj_store_put(s, &k, b, RENDEZVOUS_SIZE), SJ_OK);
    free(b);
    r.inside = r.most = 0;
    getter g[2] = {{c, s, SJ_E_INTERNAL}, {c, s, SJ_E_INTERNAL}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, get_thread, &g[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    assert_int_equal(g[0].st, SJ_OK);
    assert_int_equal(g[1].st, SJ_OK);
    if (r.most < 2) fail_msg("the two gets never overlapped: one held the store's lock throughout");
    sj_store_close(s);
    sj_ctx_destroy(c);
}

/* --- several processes --- */

static void writer_loop(int seed, int rounds) {
    sj_ctx *c;
    if (sj_ctx_create(NULL, &c) != SJ_OK) _exit(3);
    sj_store_config cfg;
    sj_store_config_init(&cfg);
    cfg.path = path;
    cfg.max_bytes = 200000; /* eviction happens too */
    cfg.touch_interval_ms = 0;
    sj_store *s;
    if (sj_store_open(c, &cfg, &s) != SJ_OK) {
        fprintf(stderr, "child open: %s\n", sj_ctx_last_error(c));
        _exit(4);
    }
    uint8_t buf[20000];
    for (int i = 0; rounds < 0 || i < rounds; i++) {
        int64_t extent = 1 + (seed + i * 7) % 24;
        size_t len = 1000 + (size_t)(extent * 700);
        fill(buf, len, (unsigned)(1 * 1000 + extent));
        sj_store_key k = make_key(1, extent);
        if (sj_store_put(s, &k, buf, len) != SJ_OK) {
            fprintf(stderr, "child put: %s\n", sj_ctx_last_error(c));
            _exit(5);
        }
        void *got;
        size_t n;
        sj_status st = sj_store_get(s, &k, &got, &n);
        if (st == SJ_OK) sj_free(c, got);
        else if (st != SJ_E_NOT_FOUND) _exit(6); /* evicted by another process is fine */
    }
    sj_store_close(s);
    sj_ctx_destroy(c);
    _exit(0);
}

static void verify_clean(void) {
    sj_store *s = open_store(0);
    int64_t checked, bad;
    assert_int_equal(sj_store_verify(s, NULL, NULL, &checked, &bad), SJ_OK);
    assert_int_equal(bad, 0);
    sj_store_close(s);
    sqlite3 *db;
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(q, 0), "ok");
    sqlite3_finalize(q);
    /* one row per key */
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT count(*) FROM (SELECT 1 FROM artifacts GROUP BY graph_hash, extent, "
                                        "options_hash, target_triple, target_cpu, target_features, artifact_version, "
                                        "shapejit_version, compiler_version HAVING count(*) > 1)",
                                        -1, &q, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(q, 0), 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
}

static void test_concurrent_processes(void **state) {
    (void)state;
    sj_store_close(open_store(0));
    pid_t kids[3];
    for (int i = 0; i < 3; i++) {
        kids[i] = fork();
        assert_true(kids[i] >= 0);
        if (kids[i] == 0) writer_loop(i, 60);
    }
    for (int i = 0; i < 3; i++) {
        int ws;
        assert_int_equal(waitpid(kids[i], &ws, 0), kids[i]);
        if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) fail_msg("writer %d ended with status %d", i, ws);
    }
    verify_clean();
}

static void test_sigkill_writers(void **state) {
    (void)state;
    sj_store_close(open_store(0));
    srand(12345);
    for (int round = 0; round < 24; round++) {
        pid_t a = fork();
        assert_true(a >= 0);
        if (a == 0) writer_loop(round, -1);
        pid_t b = fork();
        assert_true(b >= 0);
        if (b == 0) writer_loop(round + 5, -1);
        sleep_ms(5 + rand() % 25);
        kill(a, SIGKILL);
        sleep_ms(rand() % 3);
        kill(b, SIGKILL);
        int ws;
        waitpid(a, &ws, 0);
        assert_true(WIFSIGNALED(ws) || (WIFEXITED(ws) && WEXITSTATUS(ws) == 0));
        waitpid(b, &ws, 0);
        assert_true(WIFSIGNALED(ws) || (WIFEXITED(ws) && WEXITSTATUS(ws) == 0));
        verify_clean();
    }
    /* and a rerun completes */
    pid_t c = fork();
    if (c == 0) writer_loop(1, 30);
    int ws;
    waitpid(c, &ws, 0);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    verify_clean();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_put_get_restart_stats, store_fixture_fresh),
        cmocka_unit_test_setup(test_files_and_wal, store_fixture_fresh),
        cmocka_unit_test_setup(test_corruption_is_a_miss, store_fixture_fresh),
        cmocka_unit_test_setup(test_artifact_cap, store_fixture_fresh),
        cmocka_unit_test_setup(test_refused_files, store_fixture_fresh),
        cmocka_unit_test_setup(test_schema_versions, store_fixture_fresh),
        cmocka_unit_test_setup(test_eviction_by_last_use, store_fixture_fresh),
        cmocka_unit_test_setup(test_ls_rm_export_import_explain, store_fixture_fresh),
        cmocka_unit_test_setup(test_export_refuses_special_files, store_fixture_fresh),
        cmocka_unit_test_setup(test_gets_decompress_in_parallel, store_fixture_fresh),
        cmocka_unit_test_setup(test_symlinked_folders, store_fixture_fresh),
        cmocka_unit_test_setup(test_concurrent_processes, store_fixture_fresh),
        cmocka_unit_test_setup(test_sigkill_writers, store_fixture_fresh),
    };
    return cmocka_run_group_tests(tests, setup, store_fixture_teardown);
}
