/* Timing helpers shared by the benchmark programs in bench/ and
 * `shapejit bench`: clocks, medians, and timing a batch of calls.
 *
 *   double t[BENCH_BATCHES];
 *   for (int b = 0; b < BENCH_BATCHES; b++) {
 *       double t0 = bench_cpu_ns();
 *       for (int i = 0; i < CALLS; i++) work();
 *       t[b] = (bench_cpu_ns() - t0) / CALLS;      // per call
 *   }
 *   double ns = bench_median(t, BENCH_BATCHES);
 *
 * Micro figures use the thread's CPU time: on a shared machine, time spent
 * descheduled is not the code's cost. Figures a user waits for (latency,
 * time to ready) use the monotonic wall clock. Header-only so that every
 * benchmark program stays one .c file. */
#ifndef SJ_BENCH_TIMING_H
#define SJ_BENCH_TIMING_H

#include <stdlib.h>
#include <time.h>

#define BENCH_BATCHES 15

static inline double bench_clock_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}
static inline double bench_wall_ns(void) { return bench_clock_ns(CLOCK_MONOTONIC); }
static inline double bench_cpu_ns(void) { return bench_clock_ns(CLOCK_THREAD_CPUTIME_ID); }

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v in place; the middle value (mean of the two middle ones for even n). */
static inline double bench_median(double *v, int n) {
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
