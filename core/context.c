/* The context: allocator hook and per-thread last-error messages. */
#include "core/core_impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define SJ_ERRMSG_MAX 1024

/* One slot per live thread that has failed a call on this context, found
 * through a thread key (no lock, no search) and freed by the key's
 * destructor when the thread ends, so a context serving short-lived threads
 * does not grow. The list (under error_lock) is for sj_ctx_destroy, which
 * frees the slots of threads still alive. */
typedef struct error_slot {
    sj_ctx *ctx;
    char msg[SJ_ERRMSG_MAX];
    struct error_slot *prev, *next;
} error_slot;

struct sj_ctx {
    sj_allocator allocator;
    pthread_key_t slot_key;
    pthread_mutex_t error_lock;
    error_slot *errors;
    /* The runtime's state for this context (its weight pool, shared by the
     * context's devices), opaque here; made by the first user, so a context
     * that loads nothing pays nothing, and destroyed with the context. */
    _Atomic(void *) slot;
    void (*slot_destroy)(void *);
};

/* A thread with a slot ended: unlink and free it. */
static void slot_destroy(void *p) {
    error_slot *s = p;
    sj_ctx *ctx = s->ctx;
    pthread_mutex_lock(&ctx->error_lock);
    if (s->prev)
        s->prev->next = s->next;
    else
        ctx->errors = s->next;
    if (s->next) s->next->prev = s->prev;
    pthread_mutex_unlock(&ctx->error_lock);
    ctx->allocator.free_fn(ctx->allocator.user, s);
}

/* A model's weights arrive in a few buffers of tens of MB each (file
 * bytes, decoded tensors, packed panels), each written once right after it
 * is allocated. With 4 KiB pages, faulting them in was most of a warm
 * start: touching 340 MB of fresh memory took 0.49 s on a 2-core VM, 0.17 s
 * in 2 MiB pages. So the 2 MiB-aligned interior of a large block is
 * advised as huge (where the kernel's THP mode is "madvise"; a no-op under
 * "always" and "never"). Advice only: failure changes nothing. */
#define SJ_HUGE_ADVICE_MIN ((size_t)8 << 20)
#define SJ_HUGE_PAGE ((uintptr_t)2 << 20)

static void advise_huge(void *p, size_t size) {
#ifdef MADV_HUGEPAGE
    if (!p || size < SJ_HUGE_ADVICE_MIN) return;
    uintptr_t start = ((uintptr_t)p + SJ_HUGE_PAGE - 1) & ~(SJ_HUGE_PAGE - 1);
    uintptr_t end = ((uintptr_t)p + size) & ~(SJ_HUGE_PAGE - 1);
    if (end > start) (void)madvise((void *)start, end - start, MADV_HUGEPAGE);
#else
    (void)p, (void)size;
#endif
}

static void *libc_alloc(void *user, size_t size) {
    (void)user;
    void *p = malloc(size);
    advise_huge(p, size);
    return p;
}
static void *libc_realloc(void *user, void *ptr, size_t new_size) {
    (void)user;
    return realloc(ptr, new_size);
}
static void libc_free(void *user, void *ptr) {
    (void)user;
    free(ptr);
}

unsigned sj_version_number(void) { return SJ_VERSION_NUMBER; }
const char *sj_version_string(void) { return SJ_VERSION_STRING; }

const char *sj_status_str(sj_status st) {
    switch (st) {
    case SJ_OK: return "ok";
    case SJ_E_INVALID_ARG: return "invalid argument";
    case SJ_E_NOMEM: return "out of memory";
    case SJ_E_SHAPE: return "shape error";
    case SJ_E_PARSE: return "parse error";
    case SJ_E_IO: return "i/o error";
    case SJ_E_UNSUPPORTED: return "unsupported";
    case SJ_E_NOT_FOUND: return "not found";
    case SJ_E_OUT_OF_RANGE: return "out of range";
    case SJ_E_CORRUPT: return "corrupt data";
    case SJ_E_COMPILE: return "compile error";
    case SJ_E_NO_DEVICE: return "no device";
    case SJ_E_DEVICE: return "device error";
    case SJ_E_STATE: return "invalid state";
    case SJ_E_MISMATCH: return "target mismatch";
    case SJ_E_BUSY: return "busy";
    case SJ_E_INTERNAL: return "internal error";
    case SJ_E_DEVICE_LOST: return "device lost";
    }
    return "unknown status";
}

void sj_ctx_config_init(sj_ctx_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->size = sizeof *cfg;
}

sj_status sj_ctx_create(const sj_ctx_config *cfg_in, sj_ctx **out) {
    if (!out) return SJ_E_INVALID_ARG;
    *out = NULL;
    /* the caller's config as this library reads it; no context yet, so a
     * wrong size is the status alone */
    sj_ctx_config c;
    sj_ctx_config_init(&c);
    if (cfg_in) SJ_TRY(sj__config_read(NULL, "sj_ctx_config", cfg_in, SJ_CONFIG_SIZE(sj_ctx_config, allocator),
                                       sizeof c, &c));
    const sj_ctx_config *cfg = &c;
    sj_allocator a = {libc_alloc, libc_realloc, libc_free, NULL};
    if (cfg && cfg->allocator.alloc_fn) {
        if (!cfg->allocator.realloc_fn || !cfg->allocator.free_fn) return SJ_E_INVALID_ARG;
        a = cfg->allocator;
    }
    sj_ctx *ctx = a.alloc_fn(a.user, sizeof *ctx);
    if (!ctx) return SJ_E_NOMEM;
    memset(ctx, 0, sizeof *ctx);
    ctx->allocator = a;
    /* A process has at least 128 keys (POSIX) and 1024 on Linux: as many
     * live contexts. */
    if (pthread_key_create(&ctx->slot_key, slot_destroy) != 0) {
        a.free_fn(a.user, ctx);
        return SJ_E_NOMEM;
    }
    pthread_mutex_init(&ctx->error_lock, NULL);
    *out = ctx;
    return SJ_OK;
}

void sj_ctx_destroy(sj_ctx *ctx) {
    if (!ctx) return;
    void *slot = atomic_load(&ctx->slot);
    if (slot) ctx->slot_destroy(slot);
    /* No destructor runs for this context after this: threads still alive
     * have their slots freed here. */
    pthread_key_delete(ctx->slot_key);
    error_slot *s = ctx->errors;
    while (s) {
        error_slot *next = s->next;
        ctx->allocator.free_fn(ctx->allocator.user, s);
        s = next;
    }
    pthread_mutex_destroy(&ctx->error_lock);
    ctx->allocator.free_fn(ctx->allocator.user, ctx);
}

/* The calling thread's slot, made on first need when `create`. Only the
 * owning thread touches a slot's message, so no lock is needed for it. NULL
 * when there is none and create is false, or when making one fails (the
 * message is then lost, the status still returned). */
static error_slot *slot_for_thread(sj_ctx *ctx, bool create) {
    error_slot *s = pthread_getspecific(ctx->slot_key);
    if (s || !create) return s;
    s = ctx->allocator.alloc_fn(ctx->allocator.user, sizeof *s);
    if (!s) return NULL;
    s->ctx = ctx;
    s->msg[0] = '\0';
    s->prev = NULL;
    if (pthread_setspecific(ctx->slot_key, s) != 0) {
        ctx->allocator.free_fn(ctx->allocator.user, s);
        return NULL;
    }
    pthread_mutex_lock(&ctx->error_lock);
    s->next = ctx->errors;
    if (s->next) s->next->prev = s;
    ctx->errors = s;
    pthread_mutex_unlock(&ctx->error_lock);
    return s;
}

const char *sj_ctx_last_error(const sj_ctx *ctx) {
    if (!ctx) return "";
    error_slot *s = slot_for_thread((sj_ctx *)ctx, false);
    return s ? s->msg : "";
}

void sj_ctx_clear_error(sj_ctx *ctx) {
    if (!ctx) return;
    error_slot *s = slot_for_thread(ctx, false);
    if (s) s->msg[0] = '\0';
}

static void set_error_v(sj_ctx *ctx, const char *fmt, va_list ap) {
    if (!ctx) return;
    error_slot *s = slot_for_thread(ctx, true);
    if (s) vsnprintf(s->msg, sizeof s->msg, fmt, ap);
}

static void error_prefix_v(sj_ctx *ctx, const char *fmt, va_list ap) {
    if (!ctx) return;
    error_slot *s = slot_for_thread(ctx, true);
    if (s) {
        char prefix[256];
        vsnprintf(prefix, sizeof prefix, fmt, ap);
        /* Shift the old message right and write the prefix in front; a
         * message that no longer fits is cut at its end. */
        size_t plen = strlen(prefix), olen = strlen(s->msg);
        if (plen + 2 >= sizeof s->msg) plen = sizeof s->msg - 3;
        if (plen + 2 + olen >= sizeof s->msg) olen = sizeof s->msg - plen - 3;
        memmove(s->msg + plen + 2, s->msg, olen);
        s->msg[plen + 2 + olen] = '\0';
        memcpy(s->msg, prefix, plen);
        s->msg[plen] = ':';
        s->msg[plen + 1] = ' ';
    }
}

void sj__set_error(sj_ctx *ctx, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error_v(ctx, fmt, ap);
    va_end(ap);
}

void sj__error_prefix(sj_ctx *ctx, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    error_prefix_v(ctx, fmt, ap);
    va_end(ap);
}

sj_status sj_ctx_set_error(sj_ctx *ctx, sj_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error_v(ctx, fmt, ap);
    va_end(ap);
    return st;
}

void sj_ctx_prefix_error(sj_ctx *ctx, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    error_prefix_v(ctx, fmt, ap);
    va_end(ap);
}

sj_status sj__config_read(sj_ctx *ctx, const char *what, const void *in, size_t min_size, size_t known_size,
                          void *out) {
    size_t size;
    memcpy(&size, in, sizeof size);
    if (size < min_size)
        return sj_fail(ctx, SJ_E_INVALID_ARG,
                       "%s: size %zu is smaller than any shapejit's (at least %zu): fill it with %s_init "
                       "first",
                       what, size, min_size, what);
    if (size > known_size)
        return sj_fail(ctx, SJ_E_INVALID_ARG,
                       "%s: size %zu is larger than this library's (%zu, shapejit %s): the program was "
                       "built against a newer shapejit",
                       what, size, known_size, SJ_VERSION_STRING);
    memcpy(out, in, size);
    memcpy(out, &known_size, sizeof known_size);
    return SJ_OK;
}

void *sj__ctx_slot(sj_ctx *ctx) {
    return atomic_load_explicit(&ctx->slot, memory_order_acquire);
}

void *sj__ctx_slot_install(sj_ctx *ctx, void *p, void (*destroy)(void *)) {
    void *none = NULL;
    if (!atomic_compare_exchange_strong_explicit(&ctx->slot, &none, p, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        destroy(p); /* another thread installed one first */
        return none;
    }
    ctx->slot_destroy = destroy; /* read only by sj_ctx_destroy, after every user */
    return p;
}

void *sj_alloc(sj_ctx *ctx, size_t size) {
    return ctx->allocator.alloc_fn(ctx->allocator.user, size ? size : 1);
}

void *sj_calloc(sj_ctx *ctx, size_t n, size_t size) {
    size_t total;
    if (sj_mul_overflow_size(n, size, &total)) return NULL;
    void *p = sj_alloc(ctx, total);
    if (p) memset(p, 0, total);
    return p;
}

void *sj_realloc(sj_ctx *ctx, void *ptr, size_t new_size) {
    return ctx->allocator.realloc_fn(ctx->allocator.user, ptr, new_size ? new_size : 1);
}

void sj_free(sj_ctx *ctx, void *ptr) {
    if (ptr) ctx->allocator.free_fn(ctx->allocator.user, ptr);
}

char *sj_strdup(sj_ctx *ctx, const char *s) {
    size_t n = strlen(s) + 1;
    char *p = sj_alloc(ctx, n);
    if (p) memcpy(p, s, n);
    return p;
}
