/* Helpers shared by the cmocka test programs: a context allocator that
 * counts and fails on demand, scratch directories, whole-file read and
 * write. Header-only (static inline) because every tests/test_*.c is a
 * program of its own. Include after <cmocka.h>.
 *
 *   alloc_counter a;
 *   sj_ctx *ctx = ctx_with_counter(&a);
 *   a.fail_at = a.calls + 3;             // the fourth allocation from now fails
 *   ...
 *   sj_ctx_destroy(ctx);
 *   assert_int_equal(a.live, 0);         // nothing leaked
 */
#ifndef SJ_TEST_UTIL_H
#define SJ_TEST_UTIL_H

#include <ftw.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shapejit/common.h"

/* ---- counting allocator ---- */

/* Counters are atomic because some tests share one context among threads. */
typedef struct alloc_counter {
    atomic_long calls; /* allocate and reallocate calls, refused ones included */
    atomic_long live;  /* blocks handed out and not yet freed */
    /* The call numbered fail_at (counting from 0) returns NULL; -1 = none.
     * With keep_failing every later call is refused too, as when memory
     * stays short; without, only that one, to test each recovery path. */
    long fail_at;
    bool keep_failing;
} alloc_counter;

static inline bool alloc_counter_refuses(alloc_counter *a) {
    long call = atomic_fetch_add(&a->calls, 1);
    return a->fail_at >= 0 && (call == a->fail_at || (a->keep_failing && call > a->fail_at));
}

static inline void *alloc_counter_alloc(void *user, size_t n) {
    alloc_counter *a = user;
    if (alloc_counter_refuses(a)) return NULL;
    void *p = malloc(n ? n : 1);
    if (p) atomic_fetch_add(&a->live, 1);
    return p;
}

static inline void *alloc_counter_realloc(void *user, void *p, size_t n) {
    alloc_counter *a = user;
    if (alloc_counter_refuses(a)) return NULL;
    void *q = realloc(p, n ? n : 1);
    if (q && !p) atomic_fetch_add(&a->live, 1);
    return q;
}

static inline void alloc_counter_free(void *user, void *p) {
    if (p) atomic_fetch_sub(&((alloc_counter *)user)->live, 1);
    free(p);
}

/* Resets a and returns the sj_allocator that reports to it. */
static inline sj_allocator alloc_counter_allocator(alloc_counter *a) {
    atomic_store(&a->calls, 0);
    atomic_store(&a->live, 0);
    a->fail_at = -1;
    a->keep_failing = false;
    return (sj_allocator){alloc_counter_alloc, alloc_counter_realloc, alloc_counter_free, a};
}

/* A context whose every allocation goes through a (reset first). */
static inline sj_ctx *ctx_with_counter(alloc_counter *a) {
    sj_ctx_config cfg;
    sj_ctx_config_init(&cfg);
    cfg.allocator = alloc_counter_allocator(a);
    sj_ctx *ctx = NULL;
    assert_int_equal(sj_ctx_create(&cfg, &ctx), SJ_OK);
    return ctx;
}

/* Group setup and teardown for programs whose tests share one plain
 * context, passed as *state. */
static inline int ctx_group_setup(void **state) {
    sj_ctx *ctx;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return -1;
    *state = ctx;
    return 0;
}
static inline int ctx_group_teardown(void **state) {
    sj_ctx_destroy(*state);
    return 0;
}

/* ---- messages ---- */

/* The context's last error contains needle; a failure shows the message. */
static inline void assert_error_contains(sj_ctx *ctx, const char *needle) {
    const char *msg = sj_ctx_last_error(ctx);
    if (!strstr(msg, needle)) fail_msg("message '%s' lacks '%s'", msg, needle);
}

/* ---- scratch files ---- */

/* Makes a fresh directory /tmp/sj_TAG_XXXXXX into dir (cap >= 32 + tag).
 * Returns false on failure so group setups can report it. */
static inline bool scratch_dir_create(char *dir, size_t cap, const char *tag) {
    int n = snprintf(dir, cap, "/tmp/sj_%s_XXXXXX", tag);
    return n > 0 && (size_t)n < cap && mkdtemp(dir) != NULL;
}

static inline int remove_tree_entry(const char *path, const struct stat *sb, int flag,
                                    struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* Deletes path and everything below it; a missing path is not an error. */
static inline void remove_tree(const char *path) {
    nftw(path, remove_tree_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Deletes an SQLite database and the -wal and -shm files beside it, and
 * the -weights folder an engine keeps beside its store. */
static inline void remove_sqlite_files(const char *db_path) {
    char p[4096];
    unlink(db_path);
    snprintf(p, sizeof p, "%s-wal", db_path);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", db_path);
    unlink(p);
    snprintf(p, sizeof p, "%s-weights", db_path);
    remove_tree(p);
}

static inline void write_whole_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) fail_msg("cannot create %s", path);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static inline void write_text_file(const char *path, const char *text) {
    write_whole_file(path, text, strlen(text));
}

/* The file's bytes in a malloc'd buffer (one spare byte at the end). */
static inline uint8_t *read_whole_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n >= 0);
    assert_int_equal(fseek(f, 0, SEEK_SET), 0);
    uint8_t *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

#endif
