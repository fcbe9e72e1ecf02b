/* The monotonic clock compile-stage timings read. Private to the library. */
#ifndef SJ_CORE_CLOCK_H
#define SJ_CORE_CLOCK_H

#include <stdint.h>

/* Nanoseconds on CLOCK_MONOTONIC (an arbitrary origin: differences only). */
uint64_t sj__now_ns(void);

#endif
