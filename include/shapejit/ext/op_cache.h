/* shapejit/ext/op_cache.h — per-device memo of kernel handles and their
 * attributes, grow-only scratch buffers, and diagnostic gates.
 *
 *   sj_op_cache *oc;
 *   sj_op_cache_create(dev, &oc);                   // per device, never global
 *   sj_kernel_handle k;
 *   sj_kernel_attrs a;
 *   sj_op_cache_kernel(oc, module, "k0_softmax", &k, &a);  // resolves once, then a table read
 *   void *tmp;
 *   sj_op_cache_scratch(oc, "softmax_rows", 4096, &tmp);   // grows, never shrinks
 *   if (sj_op_cache_first_shape(oc, "gemm", m, n, k)) log_route(...);
 *
 * Everything here belongs to one device: handles point into that device's
 * modules, scratch is that device's memory, and gates count that device's
 * events, so a second model on another device starts fresh. The cache is a
 * client of the device (it holds a reference); the device does not own or
 * know it, and the executor does not use it (an executable resolves its
 * kernels once, with sj_module_kernel, and keeps the handles). The registry
 * of loaded kernel modules keyed by content is the device's own (every
 * module's pieces are loaded once per device, sj_device_code_stats_get), so
 * modules this cache resolves from share loaded code as executables do. It
 * serves a backend or tool that looks kernels up by name at run time.
 *
 * Kernel handles: memoised by (module, name); a hit allocates nothing. The
 * attributes the code publishes are recorded when the handle is resolved.
 * Before destroying a module, call sj_op_cache_forget_module for it.
 *
 * Scratch: a request that fits returns the stored buffer; a larger one
 * allocates a new buffer under the tag. The outgrown buffer is kept (a
 * captured graph may still replay against it) until sj_op_cache_release,
 * which frees every scratch buffer; release is idempotent, and the cache stays
 * usable after it. Thread-safe: calls lock the cache.
 *
 * Extension tier (include/shapejit/ext/): for backends, tools and tests
 * that work below sj_engine; it may change between minor versions.
 */
#ifndef SHAPEJIT_OP_CACHE_H
#define SHAPEJIT_OP_CACHE_H

#include "shapejit/ext/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sj_op_cache sj_op_cache;

/* Holds a reference on `dev` until destroyed. Destroy releases the scratch
 * first. NULL is a no-op. */
SJ_API sj_status sj_op_cache_create(sj_device *dev, sj_op_cache **out);
SJ_API void sj_op_cache_destroy(sj_op_cache *oc);

/* The handle of kernel `name` in `module` (which must be on the cache's
 * device); attrs may be NULL. SJ_E_NOT_FOUND when the module has no such
 * kernel (not memoised: the next call asks the device again). */
SJ_API sj_status sj_op_cache_kernel(sj_op_cache *oc, sj_module *module, const char *name,
                                    sj_kernel_handle *out, sj_kernel_attrs *attrs);
/* The attributes recorded for a handle this cache resolved; SJ_E_NOT_FOUND
 * for any other handle. */
SJ_API sj_status sj_op_cache_kernel_attrs(sj_op_cache *oc, sj_kernel_handle k, sj_kernel_attrs *out);
/* Forgets every handle of `module` (called when a module is unloaded). */
SJ_API void sj_op_cache_forget_module(sj_op_cache *oc, const sj_module *module);
SJ_API size_t sj_op_cache_num_kernels(sj_op_cache *oc);

/* A device buffer of at least `bytes` under `tag` (tag copied). */
SJ_API sj_status sj_op_cache_scratch(sj_op_cache *oc, const char *tag, size_t bytes, void **out);
/* Buffers held: current ones plus outgrown ones awaiting release. */
SJ_API size_t sj_op_cache_num_scratch(sj_op_cache *oc);
/* Frees every scratch buffer (after the device's release there is nothing
 * left to free and the buffers are only dropped). SJ_OK, also when repeated. */
SJ_API sj_status sj_op_cache_release(sj_op_cache *oc);

/* The allocation-fallback latch: set once a loader had to fall back (e.g. to
 * managed memory) and kept for the device's life, so later loads know. */
SJ_API void sj_op_cache_note_alloc_fallback(sj_op_cache *oc);
SJ_API bool sj_op_cache_alloc_fell_back(sj_op_cache *oc);

/* Diagnostic gates, per device. once: true the first time `key` is seen.
 * first_n: true for the first n calls with `key`. first_shape: true the first
 * time (name, m, n, k) is seen. When recording the key fails for lack of
 * memory they return false (a missed log line, not a repeated one). */
SJ_API bool sj_op_cache_once(sj_op_cache *oc, const char *key);
SJ_API bool sj_op_cache_first_n(sj_op_cache *oc, const char *key, uint32_t n);
SJ_API bool sj_op_cache_first_shape(sj_op_cache *oc, const char *name, uint32_t m, uint32_t n,
                                    uint32_t k);

#ifdef __cplusplus
}
#endif
#endif
