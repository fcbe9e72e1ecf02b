/* Memory that follows use (issue 21): params live once per memory domain
 * (every bucket's executable and every engine on a context point at the same
 * weight buffers, refcounted, freed with the last user), run memory (arena,
 * padded inputs and outputs) is made by a bucket's first run and given back
 * when an LRU bound on resident buckets trims it, a trimmed bucket still
 * answers exactly, and a bucket whose run memory cannot be allocated fails
 * that request alone while the others keep serving. ONNX external-data
 * weights are read in place from a read-only mapping of their file when
 * the layout allows (else copied, and counted), the mapping lives while
 * any graph or executable uses it, and a file changed or truncated under it
 * fails the request naming the file instead of answering. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shapejit/engine.h"
#include "shapejit/ext/artifact.h"
#include "shapejit/ext/bucketed_cache.h"
#include "shapejit/ext/compile.h"
#include "shapejit/ext/interp.h"

#include "core/weight_map.h"
#include "ir/graph_impl.h"
#include "runtime/weight_pool.h"
#include "runtime/executor_impl.h"
#include "tests/onnx_external.h"
#include "tests/skip.h"

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
    sj__weight_pool_stats_get(sj__ctx_weight_pool(ctx), &ps);
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
    sj__weight_pool_stats_get(sj__ctx_weight_pool(ctx), &ps);
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
    sj__weight_pool_stats_get(sj__ctx_weight_pool(ctx), &ps);
    assert_int_equal(ps.buffers, 2);
    assert_int_equal(ps.bytes, sizeof w1 + sizeof w2);
    assert_int_equal(ps.refs, 8);
    for (int i = 0; i < 3; i++) sj_engine_close(es[i]);
    sj__weight_pool_stats_get(sj__ctx_weight_pool(ctx), &ps);
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

/* g's buckets on a device whose memory the host cannot address: params
 * come from the device's own pool (copies, also of mapped weights, which
 * kernels there cannot read in place), shared by both buckets. */
static void check_device_pool(sj_ctx *ctx, sj_graph *g) {
    assert_int_equal(sj_host_device_create(ctx, NULL, &inner), SJ_OK);
    static sj_device_ops ops;
    ops = (sj_device_ops){.name = "host", .flags = 0, .alloc = w_alloc, .free = w_free, .copy = w_copy,
                          .load_module = w_load, .unload_module = w_unload, .resolve_kernel = w_resolve,
                          .launch = w_launch, .sync = w_sync, .begin_capture = w_begin,
                          .end_capture = w_end, .replay = w_replay, .destroy_graph = w_destroy_graph,
                          .destroy = w_destroy};
    sj_device *dev;
    assert_int_equal(sj_device_create(ctx, &ops, &ops, NULL, &dev), SJ_OK);
    sj_executable *exe[2];
    const int64_t extents[2] = {8, 32};
    for (int i = 0; i < 2; i++) {
        sj_artifact *a;
        assert_int_equal(sj_compile(g, extents[i], NULL, &a), SJ_OK);
        assert_int_equal(sj_artifact_load(a, dev, g, &exe[i]), SJ_OK);
        sj_artifact_destroy(a);
        assert_int_equal(exe[i]->n_maps, 0);
    }
    for (int i = 0; i < 2; i++) assert_ptr_equal(exe[0]->params[i].buffer, exe[1]->params[i].buffer);
    sj_weight_pool_stats ps;
    sj__weight_pool_stats_get(dev->weights, &ps);
    assert_int_equal(ps.buffers, 2);
    assert_int_equal(ps.refs, 4);
    assert_int_equal(ps.mapped_buffers, 0);
    sj__weight_pool_stats_get(sj__ctx_weight_pool(ctx), &ps);
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
    sj__weight_pool_stats_get(dev->weights, &ps);
    assert_int_equal(ps.buffers, 2);
    assert_int_equal(ps.refs, 2);
    sj_executable_destroy(exe[1]);
    sj__weight_pool_stats_get(dev->weights, &ps);
    assert_int_equal(ps.buffers, 0);
    sj_graph_destroy(g);
    sj_device_destroy(dev);
    sj_device_destroy(inner);
}

static void test_device_pool(void **state) {
    (void)state;
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    check_device_pool(ctx, make_graph(ctx));
    sj_ctx_destroy(ctx);
}


/* ---- weights mapped from ONNX external data ---- */

typedef struct ext_model {
    char dir[64];
    char model[128], weights[128];
} ext_model;

/* w1 at off1 and w2 at off2 of dir/weights.bin, the model beside it. */
static void write_ext(ext_model *m, uint64_t off1, uint64_t off2) {
    snprintf(m->dir, sizeof m->dir, "/tmp/sj_mapped_XXXXXX");
    assert_non_null(mkdtemp(m->dir));
    snprintf(m->model, sizeof m->model, "%s/model.onnx", m->dir);
    snprintf(m->weights, sizeof m->weights, "%s/weights.bin", m->dir);
    sj_test_mlp spec = {.dir = m->dir, .in = IN, .hid = HID, .out = OUT, .w1 = w1, .w2 = w2,
                        .off1 = off1, .off2 = off2};
    assert_true(sj_test_write_external_mlp(&spec));
}

static void remove_ext(ext_model *m) {
    unlink(m->model);
    unlink(m->weights);
    rmdir(m->dir);
}

static sj_engine *open_file(sj_ctx *ctx, const char *model, const char *ladder, bool copy) {
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.backend = "host";
    cfg.ladder = ladder;
    cfg.model.copy_external_data = copy;
    sj_engine *e = NULL;
    if (sj_engine_open(ctx, model, &cfg, &e) != SJ_OK) fail_msg("open: %s", sj_ctx_last_error(ctx));
    return e;
}

/* Lines of /proc/self/maps naming path: the file mapped in place, or
 * (copy_only) only its sealed copies ("/memfd:shapejit:PATH (deleted)"). */
static int maps_naming(const char *path, bool copy_only) {
    FILE *f = fopen("/proc/self/maps", "r");
    assert_non_null(f);
    char line[1024];
    int n = 0;
    size_t len = strlen(path);
    while (fgets(line, sizeof line, f)) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        size_t l = strlen(line);
        bool copy = l > strlen(" (deleted)") && !strcmp(line + l - strlen(" (deleted)"), " (deleted)") &&
                    strstr(line, "/memfd:shapejit:");
        if (copy) l -= strlen(" (deleted)");
        n += l >= len && !strncmp(line + l - len, path, len) && (copy || !copy_only);
    }
    fclose(f);
    return n;
}

/* How many mappings of path's weights this process holds: the file in
 * place, or its sealed copy. */
static int mappings_of(const char *path) { return maps_naming(path, false); }

/* Sets or clears path's immutable flag (chattr +i); false where this
 * filesystem or process cannot (no CAP_LINUX_IMMUTABLE, tmpfs). */
static bool set_immutable(const char *path, bool on) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return false;
    int flags = 0;
    bool ok = ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
    flags = on ? flags | FS_IMMUTABLE_FL : flags & ~FS_IMMUTABLE_FL;
    ok = ok && ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
    close(fd);
    return ok;
}

/* Runs n rows of the fixed input; y gets n * OUT floats. */
static sj_status run_into(sj_engine *e, sj_ctx *ctx, int64_t n, float *y) {
    float x[64 * IN];
    for (int64_t r = 0; r < n; r++)
        for (int k = 0; k < IN; k++) x[r * IN + k] = xval(r, k);
    sj_named_tensor in[1] = {{"x", {.rank = 2, .dims = {n, IN}, .data = x}}};
    sj_named_tensor out[1];
    sj_status st = sj_engine_run(e, in, 1, out, 1, NULL);
    if (st == SJ_OK) {
        memcpy(y, out[0].tensor.data, (size_t)n * OUT * sizeof *y);
        sj_tensor_free(ctx, &out[0].tensor);
    }
    return st;
}

/* a and b (engines of the same model on their own contexts) give the same
 * bits at 1, 3, 17 and 64 rows. */
static void assert_same_results(sj_engine *a, sj_ctx *ca, sj_engine *b, sj_ctx *cb) {
    float ya[64 * OUT], yb[64 * OUT];
    int64_t sizes[] = {1, 3, 17, 64};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(run_into(a, ca, sizes[i], ya), SJ_OK);
        assert_int_equal(run_into(b, cb, sizes[i], yb), SJ_OK);
        assert_memory_equal(ya, yb, (size_t)sizes[i] * OUT * sizeof(float));
    }
}

/* An aligned float32 tensor is read in place: the executables' param
 * buffers are the file's pages at the tensors' offsets, the pool and the
 * stats say mapped, and the results equal the copied path's bit for bit. */
static void test_mapped_weights(void **state) {
    (void)state;
    ext_model m;
    write_ext(&m, 0, 4096);
    sj_ctx *ctx, *ctx2;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    assert_int_equal(sj_ctx_create(NULL, &ctx2), SJ_OK);
    sj_engine *e = open_file(ctx, m.model, "list:4,64", false);
    sj_graph_weights gw;
    sj_graph_weights_get(sj_engine_graph(e), &gw);
    assert_int_equal(gw.params, 2);
    assert_int_equal(gw.mapped_params, 2);
    assert_int_equal(gw.mapped_bytes, sizeof w1 + sizeof w2);
    assert_int_equal(gw.mapped_files, 1);
    assert_int_equal(gw.external_copied, 0);

    sj_executable *a = bucket_exe(e, 3), *b = bucket_exe(e, 40);
    assert_int_equal(a->n_maps, 1);
    const uint8_t *base = sj__weight_map_data(a->maps[0]);
    assert_string_equal(sj__weight_map_path(a->maps[0]) + strlen(sj__weight_map_path(a->maps[0])) - 11,
                        "weights.bin");
    for (int i = 0; i < 2; i++) {
        assert_true(a->params[i].mapped);
        assert_ptr_equal(a->params[i].buffer, b->params[i].buffer);
        const uint8_t *p = a->params[i].buffer;
        assert_true(p == base || p == base + 4096); /* w1 at 0, w2 at 4096: no copy */
    }
    assert_memory_equal(base, w1, sizeof w1);
    sj_weight_pool_stats ps;
    sj__weight_pool_stats_get(sj__ctx_weight_pool(ctx), &ps);
    assert_int_equal(ps.buffers, 2);
    assert_int_equal(ps.mapped_buffers, 2);
    assert_int_equal(ps.mapped_bytes, sizeof w1 + sizeof w2);
    assert_int_equal(ps.mapped, 2); /* made from the mapping; bucket b shared them */
    assert_int_equal(ps.shared, 2);
    sj_engine_stats st;
    sj_engine_stats_get(e, &st);
    assert_int_equal(st.weight_bytes, sizeof w1 + sizeof w2);
    assert_int_equal(st.weight_mapped_bytes, sizeof w1 + sizeof w2);
    sj_engine_memory bm;
    assert_int_equal(sj_engine_bucket_memory(e, 0, &bm), SJ_OK);
    assert_int_equal(bm.weight_mapped_bytes, sizeof w1 + sizeof w2);

    /* The copied path (its own context, or the pool would lend it the
     * mapped buffers by hash): same bits. */
    sj_engine *c = open_file(ctx2, m.model, "list:4,64", true);
    sj_graph_weights_get(sj_engine_graph(c), &gw);
    assert_int_equal(gw.mapped_params, 0);
    assert_int_equal(gw.external_copied, 2);
    assert_int_equal(gw.external_copied_bytes, sizeof w1 + sizeof w2);
    assert_same_results(e, ctx, c, ctx2);
    assert_int_equal(run_rows(e, ctx, 40), SJ_OK); /* and right, against plain loops */
    sj__weight_pool_stats_get(sj__ctx_weight_pool(ctx2), &ps);
    assert_int_equal(ps.mapped_buffers, 0);
    assert_int_equal(mappings_of(m.weights), 1);
    sj_engine_close(c);
    sj_engine_close(e);
    assert_int_equal(mappings_of(m.weights), 0);
    sj_ctx_destroy(ctx2);
    sj_ctx_destroy(ctx);
    remove_ext(&m);
}

/* The mapping outlives the graph it was loaded with: a second engine of
 * the same file shares the first's pool entries (same hashes), so closing
 * the first (its graph) leaves that mapping held by the entries, and the
 * second still runs; the last user gone, nothing stays mapped. */
static void test_mapped_weights_outlive_graph(void **state) {
    (void)state;
    ext_model m;
    write_ext(&m, 0, 4096);
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    sj_engine *e1 = open_file(ctx, m.model, "list:4,64", false);
    assert_int_equal(run_rows(e1, ctx, 3), SJ_OK);
    sj_engine *e2 = open_file(ctx, m.model, "list:4,64", false);
    assert_int_equal(mappings_of(m.weights), 2); /* each graph maps the file */
    sj_executable *x = bucket_exe(e2, 3);
    sj_engine_close(e1);
    /* e1's mapping stays: the pool entries e2's executable shares hold it. */
    assert_int_equal(mappings_of(m.weights), 2);
    assert_true(x->params[0].mapped);
    assert_int_equal(run_rows(e2, ctx, 3), SJ_OK);
    assert_int_equal(run_rows(e2, ctx, 50), SJ_OK);
    sj_engine_close(e2);
    assert_int_equal(mappings_of(m.weights), 0);
    sj_weight_pool_stats ps;
    sj__weight_pool_stats_get(sj__ctx_weight_pool(ctx), &ps);
    assert_int_equal(ps.buffers, 0);
    sj_ctx_destroy(ctx);
    remove_ext(&m);
}

/* Whether p is the data of one of g's params. */
static bool is_param_data(const sj_graph *g, const void *p) {
    for (int v = 0; v < g->n_nodes; v++)
        if (g->nodes[v].op == SJ_OP_PARAM && g->nodes[v].bytes == p) return true;
    return false;
}

/* Weights embedded in the model (raw_data) are decoded once, into blocks
 * that the graph, the host's pool and every bucket's executable share: the
 * executables' param buffers are the graph's own data, not copies, and
 * nothing counts as mapped from a file. A second engine of the file shares
 * the first's blocks by hash and keeps them after the first closes; the
 * results equal a graph built with sj_graph_param (copied weights) bit for
 * bit; the last user gone, the pool is empty (and ASan sees no leak). */
static void test_embedded_weights_lent(void **state) {
    (void)state;
    ext_model m;
    snprintf(m.dir, sizeof m.dir, "/tmp/sj_embedded_XXXXXX");
    assert_non_null(mkdtemp(m.dir));
    snprintf(m.model, sizeof m.model, "%s/model.onnx", m.dir);
    snprintf(m.weights, sizeof m.weights, "%s/weights.bin", m.dir);
    sj_test_mlp spec = {.dir = m.dir, .in = IN, .hid = HID, .out = OUT, .w1 = w1, .w2 = w2,
                        .embedded = true};
    assert_true(sj_test_write_external_mlp(&spec));
    sj_ctx *ctx, *ctx2;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    assert_int_equal(sj_ctx_create(NULL, &ctx2), SJ_OK);
    sj_engine *e1 = open_file(ctx, m.model, "list:4,64", false);
    const sj_graph *g1 = sj_engine_graph(e1);
    sj_graph_weights gw;
    sj_graph_weights_get(g1, &gw);
    assert_int_equal(gw.params, 2);
    assert_int_equal(gw.bytes, sizeof w1 + sizeof w2);
    assert_int_equal(gw.mapped_params, 0);
    assert_int_equal(gw.mapped_files, 0);

    sj_executable *a = bucket_exe(e1, 3), *b = bucket_exe(e1, 40);
    assert_int_equal(a->n_maps, 0); /* no file to check before runs */
    for (int i = 0; i < 2; i++) {
        assert_false(a->params[i].mapped);
        assert_ptr_equal(a->params[i].buffer, b->params[i].buffer);
        assert_true(is_param_data(g1, a->params[i].buffer)); /* no copy */
    }
    sj_weight_pool_stats ps;
    sj__weight_pool_stats_get(sj__ctx_weight_pool(ctx), &ps);
    assert_int_equal(ps.buffers, 2);
    assert_int_equal(ps.bytes, sizeof w1 + sizeof w2);
    assert_int_equal(ps.mapped_buffers, 0);
    assert_int_equal(ps.mapped, 0);
    sj_engine_stats st;
    sj_engine_stats_get(e1, &st);
    assert_int_equal(st.weight_mapped_bytes, 0);

    sj_engine *c = open_engine(ctx2, "list:4,64", 0); /* sj_graph_param: copied weights */
    assert_same_results(e1, ctx, c, ctx2);
    float ye[64 * OUT], yc[64 * OUT];
    sj_engine *e2 = open_file(ctx, m.model, "list:4,64", false);
    sj_executable *x = bucket_exe(e2, 3);
    assert_ptr_equal(x->params[0].buffer, a->params[0].buffer); /* e1's block, by hash */
    sj_engine_close(e1); /* its graph goes; the pool entry keeps the block */
    assert_int_equal(run_into(e2, ctx, 3, ye), SJ_OK);
    assert_int_equal(run_into(c, ctx2, 3, yc), SJ_OK);
    assert_memory_equal(ye, yc, 3 * OUT * sizeof(float));
    sj_engine_close(e2);
    sj__weight_pool_stats_get(sj__ctx_weight_pool(ctx), &ps);
    assert_int_equal(ps.buffers, 0);
    sj_engine_close(c);
    sj_ctx_destroy(ctx2);
    sj_ctx_destroy(ctx);
    unlink(m.model);
    rmdir(m.dir);
}

/* A tensor at an offset not aligned to its element is copied (and counted
 * so); the aligned one beside it is still mapped; results stay right. */
static void test_mapped_weights_misaligned(void **state) {
    (void)state;
    ext_model m;
    write_ext(&m, 2, 4096);
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    sj_engine *e = open_file(ctx, m.model, "list:4,64", false);
    sj_graph_weights gw;
    sj_graph_weights_get(sj_engine_graph(e), &gw);
    assert_int_equal(gw.mapped_params, 1);
    assert_int_equal(gw.mapped_bytes, sizeof w2);
    assert_int_equal(gw.external_copied, 1);
    assert_int_equal(gw.external_copied_bytes, sizeof w1);
    assert_int_equal(run_rows(e, ctx, 5), SJ_OK);
    sj_weight_pool_stats ps;
    sj__weight_pool_stats_get(sj__ctx_weight_pool(ctx), &ps);
    assert_int_equal(ps.buffers, 2);
    assert_int_equal(ps.mapped_buffers, 1);
    assert_int_equal(ps.mapped_bytes, sizeof w2);
    sj_engine_stats st;
    sj_engine_stats_get(e, &st);
    assert_int_equal(st.weight_mapped_bytes, sizeof w2);
    sj_engine_close(e);
    sj_ctx_destroy(ctx);
    remove_ext(&m);
}

static void set_mtime(const char *path, time_t sec) {
    struct timespec ts[2] = {{sec, 0}, {sec, 0}};
    assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

/* Writes len bytes at offset of path in place (same inode, same size). */
static void rewrite(const char *path, uint64_t offset, const void *bytes, size_t len) {
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, bytes, len, (off_t)offset), (ssize_t)len);
    close(fd);
}

/* The file changes under the mapping: a touch (same bytes) re-hashes once
 * and serves; new bytes of the same size with a new mtime fail every
 * request and bucket load naming the file, without hashing again while the
 * file stays as it is; the old bytes back, it serves again. An explicit
 * verify re-hashes whatever the timestamps say. */
static void test_mapped_weights_file_changed(void **state) {
    (void)state;
    ext_model m;
    write_ext(&m, 0, 4096);
    /* Only an immutable file is mapped in place; the flag is cleared once
     * it is, so the file can change under the mapping (as only root can
     * make it do). */
    if (!set_immutable(m.weights, true)) {
        remove_ext(&m);
        SJ_SKIP("cannot set the immutable flag on %s (needs CAP_LINUX_IMMUTABLE and ext4/xfs/btrfs)", m.weights);
    }
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    sj_engine *e = open_file(ctx, m.model, "list:4,16,64", false);
    assert_true(set_immutable(m.weights, false));
    assert_int_equal(maps_naming(m.weights, true), 0); /* in place, not a copy */
    assert_int_equal(mappings_of(m.weights), 1);
    assert_int_equal(run_rows(e, ctx, 3), SJ_OK);
    sj_executable *x = bucket_exe(e, 3);
    sj_weight_map *wm = x->maps[0];
    /* Clearing the flag moved ctime: the first run re-hashed once, equal. */
    assert_int_equal(sj__weight_map_rehashes(wm), 1);
    assert_int_equal(run_rows(e, ctx, 3), SJ_OK);
    assert_int_equal(sj__weight_map_rehashes(wm), 1); /* fstat only while nothing moved */

    set_mtime(m.weights, 1000000000);
    assert_int_equal(run_rows(e, ctx, 3), SJ_OK);
    assert_int_equal(sj__weight_map_rehashes(wm), 2);
    assert_int_equal(run_rows(e, ctx, 4), SJ_OK);
    assert_int_equal(sj__weight_map_rehashes(wm), 2);

    float changed[IN * HID];
    memcpy(changed, w1, sizeof changed);
    changed[7] += 1.0f;
    rewrite(m.weights, 0, changed, sizeof changed);
    set_mtime(m.weights, 1000000100);
    float y[64 * OUT];
    assert_int_equal(run_into(e, ctx, 3, y), SJ_E_CORRUPT);
    assert_non_null(strstr(sj_ctx_last_error(ctx), m.weights));
    assert_non_null(strstr(sj_ctx_last_error(ctx), "changed"));
    uint64_t rehashes = sj__weight_map_rehashes(wm);
    assert_int_equal(run_into(e, ctx, 2, y), SJ_E_CORRUPT);
    assert_int_equal(sj__weight_map_rehashes(wm), rehashes);
    /* A bucket not loaded yet refuses to load from it too. */
    assert_int_equal(run_into(e, ctx, 12, y), SJ_E_CORRUPT);
    assert_non_null(strstr(sj_ctx_last_error(ctx), m.weights));
    assert_int_equal(sj_graph_weights_verify(sj_engine_graph(e)), SJ_E_CORRUPT);
    assert_non_null(strstr(sj_ctx_last_error(ctx), m.weights));

    rewrite(m.weights, 0, w1, sizeof w1);
    assert_int_equal(run_rows(e, ctx, 3), SJ_OK);
    assert_int_equal(run_rows(e, ctx, 12), SJ_OK);
    rehashes = sj__weight_map_rehashes(wm);
    assert_int_equal(sj_graph_weights_verify(sj_engine_graph(e)), SJ_OK);
    assert_true(sj__weight_map_rehashes(wm) > rehashes);
    sj_engine_stats st;
    sj_engine_stats_get(e, &st);
    assert_true(st.run_failures >= 3);
    sj_engine_close(e);
    sj_ctx_destroy(ctx);
    remove_ext(&m);
}

/* Truncated under the mapping: the check, before any kernel touches a page
 * past the new end (which would raise SIGBUS), fails the request naming the
 * file; the interpreter, reading the graph's params, checks the same. */
static void test_mapped_weights_truncated(void **state) {
    (void)state;
    ext_model m;
    write_ext(&m, 0, 4096);
    if (!set_immutable(m.weights, true)) {
        remove_ext(&m);
        SJ_SKIP("cannot set the immutable flag on %s", m.weights);
    }
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    sj_engine *e = open_file(ctx, m.model, "list:4,64", false);
    assert_true(set_immutable(m.weights, false));
    assert_int_equal(maps_naming(m.weights, true), 0);
    assert_int_equal(run_rows(e, ctx, 3), SJ_OK);
    assert_int_equal(truncate(m.weights, 4096), 0); /* w2 gone */
    float y[64 * OUT];
    assert_int_equal(run_into(e, ctx, 3, y), SJ_E_CORRUPT);
    assert_non_null(strstr(sj_ctx_last_error(ctx), m.weights));
    assert_non_null(strstr(sj_ctx_last_error(ctx), "truncated"));
    const sj_graph *g = sj_engine_graph(e);
    sj_tensor in = {.rank = 2, .dims = {3, IN}, .data = (float[3 * IN]){0}}, out[1];
    assert_int_equal(sj_interp_run(g, 3, &in, out), SJ_E_CORRUPT);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "truncated"));
    sj_engine_close(e);
    sj_ctx_destroy(ctx);
    remove_ext(&m);
}

/* A file that is not immutable is copied into a sealed memfd at open, so
 * nothing done to the file afterwards reaches the weights: truncated (as
 * `cp new.data model.onnx.data` does first), the pages a kernel reads are
 * still there — reading a truncated file's mapping raised SIGBUS, which
 * killed `serve --listen` — and rewritten with other bytes, the model
 * keeps the weights it was loaded with; no request fails for either. */
static void test_copied_weights_file_rewritten(void **state) {
    (void)state;
    ext_model m;
    write_ext(&m, 0, 4096);
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);

    /* The map itself: every byte readable after the file is emptied. */
    sj_weight_map *wm;
    assert_int_equal(sj__weight_map_open(ctx, m.weights, &wm), SJ_OK);
    assert_int_equal(truncate(m.weights, 0), 0);
    const volatile uint8_t *p = sj__weight_map_data(wm);
    uint32_t sum = 0;
    for (size_t i = 0; i < sj__weight_map_size(wm); i++) sum += p[i]; /* SIGBUS when mapped in place */
    (void)sum;
    assert_int_equal(maps_naming(m.weights, true), 1);
    assert_memory_equal(sj__weight_map_data(wm), w1, sizeof w1);
    assert_int_equal(sj__weight_map_check(wm, ctx), SJ_OK);
    assert_int_equal(sj__weight_map_verify(wm, ctx), SJ_OK);
    sj__weight_map_release(wm);
    assert_int_equal(mappings_of(m.weights), 0);
    remove_ext(&m);

    write_ext(&m, 0, 4096);
    sj_engine *e = open_file(ctx, m.model, "list:4,16,64", false);
    sj_graph_weights gw;
    sj_graph_weights_get(sj_engine_graph(e), &gw);
    assert_int_equal(gw.mapped_params, 2); /* held once, lent by the pool: no second copy */
    float y0[64 * OUT], y[64 * OUT];
    assert_int_equal(run_into(e, ctx, 3, y0), SJ_OK);
    assert_int_equal(truncate(m.weights, 4096), 0); /* w2 gone */
    assert_int_equal(run_into(e, ctx, 3, y), SJ_OK);
    assert_memory_equal(y, y0, 3 * OUT * sizeof(float));
    /* Buckets not loaded yet load from the copy too, and are right. */
    assert_int_equal(run_rows(e, ctx, 12), SJ_OK);
    float changed[IN * HID];
    for (size_t i = 0; i < IN * HID; i++) changed[i] = w1[i] + 1.0f;
    rewrite(m.weights, 0, changed, sizeof changed);
    set_mtime(m.weights, 1000000100);
    assert_int_equal(run_into(e, ctx, 3, y), SJ_OK);
    assert_memory_equal(y, y0, 3 * OUT * sizeof(float));
    assert_int_equal(run_rows(e, ctx, 40), SJ_OK);
    assert_int_equal(sj_graph_weights_verify(sj_engine_graph(e)), SJ_OK);
    sj_engine_stats st;
    sj_engine_stats_get(e, &st);
    assert_int_equal(st.run_failures, 0);
    sj_engine_close(e);
    assert_int_equal(mappings_of(m.weights), 0);
    sj_ctx_destroy(ctx);
    remove_ext(&m);
}

/* A device that cannot read host memory gets copies of mapped weights. */
static void test_mapped_weights_device_copy(void **state) {
    (void)state;
    ext_model m;
    write_ext(&m, 0, 4096);
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    sj_graph *g;
    sj_model_options o;
    sj_model_options_init(&o);
    assert_int_equal(sj_model_load(ctx, m.model, &o, &g), SJ_OK);
    sj_graph_weights gw;
    sj_graph_weights_get(g, &gw);
    assert_int_equal(gw.mapped_params, 2);
    check_device_pool(ctx, g);
    assert_int_equal(mappings_of(m.weights), 0);
    sj_ctx_destroy(ctx);
    remove_ext(&m);
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
        cmocka_unit_test(test_mapped_weights),
        cmocka_unit_test(test_mapped_weights_outlive_graph),
        cmocka_unit_test(test_mapped_weights_misaligned),
        cmocka_unit_test(test_mapped_weights_file_changed),
        cmocka_unit_test(test_mapped_weights_truncated),
        cmocka_unit_test(test_copied_weights_file_rewritten),
        cmocka_unit_test(test_mapped_weights_device_copy),
        cmocka_unit_test(test_embedded_weights_lent),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
