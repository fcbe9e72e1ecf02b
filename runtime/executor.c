/* Making an executable: check the plan against the graph, take its params
 * from the weight pool (one copy per memory domain, shared by every bucket
 * and engine) and upload the info words. The run memory (arena, padded I/O
 * buffers, slot-pointer tables) waits for the first run: exec_memory.c. */
#include "runtime/executor_impl.h"
#include "runtime/padding_impl.h"

#include "ir/graph_impl.h"
#include "runtime/host_code/host_code.h"
#include "runtime/runtime_only.h"

#include <string.h>

static int64_t shape_bytes(const sj_shape *s, sj_dtype t, int64_t extent) {
    int64_t n = sj_shape_numel(s, extent);
    return n < 0 ? -1 : n * (int64_t)sj_dtype_size(t);
}

static sj_status check_kernels(sj_ctx *ctx, const sj_launch_plan *p) {
    if (p->n_kernels < 0 || (p->n_kernels > 0 && !p->kernels))
        return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: kernel table missing");
    for (int32_t i = 0; i < p->n_kernels; i++)
        if (!memchr(p->kernels[i].name, '\0', SJ_KERNEL_NAME_MAX) || !p->kernels[i].name[0])
            return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: kernel #%d has no valid name", i);
    return SJ_OK;
}

/* A packed weight: a float32 param, a view inside it, a precision its
 * panels hold, and the bytes they take at the level the GEMM runs on this
 * CPU. */
static sj_status check_packed(sj_ctx *ctx, const sj_launch_plan *p, const sj_graph *g, int32_t i) {
    const sj_buffer_slot *s = &p->slots[i];
    if (s->index < 0 || s->index >= g->n_nodes || g->nodes[s->index].op != SJ_OP_PARAM ||
        g->nodes[s->index].dtype != SJ_F32)
        return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: packed slot #%d: value %d is not a float32 param",
                       i, s->index);
    if (s->offset < 0 || s->offset > (int64_t)p->n_words - SJ_PACK_WORDS)
        return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: packed slot #%d's words lie outside the plan", i);
    const int64_t *w = p->words + s->offset;
    if (!sj_slot_storage_valid(w[SJ_PACK_STORAGE]))
        return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: packed slot #%d has unknown storage %lld", i,
                       (long long)w[SJ_PACK_STORAGE]);
    int64_t k = w[SJ_PACK_K], n = w[SJ_PACK_N], rs = w[SJ_PACK_ROW_STRIDE], cs = w[SJ_PACK_COL_STRIDE];
    int64_t batch = w[SJ_PACK_BATCH], bs = w[SJ_PACK_BATCH_STRIDE];
    int64_t numel = sj_shape_numel(&g->nodes[s->index].shape, p->extent);
    /* The view's last element, each step checked against the param's size. */
    bool fits = k >= 1 && n >= 1 && rs >= 0 && cs >= 0 && batch >= 1 && bs >= 0 &&
                w[SJ_PACK_OFFSET] >= 0 && numel > 0;
    int64_t last = w[SJ_PACK_OFFSET];
    if (fits && last >= numel) fits = false;
    if (fits && bs > 0) {
        fits = batch - 1 <= (numel - 1 - last) / bs;
        if (fits) last += (batch - 1) * bs;
    }
    if (fits && rs > 0) {
        fits = k - 1 <= (numel - 1 - last) / rs;
        if (fits) last += (k - 1) * rs;
    }
    if (fits && cs > 0) {
        fits = n - 1 <= (numel - 1 - last) / cs;
        if (fits) last += (n - 1) * cs;
    }
    if (!fits)
        return sj_fail(ctx, SJ_E_CORRUPT,
                       "launch plan: packed slot #%d's %lld x %lld view x %lld (offset %lld, strides "
                       "%lld/%lld/%lld) reads past param %d's %lld elements",
                       i, (long long)k, (long long)n, (long long)batch, (long long)w[SJ_PACK_OFFSET],
                       (long long)rs, (long long)cs, (long long)bs, s->index, (long long)numel);
#ifdef SJ_RUNTIME_ONLY
    return sj_fail(ctx, SJ_E_UNSUPPORTED, "launch plan: packed slot #%d: %s", i,
                   SJ_RUNTIME_ONLY_NO_HOST_CODE);
#else
    /* Panels are the width of the GEMM this CPU runs: a level the CPU
     * lowers (an artifact for more than it has) would read them wrong. */
    int level = sj__host_kernel_level(w[SJ_PACK_LEVEL]);
    if (level != w[SJ_PACK_LEVEL])
        return sj_fail(ctx, SJ_E_MISMATCH,
                       "launch plan: packed slot #%d is packed for GEMM level %lld; this CPU runs "
                       "level %d",
                       i, (long long)w[SJ_PACK_LEVEL], level);
    int64_t want = sj__host_gemm_pack_slot_bytes(w);
    if (want != s->bytes)
        return sj_fail(ctx, SJ_E_CORRUPT,
                       "launch plan: packed slot #%d holds %lld bytes, %lld x %lld x %lld packed at "
                       "level %d takes %lld",
                       i, (long long)s->bytes, (long long)batch, (long long)k, (long long)n, level,
                       (long long)want);
    return SJ_OK;
#endif
}

static sj_status check_slot(sj_ctx *ctx, const sj_launch_plan *p, const sj_graph *g, int32_t i) {
    const sj_buffer_slot *s = &p->slots[i];
    sj_value_desc d;
    int64_t want;
    switch (s->kind) {
    case SJ_SLOT_INPUT:
    case SJ_SLOT_OUTPUT: {
        bool in = s->kind == SJ_SLOT_INPUT;
        int n = in ? sj_graph_num_inputs(g) : sj_graph_num_outputs(g);
        if (s->index < 0 || s->index >= n)
            return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: slot #%d names graph %s %d of %d", i,
                           in ? "input" : "output", s->index, n);
        if (in)
            sj_graph_input_desc(g, s->index, &d);
        else
            sj_graph_output_desc(g, s->index, &d);
        want = shape_bytes(&d.shape, d.dtype, p->extent);
        break;
    }
    case SJ_SLOT_PARAM:
        if (s->index < 0 || s->index >= g->n_nodes || g->nodes[s->index].op != SJ_OP_PARAM)
            return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: slot #%d: value %d is not a param",
                           i, s->index);
        if (sj_slot_storage(s) != SJ_PRECISION_FP32 &&
            (!sj_slot_storage_valid(sj_slot_storage(s)) || g->nodes[s->index].dtype != SJ_F32))
            return sj_fail(ctx, SJ_E_CORRUPT,
                           "launch plan: slot #%d: param %d cannot be stored as storage %lld", i,
                           s->index, (long long)sj_slot_storage(s));
        want = shape_bytes(&g->nodes[s->index].shape, g->nodes[s->index].dtype, p->extent);
        if (sj_slot_storage(s) != SJ_PRECISION_FP32) want /= 2; /* 16-bit elements */
        break;
    case SJ_SLOT_PACKED: return check_packed(ctx, p, g, i);
    case SJ_SLOT_ARENA:
        if (s->offset < 0 || s->bytes < 0 || s->offset > p->arena_bytes ||
            s->bytes > p->arena_bytes - s->offset)
            return sj_fail(ctx, SJ_E_CORRUPT,
                           "launch plan: slot #%d (arena offset %lld, %lld bytes) overruns the "
                           "%lld-byte arena",
                           i, (long long)s->offset, (long long)s->bytes,
                           (long long)p->arena_bytes);
        return SJ_OK;
    default:
        return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: slot #%d has unknown kind %d", i,
                       (int)s->kind);
    }
    if (want != s->bytes)
        return sj_fail(ctx, SJ_E_CORRUPT,
                       "launch plan: slot #%d holds %lld bytes, the graph's value needs %lld at "
                       "extent %lld",
                       i, (long long)s->bytes, (long long)want, (long long)p->extent);
    return SJ_OK;
}

static bool range_ok(int32_t first, int32_t n, int32_t total) {
    return first >= 0 && n >= 0 && first <= total && n <= total - first;
}

static sj_status check_plan(sj_ctx *ctx, const sj_launch_plan *p, const sj_graph *g) {
    if (p->extent < 1 || p->extent > SJ_MAX_EXTENT)
        return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: extent %lld outside 1..%lld",
                       (long long)p->extent, (long long)SJ_MAX_EXTENT);
    if (p->n_slots < 0 || p->n_launches < 0 || p->n_launch_slots < 0 || p->n_words < 0 ||
        p->arena_bytes < 0 || (p->n_slots && !p->slots) || (p->n_launches && !p->launches) ||
        (p->n_launch_slots && !p->launch_slots) || (p->n_words && !p->words))
        return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: a table is missing or has a negative size");
    SJ_TRY(check_kernels(ctx, p));
    for (int32_t i = 0; i < p->n_slots; i++) SJ_TRY(check_slot(ctx, p, g, i));
    for (int32_t i = 0; i < p->n_launch_slots; i++)
        if (p->launch_slots[i] < 0 || p->launch_slots[i] >= p->n_slots)
            return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: launch slot entry #%d names slot %d of %d",
                           i, p->launch_slots[i], p->n_slots);
    for (int32_t i = 0; i < p->n_launches; i++) {
        const sj_launch *l = &p->launches[i];
        if (l->kernel < 0 || l->kernel >= p->n_kernels)
            return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: launch #%d names kernel %d of %d", i,
                           l->kernel, p->n_kernels);
        if (!range_ok(l->first_slot, l->n_slots, p->n_launch_slots))
            return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: launch #%d's slots overrun the table",
                           i);
        if (!range_ok(l->first_word, l->n_words, p->n_words))
            return sj_fail(ctx, SJ_E_CORRUPT, "launch plan: launch #%d's words overrun the table",
                           i);
    }
    return SJ_OK;
}

static sj_status copy_plan(sj_executable *e, const sj_launch_plan *p) {
    e->extent = p->extent;
    e->n_kernels = p->n_kernels;
    e->n_launches = p->n_launches;
    e->kernels = sj_calloc(e->ctx, (size_t)p->n_kernels, sizeof *e->kernels);
    e->launches = sj_calloc(e->ctx, (size_t)p->n_launches, sizeof *e->launches);
    e->words = sj_calloc(e->ctx, (size_t)p->n_words, sizeof *e->words);
    if (!e->kernels || !e->launches || !e->words)
        return sj_fail(e->ctx, SJ_E_NOMEM, "executable: out of memory");
    if (p->n_kernels) memcpy(e->kernels, p->kernels, (size_t)p->n_kernels * sizeof *e->kernels);
    if (p->n_words) memcpy(e->words, p->words, (size_t)p->n_words * sizeof *e->words);
    for (int32_t i = 0; i < p->n_launches; i++) {
        const sj_launch *l = &p->launches[i];
        exe_launch *x = &e->launches[i];
        x->kernel = l->kernel;
        x->first_slot = l->first_slot;
        memcpy(x->dims.grid, l->grid, sizeof l->grid);
        memcpy(x->dims.block, l->block, sizeof l->block);
        x->dims.shared_bytes = l->shared_bytes;
        x->words = e->words + l->first_word;
        x->n_words = (size_t)l->n_words;
    }
    return SJ_OK;
}

static sj_status upload(sj_executable *e, const void *host, size_t bytes, void **out) {
    SJ_TRY(sj_device_alloc(e->dev, bytes, out));
    return sj_device_copy(e->dev, *out, host, bytes, SJ_COPY_H2D);
}

/* Names, shapes and sizes of the graph's inputs or outputs; their padded
 * buffers come with the run memory. */
static sj_status describe_io(sj_executable *e, const sj_graph *g, bool inputs) {
    int n = inputs ? sj_graph_num_inputs(g) : sj_graph_num_outputs(g);
    exe_io *io = sj_calloc(e->ctx, (size_t)n, sizeof *io);
    if (!io) return sj_fail(e->ctx, SJ_E_NOMEM, "executable: out of memory");
    if (inputs) {
        e->inputs = io;
        e->n_inputs = n;
    } else {
        e->outputs = io;
        e->n_outputs = n;
    }
    for (int i = 0; i < n; i++) {
        sj_value_desc d;
        if (inputs)
            sj_graph_input_desc(g, i, &d);
        else
            sj_graph_output_desc(g, i, &d);
        io[i].name = sj_strdup(e->ctx, d.name ? d.name : "?");
        if (!io[i].name) return sj_fail(e->ctx, SJ_E_NOMEM, "executable: out of memory");
        io[i].shape = d.shape;
        io[i].dtype = d.dtype;
        io[i].esize = sj_dtype_size(d.dtype);
        io[i].chunks_max = sj__pad_chunk_count(&d.shape, e->extent);
        int64_t bytes = shape_bytes(&d.shape, d.dtype, e->extent);
        if (bytes < 0)
            return sj_fail(e->ctx, SJ_E_SHAPE, "executable: %s '%s' is too large at extent %lld",
                           inputs ? "input" : "output", io[i].name, (long long)e->extent);
        io[i].bytes = (size_t)bytes;
    }
    return SJ_OK;
}

/* The plan's slot tables, kept for laying run memory out at the first run
 * (and again after a trim). */
static sj_status keep_slots(sj_executable *e, const sj_launch_plan *p) {
    e->n_slots = p->n_slots;
    e->n_launch_slots = p->n_launch_slots;
    e->arena_bytes = p->arena_bytes;
    e->sub_rows = p->sub_rows;
    e->slots = sj_calloc(e->ctx, (size_t)p->n_slots, sizeof *e->slots);
    e->launch_slots = sj_calloc(e->ctx, (size_t)p->n_launch_slots, sizeof *e->launch_slots);
    if (!e->slots || !e->launch_slots) return sj_fail(e->ctx, SJ_E_NOMEM, "executable: out of memory");
    if (p->n_slots) memcpy(e->slots, p->slots, (size_t)p->n_slots * sizeof *e->slots);
    if (p->n_launch_slots)
        memcpy(e->launch_slots, p->launch_slots, (size_t)p->n_launch_slots * sizeof *e->launch_slots);
    return SJ_OK;
}

/* One device copy of all info words, the fallback for infos the metadata
 * cache does not keep: small, and made with the executable. */
static sj_status upload_words(sj_executable *e, const sj_launch_plan *p) {
    if (p->n_words > 0)
        SJ_TRY(upload(e, p->words, (size_t)p->n_words * sizeof *p->words, &e->info_owned));
    for (int32_t i = 0; i < p->n_launches; i++) {
        const sj_launch *l = &p->launches[i];
        e->launches[i].info_owned =
            l->n_words ? (const int64_t *)e->info_owned + l->first_word : NULL;
    }
    return SJ_OK;
}

/* Once, here: the launch path reads e->handles and asks the device nothing. */
static sj_status resolve_kernels(sj_executable *e) {
    e->handles = sj_calloc(e->ctx, (size_t)e->n_kernels + 1, sizeof *e->handles);
    if (!e->handles) return sj_fail(e->ctx, SJ_E_NOMEM, "executable: out of memory");
    for (int32_t i = 0; i < e->n_kernels; i++) {
        sj_status st = sj_module_kernel(e->module, e->kernels[i].name, &e->handles[i], NULL);
        if (st != SJ_OK) {
            sj__error_prefix(e->ctx, "executable: kernel #%d '%s'", i, e->kernels[i].name);
            return st;
        }
    }
    return SJ_OK;
}

static sj_status build(sj_executable *e, const sj_launch_plan *p, const sj_graph *g) {
    SJ_TRY(sj__device_check_alive(e->dev, "executable"));
    SJ_TRY(check_plan(e->ctx, p, g));
    SJ_TRY(copy_plan(e, p));
    e->has_sym = sj_graph_symbol(g) != NULL;
    SJ_TRY(resolve_kernels(e));
    SJ_TRY(describe_io(e, g, true));
    SJ_TRY(describe_io(e, g, false));
    SJ_TRY(keep_slots(e, p));
    SJ_TRY(sj__exe_acquire_params(e, p, g));
    return upload_words(e, p);
}

static sj_status create(sj_device *dev, const sj_launch_plan *plan, sj_module *module,
                        bool owns_module, const sj_graph *g, sj_executable **out) {
    sj_executable *e = sj_calloc(dev->ctx, 1, sizeof *e);
    if (!e) {
        if (owns_module) sj_module_destroy(module);
        return sj_fail(dev->ctx, SJ_E_NOMEM, "executable: out of memory");
    }
    e->dev = dev;
    e->ctx = dev->ctx;
    /* before anything is made on the device: a reset during the build
     * leaves the executable stale, never half current */
    e->gen = sj_device_generation(dev);
    e->module = module;
    e->owns_module = owns_module;
    sj__device_retain(dev);
    sj_status st = build(e, plan, g);
    if (st != SJ_OK) {
        sj_executable_destroy(e);
        return st;
    }
    *out = e;
    return SJ_OK;
}

sj_status sj__executable_create(sj_device *dev, const sj_launch_plan *plan, sj_code_format fmt,
                               const void *code, size_t code_len, const sj_graph *g,
                               sj_executable **out) {
    if (!dev || !out)
        return sj_fail(dev ? dev->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *out = NULL;
    if (!plan || !g)
        return sj_fail(dev->ctx, SJ_E_INVALID_ARG, "executable: NULL plan or graph");
    sj_module *m;
    SJ_TRY(sj_device_load_module(dev, fmt, code, code_len, &m));
    return create(dev, plan, m, true, g, out);
}

sj_status sj__executable_create_from_module(sj_device *dev, const sj_launch_plan *plan,
                                           sj_module *module, const sj_graph *g,
                                           sj_executable **out) {
    if (!dev || !out)
        return sj_fail(dev ? dev->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *out = NULL;
    if (!plan || !g || !module)
        return sj_fail(dev->ctx, SJ_E_INVALID_ARG, "executable: NULL plan, module or graph");
    if (sj_module_device(module) != dev)
        return sj_fail(dev->ctx, SJ_E_INVALID_ARG, "executable: the module is on another device");
    return create(dev, plan, module, false, g, out);
}

void sj_executable_destroy(sj_executable *e) {
    if (!e) return;
    sj_device *dev = e->dev;
    /* After the device's release these are no-ops: the backend freed them. */
    sj_executable_trim(e);
    for (int i = 0; i < e->n_inputs; i++) sj_free(e->ctx, e->inputs[i].name);
    for (int i = 0; i < e->n_outputs; i++) sj_free(e->ctx, e->outputs[i].name);
    sj__exe_release_params(e);
    sj__device_free_gen(dev, e->info_owned, e->gen);
    if (e->owns_module) sj_module_destroy(e->module);
    sj_free(e->ctx, e->inputs);
    sj_free(e->ctx, e->outputs);
    sj_free(e->ctx, e->params);
    sj_free(e->ctx, e->slots);
    sj_free(e->ctx, e->launch_slots);
    sj_free(e->ctx, e->kernels);
    sj_free(e->ctx, e->handles);
    sj_free(e->ctx, e->launches);
    sj_free(e->ctx, e->words);
    sj_free(e->ctx, e);
    sj__device_unref(dev);
}

int64_t sj_executable_extent(const sj_executable *e) { return e->extent; }
sj_device *sj_executable_device(const sj_executable *e) { return e->dev; }
int sj_executable_num_inputs(const sj_executable *e) { return e->n_inputs; }
int sj_executable_num_outputs(const sj_executable *e) { return e->n_outputs; }
bool sj_executable_has_capture(const sj_executable *e) { return e->graph != NULL; }
bool sj_executable_stale(const sj_executable *e) {
    return e->gen != sj_device_generation(e->dev);
}
