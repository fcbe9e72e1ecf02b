/* Private helpers shared by every module: error reporting and checked
 * arithmetic. Not installed. */
#ifndef SJ_CORE_IMPL_H
#define SJ_CORE_IMPL_H

#include "shapejit/common.h"

#include <stdbool.h>
#include <stdint.h>

#if defined(__GNUC__)
#define SJ_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SJ_PRINTF(a, b)
#endif

/* Records a message for the calling thread and returns `st`, so error paths
 * read `return sj_fail(ctx, SJ_E_SHAPE, "matmul: %s vs %s", a, b);`. */
sj_status sj_fail(sj_ctx *ctx, sj_status st, const char *fmt, ...) SJ_PRINTF(3, 4);

/* Prefixes the calling thread's current message with "<prefix>: " (used when
 * an error crosses a layer that knows more context, e.g. a file name). */
void sj_error_prefix(sj_ctx *ctx, const char *fmt, ...) SJ_PRINTF(2, 3);

/* Propagate a failed status unchanged. */
#define SJ_TRY(expr)                                                                               \
    do {                                                                                           \
        sj_status sj_try_st_ = (expr);                                                             \
        if (sj_try_st_ != SJ_OK) return sj_try_st_;                                                \
    } while (0)

/* Overflow-checked size arithmetic; return false on overflow. */
static inline bool sj_mul_overflow_i64(int64_t a, int64_t b, int64_t *out) {
    return __builtin_mul_overflow(a, b, out);
}
static inline bool sj_mul_overflow_size(size_t a, size_t b, size_t *out) {
    return __builtin_mul_overflow(a, b, out);
}
static inline bool sj_add_overflow_size(size_t a, size_t b, size_t *out) {
    return __builtin_add_overflow(a, b, out);
}

#endif
