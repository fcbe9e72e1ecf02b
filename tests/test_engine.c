/* sj_engine: open / run / precompile / close on every backend this build
 * runs (interp, host), a warm start from the store, one error naming the
 * component and value for each bad open (with nothing left allocated),
 * named-input checks on run, outputs with and without the symbolic dim,
 * several threads running one engine at once, tuned buckets (the
 * schedule timed per bucket, recorded in the artifact, loaded warm),
 * native_after and tiered compilation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <sys/stat.h>

#include "shapejit/engine.h"
#include "shapejit/ext/bucketed_cache.h"
#include "shapejit/ext/artifact.h"
#include "shapejit/ext/backends.h"
#include "shapejit/store.h"

#include "tests/test_util.h"

#define INNER 8
#define OUTS  4

static alloc_counter counter;
static sj_ctx *ctx;
static char dir[256];
static float w[INNER * OUTS];

/* y = x @ w + 1   [N, OUTS]   (has the symbolic dim)
 * s = sum over N of x   [INNER]   (does not)
 * two inputs x [N, INNER] and m [N, INNER]: z = x * m [N, INNER]. */
static sj_graph *make_graph(void) {
    sj_graph *g;
    assert_int_equal(sj_graph_create(ctx, "N", &g), SJ_OK);
    int64_t xd[] = {SJ_DIM_SYM, INNER}, wd[] = {INNER, OUTS}, od[] = {1};
    float one = 1.0f;
    int axis0 = 0;
    sj_value x, m, wv, c, xw, y, s, z;
    assert_int_equal(sj_graph_input(g, "x", 2, xd, &x), SJ_OK);
    assert_int_equal(sj_graph_input(g, "m", 2, xd, &m), SJ_OK);
    assert_int_equal(sj_graph_param(g, "w", 2, wd, w, &wv), SJ_OK);
    assert_int_equal(sj_graph_param(g, "one", 1, od, &one, &c), SJ_OK);
    assert_int_equal(sj_graph_matmul(g, x, wv, &xw), SJ_OK);
    assert_int_equal(sj_graph_binary(g, SJ_OP_ADD, xw, c, &y), SJ_OK);
    assert_int_equal(sj_graph_reduce(g, SJ_OP_REDUCE_SUM, x, 1, &axis0, false, &s), SJ_OK);
    assert_int_equal(sj_graph_binary(g, SJ_OP_MUL, x, m, &z), SJ_OK);
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    assert_int_equal(sj_graph_output(g, s, "s"), SJ_OK);
    assert_int_equal(sj_graph_output(g, z, "z"), SJ_OK);
    return g;
}

static sj_engine *open_engine(const char *backend, const char *store, const char *ladder) {
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.backend = backend;
    cfg.store_path = store;
    cfg.ladder = ladder;
    sj_engine *e = NULL;
    sj_status st = sj_engine_open_graph(ctx, make_graph(), &cfg, &e);
    if (st != SJ_OK) fail_msg("open %s: %s", backend, sj_ctx_last_error(ctx));
    return e;
}

static float xval(int64_t r, int k, unsigned seed) {
    return (float)((r * 7 + k * 3 + seed) % 11) / 11.0f - 0.5f;
}
static float mval(int64_t r, int k) { return (float)((r + k) % 5) / 4.0f; }

/* Runs N rows (seeded) and checks every output against plain loops. */
static void run_and_check(sj_engine *e, int64_t n, unsigned seed) {
    float *x = malloc((size_t)n * INNER * sizeof *x), *m = malloc((size_t)n * INNER * sizeof *m);
    assert_non_null(x);
    assert_non_null(m);
    for (int64_t r = 0; r < n; r++)
        for (int k = 0; k < INNER; k++) {
            x[r * INNER + k] = xval(r, k, seed);
            m[r * INNER + k] = mval(r, k);
        }
    /* In another order than the model's: inputs go by name. */
    sj_named_tensor in[2] = {{"m", {.rank = 2, .dims = {n, INNER}, .data = m}},
                             {"x", {.rank = 2, .dims = {n, INNER}, .data = x}}};
    sj_named_tensor out[3];
    sj_run_info info;
    sj_status st = sj_engine_run(e, in, 2, out, 3, &info);
    if (st != SJ_OK) fail_msg("run N=%lld: %s", (long long)n, sj_ctx_last_error(ctx));
    assert_int_equal(info.rows, n);
    assert_true(info.bucket >= n);
    assert_string_equal(out[0].name, "y");
    assert_string_equal(out[1].name, "s");
    assert_string_equal(out[2].name, "z");
    assert_int_equal(out[0].tensor.rank, 2);
    assert_int_equal(out[0].tensor.dims[0], n);
    assert_int_equal(out[0].tensor.dims[1], OUTS);
    assert_int_equal(out[1].tensor.rank, 1);
    assert_int_equal(out[1].tensor.dims[0], INNER);
    assert_int_equal(out[2].tensor.dims[0], n);
    for (int64_t r = 0; r < n; r++)
        for (int j = 0; j < OUTS; j++) {
            double want = 1.0;
            for (int k = 0; k < INNER; k++) want += (double)x[r * INNER + k] * w[k * OUTS + j];
            assert_true(fabs(out[0].tensor.data[r * OUTS + j] - want) < 1e-4);
        }
    for (int k = 0; k < INNER; k++) {
        double want = 0; /* the padding rows never count */
        for (int64_t r = 0; r < n; r++) want += x[r * INNER + k];
        assert_true(fabs(out[1].tensor.data[k] - want) < 1e-4);
    }
    for (int64_t i = 0; i < n * INNER; i++)
        assert_true(fabs(out[2].tensor.data[i] - x[i] * m[i]) < 1e-6);
    for (int i = 0; i < 3; i++) sj_tensor_free(ctx, &out[i].tensor);
    free(x);
    free(m);
}

static void test_backends_run(void **state) {
    (void)state;
    static const char *const backends[] = {"interp", "host"};
    for (int b = 0; b < 2; b++) {
        sj_engine *e = open_engine(backends[b], NULL, "pow2:1:64");
        assert_string_equal(sj_engine_target(e), backends[b]);
        assert_int_equal(sj_engine_num_inputs(e), 2);
        assert_int_equal(sj_engine_num_outputs(e), 3);
        sj_value_desc d;
        assert_int_equal(sj_engine_input(e, 1, &d), SJ_OK);
        assert_string_equal(d.name, "m");
        assert_int_equal(d.shape.dims[0], SJ_DIM_SYM);
        assert_int_equal(sj_engine_output(e, 1, &d), SJ_OK);
        assert_string_equal(d.name, "s");
        assert_int_equal(sj_engine_output(e, 3, &d), SJ_E_OUT_OF_RANGE);
        assert_int_equal(sj_engine_num_buckets(e), 7);
        static const int64_t sizes[] = {1, 5, 17, 64, 5};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            run_and_check(e, sizes[i], (unsigned)i);
        sj_engine_stats s;
        sj_engine_stats_get(e, &s);
        assert_int_equal(s.runs, 5);
        assert_int_equal(s.compiles, 4); /* buckets 1, 8, 32, 64; the second 5 is a hit */
        assert_int_equal(s.buckets_ready, 4);
        int64_t lo, hi;
        bool ready;
        assert_int_equal(sj_engine_bucket(e, 3, &lo, &hi, &ready), SJ_OK);
        assert_int_equal(lo, 5);
        assert_int_equal(hi, 8);
        assert_true(ready);
        sj_engine_close(e);
    }
}

/* The second engine over the same store compiles nothing. */
static void test_warm_start(void **state) {
    (void)state;
    char store[512];
    snprintf(store, sizeof store, "%s/warm.db", dir);
    sj_engine *cold = open_engine("host", store, "list:4,16,64");
    assert_int_equal(sj_engine_precompile(cold, 2, NULL, NULL), SJ_OK);
    sj_engine_stats s;
    sj_engine_stats_get(cold, &s);
    assert_int_equal(s.compiles, 3);
    sj_engine_close(cold);

    sj_engine *warm = open_engine("host", store, "list:4,16,64");
    sj_named_tensor in[2];
    float x[10 * INNER] = {0}, m[10 * INNER] = {0};
    in[0] = (sj_named_tensor){"x", {.rank = 2, .dims = {10, INNER}, .data = x}};
    in[1] = (sj_named_tensor){"m", {.rank = 2, .dims = {10, INNER}, .data = m}};
    sj_named_tensor out[3];
    sj_run_info info;
    assert_int_equal(sj_engine_run(warm, in, 2, out, 3, &info), SJ_OK);
    assert_int_equal(info.wait, SJ_RUN_LOADED); /* waited for a store load, not a compile */
    for (int i = 0; i < 3; i++) sj_tensor_free(ctx, &out[i].tensor);
    assert_int_equal(sj_engine_precompile(warm, 1, NULL, NULL), SJ_OK);
    run_and_check(warm, 3, 1);
    sj_engine_stats_get(warm, &s);
    assert_int_equal(s.compiles, 0);
    assert_int_equal(s.store_hits, 3);
    assert_int_equal(s.buckets_ready, 3);
    sj_engine_close(warm);

    /* A store_only engine fills the store, loads nothing and refuses runs. */
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.ladder = "list:4,16,64,128";
    cfg.store_path = store;
    cfg.store_only = true;
    sj_engine *so;
    assert_int_equal(sj_engine_open_graph(ctx, make_graph(), &cfg, &so), SJ_OK);
    assert_int_equal(sj_engine_precompile(so, 2, NULL, NULL), SJ_OK);
    sj_engine_stats_get(so, &s);
    assert_int_equal(s.compiles, 1);
    assert_int_equal(s.store_hits, 3);
    assert_int_equal(s.buckets_ready, 0);
    assert_int_equal(sj_engine_run(so, in, 2, out, 3, NULL), SJ_E_STATE);
    assert_error_contains(ctx, "store_only");
    sj_engine_close(so);
}

/* Each bad open: one error naming the component and the value, no handle,
 * and every byte it allocated freed again. */
static void expect_open_fails(const sj_engine_config *cfg, const char *model, const char *component,
                              const char *value) {
    long live = atomic_load(&counter.live);
    sj_engine *e = (sj_engine *)&e; /* must come back NULL */
    sj_status st = model ? sj_engine_open(ctx, model, cfg, &e)
                         : sj_engine_open_graph(ctx, make_graph(), cfg, &e);
    assert_int_not_equal(st, SJ_OK);
    assert_null(e);
    assert_error_contains(ctx, component);
    assert_error_contains(ctx, value);
    assert_int_equal(atomic_load(&counter.live), live);
}

static void test_bad_open(void **state) {
    (void)state;
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.ladder = "pow3:1:64";
    expect_open_fails(&cfg, NULL, "ladder", "pow3:1:64");

    sj_engine_config_init(&cfg);
    cfg.backend = "tpu";
    expect_open_fails(&cfg, NULL, "backend", "tpu");

    sj_engine_config_init(&cfg);
    cfg.backend = "host";
    cfg.arch = "sm_70";
    expect_open_fails(&cfg, NULL, "arch", "sm_70");

    /* A store under a regular file cannot be made. */
    char file[512], store[600];
    snprintf(file, sizeof file, "%s/plain_file", dir);
    write_text_file(file, "not a directory\n");
    snprintf(store, sizeof store, "%s/store.db", file);
    sj_engine_config_init(&cfg);
    cfg.store_path = store;
    cfg.backend = "interp";
    expect_open_fails(&cfg, NULL, "store", store);

    sj_engine_config_init(&cfg);
    cfg.remote_url = "http://not-redis";
    cfg.backend = "interp";
    expect_open_fails(&cfg, NULL, "remote", "http");

    sj_engine_config_init(&cfg);
    char model[600];
    snprintf(model, sizeof model, "%s/absent.sjg", dir);
    expect_open_fails(&cfg, model, "model", "absent.sjg");
    expect_open_fails(NULL, model, "model", "absent.sjg");

    /* The fallback a default store path may take: an in-memory store. */
    sj_engine_config_init(&cfg);
    cfg.store_path = store;
    cfg.backend = "interp";
    cfg.store_fallback_to_memory = true;
    sj_engine *e;
    assert_int_equal(sj_engine_open_graph(ctx, make_graph(), &cfg, &e), SJ_OK);
    assert_non_null(strstr(sj_engine_warning(e), store));
    run_and_check(e, 2, 0);
    sj_engine_close(e);
}

static void test_open_from_file(void **state) {
    (void)state;
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.backend = "interp";
    cfg.ladder = "pow2:1:64";
    sj_engine *e;
    assert_int_equal(sj_engine_open(ctx, SJ_SOURCE_DIR "/examples/models/ffn.sjg", &cfg, &e),
                     SJ_OK);
    assert_int_equal(sj_engine_num_inputs(e), 1);
    sj_value_desc d;
    assert_int_equal(sj_engine_input(e, 0, &d), SJ_OK);
    float *x = calloc(3 * (size_t)d.shape.dims[1], sizeof *x);
    sj_named_tensor in = {d.name, {.rank = 2, .dims = {3, d.shape.dims[1]}, .data = x}}, out = {0};
    assert_int_equal(sj_engine_run(e, &in, 1, &out, 1, NULL), SJ_OK);
    assert_int_equal(out.tensor.dims[0], 3);
    sj_tensor_free(ctx, &out.tensor);
    free(x);
    sj_engine_close(e);
}

/* Config structs carry their size: a program built against a newer
 * shapejit (a larger struct) or a struct _init never filled is refused with
 * a message naming the struct, and nothing opens. */
static void test_config_sizes(void **state) {
    (void)state;
    const char *model = SJ_SOURCE_DIR "/examples/models/ffn.sjg";
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    assert_int_equal(cfg.size, sizeof cfg);
    cfg.backend = "interp";
    sj_engine *e = (sj_engine *)&cfg;
    cfg.size = sizeof cfg + 8;
    assert_int_equal(sj_engine_open(ctx, model, &cfg, &e), SJ_E_INVALID_ARG);
    assert_null(e);
    assert_error_contains(ctx, "sj_engine_config: size ");
    assert_error_contains(ctx, "built against a newer shapejit");
    cfg.size = 0;
    assert_int_equal(sj_engine_open(ctx, model, &cfg, &e), SJ_E_INVALID_ARG);
    assert_error_contains(ctx, "fill it with sj_engine_config_init first");
    sj_graph *g;
    assert_int_equal(sj_model_load(ctx, model, NULL, &g), SJ_OK);
    assert_int_equal(sj_engine_open_graph(ctx, g, &cfg, &e), SJ_E_INVALID_ARG); /* g is freed */
    assert_null(e);
    /* the embedded model options are checked where they are read */
    sj_engine_config_init(&cfg);
    cfg.backend = "interp";
    cfg.model.size = 1;
    assert_int_equal(sj_engine_open(ctx, model, &cfg, &e), SJ_E_INVALID_ARG);
    assert_error_contains(ctx, "sj_model_options: size 1 is smaller");
    /* the other stable-tier configs alike */
    sj_store_config sc;
    sj_store_config_init(&sc);
    sc.size += sizeof(void *);
    sj_store *st = NULL;
    assert_int_equal(sj_store_open(ctx, &sc, &st), SJ_E_INVALID_ARG);
    assert_null(st);
    assert_error_contains(ctx, "sj_store_config: size ");
    sj_remote_config rc;
    sj_remote_config_init(&rc);
    rc.url = "redis://127.0.0.1:1";
    rc.size = 0;
    sj_remote *r = NULL;
    assert_int_equal(sj_remote_create(ctx, &rc, &r), SJ_E_INVALID_ARG);
    assert_null(r);
    assert_error_contains(ctx, "sj_remote_config: size 0 is smaller");
    sj_ctx_config xc;
    sj_ctx_config_init(&xc);
    xc.size = 3;
    sj_ctx *other = NULL;
    assert_int_equal(sj_ctx_create(&xc, &other), SJ_E_INVALID_ARG);
    assert_null(other);
    /* and a config filled by its _init opens */
    sj_engine_config_init(&cfg);
    cfg.backend = "interp";
    assert_int_equal(sj_engine_open(ctx, model, &cfg, &e), SJ_OK);
    sj_engine_close(e);
}

/* Wrong names, dtypes and shapes: the status, a message naming the input,
 * and no output touched. */
static void expect_run_fails(sj_engine *e, sj_named_tensor *in, int n_in, int n_out, sj_status want,
                             const char *needle, const char *needle2) {
    sj_named_tensor out[3] = {{NULL, {0}}, {NULL, {0}}, {NULL, {0}}};
    long live = atomic_load(&counter.live);
    assert_int_equal(sj_engine_run(e, in, n_in, out, n_out, NULL), want);
    assert_error_contains(ctx, needle);
    if (needle2) assert_error_contains(ctx, needle2);
    for (int i = 0; i < 3; i++) assert_null(out[i].tensor.data);
    assert_int_equal(atomic_load(&counter.live), live);
}

static void test_run_checks(void **state) {
    (void)state;
    sj_engine *e = open_engine("interp", NULL, "pow2:1:64");
    float x[100 * INNER] = {0}, m[100 * INNER] = {0};
    int64_t i64[5 * INNER] = {0};
    sj_named_tensor in[3];
    in[0] = (sj_named_tensor){"x", {.rank = 2, .dims = {5, INNER}, .data = x}};
    in[1] = (sj_named_tensor){"q", {.rank = 2, .dims = {5, INNER}, .data = m}};
    expect_run_fails(e, in, 2, 3, SJ_E_INVALID_ARG, "no input 'q'", "its inputs: x, m");

    in[1] = (sj_named_tensor){"x", {.rank = 2, .dims = {5, INNER}, .data = m}};
    expect_run_fails(e, in, 2, 3, SJ_E_INVALID_ARG, "input 'x' given twice", NULL);
    expect_run_fails(e, in, 1, 3, SJ_E_INVALID_ARG, "input 'm' not given", NULL);

    in[1] = (sj_named_tensor){"m", {.rank = 2, .dims = {5, INNER}, .i64 = i64, .dtype = SJ_I64}};
    expect_run_fails(e, in, 2, 3, SJ_E_INVALID_ARG, "input 'm' is int64", "float32");

    in[1] = (sj_named_tensor){"m", {.rank = 2, .dims = {5, INNER + 1}, .data = m}};
    expect_run_fails(e, in, 2, 3, SJ_E_SHAPE, "input 'm' has shape [5, 9]", "[N, 8]");
    in[1] = (sj_named_tensor){"m", {.rank = 1, .dims = {5}, .data = m}};
    expect_run_fails(e, in, 2, 3, SJ_E_SHAPE, "input 'm' has shape [5]", NULL);
    /* Both carry N: they must agree. */
    in[1] = (sj_named_tensor){"m", {.rank = 2, .dims = {4, INNER}, .data = m}};
    expect_run_fails(e, in, 2, 3, SJ_E_SHAPE, "so N = 4, but input 'x' sets N = 5", NULL);
    in[1] = (sj_named_tensor){"m", {.rank = 2, .dims = {5, INNER}, .data = NULL}};
    expect_run_fails(e, in, 2, 3, SJ_E_INVALID_ARG, "input 'm' has no data", NULL);
    in[1] = (sj_named_tensor){"m", {.rank = 2, .dims = {5, INNER}, .data = m}};
    expect_run_fails(e, in, 2, 2, SJ_E_INVALID_ARG, "room for 2 outputs", NULL);
    /* N outside every bucket. */
    in[0].tensor.dims[0] = in[1].tensor.dims[0] = 100;
    expect_run_fails(e, in, 2, 3, SJ_E_OUT_OF_RANGE, "N = 100", NULL);

    sj_engine_stats s;
    sj_engine_stats_get(e, &s);
    assert_int_equal(s.runs, 0);
    assert_int_equal(s.run_failures, 10);
    assert_int_equal(s.compiles, 0); /* nothing compiled for a bad request */
    sj_engine_close(e);
}

typedef struct runner {
    sj_engine *e;
    int id;
} runner;

static void *run_many(void *arg) {
    runner *r = arg;
    for (int i = 0; i < 40; i++)
        run_and_check(r->e, 1 + (r->id * 13 + i * 7) % 60, (unsigned)(r->id + i));
    return NULL;
}

/* Threads share one engine: the first requests of a bucket race for one
 * compile, later ones run side by side. */
static void test_threads(void **state) {
    (void)state;
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.ladder = "pow2:1:64";
    cfg.workers = 2;
    sj_engine *e;
    assert_int_equal(sj_engine_open_graph(ctx, make_graph(), &cfg, &e), SJ_OK);
    enum { THREADS = 4 };
    pthread_t t[THREADS];
    runner r[THREADS];
    for (int i = 0; i < THREADS; i++) {
        r[i] = (runner){e, i};
        assert_int_equal(pthread_create(&t[i], NULL, run_many, &r[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    sj_engine_stats s;
    sj_engine_stats_get(e, &s);
    assert_int_equal(s.runs, THREADS * 40);
    assert_int_equal(s.run_failures, 0);
    assert_int_equal(s.compiles, (uint64_t)s.buckets_ready); /* one compile per bucket used */
    sj_engine_close(e);
}

/* ---- native_after: from a stored CPU level to code for this CPU */

/* A store holding every bucket of `ladder` for x86-64-v2 only. */
static void store_v2(const char *store, const char *ladder) {
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.ladder = ladder;
    cfg.store_path = store;
    cfg.cpu = "x86-64-v2";
    cfg.store_only = true;
    sj_engine *e;
    assert_int_equal(sj_engine_open_graph(ctx, make_graph(), &cfg, &e), SJ_OK);
    assert_int_equal(sj_engine_precompile(e, 2, NULL, NULL), SJ_OK);
    sj_engine_close(e);
}

static sj_engine *open_native(const char *store, const char *ladder, int native_after) {
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.ladder = ladder;
    cfg.store_path = store;
    cfg.native_after = native_after;
    cfg.workers = 2;
    sj_engine *e;
    if (sj_engine_open_graph(ctx, make_graph(), &cfg, &e) != SJ_OK) fail_msg("%s", sj_ctx_last_error(ctx));
    return e;
}

/* One run at n rows (seeded as run_and_check): every output into out[]. */
static void run_outputs(sj_engine *e, int64_t n, unsigned seed, sj_named_tensor out[3]) {
    float x[64 * INNER], m[64 * INNER];
    for (int64_t r = 0; r < n; r++)
        for (int k = 0; k < INNER; k++) {
            x[r * INNER + k] = xval(r, k, seed);
            m[r * INNER + k] = mval(r, k);
        }
    sj_named_tensor in[2] = {{"x", {.rank = 2, .dims = {n, INNER}, .data = x}},
                             {"m", {.rank = 2, .dims = {n, INNER}, .data = m}}};
    assert_int_equal(sj_engine_run(e, in, 2, out, 3, NULL), SJ_OK);
}

/* y of a run at n rows (seeded as run_and_check), checked, into y. */
static void run_y(sj_engine *e, int64_t n, unsigned seed, float *y) {
    run_and_check(e, n, seed);
    sj_named_tensor out[3];
    run_outputs(e, n, seed, out);
    memcpy(y, out[0].tensor.data, (size_t)n * OUTS * sizeof *y);
    for (int i = 0; i < 3; i++) sj_tensor_free(ctx, &out[i].tensor);
}

/* Whether the store file holds a row under key. */
static bool store_holds(const char *store, const sj_store_key *key) {
    sj_store_config sc;
    sj_store_config_init(&sc);
    sc.path = store;
    sj_store *st;
    assert_int_equal(sj_store_open(ctx, &sc, &st), SJ_OK);
    void *bytes;
    size_t len;
    bool found = sj_store_get(st, key, &bytes, &len) == SJ_OK;
    if (found) sj_free(ctx, bytes);
    sj_store_close(st);
    return found;
}

static const char *bucket_cpu(sj_engine *e, int i) {
    return sj_bucketed_cache_bucket_target(sj_engine_cache(e), i);
}

static void test_native_after(void **state) {
    (void)state;
    char store[512];
    snprintf(store, sizeof store, "%s/levels.db", dir);
    store_v2(store, "list:16,64");
    sj_engine *e = open_native(store, "list:16,64", 3);
    const char *native = sj_bucketed_cache_compiler(sj_engine_cache(e))->target_cpu;
    assert_string_not_equal(native, "x86-64-v2");
    float before[10 * OUTS], after[10 * OUTS];
    run_y(e, 10, 1, before); /* two runs so far: run_y checks, then keeps y */
    assert_string_equal(bucket_cpu(e, 0), "x86-64-v2");
    run_and_check(e, 16, 2); /* the third: bucket 16 is recompiled natively */
    sj_bucketed_cache_specialise_wait(sj_engine_cache(e));
    assert_string_equal(bucket_cpu(e, 0), native);
    run_y(e, 10, 1, after);
    for (int i = 0; i < 10 * OUTS; i++) assert_true(fabsf(before[i] - after[i]) < 1e-5f);
    sj_engine_stats s;
    sj_engine_stats_get(e, &s);
    assert_int_equal(s.specialised, 1);
    assert_int_equal(s.specialise_failures, 0);
    assert_int_equal(s.compiles, 1); /* the recompile, never a request's */
    assert_int_equal(s.run_failures, 0);
    /* The store holds the row under this host's own key. */
    sj_store_key key;
    assert_int_equal(sj_engine_store_key(e, 10, &key), SJ_OK);
    assert_string_equal(key.target_cpu, native);
    assert_true(store_holds(store, &key));
    sj_engine_close(e);

    /* A restart takes the native row: no compile, no level. */
    e = open_native(store, "list:16,64", 3);
    run_and_check(e, 12, 3);
    assert_string_equal(bucket_cpu(e, 0), sj_bucketed_cache_compiler(sj_engine_cache(e))->target_cpu);
    sj_engine_stats_get(e, &s);
    assert_int_equal(s.compiles, 0);
    assert_int_equal(s.store_hits, 1);
    sj_engine_close(e);

    /* Off (the default): the level serves however hot the bucket. */
    e = open_native(store, "list:16,64", 0);
    for (int i = 0; i < 6; i++) run_and_check(e, 40, (unsigned)i);
    sj_bucketed_cache_specialise_wait(sj_engine_cache(e));
    assert_string_equal(bucket_cpu(e, 1), "x86-64-v2");
    sj_engine_stats_get(e, &s);
    assert_int_equal(s.compiles + s.specialised, 0);
    sj_engine_close(e);
}

/* Threads run every bucket while each is recompiled and swapped: every
 * result exact, every bucket native at the end. */
static void test_native_after_threads(void **state) {
    (void)state;
    char store[512];
    snprintf(store, sizeof store, "%s/levels_threads.db", dir);
    store_v2(store, "pow2:1:64");
    sj_engine *e = open_native(store, "pow2:1:64", 1);
    enum { THREADS = 4 };
    pthread_t t[THREADS];
    runner r[THREADS];
    for (int i = 0; i < THREADS; i++) {
        r[i] = (runner){e, i};
        assert_int_equal(pthread_create(&t[i], NULL, run_many, &r[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    sj_bucketed_cache_specialise_wait(sj_engine_cache(e));
    sj_engine_stats s;
    sj_engine_stats_get(e, &s);
    assert_int_equal(s.runs, THREADS * 40);
    assert_int_equal(s.run_failures, 0);
    assert_int_equal(s.specialised, (uint64_t)s.buckets_ready);
    const char *native = sj_bucketed_cache_compiler(sj_engine_cache(e))->target_cpu;
    for (int i = 0; i < s.buckets; i++)
        if (bucket_cpu(e, i)) assert_string_equal(bucket_cpu(e, i), native);
    for (int i = 0; i < THREADS; i++) {
        r[i] = (runner){e, i + THREADS};
        run_many(&r[i]);
    }
    sj_engine_close(e);
}

static void test_native_after_refused(void **state) {
    (void)state;
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.native_after = -2;
    expect_open_fails(&cfg, NULL, "native_after -2", "negative");
    cfg.native_after = 3;
    cfg.backend = "interp";
    expect_open_fails(&cfg, NULL, "native_after 3", "backend host, not interp");
    cfg.backend = "host";
    cfg.cpu = "x86-64-v3";
    expect_open_fails(&cfg, NULL, "native_after 3", "cpu 'x86-64-v3'");
}

/* ---- tiered: quick (-O0) code first, the -O3 code swapped in */

static sj_engine *open_tiered(const char *store, const char *ladder) {
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.ladder = ladder;
    cfg.store_path = store;
    cfg.tiered = true;
    sj_engine *e;
    if (sj_engine_open_graph(ctx, make_graph(), &cfg, &e) != SJ_OK) fail_msg("%s", sj_ctx_last_error(ctx));
    return e;
}

/* Whether the store file holds a row for g at extent under the host
 * compiler's key at opt level `opt`. */
static bool stored_at_level(const char *store, const sj_graph *g, int64_t extent, int opt) {
    sj_host_compiler_config hcfg;
    sj_host_compiler_config_init(&hcfg);
    hcfg.options.opt_level = opt;
    sj_host_compiler *hc;
    assert_int_equal(sj_host_compiler_create(ctx, &hcfg, &hc), SJ_OK);
    sj_compiler comp;
    sj_host_compiler_table(hc, &comp);
    sj_store_key key;
    sj_bucketed_cache_key(g, &comp, extent, &key);
    bool found = store_holds(store, &key);
    sj_host_compiler_destroy(hc);
    return found;
}

static void test_tiered(void **state) {
    (void)state;
    char store[512];
    snprintf(store, sizeof store, "%s/tiered.db", dir);
    sj_engine *e = open_tiered(store, "list:16,64");
    /* The first run is served the quick code: the bucket's only code then. */
    sj_named_tensor quick[3], full[3];
    run_outputs(e, 10, 1, quick);
    sj_engine_stats s;
    sj_engine_stats_get(e, &s);
    assert_int_equal(s.quick_compiles, 1);
    sj_engine_bucket_stats b;
    assert_int_equal(sj_engine_bucket_stats_get(e, 0, &b), SJ_OK);
    assert_int_not_equal(b.tier, SJ_ENGINE_TIER_NONE);
    assert_int_equal(b.native, SJ_ENGINE_NATIVE_NONE);
    sj_bucketed_cache_specialise_wait(sj_engine_cache(e));
    assert_int_equal(sj_engine_bucket_stats_get(e, 0, &b), SJ_OK);
    assert_int_equal(b.tier, SJ_ENGINE_TIER_DONE);
    run_and_check(e, 10, 1);
    run_outputs(e, 10, 1, full);
    /* Quick and -O3 code agree within what native_after's swap allows: not
     * bitwise in general, since reductions carry `reassoc` (and products
     * `contract`) so -O3 may vectorise and fuse them where -O0 does not. */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sj_tensor_numel(&quick[i].tensor), sj_tensor_numel(&full[i].tensor));
        for (int64_t k = 0; k < sj_tensor_numel(&full[i].tensor); k++)
            assert_true(fabsf(quick[i].tensor.data[k] - full[i].tensor.data[k]) < 1e-5f);
        sj_tensor_free(ctx, &quick[i].tensor);
        sj_tensor_free(ctx, &full[i].tensor);
    }
    sj_engine_stats_get(e, &s);
    assert_int_equal(s.tier_ups, 1);
    assert_int_equal(s.tier_up_failures, 0);
    assert_int_equal(s.compiles, 1); /* the background's, never a request's */
    assert_int_equal(s.run_failures, 0);
    /* The store holds the -O3 row, never a quick one. */
    assert_true(stored_at_level(store, sj_engine_graph(e), 16, 3));
    assert_false(stored_at_level(store, sj_engine_graph(e), 16, SJ_ENGINE_TIER_OPT_LEVEL));
    sj_engine_close(e);

    /* A restart loads the -O3 code: no compile of either kind, no tier-up. */
    e = open_tiered(store, "list:16,64");
    run_and_check(e, 12, 3);
    sj_bucketed_cache_specialise_wait(sj_engine_cache(e));
    sj_engine_stats_get(e, &s);
    assert_int_equal(s.store_hits, 1);
    assert_int_equal(s.compiles + s.quick_compiles + s.tier_ups, 0);
    assert_int_equal(sj_engine_bucket_stats_get(e, 0, &b), SJ_OK);
    assert_int_equal(b.tier, SJ_ENGINE_TIER_NONE);
    sj_engine_close(e);

    /* Closed at once with tier-ups queued and one compiling: clean (the
     * allocation counter at teardown and the sanitizer builds check). */
    e = open_tiered(NULL, "pow2:1:64");
    for (int64_t n = 1; n <= 64; n *= 2) run_and_check(e, n, (unsigned)n);
    sj_engine_close(e);

    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.tiered = true;
    cfg.backend = "interp";
    expect_open_fails(&cfg, NULL, "tiered", "backend host, not interp");
}

static void test_default_store_path(void **state) {
    (void)state;
    char out[64];
    assert_int_equal(sj_engine_default_store_path("/s.db", "/xdg", "/home/u", out, sizeof out),
                     SJ_OK);
    assert_string_equal(out, "/s.db");
    assert_int_equal(sj_engine_default_store_path("", "/xdg", "/home/u", out, sizeof out), SJ_OK);
    assert_string_equal(out, "/xdg/shapejit/store.db");
    assert_int_equal(sj_engine_default_store_path(NULL, "", "/home/u", out, sizeof out), SJ_OK);
    assert_string_equal(out, "/home/u/.cache/shapejit/store.db");
    assert_int_equal(sj_engine_default_store_path(NULL, NULL, "", out, sizeof out), SJ_E_NOT_FOUND);
    assert_int_equal(sj_engine_default_store_path(NULL, NULL, "/home/u", out, 10),
                     SJ_E_INVALID_ARG);
    assert_string_equal(out, "");
}

/* The graph is the engine's also when the open fails; a NULL engine is
 * a no-op to close, and cfg NULL means the defaults (host, no store). */
static void test_ownership(void **state) {
    (void)state;
    long live = atomic_load(&counter.live);
    sj_engine_close(NULL);
    sj_engine *e;
    assert_int_equal(sj_engine_open_graph(ctx, make_graph(), NULL, &e), SJ_OK);
    assert_string_equal(sj_engine_target(e), "host");
    assert_string_equal(sj_engine_warning(e), "");
    assert_null(sj_engine_remote(e));
    run_and_check(e, 7, 3);
    sj_engine_close(e);
    assert_int_equal(atomic_load(&counter.live), live);
}

/* The tuning records of a store's rows: how many there are, and how many
 * start with `prefix` and name the schedule chosen (or say none was). */
typedef struct records {
    sj_ctx *ctx;
    const char *prefix;
    int rows, matching;
} records;

static int count_record(void *user, const sj_store_entry *e, const void *bytes, size_t len) {
    (void)e;
    records *r = user;
    sj_artifact *a;
    assert_int_equal(sj_artifact_deserialize(r->ctx, bytes, len, &a), SJ_OK);
    sj_artifact_info in;
    sj_artifact_get_info(a, &in);
    r->rows++;
    if (!strncmp(in.tuning, r->prefix, strlen(r->prefix)) &&
        (strstr(in.tuning, "(chosen)") || strstr(in.tuning, "nothing to tune")))
        r->matching++;
    sj_artifact_destroy(a);
    return 0;
}

static void expect_records(const char *store, const char *prefix, int rows, int matching) {
    sj_store_config sc;
    sj_store_config_init(&sc);
    sc.path = store;
    sj_store *s;
    assert_int_equal(sj_store_open(ctx, &sc, &s), SJ_OK);
    records r = {ctx, prefix, 0, 0};
    assert_int_equal(sj_store_scan(s, count_record, NULL, &r), SJ_OK);
    sj_store_close(s);
    assert_int_equal(r.rows, rows);
    assert_int_equal(r.matching, matching);
}

static sj_engine *open_model(const char *model, const char *backend, const char *store, bool tune) {
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.backend = backend;
    cfg.store_path = store;
    cfg.ladder = "list:8,256";
    cfg.tune = tune;
    cfg.tune_budget_ms = 20;
    sj_engine *e = NULL;
    if (sj_engine_open(ctx, model, &cfg, &e) != SJ_OK) fail_msg("open %s: %s", model, sj_ctx_last_error(ctx));
    return e;
}

static uint64_t precompile_compiles(sj_engine *e) {
    if (sj_engine_precompile(e, 1, NULL, NULL) != SJ_OK) fail_msg("precompile: %s", sj_ctx_last_error(ctx));
    sj_engine_stats s;
    sj_engine_stats_get(e, &s);
    return s.compiles;
}

/* One request of n rows on the attention example; the output, to compare. */
static sj_tensor attention_run(sj_engine *e, int64_t n) {
    sj_tensor x;
    assert_int_equal(sj_tensor_alloc(ctx, 2, (int64_t[]){n, 32}, &x), SJ_OK);
    sj_tensor_fill_seeded(&x, 5);
    sj_named_tensor in = {"x", x}, out;
    if (sj_engine_run(e, &in, 1, &out, 1, NULL) != SJ_OK) fail_msg("run: %s", sj_ctx_last_error(ctx));
    sj_tensor_free(ctx, &x);
    return out.tensor;
}

static void test_tuned_buckets(void **state) {
    (void)state;
    const char *attention = SJ_SOURCE_DIR "/examples/models/attention.sjg";
    char store[512];
    snprintf(store, sizeof store, "%s/tuned.db", dir);
    sj_engine *tuned = open_model(attention, "host", store, true);
    assert_int_equal(precompile_compiles(tuned), 2);
    /* each row says what was timed and what won */
    expect_records(store, "schedules at rows ", 2, 2);
    /* the chosen code computes what the reference does */
    sj_engine *ref = open_model(attention, "interp", NULL, false);
    for (int64_t n = 5; n <= 200; n += 195) {
        sj_tensor a = attention_run(tuned, n), b = attention_run(ref, n);
        for (int64_t i = 0; i < n * 32; i++) assert_true(fabs(a.data[i] - b.data[i]) < 1e-4);
        sj_tensor_free(ctx, &a);
        sj_tensor_free(ctx, &b);
    }
    sj_engine_close(ref);
    sj_engine_close(tuned);
    /* a warm process that tunes loads the tuned code and tunes nothing */
    sj_engine *warm = open_model(attention, "host", store, true);
    assert_int_equal(precompile_compiles(warm), 0);
    sj_engine_close(warm);
    /* untuned code has keys of its own */
    sj_engine *plain = open_model(attention, "host", store, false);
    assert_int_equal(precompile_compiles(plain), 2);
    sj_engine_close(plain);

    /* ffn has no attention: its 8-row bucket times the two matmul
     * schedules; at 256 rows nothing differs, so that bucket compiles
     * once, untimed */
    char store2[512];
    snprintf(store2, sizeof store2, "%s/tuned_ffn.db", dir);
    sj_engine *ffn = open_model(SJ_SOURCE_DIR "/examples/models/ffn.sjg", "host", store2, true);
    assert_int_equal(precompile_compiles(ffn), 2);
    sj_engine_close(ffn);
    expect_records(store2, "schedules at rows 8 and 4 (budget 20 ms): rows ", 2, 1);
    expect_records(store2, "one schedule: nothing to tune", 2, 1);

    /* without a matmul or attention no bucket has a choice, the 8-row one
     * included: each compiles once, untimed */
    char model3[512], store3[512];
    snprintf(model3, sizeof model3, "%s/elementwise.sjg", dir);
    snprintf(store3, sizeof store3, "%s/tuned_ew.db", dir);
    FILE *f = fopen(model3, "w");
    assert_non_null(f);
    fputs("graph ew(N) {\n  input x: [N, 8]\n  y = relu(x)\n  output y\n}\n", f);
    fclose(f);
    sj_engine *ew = open_model(model3, "host", store3, true);
    assert_int_equal(precompile_compiles(ew), 2);
    sj_engine_close(ew);
    expect_records(store3, "one schedule: nothing to tune", 2, 2);

    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.tune = true;
    cfg.tune_budget_ms = 0;
    expect_open_fails(&cfg, NULL, "tuning budget", "0 ms");
    sj_engine_config_init(&cfg);
    cfg.tune = true;
    cfg.backend = "interp";
    expect_open_fails(&cfg, NULL, "tune", "interp");
}

static int setup(void **state) {
    (void)state;
    for (int i = 0; i < INNER * OUTS; i++) w[i] = (float)((i * 5) % 9) / 9.0f - 0.4f;
    ctx = ctx_with_counter(&counter);
    return ctx && scratch_dir_create(dir, sizeof dir, "engine") ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    remove_tree(dir);
    sj_ctx_destroy(ctx);
    return atomic_load(&counter.live) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backends_run),       cmocka_unit_test(test_warm_start),
        cmocka_unit_test(test_bad_open),           cmocka_unit_test(test_open_from_file),
        cmocka_unit_test(test_config_sizes),
        cmocka_unit_test(test_run_checks),         cmocka_unit_test(test_threads),
        cmocka_unit_test(test_default_store_path), cmocka_unit_test(test_ownership),
        cmocka_unit_test(test_native_after),       cmocka_unit_test(test_native_after_threads),
        cmocka_unit_test(test_native_after_refused), cmocka_unit_test(test_tiered),
        cmocka_unit_test(test_tuned_buckets),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
