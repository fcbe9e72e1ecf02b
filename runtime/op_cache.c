/* The op cache: a chained hash of (module, name) -> kernel handle with its
 * attributes, scratch buffers by tag (outgrown ones parked until release),
 * the allocation-fallback latch and the diagnostic gates. One mutex guards
 * it all; the hot call (a memoised kernel) holds it for one hash probe.
 *
 * A client of the device: it holds a reference and calls only the device's
 * public functions (lock order: cache, then device); the device does not
 * know it exists. */
#include "runtime/device_impl.h"
#include "shapejit/ext/op_cache.h"
#include "core/array.h"
#include "core/hash.h"

#include <string.h>

#define KERNEL_BUCKETS 256 /* fixed: a device holds a few hundred kernels at most */

typedef struct kernel_entry {
    struct kernel_entry *next;
    const sj_module *module;
    uint64_t hash;
    sj_kernel_handle handle;
    sj_kernel_attrs attrs;
    char name[];
} kernel_entry;

typedef struct scratch_entry {
    char *tag;
    void *ptr;
    size_t bytes;
} scratch_entry;

typedef struct shape_key {
    uint64_t name_hash;
    uint32_t m, n, k;
} shape_key;

typedef struct counter_entry {
    char *key;
    uint32_t count;
} counter_entry;

struct sj_op_cache {
    sj_device *dev; /* holds a reference */
    pthread_mutex_t lock;
    kernel_entry *kernels[KERNEL_BUCKETS];
    size_t n_kernels;
    scratch_entry *scratch;
    size_t n_scratch, cap_scratch;
    void **retired; /* outgrown scratch, freed at release */
    size_t n_retired, cap_retired;
    atomic_bool fell_back;
    shape_key *shapes;
    size_t n_shapes, cap_shapes;
    counter_entry *counters;
    size_t n_counters, cap_counters;
    uint64_t gen; /* the device generation the handles and scratch are of */
};

/* After a device reset the handles and scratch held here went with the
 * lost context: they are dropped, never handed out or freed (a fresh
 * allocation may have an old address). Caller holds oc->lock. */
static void follow_generation(sj_op_cache *oc) {
    uint64_t gen = sj_device_generation(oc->dev);
    if (gen == oc->gen) return;
    sj_ctx *ctx = oc->dev->ctx;
    for (size_t b = 0; b < KERNEL_BUCKETS; b++) {
        for (kernel_entry *e = oc->kernels[b], *next; e; e = next) {
            next = e->next;
            sj_free(ctx, e);
        }
        oc->kernels[b] = NULL;
    }
    oc->n_kernels = 0;
    for (size_t i = 0; i < oc->n_scratch; i++) sj_free(ctx, oc->scratch[i].tag);
    oc->n_scratch = oc->n_retired = 0;
    oc->gen = gen;
}

static uint64_t kernel_hash(const sj_module *m, const char *name) {
    return sj__fnv1a_str(SJ_FNV_OFFSET ^ ((uint64_t)(uintptr_t)m * 0x9E3779B97F4A7C15ull), name);
}

sj_status sj_op_cache_create(sj_device *dev, sj_op_cache **out) {
    if (!dev || !out)
        return sj_fail(dev ? dev->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *out = NULL;
    sj_op_cache *oc = sj_calloc(dev->ctx, 1, sizeof *oc);
    if (!oc) return sj_fail(dev->ctx, SJ_E_NOMEM, "op cache: out of memory");
    oc->dev = dev;
    pthread_mutex_init(&oc->lock, NULL);
    atomic_init(&oc->fell_back, false);
    oc->gen = sj_device_generation(dev);
    sj__device_retain(dev);
    *out = oc;
    return SJ_OK;
}

void sj_op_cache_destroy(sj_op_cache *oc) {
    if (!oc) return;
    sj_op_cache_release(oc);
    sj_ctx *ctx = oc->dev->ctx;
    for (size_t b = 0; b < KERNEL_BUCKETS; b++) {
        kernel_entry *e = oc->kernels[b];
        while (e) {
            kernel_entry *next = e->next;
            sj_free(ctx, e);
            e = next;
        }
    }
    sj_free(ctx, oc->scratch);
    sj_free(ctx, oc->retired);
    sj_free(ctx, oc->shapes);
    for (size_t i = 0; i < oc->n_counters; i++) sj_free(ctx, oc->counters[i].key);
    sj_free(ctx, oc->counters);
    pthread_mutex_destroy(&oc->lock);
    sj_device *dev = oc->dev;
    sj_free(ctx, oc);
    sj__device_unref(dev);
}

static kernel_entry *find_kernel(sj_op_cache *oc, const sj_module *m, const char *name,
                                 uint64_t h) {
    for (kernel_entry *e = oc->kernels[h % KERNEL_BUCKETS]; e; e = e->next)
        if (e->hash == h && e->module == m && strcmp(e->name, name) == 0) return e;
    return NULL;
}

sj_status sj_op_cache_kernel(sj_op_cache *oc, sj_module *module, const char *name,
                             sj_kernel_handle *out, sj_kernel_attrs *attrs) {
    if (!oc || !module || !name || !out)
        return sj_fail(oc ? oc->dev->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    if (sj_module_device(module) != oc->dev)
        return sj_fail(oc->dev->ctx, SJ_E_INVALID_ARG,
                       "op cache: kernel '%s' asked of a module on another device", name);
    uint64_t h = kernel_hash(module, name);
    pthread_mutex_lock(&oc->lock);
    follow_generation(oc);
    kernel_entry *e = find_kernel(oc, module, name, h);
    if (e) {
        *out = e->handle;
        if (attrs) *attrs = e->attrs;
        pthread_mutex_unlock(&oc->lock);
        return SJ_OK;
    }
    pthread_mutex_unlock(&oc->lock);

    sj_kernel_handle k = NULL;
    sj_kernel_attrs a;
    /* Outside the cache's lock: a backend may take its time. */
    SJ_TRY(sj_module_kernel(module, name, &k, &a));
    size_t len = strlen(name) + 1;
    kernel_entry *fresh = sj_alloc(oc->dev->ctx, sizeof *fresh + len);
    if (!fresh) return sj_fail(oc->dev->ctx, SJ_E_NOMEM, "op cache: out of memory");
    pthread_mutex_lock(&oc->lock);
    follow_generation(oc);
    /* Another thread may have resolved it meanwhile: keep the first entry. */
    e = find_kernel(oc, module, name, h);
    if (e) {
        sj_free(oc->dev->ctx, fresh);
    } else {
        fresh->module = module;
        fresh->hash = h;
        fresh->handle = k;
        fresh->attrs = a;
        memcpy(fresh->name, name, len);
        fresh->next = oc->kernels[h % KERNEL_BUCKETS];
        oc->kernels[h % KERNEL_BUCKETS] = fresh;
        oc->n_kernels++;
        e = fresh;
    }
    *out = e->handle;
    if (attrs) *attrs = e->attrs;
    pthread_mutex_unlock(&oc->lock);
    return SJ_OK;
}

sj_status sj_op_cache_kernel_attrs(sj_op_cache *oc, sj_kernel_handle k, sj_kernel_attrs *out) {
    if (!oc || !out)
        return sj_fail(oc ? oc->dev->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    pthread_mutex_lock(&oc->lock);
    follow_generation(oc);
    for (size_t b = 0; b < KERNEL_BUCKETS; b++)
        for (kernel_entry *e = oc->kernels[b]; e; e = e->next)
            if (e->handle == k) {
                *out = e->attrs;
                pthread_mutex_unlock(&oc->lock);
                return SJ_OK;
            }
    pthread_mutex_unlock(&oc->lock);
    return sj_fail(oc->dev->ctx, SJ_E_NOT_FOUND, "op cache: kernel handle %p was not resolved here",
                   k);
}

void sj_op_cache_forget_module(sj_op_cache *oc, const sj_module *module) {
    if (!oc) return;
    pthread_mutex_lock(&oc->lock);
    for (size_t b = 0; b < KERNEL_BUCKETS; b++) {
        kernel_entry **pp = &oc->kernels[b];
        while (*pp) {
            kernel_entry *e = *pp;
            if (e->module == module) {
                *pp = e->next;
                sj_free(oc->dev->ctx, e);
                oc->n_kernels--;
            } else {
                pp = &e->next;
            }
        }
    }
    pthread_mutex_unlock(&oc->lock);
}

size_t sj_op_cache_num_kernels(sj_op_cache *oc) {
    pthread_mutex_lock(&oc->lock);
    follow_generation(oc);
    size_t n = oc->n_kernels;
    pthread_mutex_unlock(&oc->lock);
    return n;
}

sj_status sj_op_cache_scratch(sj_op_cache *oc, const char *tag, size_t bytes, void **out) {
    if (!oc || !tag || !out)
        return sj_fail(oc ? oc->dev->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *out = NULL;
    sj_ctx *ctx = oc->dev->ctx;
    pthread_mutex_lock(&oc->lock);
    follow_generation(oc);
    scratch_entry *s = NULL;
    for (size_t i = 0; i < oc->n_scratch; i++)
        if (strcmp(oc->scratch[i].tag, tag) == 0) s = &oc->scratch[i];
    if (s && s->bytes >= bytes) {
        *out = s->ptr;
        pthread_mutex_unlock(&oc->lock);
        return SJ_OK;
    }
    /* Room for the bookkeeping first, so a device buffer is never orphaned. */
    char *tag_copy = s ? NULL : sj_strdup(ctx, tag);
    bool room = s ? sj__array_reserve(ctx, (void **)&oc->retired, &oc->cap_retired,
                                     oc->n_retired + 1, sizeof *oc->retired)
                  : tag_copy && sj__array_reserve(ctx, (void **)&oc->scratch, &oc->cap_scratch,
                                                 oc->n_scratch + 1, sizeof *oc->scratch);
    if (!room) {
        sj_free(ctx, tag_copy);
        pthread_mutex_unlock(&oc->lock);
        return sj_fail(ctx, SJ_E_NOMEM, "op cache: out of memory for scratch '%s'", tag);
    }
    void *p = NULL;
    sj_status st = sj_device_alloc(oc->dev, bytes, &p);
    if (st != SJ_OK) {
        sj_free(ctx, tag_copy);
        pthread_mutex_unlock(&oc->lock);
        sj__error_prefix(ctx, "op cache: scratch '%s' (%zu bytes)", tag, bytes);
        return st;
    }
    if (s) {
        oc->retired[oc->n_retired++] = s->ptr;
        s->ptr = p;
        s->bytes = bytes;
    } else {
        oc->scratch[oc->n_scratch++] = (scratch_entry){tag_copy, p, bytes};
    }
    *out = p;
    pthread_mutex_unlock(&oc->lock);
    return SJ_OK;
}

size_t sj_op_cache_num_scratch(sj_op_cache *oc) {
    pthread_mutex_lock(&oc->lock);
    follow_generation(oc);
    size_t n = oc->n_scratch + oc->n_retired;
    pthread_mutex_unlock(&oc->lock);
    return n;
}

sj_status sj_op_cache_release(sj_op_cache *oc) {
    if (!oc) return SJ_OK;
    sj_ctx *ctx = oc->dev->ctx;
    pthread_mutex_lock(&oc->lock);
    follow_generation(oc);
    /* Emptied before freeing, so the call is idempotent and no later request
     * can get a pointer into freed memory. */
    for (size_t i = 0; i < oc->n_scratch; i++) {
        sj__device_free_gen(oc->dev, oc->scratch[i].ptr, oc->gen);
        sj_free(ctx, oc->scratch[i].tag);
    }
    for (size_t i = 0; i < oc->n_retired; i++) sj__device_free_gen(oc->dev, oc->retired[i], oc->gen);
    oc->n_scratch = 0;
    oc->n_retired = 0;
    pthread_mutex_unlock(&oc->lock);
    return SJ_OK;
}

void sj_op_cache_note_alloc_fallback(sj_op_cache *oc) { atomic_store(&oc->fell_back, true); }

bool sj_op_cache_alloc_fell_back(sj_op_cache *oc) { return atomic_load(&oc->fell_back); }

/* Shared by once and first_shape (once is (key, 0, 0, 0)), as names are
 * hashed: a collision of two 64-bit name hashes costs one missed log line. */
bool sj_op_cache_first_shape(sj_op_cache *oc, const char *name, uint32_t m, uint32_t n,
                             uint32_t k) {
    if (!oc || !name) return false;
    shape_key key = {sj__hash_str(name), m, n, k};
    pthread_mutex_lock(&oc->lock);
    bool fresh = true;
    for (size_t i = 0; i < oc->n_shapes && fresh; i++) {
        const shape_key *s = &oc->shapes[i];
        fresh = !(s->name_hash == key.name_hash && s->m == m && s->n == n && s->k == k);
    }
    if (fresh) {
        if (sj__array_reserve(oc->dev->ctx, (void **)&oc->shapes, &oc->cap_shapes,
                             oc->n_shapes + 1, sizeof *oc->shapes))
            oc->shapes[oc->n_shapes++] = key;
        else
            fresh = false;
    }
    pthread_mutex_unlock(&oc->lock);
    return fresh;
}

bool sj_op_cache_once(sj_op_cache *oc, const char *key) {
    return sj_op_cache_first_shape(oc, key, 0, 0, 0);
}

bool sj_op_cache_first_n(sj_op_cache *oc, const char *key, uint32_t n) {
    if (!oc || !key) return false;
    pthread_mutex_lock(&oc->lock);
    counter_entry *c = NULL;
    for (size_t i = 0; i < oc->n_counters && !c; i++)
        if (strcmp(oc->counters[i].key, key) == 0) c = &oc->counters[i];
    if (!c) {
        char *copy = sj_strdup(oc->dev->ctx, key);
        if (!copy || !sj__array_reserve(oc->dev->ctx, (void **)&oc->counters, &oc->cap_counters,
                                       oc->n_counters + 1, sizeof *oc->counters)) {
            sj_free(oc->dev->ctx, copy);
            pthread_mutex_unlock(&oc->lock);
            return false;
        }
        c = &oc->counters[oc->n_counters++];
        *c = (counter_entry){copy, 0};
    }
    if (c->count < UINT32_MAX) c->count++;
    bool open = c->count <= n;
    pthread_mutex_unlock(&oc->lock);
    return open;
}
