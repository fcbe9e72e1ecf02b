/* Kernels compiled once per distinct code (issue #33): a host artifact's code
 * is one object file per kernel, named by its code, so buckets whose kernels
 * compile alike carry the same bytes; the host device loads each object
 * once, however many executables hold it, and frees it with the last. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <string.h>

#include <sqlite3.h>
#include <stdio.h>

#include "shapejit/ext/artifact.h"
#include "shapejit/ext/backends.h"
#include "shapejit/ext/bucketed_cache.h"
#include "shapejit/ladder.h"
#include "shapejit/store.h"
#include "shapejit/ext/compile.h"
#include "shapejit/ext/interp.h"
#include "tests/artifact_parts.h"
#include "tests/host_harness.h"
#include "tests/test_util.h"

#define S SJ_DIM_SYM


/* x [N, 24] -> a two-layer MLP and a softmax into g: kernels over rows,
 * most of whose code does not depend on the bucket above the few-rows
 * schedule. salt varies the weights; more adds a last op (another kernel,
 * or another fused epilogue) for a model that shares only some kernels. */
static bool build_mlp(sj_graph *g, int salt, bool more) {
    float w1[24 * 40], w2[40 * 12];
    for (int i = 0; i < 24 * 40; i++) w1[i] = (float)((i * 37 + salt) % 17 - 8) / 16.0f;
    for (int i = 0; i < 40 * 12; i++) w2[i] = (float)((i * 11 + salt) % 13 - 6) / 12.0f;
    sj_value x, p1, p2, h, y;
    return sj_graph_input(g, "x", 2, (int64_t[]){S, 24}, &x) == SJ_OK &&
           sj_graph_param(g, "w1", 2, (int64_t[]){24, 40}, w1, &p1) == SJ_OK &&
           sj_graph_param(g, "w2", 2, (int64_t[]){40, 12}, w2, &p2) == SJ_OK &&
           sj_graph_matmul(g, x, p1, &h) == SJ_OK && sj_graph_unary(g, SJ_OP_TANH, h, &h) == SJ_OK &&
           sj_graph_matmul(g, h, p2, &y) == SJ_OK &&
           sj_graph_softmax(g, SJ_OP_SOFTMAX, y, 1, &y) == SJ_OK &&
           (!more || sj_graph_unary(g, SJ_OP_EXP, y, &y) == SJ_OK) && sj_graph_output(g, y, "y") == SJ_OK;
}

static int setup(void **state) {
    if (h_fixture_setup(state, 7) != 0) return -1;
    fixture *f = *state;
    return build_mlp(f->g, 0, false) ? 0 : -1;
}

static int teardown(void **state) { return h_fixture_teardown(state); }

static void run_graph_and_check(fixture *f, const sj_graph *g, sj_executable *exe, int64_t n) {
    sj_tensor in[1] = {0}, got[1] = {0}, want[1] = {0};
    h_inputs(g, n, &f->seed, in);
    assert_int_equal(sj_interp_run(g, n, in, want), SJ_OK);
    assert_int_equal(sj_executable_run(exe, n, in, got), SJ_OK);
    assert_true(h_compare(g, got, want, 1e-5, "shared code"));
    h_free_tensors(f->ctx, in, 1);
    h_free_tensors(f->ctx, got, 1);
    h_free_tensors(f->ctx, want, 1);
}

static void run_and_check(fixture *f, sj_executable *exe, int64_t n) { run_graph_and_check(f, f->g, exe, n); }

/* Buckets 32 and 64 share their kernels' objects: the second executable
 * loads none of its shared ones again, both run right, and the code stays
 * until the last executable holding it goes. */
static void test_buckets_share_loaded_code(void **state) {
    fixture *f = *state;
    sj_artifact *a32, *a64;
    assert_int_equal(sj_compile(f->g, 32, NULL, &a32), SJ_OK);
    assert_int_equal(sj_compile(f->g, 64, NULL, &a64), SJ_OK);
    int n_parts;
    int same = tp_shared_parts(f->ctx, a32, a64, &n_parts);
    assert_true(n_parts >= 2);
    assert_true(same >= 1);

    sj_device_code_stats s;
    assert_int_equal(sj_device_code_stats_get(f->dev, &s), SJ_OK);
    assert_int_equal(s.objects_loaded, 0);
    sj_executable *e32, *e64;
    assert_int_equal(sj_artifact_load(a32, f->dev, f->g, &e32), SJ_OK);
    assert_int_equal(sj_device_code_stats_get(f->dev, &s), SJ_OK);
    assert_int_equal(s.objects_loaded, (uint64_t)n_parts);
    assert_int_equal(s.objects_shared, 0);
    assert_int_equal(s.objects_resident, n_parts);

    assert_int_equal(sj_artifact_load(a64, f->dev, f->g, &e64), SJ_OK);
    sj_device_code_stats t;
    assert_int_equal(sj_device_code_stats_get(f->dev, &t), SJ_OK);
    assert_int_equal(t.objects_shared, (uint64_t)same);
    assert_true(t.objects_resident < 2 * n_parts);
    int64_t both = t.objects_resident;

    run_and_check(f, e32, 5);
    run_and_check(f, e64, 33);
    /* e64 still holds the shared objects after e32 goes, and runs */
    sj_executable_destroy(e32);
    assert_int_equal(sj_device_code_stats_get(f->dev, &t), SJ_OK);
    assert_int_equal(t.objects_resident, both - (n_parts - same));
    run_and_check(f, e64, 64);
    sj_executable_destroy(e64);
    assert_int_equal(sj_device_code_stats_get(f->dev, &t), SJ_OK);
    assert_int_equal(t.objects_resident, 0);

    /* loaded again after all went: new loads, right answers */
    assert_int_equal(sj_artifact_load(a32, f->dev, f->g, &e32), SJ_OK);
    run_and_check(f, e32, 17);
    sj_executable_destroy(e32);
    sj_artifact_destroy(a32);
    sj_artifact_destroy(a64);
}

/* Kernels are named by their code, not their graph or bucket. */
static void test_kernel_names(void **state) {
    fixture *f = *state;
    char *ir;
    size_t n;
    assert_int_equal(sj_emit_text(f->g, 32, NULL, SJ_EMIT_LLVM_IR, &ir, &n), SJ_OK);
    assert_non_null(strstr(ir, "define void @sjk_"));
    assert_null(strstr(ir, "_e32_"));
    sj_free(f->ctx, ir);
}

/* A bundle whose lengths lie is refused when it loads, naming the object,
 * and the device keeps nothing of it. */
static void test_bad_bundle(void **state) {
    fixture *f = *state;
    static const uint8_t short_bundle[] = {'S', 'J', 'O', 'B', 'J', 'S', '0', '1', 1, 0, 0, 0,
                                           0xff, 0, 0, 0, 0, 0, 0, 0, 0x7f, 'E', 'L', 'F'};
    sj_module *m = (sj_module *)1;
    assert_int_equal(sj_device_load_module(f->dev, SJ_CODE_HOST_OBJECT, short_bundle, sizeof short_bundle, &m),
                     SJ_E_CORRUPT);
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "object 0 of 1"));
    static const uint8_t no_objects[] = {'S', 'J', 'O', 'B', 'J', 'S', '0', '1', 0, 0, 0, 0};
    assert_int_equal(sj_device_load_module(f->dev, SJ_CODE_HOST_OBJECT, no_objects, sizeof no_objects, &m),
                     SJ_E_CORRUPT);
    sj_device_code_stats s;
    assert_int_equal(sj_device_code_stats_get(f->dev, &s), SJ_OK);
    assert_int_equal(s.objects_resident, 0);
}

static int64_t count(sqlite3 *db, const char *sql) {
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return n;
}

/* Model g's buckets (ladder spec) through a cache on the store at path,
 * each of rows[0..n) run and checked against the interpreter: the compile
 * stages it ends with, and (cs, when not NULL) the cache's counts. */
static sj_compile_stages precompile_model(fixture *f, const char *path, sj_graph *g, const char *spec,
                                          const int64_t *rows, int n, sj_bucketed_cache_stats *cs) {
    sj_store_config scfg;
    sj_store_config_init(&scfg);
    scfg.path = path;
    sj_store *store;
    assert_int_equal(sj_store_open(f->ctx, &scfg, &store), SJ_OK);
    sj_host_compiler *hc;
    assert_int_equal(sj_host_compiler_create(f->ctx, NULL, &hc), SJ_OK);
    sj_compiler comp;
    sj_host_compiler_table(hc, &comp);
    assert_non_null(comp.parts);
    sj_ladder *ladder;
    assert_int_equal(sj_ladder_parse(f->ctx, spec, &ladder), SJ_OK);
    sj_bucketed_cache *c;
    assert_int_equal(sj_bucketed_cache_create(g, ladder, &comp, store, NULL, &c), SJ_OK);
    assert_int_equal(sj_bucketed_cache_precompile(c, 1, NULL, NULL), SJ_OK);
    if (cs) sj_bucketed_cache_stats_get(c, cs);
    for (int i = 0; i < n; i++) {
        int64_t extent;
        void *exe;
        assert_int_equal(sj_bucketed_cache_get_or_compile(c, rows[i], &extent, &exe), SJ_OK);
        run_graph_and_check(f, g, exe, rows[i]);
    }
    sj_compile_stages st;
    comp.stages(comp.ctx, &st);
    sj_bucketed_cache_destroy(c);
    sj_ladder_destroy(ladder);
    sj_host_compiler_destroy(hc);
    sj_store_close(store);
    return st;
}

/* A cache over a store: the buckets' shared kernel objects are kept once
 * (more references than parts), and a second cache on the same file loads
 * both buckets from it, compiling nothing, and runs them right. */
static void test_store_keeps_shared_code_once(void **state) {
    fixture *f = *state;
    char dir[64];
    assert_true(scratch_dir_create(dir, sizeof dir, "test_code_share"));
    char path[128];
    snprintf(path, sizeof path, "%s/store.db", dir);
    static const int64_t rows[] = {3, 64};
    for (int pass = 0; pass < 2; pass++) {
        sj_bucketed_cache_stats cs;
        precompile_model(f, path, f->g, "list:32,64", rows, 2, &cs);
        assert_int_equal(cs.compiles, pass == 0 ? 2 : 0);
        assert_int_equal(cs.store_hits, pass == 0 ? 0 : 2);
        sqlite3 *db;
        assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
        int64_t parts = count(db, "SELECT count(*) FROM parts");
        int64_t refs = count(db, "SELECT count(*) FROM artifact_parts");
        assert_true(parts >= 2);
        assert_true(refs > parts);
        sqlite3_close(db);
    }
    remove_tree(dir);
}

/* Kernels emitted alike in several buckets are compiled once: each
 * object is found by its name (its code key: the module as emitted), so the
 * first model compiles as many objects as it has distinct names and finds
 * the rest. A second model whose kernels the first compiled (the same
 * layers, other weights) compiles none of them. A model that adds an op
 * compiles only what is new. A damaged part is compiled again and
 * repaired. */
static void test_second_model_compiles_only_whats_new(void **state) {
    static const char LADDER[] = "list:4,32,64";
    static const int64_t ROWS[] = {3, 20, 64};
    fixture *f = *state;
    char dir[64], path[128];
    assert_true(scratch_dir_create(dir, sizeof dir, "test_code_share"));
    snprintf(path, sizeof path, "%s/store.db", dir);
    sj_graph *same, *more;
    assert_int_equal(sj_graph_create(f->ctx, "N", &same), SJ_OK);
    assert_int_equal(sj_graph_create(f->ctx, "N", &more), SJ_OK);
    assert_true(build_mlp(same, 5, false));
    assert_true(build_mlp(more, 9, true));

    sj_compile_stages first = precompile_model(f, path, f->g, LADDER, ROWS, 3, NULL);
    uint64_t objects = first.objects_compiled + first.objects_found;
    assert_true(first.objects_compiled >= 3);
    assert_true(first.objects_found > 0);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(count(db, "SELECT count(*) FROM part_names"), (int64_t)first.objects_compiled);
    sqlite3_close(db);
    sj_compile_stages again = precompile_model(f, path, same, LADDER, ROWS, 3, NULL);
    assert_int_equal(again.objects_compiled, 0);
    assert_int_equal(again.objects_found, objects);
    /* one part damaged (one no other part is kept against): only its
     * kernel is compiled again, once, and the put repairs it for every
     * bucket and model that holds it */
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "UPDATE parts SET digest = zeroblob(32) WHERE key = (SELECT key FROM parts "
                                  "WHERE key NOT IN (SELECT dict_key FROM parts WHERE dict_key IS NOT NULL) "
                                  "ORDER BY key LIMIT 1)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_changes(db), 1);
    sqlite3_close(db);
    sj_graph_destroy(same);
    assert_int_equal(sj_graph_create(f->ctx, "N", &same), SJ_OK);
    assert_true(build_mlp(same, 11, false));
    sj_compile_stages one = precompile_model(f, path, same, LADDER, ROWS, 3, NULL);
    assert_int_equal(one.objects_compiled, 1);
    assert_int_equal(one.objects_found + 1, objects);

    sj_compile_stages grown = precompile_model(f, path, more, LADDER, ROWS, 3, NULL);
    assert_true(grown.objects_compiled > 0);
    assert_true(grown.objects_found > 0);

    /* every part damaged: each is a miss, compiled again, and the put
     * repairs it (and so finds it for a later bucket whose object has the
     * same bytes under another name); the model still runs right */
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "UPDATE parts SET digest = zeroblob(32)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    sj_graph_destroy(same);
    assert_int_equal(sj_graph_create(f->ctx, "N", &same), SJ_OK);
    assert_true(build_mlp(same, 13, false));
    sj_compile_stages mended = precompile_model(f, path, same, LADDER, ROWS, 3, NULL);
    assert_true(mended.objects_compiled > 0);
    assert_int_equal(mended.objects_compiled + mended.objects_found, objects);
    sj_graph_destroy(same);
    assert_int_equal(sj_graph_create(f->ctx, "N", &same), SJ_OK);
    assert_true(build_mlp(same, 17, false));
    sj_compile_stages after = precompile_model(f, path, same, LADDER, ROWS, 3, NULL);
    assert_int_equal(after.objects_compiled, 0);
    sj_graph_destroy(same);
    sj_graph_destroy(more);
    remove_tree(dir);
}

/* Names point only to parts the store holds, and a name is re-pointed by
 * a later one; arguments are checked. */
static void test_part_names(void **state) {
    fixture *f = *state;
    sj_store_config scfg;
    sj_store_config_init(&scfg); /* in memory */
    sj_store *s;
    assert_int_equal(sj_store_open(f->ctx, &scfg, &s), SJ_OK);
    uint8_t name[1][32], key[1][32], key2[1][32], art[64];
    memset(name, 1, sizeof name);
    memset(art, 7, sizeof art);
    void *bytes;
    size_t len;
    assert_int_equal(sj_store_get_named_part(s, name[0], &bytes, &len), SJ_E_NOT_FOUND);
    assert_int_equal(sj_store_name_parts(s, NULL, NULL, -1), SJ_E_INVALID_ARG);
    assert_int_equal(sj_store_name_parts(s, NULL, NULL, 1), SJ_E_INVALID_ARG);
    memset(key, 2, sizeof key);
    assert_int_equal(sj_store_name_parts(s, (const uint8_t(*)[32])name, (const uint8_t(*)[32])key, 1), SJ_OK);
    assert_int_equal(sj_store_get_named_part(s, name[0], &bytes, &len), SJ_E_NOT_FOUND); /* no such part */
    sj_store_key k = {.extent = 4, .target_triple = "t"};
    sj_store_part p[1] = {{.offset = 8, .len = 16}};
    memcpy(p[0].key, key[0], 32);
    assert_int_equal(sj_store_put_parts(s, &k, art, sizeof art, p, 1), SJ_OK);
    assert_int_equal(sj_store_name_parts(s, (const uint8_t(*)[32])name, (const uint8_t(*)[32])key, 1), SJ_OK);
    assert_int_equal(sj_store_get_named_part(s, name[0], &bytes, &len), SJ_OK);
    assert_int_equal(len, 16);
    assert_memory_equal(bytes, art + 8, 16);
    sj_free(f->ctx, bytes);
    /* another row's part under the same name: re-pointed */
    uint8_t art2[64];
    memset(art2, 9, sizeof art2);
    memset(key2, 3, sizeof key2);
    k.extent = 8;
    memcpy(p[0].key, key2[0], 32);
    assert_int_equal(sj_store_put_parts(s, &k, art2, sizeof art2, p, 1), SJ_OK);
    assert_int_equal(sj_store_name_parts(s, (const uint8_t(*)[32])name, (const uint8_t(*)[32])key2, 1), SJ_OK);
    assert_int_equal(sj_store_get_named_part(s, name[0], &bytes, &len), SJ_OK);
    assert_memory_equal(bytes, art2 + 8, 16);
    sj_free(f->ctx, bytes);
    /* the row holding it removed: the name finds nothing */
    int64_t removed = 0;
    assert_int_equal(sj_store_rm(s, &k, &removed), SJ_OK);
    assert_int_equal(removed, 1);
    assert_int_equal(sj_store_get_named_part(s, name[0], &bytes, &len), SJ_E_NOT_FOUND);
    sj_store_close(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_buckets_share_loaded_code, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kernel_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_bundle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_keeps_shared_code_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_model_compiles_only_whats_new, setup, teardown),
        cmocka_unit_test_setup_teardown(test_part_names, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
