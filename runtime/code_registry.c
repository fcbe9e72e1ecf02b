/* The device's content-keyed registry of loaded code (code_registry.h). */
#include "runtime/code_registry.h"

#include "runtime/device_impl.h"

#include <llvm-c/blake3.h>
#include <string.h>

/* A kernel resolved from a piece: valid while the piece is loaded. */
typedef struct resolved {
    struct resolved *next;
    sj_kernel_handle handle;
    sj_kernel_attrs attrs;
    char name[];
} resolved;

/* One piece as the device holds it. Found by format and the BLAKE3 of its
 * bytes, within the generation it was loaded in. */
struct sj_code_piece_ref {
    uint8_t digest[32];
    sj_code_format fmt;
    uint64_t gen;
    void *impl; /* the backend's module */
    int refs;
    resolved *kernels;
    struct sj_code_piece_ref *prev, *next;
};

static void digest_of(const void *bytes, size_t len, uint8_t out[32]) {
    llvm_blake3_hasher h;
    llvm_blake3_hasher_init(&h);
    llvm_blake3_hasher_update(&h, bytes, len);
    llvm_blake3_hasher_finalize(&h, out, 32);
}

sj_status sj__code_hold_locked(sj_device *dev, sj_code_format fmt, const void *bytes, size_t len,
                               sj_code_piece_ref **out) {
    *out = NULL;
    uint8_t digest[32];
    digest_of(bytes, len, digest);
    uint64_t gen = atomic_load(&dev->generation);
    for (sj_code_piece_ref *p = dev->code; p; p = p->next)
        if (p->gen == gen && p->fmt == fmt && !memcmp(p->digest, digest, sizeof digest)) {
            p->refs++;
            dev->code_shared++;
            *out = p;
            return SJ_OK;
        }
    sj_code_piece_ref *p = sj_calloc(dev->ctx, 1, sizeof *p);
    if (!p) return sj_fail(dev->ctx, SJ_E_NOMEM, "load module: out of memory");
    sj_status st = sj__device_recover_locked(dev, dev->ops->load_module(dev->impl, fmt, bytes, len,
                                                                        &p->impl));
    if (st != SJ_OK) {
        sj_free(dev->ctx, p);
        return st;
    }
    memcpy(p->digest, digest, sizeof digest);
    p->fmt = fmt;
    p->gen = gen;
    p->refs = 1;
    p->next = dev->code;
    if (dev->code) dev->code->prev = p;
    dev->code = p;
    dev->code_loaded++;
    *out = p;
    return SJ_OK;
}

void sj__code_release_locked(sj_device *dev, sj_code_piece_ref *p) {
    if (!p || --p->refs > 0) return;
    /* a piece of an older generation went with its context */
    if (atomic_load(&dev->alive) && !dev->lost && p->gen == atomic_load(&dev->generation))
        dev->ops->unload_module(dev->impl, p->impl);
    if (p->prev) p->prev->next = p->next;
    else dev->code = p->next;
    if (p->next) p->next->prev = p->prev;
    for (resolved *k = p->kernels, *next; k; k = next) {
        next = k->next;
        sj_free(dev->ctx, k);
    }
    sj_free(dev->ctx, p);
}

sj_status sj__code_resolve_locked(sj_device *dev, sj_code_piece_ref *p, const char *name,
                                  sj_kernel_handle *out, sj_kernel_attrs *attrs) {
    for (const resolved *k = p->kernels; k; k = k->next)
        if (!strcmp(k->name, name)) {
            *out = k->handle;
            *attrs = k->attrs;
            return SJ_OK;
        }
    SJ_TRY(dev->ops->resolve_kernel(dev->impl, p->impl, name, out, attrs));
    size_t n = strlen(name) + 1;
    resolved *k = sj_alloc(dev->ctx, sizeof *k + n);
    if (!k) return SJ_OK; /* the next executable asks the backend again */
    k->handle = *out;
    k->attrs = *attrs;
    memcpy(k->name, name, n);
    k->next = p->kernels;
    p->kernels = k;
    return SJ_OK;
}

void sj__code_stats_locked(const sj_device *dev, sj_device_code_stats *out) {
    uint64_t gen = atomic_load(&((sj_device *)dev)->generation);
    int64_t resident = 0;
    for (const sj_code_piece_ref *p = dev->code; p; p = p->next) resident += p->gen == gen;
    *out = (sj_device_code_stats){dev->code_loaded, dev->code_shared, resident};
}
