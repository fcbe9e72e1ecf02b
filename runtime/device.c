/* The device wrapper: lifetime (release vs. the struct's references), the
 * lock, and checked calls into the backend's table. */
#include "runtime/device_impl.h"

#include "plan/code_bundle.h"
#include "runtime/code_registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void mdcache_release_buffer(void *user, void *buffer) {
    sj_device *dev = user;
    if (!dev->forgetting) dev->ops->free(dev->impl, buffer);
}

/* The device pool's buffers: device memory of the pool's generation, made
 * and freed under the lock so a reset cannot come in between (a free after
 * the device's release or a reset is a no-op: the backend freed it). */
static sj_status weight_make(void *user, const void *src, size_t bytes, void **out) {
    sj_weight_gen *wg = user;
    sj_device *dev = wg->dev;
    sj__device_lock(dev);
    sj_status st = sj__device_check_usable_locked(dev, "upload weights");
    if (st == SJ_OK && wg->gen != atomic_load(&dev->generation))
        st = sj_fail(dev->ctx, SJ_E_STATE, "upload weights: device '%s' was reset meanwhile",
                     dev->ops->name);
    if (st == SJ_OK) st = dev->ops->alloc(dev->impl, bytes, out);
    if (st == SJ_OK) {
        st = dev->ops->copy(dev->impl, *out, src, bytes, SJ_COPY_H2D);
        if (st != SJ_OK) dev->ops->free(dev->impl, *out);
    }
    sj__device_recover_locked(dev, st);
    sj__device_unlock(dev);
    return st;
}

static void weight_free(void *user, void *buf) {
    sj_weight_gen *wg = user;
    sj__device_free_gen(wg->dev, buf, wg->gen);
}

sj_weight_pool *sj__device_weight_pool(sj_device *dev, const sj_weight_backing **backing) {
    sj__device_lock(dev);
    uint64_t gen = atomic_load(&dev->generation);
    sj_weight_gen *wg = dev->weight_gens;
    if (!wg || wg->gen != gen) {
        wg = sj_calloc(dev->ctx, 1, sizeof *wg);
        if (wg && sj__weight_pool_create(dev->ctx, &wg->pool) != SJ_OK) {
            sj_free(dev->ctx, wg);
            wg = NULL;
        }
        if (wg) {
            wg->dev = dev;
            wg->gen = gen;
            wg->backing = (sj_weight_backing){wg, weight_make, weight_free};
            wg->older = dev->weight_gens;
            dev->weight_gens = wg;
            dev->weights = wg->pool;
        }
    }
    sj__device_unlock(dev);
    *backing = wg ? &wg->backing : NULL;
    return wg ? wg->pool : NULL;
}

static bool ops_complete(const sj_device_ops *o) {
    return o->name && o->alloc && o->free && o->copy && o->load_module && o->unload_module &&
           o->resolve_kernel && o->launch && o->sync && o->begin_capture && o->end_capture &&
           o->replay && o->destroy_graph && o->destroy;
}

sj_status sj_device_create(sj_ctx *ctx, const sj_device_ops *ops, void *impl,
                           const sj_mdcache_policy *policy, sj_device **out) {
    if (!ctx || !out || !ops) {
        if (ops && ops->destroy && impl) ops->destroy(impl);
        return ctx ? sj_fail(ctx, SJ_E_INVALID_ARG, "sj_device_create: NULL argument")
                   : SJ_E_INVALID_ARG;
    }
    *out = NULL;
    if (!ops_complete(ops)) {
        if (ops->destroy && impl) ops->destroy(impl);
        return sj_fail(ctx, SJ_E_INVALID_ARG,
                       "sj_device_create: backend '%s' leaves a function of its table NULL",
                       ops->name ? ops->name : "?");
    }
    sj_device *dev = sj_calloc(ctx, 1, sizeof *dev);
    if (!dev) {
        ops->destroy(impl);
        return sj_fail(ctx, SJ_E_NOMEM, "sj_device_create: out of memory");
    }
    dev->ctx = ctx;
    dev->ops = ops;
    dev->impl = impl;
    pthread_mutex_init(&dev->lock, NULL);
    atomic_init(&dev->refs, 1);
    atomic_init(&dev->alive, true);
    dev->next_graph_id = 1;
    atomic_init(&dev->generation, 0);
    atomic_init(&dev->resets, 0);
    if (policy)
        dev->mdcache_policy = *policy;
    else
        sj_mdcache_policy_init(&dev->mdcache_policy);
    sj_status st = sj_mdcache_create(ctx, policy, mdcache_release_buffer, dev, &dev->mdcache);
    if (st != SJ_OK) {
        sj_device_destroy(dev);
        return st;
    }
    *out = dev;
    return SJ_OK;
}

void sj__device_lock(sj_device *dev) { pthread_mutex_lock(&dev->lock); }
void sj__device_unlock(sj_device *dev) { pthread_mutex_unlock(&dev->lock); }

void sj__device_retain(sj_device *dev) { atomic_fetch_add(&dev->refs, 1); }

void sj__device_unref(sj_device *dev) {
    if (atomic_fetch_sub(&dev->refs, 1) != 1) return;
    for (sj_weight_gen *wg = dev->weight_gens, *older; wg; wg = older) {
        older = wg->older;
        sj__weight_pool_destroy(wg->pool);
        sj_free(dev->ctx, wg);
    }
    pthread_mutex_destroy(&dev->lock);
    sj_free(dev->ctx, dev->weight_dir);
    sj_free(dev->ctx, dev);
}

void sj_device_destroy(sj_device *dev) {
    if (!dev) return;
    sj__device_lock(dev);
    if (atomic_load(&dev->alive)) {
        /* The cache first: its buffers go back through the backend, which must
         * still be there; the backend then frees whatever is left. (NULL while
         * a lost device waits for its reset.) */
        sj_mdcache_destroy(dev->mdcache);
        dev->mdcache = NULL;
        dev->ops->destroy(dev->impl);
        dev->impl = NULL;
        atomic_store(&dev->alive, false);
    }
    sj__device_unlock(dev);
    sj__device_unref(dev);
}

sj_status sj__device_check_alive(sj_device *dev, const char *what) {
    if (atomic_load(&dev->alive)) return SJ_OK;
    return sj_fail(dev->ctx, SJ_E_STATE, "%s: device '%s' was released", what, dev->ops->name);
}

/* The losing half of a reset: whatever was made so far is gone with the
 * context. The generation moves on first, so every holder drops its
 * handles unused; the metadata cache lets its buffers go without freeing
 * them (the driver did); the backend's context is reset by revive_locked. */
static void lose_locked(sj_device *dev) {
    atomic_fetch_add(&dev->generation, 1);
    dev->forgetting = true;
    sj_mdcache_destroy(dev->mdcache);
    dev->forgetting = false;
    dev->mdcache = NULL;
    dev->capturing = false;
    dev->lost = true;
    dev->reset_backend = true;
}

/* The other half: a fresh backend context and metadata cache. Retried by
 * every call while it fails. */
static sj_status revive_locked(sj_device *dev) {
    if (dev->reset_backend) {
        SJ_TRY(dev->ops->reset(dev->impl));
        dev->reset_backend = false;
        atomic_fetch_add(&dev->resets, 1);
    }
    if (!dev->mdcache)
        SJ_TRY(sj_mdcache_create(dev->ctx, &dev->mdcache_policy, mdcache_release_buffer, dev,
                                 &dev->mdcache));
    dev->lost = false;
    return SJ_OK;
}

sj_status sj__device_recover_locked(sj_device *dev, sj_status st) {
    if (st != SJ_E_DEVICE_LOST || !dev->ops->reset || !atomic_load(&dev->alive)) return st;
    char why[512];
    snprintf(why, sizeof why, "%s", sj_ctx_last_error(dev->ctx));
    if (!dev->lost) lose_locked(dev);
    if (revive_locked(dev) == SJ_OK) {
        sj_fail(dev->ctx, st, "%s", why); /* the caller's message, not the reset's */
        return st;
    }
    char reset_why[512];
    snprintf(reset_why, sizeof reset_why, "%s", sj_ctx_last_error(dev->ctx));
    sj_fail(dev->ctx, st, "%s; then the device reset failed: %s", why, reset_why);
    return st;
}

sj_status sj__device_check_usable_locked(sj_device *dev, const char *what) {
    SJ_TRY(sj__device_check_alive(dev, what));
    if (!dev->lost) return SJ_OK;
    if (revive_locked(dev) == SJ_OK) return SJ_OK;
    sj__error_prefix(dev->ctx, "%s: device '%s' lost its context and cannot be reset", what,
                    dev->ops->name);
    return SJ_E_DEVICE_LOST;
}

uint64_t sj_device_generation(const sj_device *dev) {
    return atomic_load(&((sj_device *)dev)->generation);
}

uint64_t sj_device_resets(const sj_device *dev) {
    return atomic_load(&((sj_device *)dev)->resets);
}

sj_ctx *sj_device_ctx(const sj_device *dev) { return dev->ctx; }
const char *sj_device_name(const sj_device *dev) { return dev->ops->name; }
unsigned sj_device_flags(const sj_device *dev) { return dev->ops->flags; }
bool sj_device_alive(const sj_device *dev) { return atomic_load(&((sj_device *)dev)->alive); }
sj_mdcache *sj_device_metadata_cache(sj_device *dev) { return dev->mdcache; }

/* Every checked wrapper: lock, refuse after release, call, reset after a
 * lost context, unlock. */
#define LOCKED_CALL(dev, what, call)                                                               \
    do {                                                                                           \
        sj__device_lock(dev);                                                                       \
        sj_status st_ = sj__device_check_usable_locked(dev, what);                                  \
        if (st_ == SJ_OK) st_ = sj__device_recover_locked(dev, (call));                             \
        sj__device_unlock(dev);                                                                     \
        return st_;                                                                                \
    } while (0)

sj_status sj_device_alloc(sj_device *dev, size_t bytes, void **out) {
    if (!dev || !out)
        return sj_fail(dev ? dev->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *out = NULL;
    LOCKED_CALL(dev, "device alloc", dev->ops->alloc(dev->impl, bytes, out));
}

void sj_device_free(sj_device *dev, void *ptr) {
    if (!dev || !ptr) return;
    sj__device_lock(dev);
    if (atomic_load(&dev->alive) && !dev->lost) dev->ops->free(dev->impl, ptr);
    sj__device_unlock(dev);
}

void sj__device_free_gen(sj_device *dev, void *ptr, uint64_t gen) {
    if (!dev || !ptr) return;
    sj__device_lock(dev);
    if (atomic_load(&dev->alive) && !dev->lost && atomic_load(&dev->generation) == gen)
        dev->ops->free(dev->impl, ptr);
    sj__device_unlock(dev);
}

sj_status sj_device_copy(sj_device *dev, void *dst, const void *src, size_t bytes,
                         sj_copy_kind kind) {
    if (!dev) return SJ_E_INVALID_ARG;
    if (bytes == 0) return SJ_OK;
    if (!dst || !src || kind < SJ_COPY_H2D || kind > SJ_COPY_D2D)
        return sj_fail(dev->ctx, SJ_E_INVALID_ARG, "device copy: NULL pointer or bad kind");
    LOCKED_CALL(dev, "device copy", dev->ops->copy(dev->impl, dst, src, bytes, kind));
}

sj_status sj_device_sync(sj_device *dev) {
    if (!dev) return SJ_E_INVALID_ARG;
    LOCKED_CALL(dev, "device sync", dev->ops->sync(dev->impl));
}

sj_status sj_device_set_timing(sj_device *dev, bool on) {
    if (!dev) return SJ_E_INVALID_ARG;
    sj__device_lock(dev);
    dev->timing = on;
    memset(&dev->timed, 0, sizeof dev->timed);
    dev->timed.kernel_measured = dev->ops->kernel_timer != NULL;
    sj__device_unlock(dev);
    return SJ_OK;
}

sj_status sj_device_timing_get(sj_device *dev, sj_device_timing *out) {
    if (!dev || !out) return SJ_E_INVALID_ARG;
    sj__device_lock(dev);
    *out = dev->timed;
    sj__device_unlock(dev);
    return SJ_OK;
}

sj_status sj_device_code_stats_get(sj_device *dev, sj_device_code_stats *out) {
    if (!dev || !out) return sj_fail(dev ? dev->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    memset(out, 0, sizeof *out);
    sj__device_lock(dev);
    sj_status st = sj__device_check_alive(dev, "device code stats");
    if (st == SJ_OK) sj__code_stats_locked(dev, out);
    sj__device_unlock(dev);
    return st;
}

sj_status sj_device_launch(sj_device *dev, sj_kernel_handle k, const sj_launch_dims *dims,
                           void *const *buffers, const int64_t *info, int64_t active_extent) {
    if (!dev) return SJ_E_INVALID_ARG;
    if (!k || !dims)
        return sj_fail(dev->ctx, SJ_E_INVALID_ARG, "device launch: NULL kernel or geometry");
    LOCKED_CALL(dev, "device launch",
                dev->ops->launch(dev->impl, k, dims, buffers, info, active_extent));
}

sj_status sj__device_begin_capture_locked(sj_device *dev) {
    if (dev->capturing)
        return sj_fail(dev->ctx, SJ_E_STATE, "device '%s': a capture is already recording",
                       dev->ops->name);
    sj_status st = dev->ops->begin_capture(dev->impl);
    if (st == SJ_OK) dev->capturing = true;
    return st;
}

sj_status sj__device_end_capture_locked(sj_device *dev, sj_graph_handle *out) {
    if (!dev->capturing)
        return sj_fail(dev->ctx, SJ_E_STATE, "device '%s': end of capture with none recording",
                       dev->ops->name);
    dev->capturing = false;
    return dev->ops->end_capture(dev->impl, out);
}

sj_status sj_device_begin_capture(sj_device *dev) {
    if (!dev) return SJ_E_INVALID_ARG;
    LOCKED_CALL(dev, "begin capture", sj__device_begin_capture_locked(dev));
}

sj_status sj_device_end_capture(sj_device *dev, sj_graph_handle *out) {
    if (!dev || !out)
        return sj_fail(dev ? dev->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *out = NULL;
    LOCKED_CALL(dev, "end capture", sj__device_end_capture_locked(dev, out));
}

sj_status sj_device_replay(sj_device *dev, sj_graph_handle g, int64_t active_extent) {
    if (!dev) return SJ_E_INVALID_ARG;
    if (!g) return sj_fail(dev->ctx, SJ_E_INVALID_ARG, "device replay: NULL graph");
    LOCKED_CALL(dev, "device replay", dev->ops->replay(dev->impl, g, active_extent));
}

void sj_device_destroy_graph(sj_device *dev, sj_graph_handle g) {
    if (!dev || !g) return;
    sj__device_lock(dev);
    if (atomic_load(&dev->alive) && !dev->lost) dev->ops->destroy_graph(dev->impl, g);
    sj__device_unlock(dev);
}

/* The module's pieces, each held in the device's registry: a bundle's
 * objects one by one, any other blob whole. */
static sj_status hold_pieces_locked(sj_device *dev, sj_code_format fmt, const uint8_t *code,
                                    size_t len, sj_module *m) {
    sj_code_piece whole = {0, len}, *pieces = &whole;
    int n = 1;
    if (fmt != SJ_CODE_HOST_NATIVE && sj__code_bundle_is(code, len))
        SJ_TRY(sj__code_bundle_parse(dev->ctx, code, len, &pieces, &n));
    m->pieces = sj_calloc(dev->ctx, (size_t)n, sizeof *m->pieces);
    sj_status st = m->pieces ? SJ_OK : sj_fail(dev->ctx, SJ_E_NOMEM, "load module: out of memory");
    for (int i = 0; i < n && st == SJ_OK; i++) {
        st = sj__code_hold_locked(dev, fmt, code + pieces[i].offset, pieces[i].len, &m->pieces[i]);
        if (st != SJ_OK && n > 1) sj__error_prefix(dev->ctx, "load module: piece %d of %d", i, n);
        if (st == SJ_OK) m->n = i + 1;
    }
    if (pieces != &whole) sj_free(dev->ctx, pieces);
    return st;
}

static void release_pieces_locked(sj_device *dev, sj_module *m) {
    for (int i = 0; i < m->n; i++) sj__code_release_locked(dev, m->pieces[i]);
    sj_free(dev->ctx, m->pieces);
}

sj_status sj_device_load_module(sj_device *dev, sj_code_format fmt, const void *code, size_t len,
                                sj_module **out) {
    if (!dev || !out)
        return sj_fail(dev ? dev->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *out = NULL;
    if (!code || len == 0)
        return sj_fail(dev->ctx, SJ_E_INVALID_ARG, "load module: no code");
    sj_module *m = sj_calloc(dev->ctx, 1, sizeof *m);
    if (!m) return sj_fail(dev->ctx, SJ_E_NOMEM, "load module: out of memory");
    m->dev = dev;
    sj__device_lock(dev);
    sj_status st = sj__device_check_usable_locked(dev, "load module");
    m->gen = atomic_load(&dev->generation);
    if (st == SJ_OK) st = hold_pieces_locked(dev, fmt, code, len, m);
    if (st != SJ_OK) release_pieces_locked(dev, m);
    sj__device_unlock(dev);
    if (st != SJ_OK) {
        sj_free(dev->ctx, m);
        return st;
    }
    sj__device_retain(dev);
    *out = m;
    return SJ_OK;
}

void sj_module_destroy(sj_module *m) {
    if (!m) return;
    sj_device *dev = m->dev;
    sj__device_lock(dev);
    release_pieces_locked(dev, m);
    sj__device_unlock(dev);
    sj_free(dev->ctx, m);
    sj__device_unref(dev);
}

/* Kernel `name` in the first piece that has it, starting where the last
 * kernel was found (an executable resolves its kernels in the order the
 * bundle holds them, so each is found at the first try); a kernel another
 * module resolved from a shared piece is not asked of the backend again. */
static sj_status resolve_locked(sj_module *m, const char *name, sj_kernel_handle *out,
                                sj_kernel_attrs *attrs) {
    sj_device *dev = m->dev;
    if (m->gen != atomic_load(&dev->generation))
        return sj_fail(dev->ctx, SJ_E_STATE,
                       "resolve kernel %s: the module was loaded before device '%s' was reset; "
                       "load it again",
                       name, dev->ops->name);
    sj_status st = SJ_E_NOT_FOUND;
    for (int t = 0; t < m->n; t++) {
        int i = (m->next + t) % m->n;
        st = sj__code_resolve_locked(dev, m->pieces[i], name, out, attrs);
        if (st == SJ_OK) m->next = (i + 1) % m->n;
        if (st != SJ_E_NOT_FOUND) return st;
    }
    if (m->n > 1)
        (void)sj_fail(dev->ctx, SJ_E_NOT_FOUND,
                      "resolve kernel: none of the module's %d pieces has '%s'", m->n, name);
    return st;
}

sj_device *sj_module_device(const sj_module *m) { return m->dev; }

sj_status sj_module_kernel(sj_module *m, const char *name, sj_kernel_handle *out,
                           sj_kernel_attrs *attrs) {
    if (!m || !name || !out) return SJ_E_INVALID_ARG;
    *out = NULL;
    sj_kernel_attrs scratch;
    sj_kernel_attrs *a = attrs ? attrs : &scratch;
    memset(a, 0, sizeof *a);
    LOCKED_CALL(m->dev, "resolve kernel", resolve_locked(m, name, out, a));
}
