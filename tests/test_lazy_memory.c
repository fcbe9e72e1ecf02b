/* Loading a bucket's executable allocates no working memory: precompiling a
 * wide ladder used to hold every bucket's arena and padded I/O at once
 * (11.4 GB for attention.sjg over pow2:1:65536). The first run makes it,
 * and a run whose memory does not fit says how much it needed. A precompile
 * that only stores still says what each bucket will need (the estimate
 * equals what the loaded bucket then holds), the store lists it per row,
 * and a bucket that needs more than the device has is refused before
 * anything is allocated while the other buckets go on serving. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shapejit/ext/artifact.h"
#include "shapejit/ext/backends.h"
#include "shapejit/ext/bucketed_cache.h"
#include "shapejit/ext/runtime.h"
#include "shapejit/model.h"
#include "tests/test_util.h"

/* Remembers the largest allocation; refuses any above `limit`. */
typedef struct sizes {
    _Atomic size_t largest;
    size_t limit;
} sizes;

static void *sz_alloc(void *user, size_t n) {
    sizes *s = user;
    size_t cur = atomic_load(&s->largest);
    while (n > cur && !atomic_compare_exchange_weak(&s->largest, &cur, n)) {
    }
    return n > s->limit ? NULL : malloc(n);
}
static void *sz_realloc(void *user, void *p, size_t n) {
    sizes *s = user;
    return n > s->limit ? NULL : realloc(p, n);
}
static void sz_free(void *user, void *p) { free(p); }

static const char model[] = "graph wide(N) {\n"
                            "  input x: [N, 256]\n"
                            "  param w: [256, 256] = fill(0.01)\n"
                            "  h = relu(matmul(x, w))\n"
                            "  y = softmax(matmul(h, w), axis=1)\n"
                            "  output y\n"
                            "}\n";

/* A host bucketed cache over a model text and a two-bucket list ladder,
 * on a context whose allocator records (and bounds) what is asked of it;
 * with a store in a scratch folder when `with_store`. */
typedef struct rig {
    sizes sz;
    sj_ctx *ctx;
    sj_graph *g;
    sj_ladder *l;
    sj_host_compiler *hc;
    sj_store *store;
    sj_bucketed_cache *c;
    char dir[64];
} rig;

static void rig_open(rig *r, size_t limit, const char *text, int64_t small, int64_t large, bool with_store) {
    memset(r, 0, sizeof *r);
    r->sz.limit = limit;
    sj_ctx_config cc;
    sj_ctx_config_init(&cc);
    cc.allocator = (sj_allocator){sz_alloc, sz_realloc, sz_free, &r->sz};
    assert_int_equal(sj_ctx_create(&cc, &r->ctx), SJ_OK);
    assert_int_equal(sj_sjg_parse(r->ctx, text, strlen(text), "model.sjg", NULL, &r->g), SJ_OK);
    assert_int_equal(sj_ladder_list(r->ctx, (int64_t[]){small, large}, 2, &r->l), SJ_OK);
    assert_int_equal(sj_host_compiler_create(r->ctx, NULL, &r->hc), SJ_OK);
    if (with_store) {
        char path[128];
        assert_true(scratch_dir_create(r->dir, sizeof r->dir, "test_lazy_memory"));
        snprintf(path, sizeof path, "%s/store.db", r->dir);
        sj_store_config sc;
        sj_store_config_init(&sc);
        sc.path = path;
        assert_int_equal(sj_store_open(r->ctx, &sc, &r->store), SJ_OK);
    }
    sj_compiler comp;
    sj_host_compiler_table(r->hc, &comp);
    assert_int_equal(sj_bucketed_cache_create(r->g, r->l, &comp, r->store, NULL, &r->c), SJ_OK);
}

static void rig_close(rig *r) {
    sj_bucketed_cache_destroy(r->c);
    sj_host_compiler_destroy(r->hc);
    sj_store_close(r->store);
    sj_ladder_destroy(r->l);
    sj_graph_destroy(r->g);
    sj_ctx_destroy(r->ctx);
    if (r->dir[0]) remove_tree(r->dir);
}

static void test_load_allocates_no_working_memory(void **state) {
    (void)state;
    rig r;
    /* extent 65536: each [N, 256] buffer is 64 MiB, over the allocator's limit */
    rig_open(&r, (size_t)48 << 20, model, 4, 65536, false);
    sj_ctx *ctx = r.ctx;
    sj_bucketed_cache *c = r.c;
    atomic_store(&r.sz.largest, 0);
    if (sj_bucketed_cache_precompile(c, 1, NULL, NULL) != SJ_OK)
        fail_msg("precompile: %s", sj_ctx_last_error(ctx));
    if (atomic_load(&r.sz.largest) > ((size_t)8 << 20))
        fail_msg("loading allocated %zu bytes at once", atomic_load(&r.sz.largest));
    int64_t extent;
    void *exe;
    assert_int_equal(sj_bucketed_cache_get_or_compile(c, 65536, &extent, &exe), SJ_OK);
    sj_executable_memory_info mi;
    sj_executable_memory(exe, &mi);
    assert_true(mi.run_bytes >= (uint64_t)2 * 65536 * 256 * 4);
    assert_false(mi.resident);

    /* the small bucket runs */
    float *x = calloc(3 * 256, sizeof *x);
    sj_cache_input in = {"x", x, 256, true};
    int64_t inner = 256;
    sj_tensor out;
    if (sj_bucketed_cache_run_padded(c, 3, 3, &in, 1, &inner, 1, &out, 1, &extent) != SJ_OK)
        fail_msg("run at 3: %s", sj_ctx_last_error(ctx));
    sj_tensor_free(ctx, &out);
    free(x);
    /* the big one cannot get its memory here: an error that says how much */
    x = calloc((size_t)40000 * 256, sizeof *x);
    in.data = x;
    assert_int_not_equal(sj_bucketed_cache_run_padded(c, 40000, 40000, &in, 1, &inner, 1, &out, 1, &extent),
                         SJ_OK);
    assert_error_contains(ctx, "bucket 65536: run memory (arena");
    free(x);
    rig_close(&r);
}

typedef struct scanned {
    int rows;
    sj_ctx *ctx;
    sj_bucketed_cache *c;
    const sj_ladder *l;
} scanned;

/* Each stored row's figures, read from its bytes, are the cache's estimate
 * for that bucket. */
static int check_row(void *user, const sj_store_entry *e, const void *bytes, size_t len) {
    scanned *sc = user;
    sj_artifact *a;
    assert_int_equal(sj_artifact_deserialize(sc->ctx, bytes, len, &a), SJ_OK);
    sj_artifact_info in;
    sj_artifact_get_info(a, &in);
    sj_executable_memory_info est;
    assert_int_equal(sj_bucketed_cache_bucket_memory(sc->c, sj_ladder_find(sc->l, e->key.extent), &est), SJ_OK);
    assert_int_equal(in.run_bytes, est.run_bytes);
    assert_int_equal(in.arena_bytes, est.arena_bytes);
    assert_int_equal(in.weight_bytes, 256 * 256 * 4);
    sj_artifact_destroy(a);
    sc->rows++;
    return 0;
}

static void test_precompile_estimates_each_bucket(void **state) {
    (void)state;
    rig r;
    rig_open(&r, SIZE_MAX, model, 4, 1024, true);
    sj_ctx *ctx = r.ctx;
    sj_bucketed_cache *c = r.c;
    const sj_ladder *l = r.l;
    if (sj_bucketed_cache_precompile_stored(c, 2, NULL, NULL) != SJ_OK)
        fail_msg("precompile: %s", sj_ctx_last_error(ctx));
    sj_executable_memory_info est[2], held;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(sj_bucketed_cache_bucket_memory(c, i, &est[i]), SJ_OK);
        assert_true(est[i].estimated);
        assert_false(est[i].resident);
        /* x and y, padded to the extent */
        assert_int_equal(est[i].io_bytes, (uint64_t)2 * sj_ladder_extent(l, i) * 256 * 4);
    }
    assert_true(est[1].run_bytes > est[0].run_bytes);
    scanned sn = {0, ctx, c, l};
    assert_int_equal(sj_store_scan(r.store, check_row, NULL, &sn), SJ_OK);
    assert_int_equal(sn.rows, 2);

    /* loaded and run: the bucket holds what was estimated */
    float *x = calloc((size_t)1000 * 256, sizeof *x);
    sj_cache_input in = {"x", x, 256, true};
    int64_t inner = 256, extent;
    sj_tensor out;
    if (sj_bucketed_cache_run_padded(c, 1000, 1000, &in, 1, &inner, 1, &out, 1, &extent) != SJ_OK)
        fail_msg("run: %s", sj_ctx_last_error(ctx));
    sj_tensor_free(ctx, &out);
    free(x);
    assert_int_equal(sj_bucketed_cache_bucket_memory(c, 1, &held), SJ_OK);
    assert_false(held.estimated);
    assert_true(held.resident);
    assert_int_equal(held.run_bytes, est[1].run_bytes);
    assert_int_equal(held.arena_bytes, est[1].arena_bytes);
    assert_int_equal(held.io_bytes, est[1].io_bytes);
    assert_int_equal(held.weight_bytes, est[1].weight_bytes);
    rig_close(&r);
}

/* [N, 2^18] at N = 2^20: the input and the output are a TiB each, more than
 * any machine this runs on has. */
static const char huge_model[] = "graph huge(N) {\n"
                                 "  input x: [N, 262144]\n"
                                 "  y = relu(x)\n"
                                 "  output y\n"
                                 "}\n";

static void test_bucket_beyond_the_device_refused_up_front(void **state) {
    (void)state;
    rig r;
    rig_open(&r, SIZE_MAX, huge_model, 2, (int64_t)1 << 20, false);
    sj_ctx *ctx = r.ctx;
    sj_bucketed_cache *c = r.c;
    float *x = calloc((size_t)3 * 262144, sizeof *x);
    sj_cache_input in = {"x", x, 262144, true};
    int64_t inner = 262144, extent;
    sj_tensor out;
    atomic_store(&r.sz.largest, 0);
    assert_int_equal(sj_bucketed_cache_run_padded(c, 3, 3, &in, 1, &inner, 1, &out, 1, &extent), SJ_E_NOMEM);
    assert_error_contains(ctx, "bucket 1048576: run memory of ");
    assert_error_contains(ctx, "inputs and outputs 2199023255552) is more than the ");
    assert_error_contains(ctx, "bytes the host device has");
    /* refused before any allocation: nothing near the run memory was asked for */
    if (atomic_load(&r.sz.largest) > ((size_t)64 << 20))
        fail_msg("an allocation of %zu bytes was attempted", atomic_load(&r.sz.largest));
    /* the small bucket serves on */
    if (sj_bucketed_cache_run_padded(c, 2, 2, &in, 1, &inner, 1, &out, 1, &extent) != SJ_OK)
        fail_msg("run at 2: %s", sj_ctx_last_error(ctx));
    assert_int_equal(extent, 2);
    sj_tensor_free(ctx, &out);
    free(x);
    rig_close(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_allocates_no_working_memory),
        cmocka_unit_test(test_precompile_estimates_each_bucket),
        cmocka_unit_test(test_bucket_beyond_the_device_refused_up_front),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
