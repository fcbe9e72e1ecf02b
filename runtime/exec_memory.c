/* An executable's memory: its params from a weight pool (one copy per
 * memory domain, whatever the number of buckets or engines), and its run
 * memory (arena, padded inputs and outputs, slot-pointer tables, staging),
 * made by the first run and released by sj_executable_trim, so a loaded or
 * precompiled bucket costs no working memory until it serves. */
#include "runtime/executor_impl.h"

#include "ir/graph_impl.h"
#include "runtime/host_code/host_code.h"
#include "runtime/runtime_only.h"
#include "runtime/weight_files.h"

#include <llvm-c/blake3.h>

#include <inttypes.h>
#include <string.h>

/* Host-addressable memory is one domain per context: its pool is the
 * context's, so every host device (workers, engines) shares one copy. */
static sj_weight_pool *pool_for(sj_device *dev, const sj_weight_backing **backing) {
    if (dev->ops->flags & SJ_DEVICE_HOST_VISIBLE) {
        *backing = sj__ctx_host_weight_backing(dev->ctx);
        return sj__ctx_weight_pool(dev->ctx);
    }
    return sj__device_weight_pool(dev, backing);
}

/* The executable's copy of what slot s reads: the param as stored, or (a
 * packed slot) its panels in the slot's layout. */
static exe_param *find_param(sj_executable *e, const sj_buffer_slot *s, const int64_t *pack) {
    bool packed = s->kind == SJ_SLOT_PACKED;
    for (int i = 0; i < e->n_params; i++) {
        const exe_param *x = &e->params[i];
        if (x->value == s->index && x->packed == packed &&
            (!packed || !memcmp(x->pack, pack, sizeof x->pack)))
            return &e->params[i];
    }
    return NULL;
}

#ifndef SJ_RUNTIME_ONLY
typedef struct pack_job {
    const float *weight;
    const int64_t *w; /* the slot's words */
    bool packed;      /* this call made the panels (no other load had) */
} pack_job;

static void fill_packed(void *user, void *buf) {
    pack_job *j = user;
    j->packed = true;
    const int64_t *w = j->w;
    sj__host_gemm_pack_slot(w, j->weight, buf);
}
#endif

/* A weight in a GEMM's panels (check_packed in executor.c vetted the
 * layout against the param), made once per pool and layout: its key hashes
 * the weight's content hash with the layout words, so buckets and engines
 * that pack a weight alike share one copy, and another layout (a level, a
 * view) is another entry. */
static sj_status acquire_packed(sj_executable *e, const sj_graph *g, const sj_buffer_slot *s,
                                const int64_t *w, const sj_weight_backing *backing, void **out) {
#ifdef SJ_RUNTIME_ONLY
    (void)g, (void)w, (void)backing, (void)out;
    return sj_fail(e->ctx, SJ_E_UNSUPPORTED, "%s", SJ_RUNTIME_ONLY_NO_HOST_CODE);
#else
    if (!(e->dev->ops->flags & SJ_DEVICE_HOST_VISIBLE))
        return sj_fail(e->ctx, SJ_E_MISMATCH,
                       "a packed weight is host GEMM panels; device %s cannot read it",
                       sj_device_name(e->dev));
    uint8_t weight_hash[32], hash[32];
    sj__graph_param_hash_stored(g, s->index, SJ_PRECISION_FP32, weight_hash);
    static const char tag[] = "shapejit-packed-weight-1";
    llvm_blake3_hasher h;
    llvm_blake3_hasher_init(&h);
    llvm_blake3_hasher_update(&h, tag, sizeof tag - 1);
    llvm_blake3_hasher_update(&h, weight_hash, sizeof weight_hash);
    for (int i = 0; i < SJ_PACK_WORDS; i++) {
        uint8_t b[8];
        for (int j = 0; j < 8; j++) b[j] = (uint8_t)((uint64_t)w[i] >> (8 * j));
        llvm_blake3_hasher_update(&h, b, sizeof b);
    }
    llvm_blake3_hasher_finalize(&h, hash, sizeof hash);
    pack_job job = {g->nodes[s->index].data, w, false};
    size_t bytes = (size_t)s->bytes;
    const char *dir = e->dev->weight_dir;
    if (!dir)
        return sj__weight_pool_acquire_filled(e->weights, hash, bytes, backing, fill_packed, &job,
                                              out);
    if (sj__weight_pool_acquire_held(e->weights, hash, bytes, backing, out)) return SJ_OK;
    /* Kept by an earlier process: mapped, not made. A file that is not
     * usable (damaged header, unreadable) is made again and replaced. */
    sj_weight_map *m;
    const void *data;
    if (sj__weight_file_map(e->ctx, dir, hash, bytes, &m, &data) == SJ_OK) {
        sj_status st = sj__weight_pool_acquire_mapped(e->weights, hash, data, bytes, backing, m, out);
        sj__weight_map_release(m); /* the pool entry holds its own reference */
        return st;
    }
    SJ_TRY(sj__weight_pool_acquire_filled(e->weights, hash, bytes, backing, fill_packed, &job, out));
    if (job.packed) sj__weight_file_save(e->ctx, dir, hash, *out, bytes);
    return SJ_OK;
#endif
}

/* A param as its slot stores it: the graph's bytes, or (a param the
 * precision policy narrows) its 16-bit rounding, made once per pool. */
static sj_status acquire_param(sj_executable *e, const sj_graph *g, const sj_buffer_slot *s,
                               const sj_weight_backing *backing, void **out) {
    uint8_t hash[32];
    sj_precision storage = (sj_precision)sj_slot_storage(s);
    sj__graph_param_hash_stored(g, s->index, storage, hash);
    const sj_node *nd = &g->nodes[s->index];
    /* Bytes already as the kernels read them, in a file mapping, on a
     * device that reads host memory: lent in place, not copied. */
    if (storage == SJ_PRECISION_FP32 && nd->map && (e->dev->ops->flags & SJ_DEVICE_HOST_VISIBLE))
        return sj__weight_pool_acquire_mapped(e->weights, hash, nd->data, (size_t)s->bytes, backing,
                                             nd->map, out);
    if (storage == SJ_PRECISION_FP32)
        return sj__weight_pool_acquire(e->weights, hash, nd->data, (size_t)s->bytes, backing, out);
    if (sj__weight_pool_acquire_held(e->weights, hash, (size_t)s->bytes, backing, out)) return SJ_OK;
    void *narrow = sj_alloc(e->ctx, (size_t)s->bytes ? (size_t)s->bytes : 1);
    if (!narrow)
        return sj_fail(e->ctx, SJ_E_NOMEM, "out of memory for %lld bytes of %s weights",
                       (long long)s->bytes, sj_precision_name(storage));
    sj__precision_round(storage, nd->data, narrow, s->bytes / 2);
    sj_status st = sj__weight_pool_acquire(e->weights, hash, narrow, (size_t)s->bytes, backing, out);
    sj_free(e->ctx, narrow);
    return st;
}

/* Notes the file mapping x's buffer lies in, once per mapping (an
 * adopted block of decoded weights has no file to check). */
static sj_status note_map(sj_executable *e, exe_param *x) {
    sj_weight_map *m = sj__weight_pool_buffer_map(e->weights, x->buffer);
    x->mapped = m && sj__weight_map_is_file(m);
    if (!x->mapped) return SJ_OK;
    for (int i = 0; i < e->n_maps; i++)
        if (e->maps[i] == m) return SJ_OK;
    sj_weight_map **grown = sj_realloc(e->ctx, e->maps, (size_t)(e->n_maps + 1) * sizeof *grown);
    if (!grown) return sj_fail(e->ctx, SJ_E_NOMEM, "executable: out of memory");
    e->maps = grown;
    e->maps[e->n_maps++] = m;
    return SJ_OK;
}

sj_status sj__exe_acquire_params(sj_executable *e, const sj_launch_plan *p, const sj_graph *g) {
    e->params = sj_calloc(e->ctx, (size_t)p->n_slots, sizeof *e->params);
    if (!e->params) return sj_fail(e->ctx, SJ_E_NOMEM, "executable: out of memory");
    /* A bucket load copies or lends the mapped bytes: they must still be
     * the ones the graph was loaded (and hashed) with. */
    SJ_TRY(sj__graph_check_mapped(g, e->ctx));
    const sj_weight_backing *backing;
    e->weights = pool_for(e->dev, &backing);
    if (!e->weights) return sj_fail(e->ctx, SJ_E_NOMEM, "executable: out of memory for the weight pool");
    for (int32_t i = 0; i < p->n_slots; i++) {
        const sj_buffer_slot *s = &p->slots[i];
        bool packed = s->kind == SJ_SLOT_PACKED;
        const int64_t *w = packed ? p->words + s->offset : NULL;
        if ((s->kind != SJ_SLOT_PARAM && !packed) || find_param(e, s, w)) continue;
        exe_param *x = &e->params[e->n_params];
        sj_status st = packed ? acquire_packed(e, g, s, w, backing, &x->buffer)
                              : acquire_param(e, g, s, backing, &x->buffer);
        if (st != SJ_OK) {
            sj__error_prefix(e->ctx, "executable: %sparam '%s'", packed ? "packed " : "",
                            g->nodes[s->index].name ? g->nodes[s->index].name : "?");
            return st;
        }
        x->value = s->index;
        x->bytes = (size_t)s->bytes;
        x->packed = packed;
        if (packed) memcpy(x->pack, w, sizeof x->pack);
        e->n_params++;
        SJ_TRY(note_map(e, x));
    }
    return SJ_OK;
}

void sj__exe_release_params(sj_executable *e) {
    for (int i = 0; i < e->n_params; i++) sj__weight_pool_release(e->weights, e->params[i].buffer);
    e->n_params = 0;
    sj_free(e->ctx, e->maps);
    e->maps = NULL;
    e->n_maps = 0;
}

sj_status sj__exe_check_mapped(sj_executable *e) {
    for (int i = 0; i < e->n_maps; i++) SJ_TRY(sj__weight_map_check(e->maps[i], e->ctx));
    return SJ_OK;
}

static void *slot_pointer(sj_executable *e, const sj_buffer_slot *s) {
    switch (s->kind) {
    case SJ_SLOT_INPUT: return e->inputs[s->index].buffer;
    case SJ_SLOT_OUTPUT: return e->outputs[s->index].buffer;
    case SJ_SLOT_PARAM:
    case SJ_SLOT_PACKED: {
        exe_param *x = find_param(e, s, s->kind == SJ_SLOT_PACKED ? e->words + s->offset : NULL);
        return x ? x->buffer : NULL;
    }
    case SJ_SLOT_ARENA: return (char *)e->arena + s->offset;
    }
    return NULL;
}

/* Caller holds the device lock (all of these go straight to the backend,
 * unless a release or a reset took them already). */
static void free_run_memory(sj_executable *e) {
    sj_device *dev = e->dev;
    bool alive = sj_exe_current(e);
    for (int i = 0; i < e->n_inputs; i++) {
        if (alive && e->inputs[i].buffer) dev->ops->free(dev->impl, e->inputs[i].buffer);
        e->inputs[i].buffer = NULL;
    }
    for (int i = 0; i < e->n_outputs; i++) {
        if (alive && e->outputs[i].buffer) dev->ops->free(dev->impl, e->outputs[i].buffer);
        e->outputs[i].buffer = NULL;
    }
    if (alive && e->arena) dev->ops->free(dev->impl, e->arena);
    if (alive && e->tables) dev->ops->free(dev->impl, e->tables);
    e->arena = e->tables = NULL;
    sj_free(e->ctx, e->staging);
    e->staging = NULL;
    for (int32_t i = 0; i < e->n_launches; i++) e->launches[i].buffers = NULL;
    e->resident = false;
}

static sj_status dev_alloc(sj_executable *e, size_t bytes, void **out) {
    return e->dev->ops->alloc(e->dev->impl, bytes, out);
}

/* Host staging for devices the host cannot address, big enough for the
 * largest input or output (only needed when one copies in several chunks). */
static sj_status alloc_staging(sj_executable *e) {
    if (e->dev->ops->flags & SJ_DEVICE_HOST_VISIBLE) return SJ_OK;
    size_t need = 0;
    for (int i = 0; i < e->n_inputs; i++)
        if (e->inputs[i].chunks_max > 1 && e->inputs[i].bytes > need) need = e->inputs[i].bytes;
    for (int i = 0; i < e->n_outputs; i++)
        if (e->outputs[i].chunks_max > 1 && e->outputs[i].bytes > need) need = e->outputs[i].bytes;
    if (need == 0) return SJ_OK;
    e->staging = sj_alloc(e->ctx, need);
    if (!e->staging) return sj_fail(e->ctx, SJ_E_NOMEM, "out of memory for %zu bytes of staging", need);
    return SJ_OK;
}

/* One device table of slot pointers for all launches (each launch's
 * buffers is a window into it). */
static sj_status upload_tables(sj_executable *e) {
    if (e->n_launch_slots == 0) return SJ_OK;
    size_t bytes = (size_t)e->n_launch_slots * sizeof(void *);
    void **host = sj_alloc(e->ctx, bytes);
    if (!host) return sj_fail(e->ctx, SJ_E_NOMEM, "out of memory for the slot table");
    for (int32_t i = 0; i < e->n_launch_slots; i++)
        host[i] = slot_pointer(e, &e->slots[e->launch_slots[i]]);
    sj_status st = dev_alloc(e, bytes, &e->tables);
    if (st == SJ_OK) st = e->dev->ops->copy(e->dev->impl, e->tables, host, bytes, SJ_COPY_H2D);
    sj_free(e->ctx, host);
    return st;
}

static sj_status make_run_memory(sj_executable *e) {
    for (int i = 0; i < e->n_inputs; i++) SJ_TRY(dev_alloc(e, e->inputs[i].bytes, &e->inputs[i].buffer));
    for (int i = 0; i < e->n_outputs; i++)
        SJ_TRY(dev_alloc(e, e->outputs[i].bytes, &e->outputs[i].buffer));
    if (e->arena_bytes > 0) SJ_TRY(dev_alloc(e, (size_t)e->arena_bytes, &e->arena));
    SJ_TRY(upload_tables(e));
    for (int32_t i = 0; i < e->n_launches; i++)
        e->launches[i].buffers = e->tables ? (void *const *)e->tables + e->launches[i].first_slot : NULL;
    return alloc_staging(e);
}

static size_t io_bytes(const sj_executable *e) {
    size_t n = 0;
    for (int i = 0; i < e->n_inputs; i++) n += e->inputs[i].bytes;
    for (int i = 0; i < e->n_outputs; i++) n += e->outputs[i].bytes;
    return n;
}

static uint64_t run_bytes(const sj_executable *e) {
    return (uint64_t)e->arena_bytes + io_bytes(e) + (uint64_t)e->n_launch_slots * sizeof(void *);
}

/* A run memory larger than all the device has is refused before anything
 * is allocated: the request fails with the figures, the process (and every
 * other bucket) goes on. */
static sj_status check_fits(sj_executable *e) {
    const sj_device_ops *ops = e->dev->ops;
    uint64_t cap = ops->memory_capacity ? ops->memory_capacity(e->dev->impl) : 0;
    uint64_t need = run_bytes(e);
    if (cap == 0 || need <= cap) return SJ_OK;
    return sj_fail(e->ctx, SJ_E_NOMEM,
                   "bucket %" PRId64 ": run memory of %" PRIu64 " bytes (arena %" PRId64
                   ", inputs and outputs %zu) is more than the %" PRIu64 " bytes the %s device has: "
                   "no request in this bucket can run here (a ladder whose largest bucket is smaller "
                   "avoids it)",
                   e->extent, need, e->arena_bytes, io_bytes(e), cap, ops->name);
}

sj_status sj__exe_make_resident(sj_executable *e) {
    if (e->resident) return SJ_OK;
    SJ_TRY(check_fits(e));
    sj_status st = make_run_memory(e);
    if (st != SJ_OK) {
        free_run_memory(e);
        sj__error_prefix(e->ctx,
                        "bucket %" PRId64 ": run memory (arena %" PRId64 " bytes, inputs and "
                        "outputs %zu bytes)",
                        e->extent, e->arena_bytes, io_bytes(e));
        return st;
    }
    e->resident = true;
    e->materialized++;
    return SJ_OK;
}

void sj_executable_trim(sj_executable *e) {
    if (!e) return;
    /* A capture recorded the run memory's pointers: it goes with them. */
    sj_executable_release_capture(e);
    sj__device_lock(e->dev);
    if (e->resident) e->trimmed++;
    free_run_memory(e);
    sj__device_unlock(e->dev);
}

void sj_executable_memory(const sj_executable *e, sj_executable_memory_info *out) {
    memset(out, 0, sizeof *out);
    if (!e) return;
    sj_executable *m = (sj_executable *)e; /* the lock is not part of the logical state */
    sj__device_lock(m->dev);
    for (int i = 0; i < e->n_params; i++) {
        out->weight_bytes += e->params[i].bytes;
        if (e->params[i].mapped) out->weight_mapped_bytes += e->params[i].bytes;
        if (e->params[i].packed) out->weight_packed_bytes += e->params[i].bytes;
    }
    out->arena_bytes = (uint64_t)e->arena_bytes;
    out->io_bytes = io_bytes(e);
    out->run_bytes = run_bytes(e);
    out->resident = e->resident;
    out->materialized = e->materialized;
    out->trimmed = e->trimmed;
    out->runs = e->runs;
    out->rows_requested = e->rows_requested;
    out->rows_computed = e->rows_computed;
    sj__device_unlock(m->dev);
}
