/* The CUDA device's error when there is no driver, checked on every
 * machine: split from test_gpu_device (label gpu), whose every other test
 * needs a GPU and skips without one, so that program reports Skipped there
 * instead of Passed with one real test in it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <string.h>

#include "shapejit/ext/cuda_device.h"
#include "shapejit/ext/device.h"
#include "tests/test_util.h"

/* Runs everywhere: a missing driver library is SJ_E_NO_DEVICE naming it. */
static void test_missing_driver_is_reported(void **state) {
    sj_ctx *ctx = *state;
    sj_cuda_device_config cfg;
    sj_cuda_device_config_init(&cfg);
    cfg.driver_path = "/nonexistent/libcuda.so.1";
    sj_device *dev = (sj_device *)1;
    assert_int_equal(sj_cuda_device_create(ctx, &cfg, NULL, &dev), SJ_E_NO_DEVICE);
    assert_null(dev);
#ifdef SJ_HAVE_CUDA
    assert_non_null(strstr(sj_ctx_last_error(ctx), "/nonexistent/libcuda.so.1"));
#else
    assert_non_null(strstr(sj_ctx_last_error(ctx), "CUDA toolkit"));
#endif
    sj_cuda_device_info info;
    assert_int_equal(sj_cuda_probe(ctx, &cfg, &info), SJ_E_NO_DEVICE);
    cfg.driver_path = NULL;
    cfg.ordinal = 1 << 20;
    assert_int_equal(sj_cuda_probe(ctx, &cfg, &info), SJ_E_NO_DEVICE);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_driver_is_reported),
    };
    return cmocka_run_group_tests(tests, ctx_group_setup, ctx_group_teardown);
}
