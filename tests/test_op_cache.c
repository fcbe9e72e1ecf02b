/* The op cache: memoised kernel handles with their attributes, grow-only
 * scratch, idempotent release, the allocation-fallback latch and the
 * diagnostic gates, all per device; against a mock backend that counts what
 * it is asked. The cache is a client of the device: the fixture makes one
 * over the device, as a backend or tool would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "shapejit/ext/op_cache.h"
#include "tests/test_util.h"

/* --- a mock backend: memory from malloc, kernels made up from their names. */
typedef struct mock {
    int resolves, allocs, frees, live;
    void *blocks[64]; /* live allocations, so destroy frees what is left */
    char kernel_names[8][32];
    int n_kernels;
} mock;

static sj_status mock_alloc(void *impl, size_t bytes, void **out) {
    mock *m = impl;
    for (int i = 0; i < 64; i++)
        if (!m->blocks[i]) {
            m->allocs++;
            m->live++;
            *out = m->blocks[i] = calloc(1, bytes ? bytes : 1);
            return SJ_OK;
        }
    return SJ_E_NOMEM;
}
static void mock_free(void *impl, void *p) {
    mock *m = impl;
    for (int i = 0; i < 64; i++)
        if (m->blocks[i] == p) {
            m->blocks[i] = NULL;
            m->frees++;
            m->live--;
            free(p);
        }
}
static sj_status mock_copy(void *impl, void *d, const void *s, size_t n, sj_copy_kind k) {
    (void)impl;
    (void)k;
    memcpy(d, s, n);
    return SJ_OK;
}
static sj_status mock_load(void *impl, sj_code_format f, const void *c, size_t n, void **out) {
    (void)impl;
    (void)f;
    (void)n;
    *out = (void *)c; /* the "module" is its code pointer */
    return SJ_OK;
}
static void mock_unload(void *impl, void *m) {
    (void)impl;
    (void)m;
}
/* Kernels exist when their name starts with 'k'; each publishes tiles
 * derived from its name's length, so attributes are checkable. */
static sj_status mock_resolve(void *impl, void *module, const char *name, sj_kernel_handle *out,
                              sj_kernel_attrs *attrs) {
    mock *m = impl;
    (void)module;
    m->resolves++;
    if (name[0] != 'k') return SJ_E_NOT_FOUND;
    int i = m->n_kernels++;
    strncpy(m->kernel_names[i], name, sizeof m->kernel_names[i] - 1);
    *out = m->kernel_names[i];
    *attrs = (sj_kernel_attrs){256, 16, (uint32_t)strlen(name) * 8, 32, 0, 0, 0};
    return SJ_OK;
}
static sj_status mock_launch(void *impl, sj_kernel_handle k, const sj_launch_dims *d,
                             void *const *b, const int64_t *info, int64_t n) {
    (void)impl, (void)k, (void)d, (void)b, (void)info, (void)n;
    return SJ_OK;
}
static sj_status mock_ok(void *impl) {
    (void)impl;
    return SJ_OK;
}
static sj_status mock_end(void *impl, sj_graph_handle *out) {
    (void)impl;
    *out = NULL;
    return SJ_E_UNSUPPORTED; /* the op cache never captures */
}
static sj_status mock_replay(void *impl, sj_graph_handle g, int64_t n) {
    (void)impl, (void)g, (void)n;
    return SJ_E_UNSUPPORTED;
}
static void mock_destroy_graph(void *impl, sj_graph_handle g) {
    (void)impl, (void)g;
}
/* Frees what is left, as a real backend does; the mock struct itself belongs
 * to the test, which checks it afterwards. */
static void mock_destroy(void *impl) {
    mock *m = impl;
    for (int i = 0; i < 64; i++)
        if (m->blocks[i]) mock_free(m, m->blocks[i]);
}

static const sj_device_ops mock_ops = {
    .name = "mock",
    .alloc = mock_alloc,
    .free = mock_free,
    .copy = mock_copy,
    .load_module = mock_load,
    .unload_module = mock_unload,
    .resolve_kernel = mock_resolve,
    .launch = mock_launch,
    .sync = mock_ok,
    .begin_capture = mock_ok,
    .end_capture = mock_end,
    .replay = mock_replay,
    .destroy_graph = mock_destroy_graph,
    .destroy = mock_destroy,
};

typedef struct fixture {
    alloc_counter counts;
    sj_ctx *ctx;
    mock m;
    sj_device *dev;
    sj_module *mod;
    sj_op_cache *oc;
} fixture;

static const char code_a[] = "module a", code_b[] = "module b";

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    f->ctx = ctx_with_counter(&f->counts);
    assert_int_equal(sj_device_create(f->ctx, &mock_ops, &f->m, NULL, &f->dev), SJ_OK);
    assert_int_equal(
        sj_device_load_module(f->dev, SJ_CODE_PTX, code_a, sizeof code_a, &f->mod), SJ_OK);
    assert_int_equal(sj_op_cache_create(f->dev, &f->oc), SJ_OK);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    sj_op_cache_forget_module(f->oc, f->mod);
    sj_op_cache_destroy(f->oc);
    sj_module_destroy(f->mod);
    sj_device_destroy(f->dev);
    assert_int_equal(f->m.live, 0);
    sj_ctx_destroy(f->ctx);
    free(f);
    return 0;
}

static void test_kernel_resolved_once_and_reused(void **state) {
    fixture *f = *state;
    sj_op_cache *oc = f->oc;
    sj_kernel_handle a, b;
    sj_kernel_attrs attrs;
    assert_int_equal(sj_op_cache_kernel(oc, f->mod, "k_gemm", &a, &attrs), SJ_OK);
    assert_int_equal(attrs.tile_n, 6 * 8);
    assert_int_equal(attrs.max_threads, 256);
    assert_int_equal(sj_op_cache_kernel(oc, f->mod, "k_gemm", &b, NULL), SJ_OK);
    assert_ptr_equal(a, b);
    assert_int_equal(f->m.resolves, 1);
    assert_int_equal(sj_op_cache_num_kernels(oc), 1);
    /* Attributes are recorded per handle at resolve time. */
    memset(&attrs, 0, sizeof attrs);
    assert_int_equal(sj_op_cache_kernel_attrs(oc, a, &attrs), SJ_OK);
    assert_int_equal(attrs.tile_m, 16);
    assert_int_equal(sj_op_cache_kernel_attrs(oc, (sj_kernel_handle)&attrs, &attrs),
                     SJ_E_NOT_FOUND);
}

static void test_same_name_in_two_modules_is_two_kernels(void **state) {
    fixture *f = *state;
    sj_op_cache *oc = f->oc;
    sj_module *other;
    assert_int_equal(sj_device_load_module(f->dev, SJ_CODE_PTX, code_b, sizeof code_b, &other),
                     SJ_OK);
    sj_kernel_handle a, b;
    assert_int_equal(sj_op_cache_kernel(oc, f->mod, "k0", &a, NULL), SJ_OK);
    assert_int_equal(sj_op_cache_kernel(oc, other, "k0", &b, NULL), SJ_OK);
    assert_ptr_not_equal(a, b);
    assert_int_equal(f->m.resolves, 2);
    /* Forgetting a module before unloading it drops its handles: a new
     * module that happens to reuse the address resolves afresh. */
    sj_op_cache_forget_module(oc, other);
    sj_module_destroy(other);
    assert_int_equal(sj_op_cache_num_kernels(oc), 1);
}

static void test_missing_kernel_is_not_memoised(void **state) {
    fixture *f = *state;
    sj_op_cache *oc = f->oc;
    sj_kernel_handle k;
    assert_int_equal(sj_op_cache_kernel(oc, f->mod, "nope", &k, NULL), SJ_E_NOT_FOUND);
    assert_int_equal(sj_op_cache_kernel(oc, f->mod, "nope", &k, NULL), SJ_E_NOT_FOUND);
    assert_int_equal(f->m.resolves, 2);
    assert_int_equal(sj_op_cache_num_kernels(oc), 0);
}

static void test_memoised_hit_allocates_nothing(void **state) {
    fixture *f = *state;
    sj_op_cache *oc = f->oc;
    sj_kernel_handle k;
    assert_int_equal(sj_op_cache_kernel(oc, f->mod, "k_softmax", &k, NULL), SJ_OK);
    void *s;
    assert_int_equal(sj_op_cache_scratch(oc, "rows", 4096, &s), SJ_OK);
    long before = f->counts.calls;
    for (int i = 0; i < 1000; i++) {
        sj_kernel_attrs a;
        assert_int_equal(sj_op_cache_kernel(oc, f->mod, "k_softmax", &k, &a), SJ_OK);
        void *t;
        assert_int_equal(sj_op_cache_scratch(oc, "rows", 1024, &t), SJ_OK);
        assert_ptr_equal(s, t);
    }
    assert_int_equal(f->counts.calls, before);
}

static void test_two_caches_share_nothing(void **state) {
    fixture *f = *state;
    sj_op_cache *a = f->oc, *b;
    assert_int_equal(sj_op_cache_create(f->dev, &b), SJ_OK);
    void *p;
    assert_int_equal(sj_op_cache_scratch(a, "fp8_activation", 1024, &p), SJ_OK);
    assert_int_equal(sj_op_cache_num_scratch(a), 1);
    assert_int_equal(sj_op_cache_num_scratch(b), 0);
    sj_kernel_handle k;
    assert_int_equal(sj_op_cache_kernel(a, f->mod, "k1", &k, NULL), SJ_OK);
    assert_int_equal(sj_op_cache_num_kernels(b), 0);
    sj_op_cache_note_alloc_fallback(a);
    assert_true(sj_op_cache_alloc_fell_back(a));
    assert_false(sj_op_cache_alloc_fell_back(b));
    assert_true(sj_op_cache_once(a, "route"));
    assert_true(sj_op_cache_once(b, "route"));
    sj_op_cache_destroy(b);
}

static void test_scratch_grows_never_shrinks(void **state) {
    fixture *f = *state;
    sj_op_cache *oc = f->oc;
    void *small, *same, *bigger, *again;
    assert_int_equal(sj_op_cache_scratch(oc, "act", 64, &small), SJ_OK);
    assert_int_equal(sj_op_cache_scratch(oc, "act", 32, &same), SJ_OK);
    assert_ptr_equal(small, same);
    assert_int_equal(sj_op_cache_scratch(oc, "act", 4096, &bigger), SJ_OK);
    assert_ptr_not_equal(small, bigger);
    assert_int_equal(sj_op_cache_scratch(oc, "act", 100, &again), SJ_OK);
    assert_ptr_equal(bigger, again);
    /* The outgrown buffer waits for release (a graph may still use it). */
    assert_int_equal(sj_op_cache_num_scratch(oc), 2);
    assert_int_equal(f->m.live, 2);
    void *other;
    assert_int_equal(sj_op_cache_scratch(oc, "other", 8, &other), SJ_OK);
    assert_int_equal(f->m.live, 3);
}

static void test_release_frees_every_scratch_and_is_idempotent(void **state) {
    fixture *f = *state;
    sj_op_cache *oc = f->oc;
    void *p;
    assert_int_equal(sj_op_cache_scratch(oc, "a", 64, &p), SJ_OK);
    assert_int_equal(sj_op_cache_scratch(oc, "a", 128, &p), SJ_OK);
    assert_int_equal(sj_op_cache_scratch(oc, "b", 64, &p), SJ_OK);
    assert_int_equal(f->m.live, 3);
    assert_int_equal(sj_op_cache_release(oc), SJ_OK);
    assert_int_equal(f->m.live, 0);
    assert_int_equal(sj_op_cache_num_scratch(oc), 0);
    assert_int_equal(sj_op_cache_release(oc), SJ_OK);
    assert_int_equal(f->m.frees, 3);
    /* Still usable: a later request allocates afresh. */
    assert_int_equal(sj_op_cache_scratch(oc, "a", 16, &p), SJ_OK);
    assert_int_equal(f->m.live, 1);
}

static void test_alloc_fallback_latch(void **state) {
    fixture *f = *state;
    sj_op_cache *oc = f->oc;
    assert_false(sj_op_cache_alloc_fell_back(oc));
    sj_op_cache_note_alloc_fallback(oc);
    assert_true(sj_op_cache_alloc_fell_back(oc));
    sj_op_cache_release(oc); /* latched for the device's life */
    assert_true(sj_op_cache_alloc_fell_back(oc));
}

static void test_diagnostic_gates(void **state) {
    fixture *f = *state;
    sj_op_cache *oc = f->oc;
    assert_true(sj_op_cache_once(oc, "fallback"));
    assert_false(sj_op_cache_once(oc, "fallback"));
    assert_true(sj_op_cache_once(oc, "other"));
    for (int i = 0; i < 3; i++) assert_true(sj_op_cache_first_n(oc, "slow path", 3));
    assert_false(sj_op_cache_first_n(oc, "slow path", 3));
    assert_false(sj_op_cache_first_n(oc, "never", 0));
    assert_true(sj_op_cache_first_shape(oc, "gemm", 64, 128, 256));
    assert_false(sj_op_cache_first_shape(oc, "gemm", 64, 128, 256));
    assert_true(sj_op_cache_first_shape(oc, "gemm", 64, 128, 512));
    assert_true(sj_op_cache_first_shape(oc, "gemv", 64, 128, 256));
}

static void test_released_device_answers_state(void **state) {
    fixture *f = *state;
    sj_op_cache *own;
    assert_int_equal(sj_op_cache_create(f->dev, &own), SJ_OK);
    void *p;
    assert_int_equal(sj_op_cache_scratch(own, "x", 64, &p), SJ_OK);
    sj_kernel_handle k;
    assert_int_equal(sj_op_cache_kernel(own, f->mod, "k_late", &k, NULL), SJ_OK);
    sj_device *dev = f->dev;
    sj_device_destroy(dev); /* the backend goes; this cache holds the struct */
    f->dev = NULL;
    assert_int_equal(sj_op_cache_scratch(own, "x", 128, &p), SJ_E_STATE);
    assert_int_equal(sj_op_cache_kernel(own, f->mod, "k_new", &k, NULL), SJ_E_STATE);
    assert_int_equal(sj_op_cache_release(own), SJ_OK);
    sj_op_cache_destroy(own);
}


int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kernel_resolved_once_and_reused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_name_in_two_modules_is_two_kernels, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_missing_kernel_is_not_memoised, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memoised_hit_allocates_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_caches_share_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scratch_grows_never_shrinks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_release_frees_every_scratch_and_is_idempotent, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_alloc_fallback_latch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_diagnostic_gates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_released_device_answers_state, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
