/* Loading a bucket's executable allocates no working memory: precompiling a
 * wide ladder used to hold every bucket's arena and padded I/O at once
 * (11.4 GB for attention.sjg over pow2:1:65536). The first run makes it,
 * and a run whose memory does not fit says how much it needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

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

static void test_load_allocates_no_working_memory(void **state) {
    (void)state;
    sizes sz = {0, (size_t)48 << 20};
    sj_ctx_config cc;
    sj_ctx_config_init(&cc);
    cc.allocator = (sj_allocator){sz_alloc, sz_realloc, sz_free, &sz};
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(&cc, &ctx), SJ_OK);
    sj_graph *g;
    assert_int_equal(sj_sjg_parse(ctx, model, strlen(model), "wide.sjg", NULL, &g), SJ_OK);
    sj_ladder *l;
    /* extent 65536: each [N, 256] buffer is 64 MiB, over the allocator's limit */
    assert_int_equal(sj_ladder_list(ctx, (int64_t[]){4, 65536}, 2, &l), SJ_OK);
    sj_host_compiler *hc;
    assert_int_equal(sj_host_compiler_create(ctx, NULL, &hc), SJ_OK);
    sj_compiler comp;
    sj_host_compiler_table(hc, &comp);
    sj_bucketed_cache *c;
    assert_int_equal(sj_bucketed_cache_create(g, l, &comp, NULL, NULL, &c), SJ_OK);
    atomic_store(&sz.largest, 0);
    if (sj_bucketed_cache_precompile(c, 1, NULL, NULL) != SJ_OK)
        fail_msg("precompile: %s", sj_ctx_last_error(ctx));
    if (atomic_load(&sz.largest) > ((size_t)8 << 20))
        fail_msg("loading allocated %zu bytes at once", atomic_load(&sz.largest));
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
    sj_bucketed_cache_destroy(c);
    sj_host_compiler_destroy(hc);
    sj_ladder_destroy(l);
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_allocates_no_working_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
