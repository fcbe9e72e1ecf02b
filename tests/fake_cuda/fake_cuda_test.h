/* What the test programs on the fake CUDA driver share (test_cuda_fault.c,
 * test_cuda_share.c). Built with the toolkit (SJ_FAKE_CUDA, the fake's
 * path): fake_cuda_test_open loads the fake and finds its controls. Built
 * without it: this header is the program's main, one test that says why
 * it skips, so a program keeps its own tests inside #ifdef SJ_FAKE_CUDA.
 * Include after <cmocka.h>, tests/skip.h and tests/test_util.h. */
#ifndef SJ_TESTS_FAKE_CUDA_TEST_H
#define SJ_TESTS_FAKE_CUDA_TEST_H

#ifdef SJ_FAKE_CUDA
#include <dlfcn.h>

#include "tests/fake_cuda/fake_cuda.h"

/* The fake's controls, from the library the device will open. */
typedef struct fake_cuda_controls {
    void *lib;
    fake_cuda_inject_fn inject;
    fake_cuda_counters_fn counters;
    fake_cuda_launched_fn launched;
    fake_cuda_fail_resets_fn fail_resets;
} fake_cuda_controls;

/* 0 when the fake loaded with every control, -1 otherwise. */
static inline int fake_cuda_test_open(fake_cuda_controls *c) {
    c->lib = dlopen(SJ_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
    if (!c->lib) return -1;
    c->inject = (fake_cuda_inject_fn)dlsym(c->lib, "fake_cuda_inject");
    c->counters = (fake_cuda_counters_fn)dlsym(c->lib, "fake_cuda_counters_get");
    c->launched = (fake_cuda_launched_fn)dlsym(c->lib, "fake_cuda_launched");
    c->fail_resets = (fake_cuda_fail_resets_fn)dlsym(c->lib, "fake_cuda_fail_resets");
    return c->inject && c->counters && c->launched && c->fail_resets ? 0 : -1;
}

#else

static void test_needs_toolkit(void **state) {
    (void)state;
    SJ_SKIP("built without the CUDA toolkit: no cuda.h for the fake driver");
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_needs_toolkit)};
    return sj_run_tests(tests, NULL, NULL);
}

#endif
#endif
