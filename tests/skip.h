/* Honest skips for the cmocka programs. cmocka's skip() leaves the program's
 * exit status 0, so a program whose every test skipped would read as Passed.
 * SJ_SKIP says why and counts; sj_run_tests returns 77 when every test of
 * the group skipped, which ctest (SKIP_RETURN_CODE 77) reports as Skipped.
 * Include after <cmocka.h>.
 *
 *   if (!gpu) SJ_SKIP("no CUDA device: %s", why);
 *   ...
 *   return sj_run_tests(tests, setup, teardown);
 */
#ifndef SJ_TESTS_SKIP_H
#define SJ_TESTS_SKIP_H

#include <stdio.h>

/* One program per test file: this counter is the program's, not shared. */
static int sj_tests_skipped;

/* Prints "SKIP <test>: <why>" (the reason lands in ctest's log) and skips. */
#define SJ_SKIP(...)                                                                               \
    do {                                                                                           \
        printf("SKIP %s: ", __func__);                                                             \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        fflush(stdout);                                                                            \
        sj_tests_skipped++;                                                                        \
        skip();                                                                                    \
    } while (0)

static inline int sj_tests_exit(int failed, int n_tests) {
    if (failed) return failed;
    if (n_tests > 0 && sj_tests_skipped >= n_tests) {
        printf("all %d tests skipped: exit 77 (ctest: Skipped)\n", n_tests);
        return 77;
    }
    return 0;
}

#define sj_run_tests(tests, setup, teardown)                                                       \
    sj_tests_exit(cmocka_run_group_tests(tests, setup, teardown),                                  \
                  (int)(sizeof(tests) / sizeof((tests)[0])))

#endif
