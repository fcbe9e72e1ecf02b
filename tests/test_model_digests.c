/* A warm start hashes no weight byte when the model's files are unchanged
 * (cache/model_digests.c): the store keeps the weights' digests under the
 * files' identities, a second process of the same file takes them, and any
 * change to the file (its bytes, or only its timestamps), a damaged row or
 * a file too fresh to trust means the weights are hashed again, never
 * digests of other bytes. Results are
 * checked against a graph built with the weights each time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shapejit/engine.h"
#include "tests/onnx_external.h"

#define IN 8
#define HID 16
#define OUT 4

static float w1[IN * HID], w2[HID * OUT];

typedef struct fixture {
    char dir[64], model[128], store[128];
} fixture;

/* The file's last change must be two seconds old before its identity is
 * trusted (core/file_identity.h): wait that out after writing. */
static void settle(void) {
    struct timespec t = {2, 200 * 1000 * 1000};
    while (nanosleep(&t, &t) != 0) {}
}

static void write_model(fixture *f, float scale) {
    for (int i = 0; i < IN * HID; i++) w1[i] = scale * ((float)((i * 13) % 17) / 17.0f - 0.4f);
    for (int i = 0; i < HID * OUT; i++) w2[i] = (float)((i * 5) % 7) / 7.0f - 0.5f;
    sj_test_mlp spec = {.dir = f->dir, .in = IN, .hid = HID, .out = OUT, .w1 = w1, .w2 = w2, .embedded = true};
    assert_true(sj_test_write_external_mlp(&spec));
}

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/sj_digests_XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->model, sizeof f->model, "%s/model.onnx", f->dir);
    snprintf(f->store, sizeof f->store, "%s/s.db", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

/* y = relu(x @ w1) @ w2 for x's 3 rows, in plain loops over w1 and w2 as
 * they are now. */
static void expected(const float *x, float *y) {
    for (int r = 0; r < 3; r++) {
        float h[HID];
        for (int j = 0; j < HID; j++) {
            float s = 0;
            for (int k = 0; k < IN; k++) s += x[r * IN + k] * w1[k * HID + j];
            h[j] = s > 0 ? s : 0;
        }
        for (int j = 0; j < OUT; j++) {
            float s = 0;
            for (int k = 0; k < HID; k++) s += h[k] * w2[k * OUT + j];
            y[r * OUT + j] = s;
        }
    }
}

/* Opens the model with the store, runs 3 rows against expected(), and
 * returns whether the weights' digests came from the store. */
static bool open_and_run(fixture *f, uint8_t hash[32]) {
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.backend = "interp";
    cfg.ladder = "list:4";
    cfg.store_path = f->store;
    sj_engine *e = NULL;
    if (sj_engine_open(ctx, f->model, &cfg, &e) != SJ_OK) fail_msg("open: %s", sj_ctx_last_error(ctx));
    float x[3 * IN], want[3 * OUT];
    for (int i = 0; i < 3 * IN; i++) x[i] = (float)((i * 7) % 11) / 11.0f - 0.5f;
    expected(x, want);
    sj_named_tensor in[1] = {{"x", {.rank = 2, .dims = {3, IN}, .data = x}}};
    sj_named_tensor out[1];
    if (sj_engine_run(e, in, 1, out, 1, NULL) != SJ_OK) fail_msg("run: %s", sj_ctx_last_error(ctx));
    for (int i = 0; i < 3 * OUT; i++) assert_float_equal(out[0].tensor.data[i], want[i], 1e-4);
    sj_tensor_free(ctx, &out[0].tensor);
    sj_graph_hash(sj_engine_graph(e), hash);
    sj_engine_stats st;
    sj_engine_stats_get(e, &st);
    assert_true(st.hash_ms >= 0);
    sj_engine_close(e);
    sj_ctx_destroy(ctx);
    return st.digests_from_store;
}

/* SQL against the store behind the library's back (the tests' hand as a
 * damaged disk's); returns the first column of the first row, or -1. */
static long long sql(const fixture *f, const char *q) {
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->store, &db), SQLITE_OK);
    sqlite3_stmt *st;
    long long v = -1;
    if (sqlite3_prepare_v2(db, q, -1, &st, NULL) == SQLITE_OK) {
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE) fail_msg("%s: %s", q, sqlite3_errmsg(db));
        sqlite3_finalize(st);
    } else {
        fail_msg("%s: %s", q, sqlite3_errmsg(db));
    }
    sqlite3_close(db);
    return v;
}

static void test_unchanged_file_hashes_nothing(void **state) {
    fixture *f = *state;
    write_model(f, 1.0f);
    settle();
    uint8_t h1[32], h2[32];
    assert_false(open_and_run(f, h1)); /* hashed, and kept */
    assert_int_equal(sql(f, "SELECT count(*) FROM model_digests"), 1);
    assert_true(open_and_run(f, h2)); /* taken from the store */
    assert_memory_equal(h1, h2, 32);  /* the same graph hash: the same artifacts */
    assert_true(open_and_run(f, h2));
}

/* New bytes in the file (same size): hashed again, the new weights serve,
 * and the file's old row is replaced, not kept beside the new one. */
static void test_changed_file_is_hashed(void **state) {
    fixture *f = *state;
    write_model(f, 1.0f);
    settle();
    uint8_t h1[32], h2[32];
    assert_false(open_and_run(f, h1));
    assert_true(open_and_run(f, h1));
    write_model(f, -2.0f);
    settle();
    assert_false(open_and_run(f, h2));
    assert_memory_not_equal(h1, h2, 32);
    assert_int_equal(sql(f, "SELECT count(*) FROM model_digests"), 1);
    assert_true(open_and_run(f, h2));
}

/* Only the timestamps moved (a touch): the identity differs, so the bytes
 * are hashed again, to the same digests. */
static void test_touched_file_is_hashed(void **state) {
    fixture *f = *state;
    write_model(f, 1.0f);
    settle();
    uint8_t h1[32], h2[32];
    assert_false(open_and_run(f, h1));
    struct timespec ts[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
    assert_int_equal(utimensat(AT_FDCWD, f->model, ts, 0), 0);
    settle();
    assert_false(open_and_run(f, h2));
    assert_memory_equal(h1, h2, 32);
    assert_true(open_and_run(f, h2));
}

/* A file changed under two seconds ago could still change within the same
 * timestamp tick: it is hashed, and nothing is kept for it. */
static void test_fresh_file_is_not_trusted(void **state) {
    fixture *f = *state;
    write_model(f, 1.0f);
    uint8_t h[32];
    assert_false(open_and_run(f, h));
    assert_false(open_and_run(f, h));
    assert_int_equal(sql(f, "SELECT count(*) FROM sqlite_master WHERE name = 'model_digests'"), 0);
}

/* A damaged row (its digests changed on disk, or cut short) fails its
 * check: a miss, hashed again and rewritten, results right. */
static void test_damaged_row_is_a_miss(void **state) {
    fixture *f = *state;
    write_model(f, 1.0f);
    settle();
    uint8_t h1[32], h2[32];
    assert_false(open_and_run(f, h1));
    sql(f, "UPDATE model_digests SET digests = substr(digests, 1, 20) || zeroblob(32) || "
           "substr(digests, 53)");
    assert_false(open_and_run(f, h2));
    assert_memory_equal(h1, h2, 32);
    assert_true(open_and_run(f, h2));
    sql(f, "UPDATE model_digests SET digests = substr(digests, 1, 9)");
    assert_false(open_and_run(f, h2));
    assert_memory_equal(h1, h2, 32);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_unchanged_file_hashes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_changed_file_is_hashed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_touched_file_is_hashed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fresh_file_is_not_trusted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_row_is_a_miss, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
