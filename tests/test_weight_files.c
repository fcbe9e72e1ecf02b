/* Packed weights kept as files (runtime/weight_files.c): a file round
 * trips, every kind of unusable file is refused as a miss, and engines on a
 * store make them once, then map them, with results equal bit for bit to
 * engines that make them in memory. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "runtime/weight_files.h"
#include "shapejit/engine.h"
#include "test_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MODEL SJ_SOURCE_DIR "/examples/models/ffn.sjg"
#define ROWS 40 /* ffn's matmuls read both weights packed from 16 rows up */
#define IN 64

static void key_of(int i, uint8_t key[32]) {
    for (int j = 0; j < 32; j++) key[j] = (uint8_t)(i * 37 + j);
}

/* How many files dir holds; *first (when not NULL) gets one's path. */
static int files_in(const char *dir, char *first, size_t cap) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        size_t dl = strlen(dir), nl = strlen(e->d_name);
        if (n++ == 0 && first) {
            assert_true(dl + 1 + nl < cap);
            memcpy(first, dir, dl);
            first[dl] = '/';
            memcpy(first + dl + 1, e->d_name, nl + 1);
        }
    }
    closedir(d);
    return n;
}

/* Overwrites one byte of a read-only file, as a user breaking the
 * folder's contract would. */
static void poke(const char *path, off_t at, uint8_t v) {
    assert_int_equal(chmod(path, 0600), 0);
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, &v, 1, at), 1);
    close(fd);
}

static void test_round_trip(void **state) {
    (void)state;
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    char dir[64], sub[128];
    assert_true(scratch_dir_create(dir, sizeof dir, "wfiles"));
    snprintf(sub, sizeof sub, "%s/weights", dir); /* made by the first save */
    enum { N = 10000 };
    float *w = malloc(N * sizeof *w);
    for (int i = 0; i < N; i++) w[i] = (float)i * 0.25f - 7.0f;
    uint8_t key[32];
    key_of(1, key);
    sj_weight_map *m;
    const void *data;
    assert_int_equal(sj__weight_file_map(ctx, sub, key, sizeof(float) * N, &m, &data), SJ_E_NOT_FOUND);
    assert_true(sj__weight_file_save(ctx, sub, key, w, sizeof(float) * N));
    char path[256];
    assert_int_equal(files_in(sub, path, sizeof path), 1); /* no temporary left */
    assert_int_equal(sj__weight_file_map(ctx, sub, key, sizeof(float) * N, &m, &data), SJ_OK);
    assert_int_equal((uintptr_t)data % 4096, 0);
    assert_memory_equal(data, w, sizeof(float) * N);
    assert_true(sj__weight_map_is_file(m));
    assert_int_equal(sj__weight_map_check(m, ctx), SJ_OK);
    assert_int_equal(sj__weight_map_verify(m, ctx), SJ_OK);
    /* bytes changed under the mapping (the contract broken): verify says
     * so; a save renames a fresh file over it without touching the pages */
    poke(path, 4096 + 5, 0x5a);
    assert_int_equal(sj__weight_map_verify(m, ctx), SJ_E_CORRUPT);
    assert_error_contains(ctx, path);
    sj__weight_map_release(m);
    assert_true(sj__weight_file_save(ctx, sub, key, w, sizeof(float) * N));
    assert_int_equal(sj__weight_file_map(ctx, sub, key, sizeof(float) * N, &m, &data), SJ_OK);
    assert_memory_equal(data, w, sizeof(float) * N);
    assert_int_equal(sj__weight_map_verify(m, ctx), SJ_OK);
    sj__weight_map_release(m);
    free(w);
    remove_tree(dir);
    sj_ctx_destroy(ctx);
}

/* Each file that must not be used is a miss naming the file and why. */
static void test_unusable_files(void **state) {
    (void)state;
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    char dir[64], path[256], other[256], dir2[128];
    assert_true(scratch_dir_create(dir, sizeof dir, "wfiles"));
    snprintf(dir2, sizeof dir2, "%s/two", dir);
    uint8_t w[8192], key[32], key2[32];
    for (size_t i = 0; i < sizeof w; i++) w[i] = (uint8_t)(i * 7);
    key_of(2, key);
    key_of(3, key2);
    sj_weight_map *m;
    const void *data;

    assert_true(sj__weight_file_save(ctx, dir, key, w, sizeof w));
    assert_int_equal(files_in(dir, path, sizeof path), 1);
    assert_int_equal(sj__weight_file_map(ctx, dir, key, sizeof w - 4, &m, &data), SJ_E_CORRUPT);
    assert_error_contains(ctx, "another size");
    assert_null(m);
    assert_true(sj__weight_file_save(ctx, dir2, key2, w, sizeof w));
    assert_int_equal(files_in(dir2, other, sizeof other), 1);
    assert_int_equal(rename(path, other), 0); /* key 2's bytes under key 3's name */
    assert_int_equal(sj__weight_file_map(ctx, dir2, key2, sizeof w, &m, &data), SJ_E_CORRUPT);
    assert_error_contains(ctx, "another key");

    assert_true(sj__weight_file_save(ctx, dir, key, w, sizeof w));
    assert_int_equal(chmod(path, 0600), 0);
    assert_int_equal(truncate(path, 4096 + sizeof w - 1), 0);
    assert_int_equal(sj__weight_file_map(ctx, dir, key, sizeof w, &m, &data), SJ_E_CORRUPT);
    assert_error_contains(ctx, path);
    assert_int_equal(truncate(path, 100), 0);
    assert_int_equal(sj__weight_file_map(ctx, dir, key, sizeof w, &m, &data), SJ_E_CORRUPT);
    assert_error_contains(ctx, "shorter than its header");

    assert_true(sj__weight_file_save(ctx, dir, key, w, sizeof w));
    poke(path, 9, 0xff); /* the byte count: the header's check fails */
    assert_int_equal(sj__weight_file_map(ctx, dir, key, sizeof w, &m, &data), SJ_E_CORRUPT);
    assert_error_contains(ctx, "damaged");
    write_text_file(path, "not a packed weights file at all, but long enough to hold a header: "
                          "................................................................");
    assert_int_equal(sj__weight_file_map(ctx, dir, key, sizeof w, &m, &data), SJ_E_CORRUPT);
    assert_error_contains(ctx, "not a packed weights file");
    /* a save puts a good file back over any of them */
    assert_true(sj__weight_file_save(ctx, dir, key, w, sizeof w));
    assert_int_equal(sj__weight_file_map(ctx, dir, key, sizeof w, &m, &data), SJ_OK);
    assert_memory_equal(data, w, sizeof w);
    sj__weight_map_release(m);

    /* a folder that cannot be made: false, nothing written, no error left */
    char blocked[300];
    snprintf(blocked, sizeof blocked, "%s/file", dir);
    write_text_file(blocked, "x");
    strcat(blocked, "/sub");
    sj_ctx_clear_error(ctx);
    assert_false(sj__weight_file_save(ctx, blocked, key, w, sizeof w));
    assert_string_equal(sj_ctx_last_error(ctx), "");
    remove_tree(dir);
    sj_ctx_destroy(ctx);
}

typedef struct engine_result {
    float y[ROWS * IN];
    sj_engine_stats stats;
} engine_result;

/* A fresh context and engine on store (NULL: none), as a new process
 * would open them: runs ROWS rows once. */
static void run_engine(const char *store, bool weight_files, engine_result *r) {
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.backend = "host";
    cfg.ladder = "list:64";
    cfg.store_path = store;
    cfg.weight_files = weight_files;
    sj_engine *e;
    if (sj_engine_open(ctx, MODEL, &cfg, &e) != SJ_OK) fail_msg("open: %s", sj_ctx_last_error(ctx));
    static float x[ROWS * IN];
    for (int i = 0; i < ROWS * IN; i++) x[i] = (float)((i * 7919) % 201 - 100) / 50.0f;
    sj_named_tensor in[1] = {{"x", {.rank = 2, .dims = {ROWS, IN}, .data = x}}};
    sj_named_tensor out[1];
    if (sj_engine_run(e, in, 1, out, 1, NULL) != SJ_OK) fail_msg("run: %s", sj_ctx_last_error(ctx));
    assert_int_equal(out[0].tensor.dims[0], ROWS);
    memcpy(r->y, out[0].tensor.data, sizeof r->y);
    sj_tensor_free(ctx, &out[0].tensor);
    sj_engine_stats_get(e, &r->stats);
    sj_engine_close(e);
    sj_ctx_destroy(ctx);
}

static void test_engines_share_files(void **state) {
    (void)state;
    char dir[64], store[128], weights[160];
    assert_true(scratch_dir_create(dir, sizeof dir, "wfiles"));
    snprintf(store, sizeof store, "%s/store.db", dir);
    snprintf(weights, sizeof weights, "%s-weights", store);
    static engine_result plain, first, later, off;
    run_engine(NULL, true, &plain);
    assert_true(plain.stats.weight_packed_bytes > 0);
    assert_int_equal(plain.stats.weight_mapped_bytes, 0);

    run_engine(store, true, &first); /* compiles, packs, keeps the files */
    assert_int_equal(first.stats.weight_mapped_bytes, 0);
    int files = files_in(weights, NULL, 0);
    assert_true(files > 0);
    run_engine(store, true, &later); /* maps every packed weight */
    assert_int_equal(later.stats.compiles, 0);
    assert_int_equal(later.stats.weight_mapped_bytes, later.stats.weight_packed_bytes);
    assert_int_equal(later.stats.weight_packed_bytes, plain.stats.weight_packed_bytes);
    run_engine(store, false, &off); /* turned off: made in memory */
    assert_int_equal(off.stats.weight_mapped_bytes, 0);
    assert_memory_equal(first.y, plain.y, sizeof plain.y);
    assert_memory_equal(later.y, plain.y, sizeof plain.y);
    assert_memory_equal(off.y, plain.y, sizeof plain.y);

    /* A damaged file is made again, replaced, and mapped next time. */
    char victim[512];
    files_in(weights, victim, sizeof victim);
    poke(victim, 20, 0x00);
    static engine_result mended, again;
    run_engine(store, true, &mended);
    assert_true(mended.stats.weight_mapped_bytes < mended.stats.weight_packed_bytes);
    assert_memory_equal(mended.y, plain.y, sizeof plain.y);
    assert_int_equal(files_in(weights, NULL, 0), files);
    run_engine(store, true, &again);
    assert_int_equal(again.stats.weight_mapped_bytes, again.stats.weight_packed_bytes);
    assert_memory_equal(again.y, plain.y, sizeof plain.y);

    /* The folder removed: made again, kept again. */
    remove_tree(weights);
    run_engine(store, true, &again);
    assert_int_equal(again.stats.weight_mapped_bytes, 0);
    assert_int_equal(files_in(weights, NULL, 0), files);
    assert_memory_equal(again.y, plain.y, sizeof plain.y);
    remove_tree(dir);
}

/* Sets path's mtime (its last use) to t seconds after the epoch. */
static void used_at(const char *path, time_t t) {
    struct timespec ts[2] = {{0, UTIME_OMIT}, {t, 0}};
    assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

/* A prune keeps the most recently used files within its bound, removes
 * old temporaries (never fresh ones, a writer's), leaves other files and a
 * mapped file's pages alone; a missing folder is no error. */
static void test_prune(void **state) {
    (void)state;
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    char dir[64], path[3][512], other[256], tmp_old[600], tmp_new[600];
    assert_true(scratch_dir_create(dir, sizeof dir, "wprune"));
    int64_t files = -1, bytes = -1;
    char missing[128];
    snprintf(missing, sizeof missing, "%s/none", dir);
    assert_int_equal(sj__weight_files_prune(ctx, missing, 0, &files, &bytes), SJ_OK);
    assert_int_equal(files, 0);
    uint8_t w[3][4096];
    sj_weight_map *m[3];
    const void *data[3];
    char sub[3][128];
    for (int i = 0; i < 3; i++) { /* each saved alone, to learn its name */
        memset(w[i], i + 1, sizeof w[i]);
        uint8_t key[32];
        key_of(10 + i, key);
        snprintf(sub[i], sizeof sub[i], "%s/s%d", dir, i);
        assert_true(sj__weight_file_save(ctx, sub[i], key, w[i], sizeof w[i]));
        char first[512];
        assert_int_equal(files_in(sub[i], first, sizeof first), 1);
        snprintf(path[i], sizeof path[i], "%s/%s", dir, strrchr(first, '/') + 1);
        assert_int_equal(rename(first, path[i]), 0);
        rmdir(sub[i]);
        used_at(path[i], 1000000 + 1000 * i); /* file 2 used last */
    }
    int64_t one = 4096 + (int64_t)sizeof w[0];
    /* a map marks file 0 used now: it is kept over file 1 */
    uint8_t key0[32];
    key_of(10, key0);
    assert_int_equal(sj__weight_file_map(ctx, dir, key0, sizeof w[0], &m[0], &data[0]), SJ_OK);
    snprintf(other, sizeof other, "%s/notes.txt", dir);
    write_text_file(other, "not ours");
    snprintf(tmp_old, sizeof tmp_old, "%s.Ab3dEf", path[1]);
    snprintf(tmp_new, sizeof tmp_new, "%s.Gh5jKl", path[2]);
    write_text_file(tmp_old, "half");
    write_text_file(tmp_new, "half");
    used_at(tmp_old, time(NULL) - 7200);

    assert_int_equal(sj__weight_files_prune(ctx, dir, 2 * one, &files, &bytes), SJ_OK);
    assert_int_equal(files, 2); /* file 1 and the old temporary */
    assert_int_equal(bytes, one + 4);
    assert_int_equal(access(path[1], F_OK), -1);
    assert_int_equal(access(tmp_old, F_OK), -1);
    assert_int_equal(access(path[0], F_OK), 0);
    assert_int_equal(access(path[2], F_OK), 0);
    assert_int_equal(access(tmp_new, F_OK), 0);
    assert_int_equal(access(other, F_OK), 0);

    assert_int_equal(sj__weight_files_prune(ctx, dir, 0, &files, &bytes), SJ_OK);
    assert_int_equal(files, 2);
    assert_int_equal(access(path[0], F_OK), -1);
    assert_memory_equal(data[0], w[0], sizeof w[0]); /* the mapping keeps its pages */
    sj__weight_map_release(m[0]);
    remove_tree(dir);
    sj_ctx_destroy(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_unusable_files),
        cmocka_unit_test(test_engines_share_files),
        cmocka_unit_test(test_prune),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
