/* Shared by the libFuzzer targets: one context for the whole run (a context
 * is cheap to reuse and its error slots are per thread), and a NUL-terminated
 * copy of the input for parsers of text. */
#ifndef SJ_FUZZ_COMMON_H
#define SJ_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shapejit/common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Single allocations above this fail (the library must then report
 * SJ_E_NOMEM): a 1 KB input may legally ask for a 1 GiB weight, and filling
 * it on every execution would make the run slow rather than thorough. */
#define FUZZ_MAX_ALLOC ((size_t)64 << 20)

static inline void *fuzz_alloc(void *user, size_t n) { return n > FUZZ_MAX_ALLOC ? NULL : malloc(n); }
static inline void *fuzz_realloc(void *user, void *p, size_t n) {
    return n > FUZZ_MAX_ALLOC ? NULL : realloc(p, n);
}
static inline void fuzz_free(void *user, void *p) { free(p); }

static inline sj_ctx *fuzz_ctx(void) {
    static sj_ctx *ctx;
    if (!ctx) {
        sj_ctx_config cfg;
        sj_ctx_config_init(&cfg);
        cfg.allocator = (sj_allocator){fuzz_alloc, fuzz_realloc, fuzz_free, NULL};
        if (sj_ctx_create(&cfg, &ctx) != SJ_OK) abort();
    }
    return ctx;
}

/* A failed call must leave a message: an empty one is a bug this harness
 * reports as a crash. */
static inline void fuzz_check_message(sj_status st) {
    if (st != SJ_OK && !sj_ctx_last_error(fuzz_ctx())[0]) abort();
}

static inline char *fuzz_cstr(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) abort();
    if (size) memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

#endif
