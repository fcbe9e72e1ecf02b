/* shapejit/common.h — status codes, the context, allocator hook, version.
 *
 *   sj_ctx_config cfg;
 *   sj_ctx_config_init(&cfg);              // defaults: libc allocator
 *   sj_ctx *ctx;
 *   if (sj_ctx_create(&cfg, &ctx) != SJ_OK) return 1;
 *   sj_status st = some_sj_call(ctx, ...);
 *   if (st != SJ_OK)
 *       fprintf(stderr, "%s: %s\n", sj_status_str(st), sj_ctx_last_error(ctx));
 *   sj_ctx_destroy(ctx);
 *
 * Every object shapejit makes belongs to a context; the library keeps no
 * global mutable state and reads no environment variables. A context is safe
 * to share between threads; its last-error message is kept per thread so one
 * thread's failure never overwrites the message another thread is reading.
 */
#ifndef SHAPEJIT_COMMON_H
#define SHAPEJIT_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* Marks the functions libshapejit.so exports. The library is built with
 * hidden visibility, so everything else (internals, the protobuf-c ONNX
 * code) stays inside it; a ctest compares the exports with the headers. */
#if defined(__GNUC__) || defined(__clang__)
#define SJ_API __attribute__((visibility("default")))
#else
#define SJ_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define SJ_VERSION_MAJOR 0
#define SJ_VERSION_MINOR 1
#define SJ_VERSION_PATCH 0
#define SJ_VERSION_STRING "0.1.0"
/* major * 10000 + minor * 100 + patch, comparable with < and >. */
#define SJ_VERSION_NUMBER (SJ_VERSION_MAJOR * 10000 + SJ_VERSION_MINOR * 100 + SJ_VERSION_PATCH)

/* The version of the library actually linked (may differ from the header). */
SJ_API unsigned sj_version_number(void);
SJ_API const char *sj_version_string(void);

typedef enum sj_status {
    SJ_OK = 0,
    SJ_E_INVALID_ARG = -1,   /* a caller passed something malformed */
    SJ_E_NOMEM = -2,         /* the allocator failed */
    SJ_E_SHAPE = -3,         /* shapes do not agree */
    SJ_E_PARSE = -4,         /* text, npy, protobuf or artifact bytes malformed */
    SJ_E_IO = -5,            /* a file or socket operation failed */
    SJ_E_UNSUPPORTED = -6,   /* valid input that shapejit does not handle */
    SJ_E_NOT_FOUND = -7,     /* a named thing does not exist */
    SJ_E_OUT_OF_RANGE = -8,  /* an extent outside every bucket / the compiled one */
    SJ_E_CORRUPT = -9,       /* stored bytes failed a checksum or bounds check */
    SJ_E_COMPILE = -10,      /* a compiler (LLVM, NVRTC, ptxas) rejected code */
    SJ_E_NO_DEVICE = -11,    /* the device or its driver is not available */
    SJ_E_DEVICE = -12,       /* the device reported an error */
    SJ_E_STATE = -13,        /* call not valid in the object's current state */
    SJ_E_MISMATCH = -14,     /* artifact target/toolchain differs from the device */
    SJ_E_BUSY = -15,         /* a lock or resource could not be had in time */
    SJ_E_INTERNAL = -16,     /* a bug in shapejit */
    /* A kernel faulted on the device (illegal address, trap, timeout, ...):
     * the device's context was lost with everything made on it. The device
     * resets itself; what was loaded on it loads again at its next use. */
    SJ_E_DEVICE_LOST = -17
} sj_status;

SJ_API const char *sj_status_str(sj_status st);

/* Allocation hook. Tests use it to count allocations on the launch path and
 * to inject failures. Either all three functions are set or none (libc is
 * then used). All three receive `user`; they must be thread-safe. */
typedef struct sj_allocator {
    void *(*alloc_fn)(void *user, size_t size);
    void *(*realloc_fn)(void *user, void *ptr, size_t new_size);
    void (*free_fn)(void *user, void *ptr);
    void *user;
} sj_allocator;

/* Config structs (sj_ctx_config, sj_store_config, sj_remote_config,
 * sj_model_options, sj_engine_config) start with `size_t size`, which
 * their _init sets to sizeof the struct the caller was compiled with: a
 * later shapejit appends fields and reads only those within size (the
 * others keep their defaults), so a program keeps working with a newer
 * library of the same major version without a rebuild. A size larger than
 * the library knows (a program built against a newer shapejit) or smaller
 * than any (a struct not filled by its _init) is refused with
 * SJ_E_INVALID_ARG and a message naming the struct. Always call the _init,
 * then set fields by name. */
typedef struct sj_ctx_config {
    /* Set by sj_ctx_config_init to the size of this struct the caller is built with;
     * leave it (see "Config structs" in shapejit/common.h). */
    size_t size;
    sj_allocator allocator; /* zero-filled = libc malloc/realloc/free */
} sj_ctx_config;

SJ_API void sj_ctx_config_init(sj_ctx_config *cfg);

typedef struct sj_ctx sj_ctx;

/* cfg may be NULL for defaults. Owner must call sj_ctx_destroy after every
 * object created from the context is destroyed. */
SJ_API sj_status sj_ctx_create(const sj_ctx_config *cfg, sj_ctx **out);
SJ_API void sj_ctx_destroy(sj_ctx *ctx);

/* The message of the calling thread's last failed call on this context, or ""
 * when there is none. Valid until this thread's next call into the context. */
SJ_API const char *sj_ctx_last_error(const sj_ctx *ctx);
SJ_API void sj_ctx_clear_error(sj_ctx *ctx);

/* For code built on shapejit that reports its own failures the same way
 * (a serving layer, a tool): sj_ctx_set_error records a printf-style message
 * as the calling thread's last error on ctx and returns st, so an error path
 * reads `return sj_ctx_set_error(ctx, SJ_E_INVALID_ARG, "window %d", w);`.
 * sj_ctx_prefix_error puts "<prefix>: " in front of the current message, as
 * an error crosses a layer that knows more (a file name, a request size).
 * A NULL ctx records nothing. */
#if defined(__GNUC__) || defined(__clang__)
#define SJ_PRINTF_FORMAT(a, b) __attribute__((format(printf, a, b)))
#else
#define SJ_PRINTF_FORMAT(a, b)
#endif
SJ_API sj_status sj_ctx_set_error(sj_ctx *ctx, sj_status st, const char *fmt, ...) SJ_PRINTF_FORMAT(3, 4);
SJ_API void sj_ctx_prefix_error(sj_ctx *ctx, const char *fmt, ...) SJ_PRINTF_FORMAT(2, 3);

/* Allocation through the context's hook (for code embedding shapejit and for
 * tests that want the same accounting). Never returns NULL for size 0. */
SJ_API void *sj_alloc(sj_ctx *ctx, size_t size);
SJ_API void *sj_calloc(sj_ctx *ctx, size_t n, size_t size);
SJ_API void *sj_realloc(sj_ctx *ctx, void *ptr, size_t new_size);
SJ_API void sj_free(sj_ctx *ctx, void *ptr);
SJ_API char *sj_strdup(sj_ctx *ctx, const char *s);

#ifdef __cplusplus
}
#endif
#endif
