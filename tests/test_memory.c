/* Memory that follows use (issue 21): params live once per memory domain
 * (every bucket's executable and every engine on a context point at the same
 * weight buffers, refcounted, freed with the last user), run memory (arena,
 * padded inputs and outputs) is made by a bucket's first run and given back
 * when an LRU bound on resident buckets trims it, a trimmed bucket still
 * answers exactly, and a bucket whose run memory cannot be allocated fails
 * that request alone while the others keep serving. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "shapejit/engine.h"
#include "shapejit/ext/artifact.h"
#include "shapejit/ext/bucketed_cache.h"
#include "shapejit/ext/compile.h"
#include "shapejit/ext/interp.h"

#include "core/weight_pool.h"
#include "runtime/executor_impl.h"

#define IN 16
#define HID 32
#define OUT 8

/* An allocator that refuses any single request above `limit` bytes while
 * `armed`: a bucket's arena or padded buffers past the limit cannot be
 * had, while small allocations (other buckets, tensors) still can. */
typedef struct limit_alloc {
    atomic_bool armed;
    size_t limit;
    atomic_long refused;
} limit_alloc;

static void *la_alloc(void *user, size_t n) {
    limit_alloc *a = user;
    if (atomic_load(&a->armed) && n > a->limit) {
        atomic_fetch_add(&a->refused, 1);
        return NULL;
    }
    return malloc(n ? n : 1);
}
static void *la_realloc(void *user, void *p, size_t n) {
    limit_alloc *a = user;
    if (atomic_load(&a->armed) && n > a->limit) {
        atomic_fetch_add(&a->refused, 1);
        return NULL;
    }
    return realloc(p, n ? n : 1);
}
static void la_free(void *user, void *p) {
    (void)user;
    free(p);
}

static float w1[IN * HID], w2[HID * OUT];

/* The two-matmul model, small: y = relu(x @ w1) @ w2. */
static sj_graph *make_graph(sj_ctx *ctx) {
    sj_graph *g;
    assert_int_equal(sj_graph_create(ctx, "N", &g), SJ_OK);
    int64_t xd[] = {SJ_DIM_SYM, IN}, d1[] = {IN, HID}, d2[] = {HID, OUT};
    sj_value x, a, b, h, r, y;
    assert_int_equal(sj_graph_input(g, "x", 2, xd, &x), SJ_OK);
    assert_int_equal(sj_graph_param(g, "w1", 2, d1, w1, &a), SJ_OK);
    assert_int_equal(sj_graph_param(g, "w2", 2, d2, w2, &b), SJ_OK);
    assert_int_equal(sj_graph_matmul(g, x, a, &h), SJ_OK);
    assert_int_equal(sj_graph_unary(g, SJ_OP_RELU, h, &r), SJ_OK);
    assert_int_equal(sj_graph_matmul(g, r, b, &y), SJ_OK);
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    return g;
}

static sj_engine *open_engine(sj_ctx *ctx, const char *ladder, int max_resident) {
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.backend = "host";
    cfg.ladder = ladder;
    cfg.max_resident_buckets = max_resident;
    sj_engine *e = NULL;
    if (sj_engine_open_graph(ctx, make_graph(ctx), &cfg, &e) != SJ_OK)
        fail_msg("open: %s", sj_ctx_last_error(ctx));
    return e;
}

static float xval(int64_t r, int k) { return (float)((r * 7 + k * 3) % 11) / 11.0f - 0.5f; }

/* Runs n rows; checks y against plain loops. Returns the run's status. */
static sj_status run_rows(sj_engine *e, sj_ctx *ctx, int64_t n) {
    float *x = malloc((size_t)n * IN * sizeof *x);
    assert_non_null(x);
    for (int64_t r = 0; r < n; r++)
        for (int k = 0; k < IN; k++) x[r * IN + k] = xval(r, k);
    sj_named_tensor in[1] = {{"x", {.rank = 2, .dims = {n, IN}, .data = x}}};
    sj_named_tensor out[1];
    sj_status st = sj_engine_run(e, in, 1, out, 1, NULL);
    if (st == SJ_OK) {
        for (int64_t r = 0; r < n; r++)
            for (int j = 0; j < OUT; j++) {
                double acc = 0;
                for (int m = 0; m < HID; m++) {
                    double h = 0;
                    for (int k = 0; k < IN; k++) h += (double)x[r * IN + k] * w1[k * HID + m];
                    acc += (h > 0 ? h : 0) * w2[m * OUT + j];
                }
                assert_true(fabs(out[0].tensor.data[r * OUT + j] - acc) < 1e-4);
            }
        sj_tensor_free(ctx, &out[0].tensor);
    }
    free(x);
    return st;
}

static int setup(void **state) {
    (void)state;
    for (int i = 0; i < IN * HID; i++) w1[i] = (float)((i * 13) % 17) / 17.0f - 0.4f;
    for (int i = 0; i < HID * OUT; i++) w2[i] = (float)((i * 5) % 7) / 7.0f - 0.5f;
    return 0;
}

static sj_executable *bucket_exe(sj_engine *e, int64_t key) {
    int64_t extent;
    void *exe;
    assert_int_equal(sj_bucketed_cache_get_or_compile(sj_engine_cache(e), key, &extent, &exe), SJ_OK);
    return exe;
}

/* Two buckets' executables point at the same weight buffers; the pool
 * holds one copy per param with a reference per executable. */
static void test_buckets_share_weights(void **state) {
    (void)state;
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    sj_engine *e = open_engine(ctx, "list:4,64", 0);
    sj_executable *a = bucket_exe(e, 3), *b = bucket_exe(e, 40);
    assert_ptr_not_equal(a, b);
    assert_int_equal(a->n_params, 2);
    assert_int_equal(b->n_params, 2);
    for (int i = 0; i < 2; i++) {
        assert_non_null(a->params[i].buffer);
        assert_ptr_equal(a->params[i].buffer, b->params[i].buffer);
    }
    sj_weight_pool_stats ps;
    sj_weight_pool_stats_get(sj_ctx_weight_pool(ctx), &ps);
    assert_int_equal(ps.buffers, 2);
    assert_int_equal(ps.bytes, sizeof w1 + sizeof w2);
    assert_int_equal(ps.refs, 4);
    sj_engine_stats st;
    sj_engine_stats_get(e, &st);
    assert_int_equal(st.weight_bytes, sizeof w1 + sizeof w2);
    assert_int_equal(run_rows(e, ctx, 3), SJ_OK);
    assert_int_equal(run_rows(e, ctx, 40), SJ_OK);
    sj_engine_close(e);
    /* The last user gone, the weights are gone. */
    sj_weight_pool_stats_get(sj_ctx_weight_pool(ctx), &ps);
    assert_int_equal(ps.buffers, 0);
    assert_int_equal(ps.bytes, 0);
    sj_ctx_destroy(ctx);
}

/* Four engines of one model on one context hold one copy of the weights;
 * closing three leaves the fourth's intact and running. */
static void test_engines_share_weights(void **state) {
    (void)state;
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    sj_engine *es[4];
    for (int i = 0; i < 4; i++) {
        es[i] = open_engine(ctx, "pow2:1:64", 0);
        assert_int_equal(run_rows(es[i], ctx, 5 + 9 * i), SJ_OK);
    }
    sj_weight_pool_stats ps;
    sj_weight_pool_stats_get(sj_ctx_weight_pool(ctx), &ps);
    assert_int_equal(ps.buffers, 2);
    assert_int_equal(ps.bytes, sizeof w1 + sizeof w2);
    assert_int_equal(ps.refs, 8);
    for (int i = 0; i < 3; i++) sj_engine_close(es[i]);
    sj_weight_pool_stats_get(sj_ctx_weight_pool(ctx), &ps);
    assert_int_equal(ps.buffers, 2);
    assert_int_equal(ps.refs, 2);
    assert_int_equal(run_rows(es[3], ctx, 31), SJ_OK);
    sj_engine_close(es[3]);
    sj_ctx_destroy(ctx);
}

/* Loading (and precompiling) makes no run memory; the first run does. */
static void test_run_memory_on_first_run(void **state) {
    (void)state;
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    sj_engine *e = open_engine(ctx, "list:4,64", 0);
    assert_int_equal(sj_engine_precompile(e, 1, NULL, NULL), SJ_OK);
    sj_executable_memory_info m;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(sj_bucketed_cache_bucket_memory(sj_engine_cache(e), i, &m), SJ_OK);
        assert_false(m.resident);
        assert_int_equal(m.materialized, 0);
        assert_int_equal(m.weight_bytes, sizeof w1 + sizeof w2);
    }
    sj_engine_stats st;
    sj_engine_stats_get(e, &st);
    assert_int_equal(st.buckets_resident, 0);
    assert_int_equal(st.run_bytes, 0);
    assert_int_equal(run_rows(e, ctx, 50), SJ_OK);
    assert_int_equal(sj_bucketed_cache_bucket_memory(sj_engine_cache(e), 1, &m), SJ_OK);
    assert_true(m.resident);
    assert_int_equal(m.materialized, 1);
    assert_int_equal(m.io_bytes, 64 * (IN + OUT) * sizeof(float));
    /* The hidden [64, HID] activation lives in the arena (liveness plan). */
    assert_true(m.arena_bytes >= 64 * HID * sizeof(float));
    assert_true(m.run_bytes >= m.arena_bytes + m.io_bytes);
    assert_int_equal(sj_bucketed_cache_bucket_memory(sj_engine_cache(e), 0, &m), SJ_OK);
    assert_false(m.resident);
    /* Later runs reuse it. */
    assert_int_equal(run_rows(e, ctx, 9), SJ_OK);
    assert_int_equal(sj_bucketed_cache_bucket_memory(sj_engine_cache(e), 1, &m), SJ_OK);
    assert_int_equal(m.materialized, 1);
    sj_engine_close(e);
    sj_ctx_destroy(ctx);
}

/* With at most two resident buckets, a third trims the least recently run;
 * the trimmed one answers exactly when it runs again. */
static void test_resident_lru(void **state) {
    (void)state;
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    sj_engine *e = open_engine(ctx, "list:4,16,64", 2);
    sj_bucketed_cache *c = sj_engine_cache(e);
    assert_int_equal(run_rows(e, ctx, 3), SJ_OK);  /* bucket 0 */
    assert_int_equal(run_rows(e, ctx, 12), SJ_OK); /* bucket 1 */
    assert_int_equal(run_rows(e, ctx, 2), SJ_OK);  /* bucket 0 again: 1 is now the LRU */
    assert_int_equal(run_rows(e, ctx, 60), SJ_OK); /* bucket 2: trims 1 */
    sj_executable_memory_info m[3];
    for (int i = 0; i < 3; i++) assert_int_equal(sj_bucketed_cache_bucket_memory(c, i, &m[i]), SJ_OK);
    assert_true(m[0].resident);
    assert_false(m[1].resident);
    assert_int_equal(m[1].trimmed, 1);
    assert_true(m[2].resident);
    sj_engine_stats st;
    sj_engine_stats_get(e, &st);
    assert_int_equal(st.resident_evictions, 1);
    assert_int_equal(st.buckets_resident, 2);
    assert_int_equal(st.run_bytes, m[0].run_bytes + m[2].run_bytes);
    /* Trimmed, not unloaded: the weights are still shared, nothing recompiles. */
    assert_int_equal(m[1].weight_bytes, sizeof w1 + sizeof w2);
    uint64_t compiles = st.compiles;
    assert_int_equal(run_rows(e, ctx, 16), SJ_OK); /* bucket 1 back: trims 0 */
    sj_engine_stats_get(e, &st);
    assert_int_equal(st.compiles, compiles);
    assert_int_equal(st.resident_evictions, 2);
    assert_int_equal(sj_bucketed_cache_bucket_memory(c, 1, &m[1]), SJ_OK);
    assert_int_equal(m[1].materialized, 2);
    assert_int_equal(sj_bucketed_cache_bucket_memory(c, 0, &m[0]), SJ_OK);
    assert_false(m[0].resident);
    sj_engine_close(e);
    sj_ctx_destroy(ctx);
}

/* A negative bound is refused by name; 0 means no bound. */
static void test_resident_bound_checked(void **state) {
    (void)state;
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.backend = "host";
    cfg.max_resident_buckets = -1;
    sj_engine *e = (sj_engine *)1;
    assert_int_equal(sj_engine_open_graph(ctx, make_graph(ctx), &cfg, &e), SJ_E_INVALID_ARG);
    assert_null(e);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "max_resident_buckets -1"));
    e = open_engine(ctx, "list:4,16,64", 0);
    for (int64_t n = 1; n <= 64; n *= 4) assert_int_equal(run_rows(e, ctx, n), SJ_OK);
    sj_engine_stats st;
    sj_engine_stats_get(e, &st);
    assert_int_equal(st.buckets_resident, 3);
    assert_int_equal(st.resident_evictions, 0);
    sj_engine_close(e);
    sj_ctx_destroy(ctx);
}

/* A bucket whose run memory cannot be had fails that request with a
 * message naming the bucket; the other buckets keep serving, and once
 * memory is back the same bucket serves too. */
static void test_arena_allocation_failure(void **state) {
    (void)state;
    limit_alloc la = {.limit = 64 * 1024};
    sj_ctx_config cc;
    sj_ctx_config_init(&cc);
    cc.allocator = (sj_allocator){la_alloc, la_realloc, la_free, &la};
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(&cc, &ctx), SJ_OK);
    sj_engine *e = open_engine(ctx, "list:8,4096", 0);
    assert_int_equal(sj_engine_precompile(e, 1, NULL, NULL), SJ_OK);
    atomic_store(&la.armed, true);
    assert_int_equal(run_rows(e, ctx, 5), SJ_OK);
    /* Bucket 4096's padded input alone is 256 KiB. */
    float *x = calloc(4096 * IN, sizeof *x);
    assert_non_null(x);
    sj_named_tensor in[1] = {{"x", {.rank = 2, .dims = {4000, IN}, .data = x}}};
    sj_named_tensor out[1];
    assert_int_equal(sj_engine_run(e, in, 1, out, 1, NULL), SJ_E_NOMEM);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "bucket 4096"));
    assert_true(atomic_load(&la.refused) > 0);
    sj_executable_memory_info m;
    assert_int_equal(sj_bucketed_cache_bucket_memory(sj_engine_cache(e), 1, &m), SJ_OK);
    assert_false(m.resident);
    assert_int_equal(run_rows(e, ctx, 7), SJ_OK);
    atomic_store(&la.armed, false);
    assert_int_equal(run_rows(e, ctx, 4000), SJ_OK);
    free(x);
    sj_engine_close(e);
    sj_ctx_destroy(ctx);
}

/* A device whose memory the host does not address (the host device's
 * backend behind a table without SJ_DEVICE_HOST_VISIBLE, as a GPU is): its
 * weights come from the device's own pool, shared by its executables,
 * uploaded once, freed with the last; runs copy through staging. */
static sj_device *inner;
static sj_status w_alloc(void *u, size_t n, void **o) { return inner->ops->alloc(inner->impl, n, o); }
static void w_free(void *u, void *p) { inner->ops->free(inner->impl, p); }
static sj_status w_copy(void *u, void *d, const void *s, size_t n, sj_copy_kind k) {
    return inner->ops->copy(inner->impl, d, s, n, k);
}
static sj_status w_load(void *u, sj_code_format f, const void *c, size_t n, void **o) {
    return inner->ops->load_module(inner->impl, f, c, n, o);
}
static void w_unload(void *u, void *m) { inner->ops->unload_module(inner->impl, m); }
static sj_status w_resolve(void *u, void *m, const char *name, sj_kernel_handle *o, sj_kernel_attrs *a) {
    return inner->ops->resolve_kernel(inner->impl, m, name, o, a);
}
static sj_status w_launch(void *u, sj_kernel_handle k, const sj_launch_dims *d, void *const *b,
                          const int64_t *info, int64_t n) {
    return inner->ops->launch(inner->impl, k, d, b, info, n);
}
static sj_status w_sync(void *u) { return inner->ops->sync(inner->impl); }
static sj_status w_begin(void *u) { return inner->ops->begin_capture(inner->impl); }
static sj_status w_end(void *u, sj_graph_handle *o) { return inner->ops->end_capture(inner->impl, o); }
static sj_status w_replay(void *u, sj_graph_handle g, int64_t n) { return inner->ops->replay(inner->impl, g, n); }
static void w_destroy_graph(void *u, sj_graph_handle g) { inner->ops->destroy_graph(inner->impl, g); }
static void w_destroy(void *u) { (void)u; }

static void test_device_pool(void **state) {
    (void)state;
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    assert_int_equal(sj_host_device_create(ctx, NULL, &inner), SJ_OK);
    static sj_device_ops ops;
    ops = (sj_device_ops){.name = "host", .flags = 0, .alloc = w_alloc, .free = w_free, .copy = w_copy,
                          .load_module = w_load, .unload_module = w_unload, .resolve_kernel = w_resolve,
                          .launch = w_launch, .sync = w_sync, .begin_capture = w_begin,
                          .end_capture = w_end, .replay = w_replay, .destroy_graph = w_destroy_graph,
                          .destroy = w_destroy};
    sj_device *dev;
    assert_int_equal(sj_device_create(ctx, &ops, &ops, NULL, &dev), SJ_OK);
    sj_graph *g = make_graph(ctx);
    sj_executable *exe[2];
    const int64_t extents[2] = {8, 32};
    for (int i = 0; i < 2; i++) {
        sj_artifact *a;
        assert_int_equal(sj_compile(g, extents[i], NULL, &a), SJ_OK);
        assert_int_equal(sj_artifact_load(a, dev, g, &exe[i]), SJ_OK);
        sj_artifact_destroy(a);
    }
    for (int i = 0; i < 2; i++) assert_ptr_equal(exe[0]->params[i].buffer, exe[1]->params[i].buffer);
    sj_weight_pool_stats ps;
    sj_weight_pool_stats_get(dev->weights, &ps);
    assert_int_equal(ps.buffers, 2);
    assert_int_equal(ps.refs, 4);
    sj_weight_pool_stats_get(sj_ctx_weight_pool(ctx), &ps);
    assert_int_equal(ps.buffers, 0); /* not the host pool: this memory is the device's */
    for (int i = 0; i < 2; i++) {
        int64_t n = extents[i] - 3;
        float *x = malloc((size_t)n * IN * sizeof *x);
        for (int64_t k = 0; k < n * IN; k++) x[k] = xval(k / IN, (int)(k % IN));
        sj_tensor in[1] = {{.rank = 2, .dims = {n, IN}, .data = x}}, got[1] = {{0}}, want[1] = {{0}};
        assert_int_equal(sj_executable_run(exe[i], n, in, got), SJ_OK);
        assert_int_equal(sj_interp_run(g, n, in, want), SJ_OK);
        for (int64_t k = 0; k < n * OUT; k++) assert_true(fabsf(got[0].data[k] - want[0].data[k]) < 1e-4f);
        sj_tensor_free(ctx, &got[0]);
        sj_tensor_free(ctx, &want[0]);
        free(x);
    }
    sj_executable_destroy(exe[0]);
    sj_weight_pool_stats_get(dev->weights, &ps);
    assert_int_equal(ps.buffers, 2);
    assert_int_equal(ps.refs, 2);
    sj_executable_destroy(exe[1]);
    sj_weight_pool_stats_get(dev->weights, &ps);
    assert_int_equal(ps.buffers, 0);
    sj_graph_destroy(g);
    sj_device_destroy(dev);
    sj_device_destroy(inner);
    sj_ctx_destroy(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buckets_share_weights),
        cmocka_unit_test(test_engines_share_weights),
        cmocka_unit_test(test_run_memory_on_first_run),
        cmocka_unit_test(test_resident_lru),
        cmocka_unit_test(test_resident_bound_checked),
        cmocka_unit_test(test_arena_allocation_failure),
        cmocka_unit_test(test_device_pool),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
