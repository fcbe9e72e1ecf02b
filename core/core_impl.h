/* Private helpers shared by every module: error reporting and checked
 * arithmetic. Not installed. */
#ifndef SJ_CORE_IMPL_H
#define SJ_CORE_IMPL_H

#include "shapejit/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define SJ_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SJ_PRINTF(a, b)
#endif

/* Records a message for the calling thread. */
void sj__set_error(sj_ctx *ctx, const char *fmt, ...) SJ_PRINTF(2, 3);

/* Records a message and yields `st`, so error paths read
 * `return sj_fail(ctx, SJ_E_SHAPE, "matmul: %s vs %s", a, b);`. A macro
 * rather than a function so the compiler sees the status constant at the
 * call site: it then knows an out-parameter is set whenever SJ_OK comes back
 * and -O3 raises no false maybe-uninitialized errors. `st` must not have
 * side effects (it is evaluated once more than it appears). */
#define sj_fail(ctx, st, ...) (sj__set_error((ctx), __VA_ARGS__), (sj_status)(st))

/* Prefixes the calling thread's current message with "<prefix>: " (used when
 * an error crosses a layer that knows more context, e.g. a file name). */
void sj__error_prefix(sj_ctx *ctx, const char *fmt, ...) SJ_PRINTF(2, 3);

/* Reads a public config struct whose first field is `size_t size` (set by
 * its _init to the size the caller was built with). *out holds the
 * library's defaults; the caller's bytes within its size replace them, so a
 * program built against an older shapejit (a shorter struct) gets the
 * defaults of the fields it never knew, and out->size becomes known_size.
 * SJ_E_INVALID_ARG naming `what` (the type) when the size is below
 * min_size (the struct's first versioned layout: _init was not called) or
 * above known_size (built against a newer shapejit: fields this library
 * would ignore). ctx may be NULL (no message). */
sj_status sj__config_read(sj_ctx *ctx, const char *what, const void *in, size_t min_size, size_t known_size,
                          void *out);
/* The first versioned size of a config struct: up to and including its
 * last field as of shapejit 0.1. */
#define SJ_CONFIG_SIZE(type, last_field) (offsetof(type, last_field) + sizeof(((type *)0)->last_field))

/* The context's one slot for the layer above core (the runtime keeps its
 * weight pool there), so core holds no runtime concept. sj__ctx_slot: what
 * is installed, NULL before. sj__ctx_slot_install: installs p unless another
 * thread did first, in which case p is destroyed; returns what is installed.
 * destroy runs on it in sj_ctx_destroy. */
void *sj__ctx_slot(sj_ctx *ctx);
void *sj__ctx_slot_install(sj_ctx *ctx, void *p, void (*destroy)(void *));

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
