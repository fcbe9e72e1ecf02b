/* The CUDA device: the device interface's backend for an NVIDIA GPU, on the
 * driver API opened at run time (runtime/cuda_driver.c). One retained primary
 * context and one non-blocking stream per device; every call makes the
 * context current for its duration only, so an embedding application's own
 * context use is left alone. */
#include <string.h>

#include "shapejit/ext/cuda_device.h"
#include "core/core_impl.h"
#include "runtime/cuda_impl.h"

void sj_cuda_device_config_init(sj_cuda_device_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
}

sj_status sj_cuda_load_code(sj_device *dev, const void *cubin, size_t cubin_len, const char *ptx,
                            size_t ptx_len, sj_module **out) {
    sj_ctx *ctx = sj_device_ctx(dev);
    if (strcmp(sj_device_name(dev), "cuda") != 0)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "cuda: load_code needs a cuda device, not %s",
                       sj_device_name(dev));
    if (!cubin && !ptx)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "cuda: load_code given neither cubin nor PTX");
    if (cubin) {
        sj_status st = sj_device_load_module(dev, SJ_CODE_CUBIN, cubin, cubin_len, out);
        /* SASS for another arch: the PTX (when kept) is JIT-compiled instead */
        if (st != SJ_E_MISMATCH || !ptx) return st;
    }
    return sj_device_load_module(dev, SJ_CODE_PTX, ptx, ptx_len, out);
}

#ifdef SJ_HAVE_CUDA

/* Handles the device gave out and must free at release. */
typedef struct ptr_list {
    void **items;
    size_t n, cap;
} ptr_list;

typedef struct cu_node {
    CUgraphNode node;
    CUDA_KERNEL_NODE_PARAMS params;
    void *buffers;
    void *info;
    int64_t extent; /* the extent the instantiated graph currently launches with */
} cu_node;

typedef struct cu_graph {
    CUgraph graph;
    CUgraphExec exec;
    size_t n_nodes;
    cu_node *nodes;
} cu_graph;

typedef struct cu_device {
    sj_ctx *ctx;
    sj_cu_api api;
    CUdevice dev;
    CUcontext cuctx;
    CUstream stream;
    CUevent timer[2]; /* kernel timing: start, stop; NULL until first used */
    bool have_ctx;
    bool capturing;
    sj_cuda_device_info info;
    ptr_list allocs, modules, graphs;
} cu_device;

static sj_status list_add(sj_ctx *ctx, ptr_list *l, void *p) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        void **items = sj_realloc(ctx, l->items, cap * sizeof *items);
        if (!items) return sj_fail(ctx, SJ_E_NOMEM, "cuda: handle list of %zu entries", cap);
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = p;
    return SJ_OK;
}

static bool list_remove(ptr_list *l, void *p) {
    for (size_t i = l->n; i-- > 0;) {
        if (l->items[i] == p) {
            l->items[i] = l->items[--l->n];
            return true;
        }
    }
    return false;
}

#define CU_CALL(d, call, what)                                                                     \
    do {                                                                                           \
        CUresult cu_r_ = (call);                                                                   \
        if (cu_r_ != CUDA_SUCCESS) return sj__cu_fail((d)->ctx, &(d)->api, cu_r_, what);            \
    } while (0)

static sj_status push(cu_device *d) {
    CU_CALL(d, d->api.cuCtxPushCurrent(d->cuctx), "make the context current");
    return SJ_OK;
}

static void pop(cu_device *d) {
    CUcontext prev;
    d->api.cuCtxPopCurrent(&prev);
}

/* Runs `body` (a sj_status expression) with the context current. */
#define WITH_CTX(d, body)                                                                          \
    do {                                                                                           \
        SJ_TRY(push(d));                                                                           \
        sj_status with_st_ = (body);                                                               \
        pop(d);                                                                                    \
        return with_st_;                                                                           \
    } while (0)

/* --- memory */

static sj_status do_alloc(cu_device *d, size_t bytes, void **out) {
    CUdeviceptr p;
    CU_CALL(d, d->api.cuMemAlloc(&p, bytes ? bytes : 1), "cuMemAlloc");
    CUresult r;
    if (!d->capturing) {
        r = d->api.cuMemsetD8Async(p, 0, bytes ? bytes : 1, d->stream);
    } else {
        /* the stream is recording: zero on the legacy stream and wait, so the
         * fill neither lands in the graph nor races the capture's launches */
        r = d->api.cuMemsetD8(p, 0, bytes ? bytes : 1);
        if (r == CUDA_SUCCESS) r = d->api.cuStreamSynchronize(CU_STREAM_LEGACY);
    }
    if (r != CUDA_SUCCESS) {
        d->api.cuMemFree(p);
        return sj__cu_fail(d->ctx, &d->api, r, "zero-fill of a new allocation");
    }
    sj_status st = list_add(d->ctx, &d->allocs, (void *)(uintptr_t)p);
    if (st != SJ_OK) {
        d->api.cuMemFree(p);
        return st;
    }
    *out = (void *)(uintptr_t)p;
    return SJ_OK;
}

static sj_status cu_alloc(void *impl, size_t bytes, void **out) {
    cu_device *d = impl;
    WITH_CTX(d, do_alloc(d, bytes, out));
}

static void cu_free(void *impl, void *ptr) {
    cu_device *d = impl;
    if (!ptr || !list_remove(&d->allocs, ptr)) return;
    if (push(d) != SJ_OK) return;
    /* a launch already queued may still read it (an evicted info buffer);
     * a recording stream has nothing queued to wait for and cannot be synced */
    if (!d->capturing) d->api.cuStreamSynchronize(d->stream);
    d->api.cuMemFree((CUdeviceptr)(uintptr_t)ptr);
    pop(d);
}

/* While the stream records a capture, copies use the synchronous calls,
 * which are not stream-ordered and so run now instead of landing in the
 * graph (the executor uploads metadata info buffers on first use, which may
 * be during a capture). */
static sj_status copy_now(cu_device *d, void *dst, const void *src, size_t bytes, sj_copy_kind kind) {
    CUdeviceptr dd = (CUdeviceptr)(uintptr_t)dst, sd = (CUdeviceptr)(uintptr_t)src;
    switch (kind) {
    case SJ_COPY_H2D: CU_CALL(d, d->api.cuMemcpyHtoD(dd, src, bytes), "copy host to device"); break;
    case SJ_COPY_D2H: CU_CALL(d, d->api.cuMemcpyDtoH(dst, sd, bytes), "copy device to host"); break;
    case SJ_COPY_D2D: CU_CALL(d, d->api.cuMemcpyDtoD(dd, sd, bytes), "copy device to device"); break;
    }
    return SJ_OK;
}

static sj_status do_copy(cu_device *d, void *dst, const void *src, size_t bytes, sj_copy_kind kind) {
    if (kind != SJ_COPY_H2D && kind != SJ_COPY_D2H && kind != SJ_COPY_D2D)
        return sj_fail(d->ctx, SJ_E_INVALID_ARG, "cuda: unknown copy kind %d", (int)kind);
    if (bytes == 0) return SJ_OK;
    if (d->capturing) return copy_now(d, dst, src, bytes, kind);
    CUdeviceptr dd = (CUdeviceptr)(uintptr_t)dst, sd = (CUdeviceptr)(uintptr_t)src;
    switch (kind) {
    case SJ_COPY_H2D:
        CU_CALL(d, d->api.cuMemcpyHtoDAsync(dd, src, bytes, d->stream), "copy host to device");
        /* the caller may reuse `src` at once, pinned or not */
        CU_CALL(d, d->api.cuStreamSynchronize(d->stream), "copy host to device");
        break;
    case SJ_COPY_D2H:
        CU_CALL(d, d->api.cuMemcpyDtoHAsync(dst, sd, bytes, d->stream), "copy device to host");
        CU_CALL(d, d->api.cuStreamSynchronize(d->stream), "copy device to host");
        break;
    case SJ_COPY_D2D:
        CU_CALL(d, d->api.cuMemcpyDtoDAsync(dd, sd, bytes, d->stream), "copy device to device");
        break;
    }
    return SJ_OK;
}

static sj_status cu_copy(void *impl, void *dst, const void *src, size_t bytes, sj_copy_kind kind) {
    cu_device *d = impl;
    WITH_CTX(d, do_copy(d, dst, src, bytes, kind));
}

/* --- modules and kernels */

static sj_status load_ptx(cu_device *d, const char *ptx, size_t len, CUmodule *m) {
    char *owned = NULL;
    if (len == 0 || ptx[len - 1] != '\0') { /* the driver reads PTX as a C string */
        owned = sj_alloc(d->ctx, len + 1);
        if (!owned) return sj_fail(d->ctx, SJ_E_NOMEM, "cuda: PTX copy of %zu bytes", len);
        memcpy(owned, ptx, len);
        owned[len] = '\0';
        ptx = owned;
    }
    char log[2048];
    log[0] = '\0';
    CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
    CUresult r = d->api.cuModuleLoadDataEx(m, ptx, 2, opts, vals);
    sj_free(d->ctx, owned);
    if (r == CUDA_SUCCESS) return SJ_OK;
    if (log[0] == '\0') return sj__cu_fail(d->ctx, &d->api, r, "load PTX");
    log[sizeof log - 1] = '\0';
    return sj_fail(d->ctx, r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION ? SJ_E_MISMATCH : SJ_E_COMPILE,
                   "cuda: the driver's PTX JIT for sm_%d rejected the module: %.700s", d->info.sm,
                   log);
}

static sj_status load_cubin(cu_device *d, const void *code, size_t len, CUmodule *m) {
    int arch;
    SJ_TRY(sj_cubin_arch(d->ctx, code, len, &arch));
    /* SASS runs on its own major arch at an equal or higher minor only */
    if (arch / 10 != d->info.sm / 10 || arch % 10 > d->info.sm % 10)
        return sj_fail(d->ctx, SJ_E_MISMATCH,
                       "cuda: cubin built for sm_%d cannot run on %s (sm_%d); load its PTX instead",
                       arch, d->info.name, d->info.sm);
    CU_CALL(d, d->api.cuModuleLoadDataEx(m, code, 0, NULL, NULL), "load cubin");
    return SJ_OK;
}

static sj_status do_load(cu_device *d, sj_code_format fmt, const void *code, size_t len,
                         void **out) {
    CUmodule m;
    if (fmt == SJ_CODE_PTX)
        SJ_TRY(load_ptx(d, code, len, &m));
    else if (fmt == SJ_CODE_CUBIN)
        SJ_TRY(load_cubin(d, code, len, &m));
    else
        return sj_fail(d->ctx, SJ_E_UNSUPPORTED,
                       "cuda: the CUDA device loads PTX or cubin, not host code (format %d)",
                       (int)fmt);
    sj_status st = list_add(d->ctx, &d->modules, m);
    if (st != SJ_OK) {
        d->api.cuModuleUnload(m);
        return st;
    }
    *out = m;
    return SJ_OK;
}

static sj_status cu_load_module(void *impl, sj_code_format fmt, const void *code, size_t len,
                                void **out_module) {
    cu_device *d = impl;
    WITH_CTX(d, do_load(d, fmt, code, len, out_module));
}

static void cu_unload_module(void *impl, void *module) {
    cu_device *d = impl;
    if (!module || !list_remove(&d->modules, module)) return;
    if (push(d) != SJ_OK) return;
    d->api.cuModuleUnload(module);
    pop(d);
}

static sj_status do_resolve(cu_device *d, void *module, const char *name, sj_kernel_handle *out,
                            sj_kernel_attrs *attrs) {
    CUfunction f;
    CUresult r = d->api.cuModuleGetFunction(&f, module, name);
    if (r == CUDA_ERROR_NOT_FOUND)
        return sj_fail(d->ctx, SJ_E_NOT_FOUND, "cuda: module has no kernel %s", name);
    if (r != CUDA_SUCCESS) return sj__cu_fail(d->ctx, &d->api, r, "cuModuleGetFunction");
    if (attrs) {
        memset(attrs, 0, sizeof *attrs);
        int v = 0;
        CU_CALL(d, d->api.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f),
                "kernel attributes");
        attrs->max_threads = (uint32_t)v;
    }
    *out = f;
    return SJ_OK;
}

static sj_status cu_resolve_kernel(void *impl, void *module, const char *name,
                                   sj_kernel_handle *out, sj_kernel_attrs *attrs) {
    cu_device *d = impl;
    WITH_CTX(d, do_resolve(d, module, name, out, attrs));
}

/* --- launches */

static sj_status do_launch(cu_device *d, sj_kernel_handle k, const sj_launch_dims *dims,
                           void *const *buffers, const int64_t *info, int64_t active_extent) {
    void *bufs = (void *)buffers;
    void *words = (void *)info;
    int64_t n = active_extent;
    void *args[3] = {&bufs, &words, &n};
    CU_CALL(d,
            d->api.cuLaunchKernel(k, dims->grid[0], dims->grid[1], dims->grid[2], dims->block[0],
                                  dims->block[1], dims->block[2], dims->shared_bytes, d->stream,
                                  args, NULL),
            "cuLaunchKernel");
    return SJ_OK;
}

static sj_status cu_launch(void *impl, sj_kernel_handle k, const sj_launch_dims *dims,
                           void *const *buffers, const int64_t *info, int64_t active_extent) {
    cu_device *d = impl;
    WITH_CTX(d, do_launch(d, k, dims, buffers, info, active_extent));
}

static sj_status do_sync(cu_device *d) {
    CU_CALL(d, d->api.cuStreamSynchronize(d->stream), "cuStreamSynchronize");
    return SJ_OK;
}

static sj_status cu_sync(void *impl) {
    cu_device *d = impl;
    WITH_CTX(d, do_sync(d));
}

/* --- capture and replay */

static sj_status do_begin_capture(cu_device *d) {
    if (d->capturing) return sj_fail(d->ctx, SJ_E_STATE, "cuda: a capture is already recording");
    /* relaxed: a capture may still allocate (first-use scratch, info buffers) */
    CU_CALL(d, d->api.cuStreamBeginCapture(d->stream, CU_STREAM_CAPTURE_MODE_RELAXED),
            "cuStreamBeginCapture");
    d->capturing = true;
    return SJ_OK;
}

static sj_status cu_begin_capture(void *impl) {
    cu_device *d = impl;
    WITH_CTX(d, do_begin_capture(d));
}

static void graph_free(cu_device *d, cu_graph *g) {
    if (g->exec) d->api.cuGraphExecDestroy(g->exec);
    if (g->graph) d->api.cuGraphDestroy(g->graph);
    sj_free(d->ctx, g->nodes);
    sj_free(d->ctx, g);
}

/* Remembers each kernel node's buffers, info and extent, so a replay at
 * another extent can rewrite just that parameter. */
static sj_status collect_kernel_nodes(cu_device *d, cu_graph *g) {
    size_t n = 0;
    CU_CALL(d, d->api.cuGraphGetNodes(g->graph, NULL, &n), "cuGraphGetNodes");
    if (n == 0) return SJ_OK;
    CUgraphNode *all = sj_alloc(d->ctx, n * sizeof *all);
    g->nodes = sj_calloc(d->ctx, n, sizeof *g->nodes);
    if (!all || !g->nodes) {
        sj_free(d->ctx, all);
        return sj_fail(d->ctx, SJ_E_NOMEM, "cuda: node table of %zu entries", n);
    }
    sj_status st = SJ_OK;
    CUresult r = d->api.cuGraphGetNodes(g->graph, all, &n);
    if (r != CUDA_SUCCESS) st = sj__cu_fail(d->ctx, &d->api, r, "cuGraphGetNodes");
    for (size_t i = 0; st == SJ_OK && i < n; i++) {
        CUgraphNodeType type;
        r = d->api.cuGraphNodeGetType(all[i], &type);
        if (r != CUDA_SUCCESS) {
            st = sj__cu_fail(d->ctx, &d->api, r, "cuGraphNodeGetType");
            break;
        }
        if (type != CU_GRAPH_NODE_TYPE_KERNEL) continue;
        cu_node *node = &g->nodes[g->n_nodes];
        node->node = all[i];
        r = d->api.cuGraphKernelNodeGetParams(all[i], &node->params);
        if (r != CUDA_SUCCESS) {
            st = sj__cu_fail(d->ctx, &d->api, r, "cuGraphKernelNodeGetParams");
            break;
        }
        void **kp = node->params.kernelParams;
        if (!kp) {
            st = sj_fail(d->ctx, SJ_E_INTERNAL, "cuda: captured kernel node without parameters");
            break;
        }
        memcpy(&node->buffers, kp[0], sizeof node->buffers);
        memcpy(&node->info, kp[1], sizeof node->info);
        memcpy(&node->extent, kp[2], sizeof node->extent);
        g->n_nodes++;
    }
    sj_free(d->ctx, all);
    return st;
}

static sj_status do_end_capture(cu_device *d, sj_graph_handle *out) {
    *out = NULL;
    if (!d->capturing) return sj_fail(d->ctx, SJ_E_STATE, "cuda: no capture is recording");
    d->capturing = false;
    cu_graph *g = sj_calloc(d->ctx, 1, sizeof *g);
    CUgraph graph = NULL;
    CUresult r = d->api.cuStreamEndCapture(d->stream, &graph);
    if (!g) {
        if (graph) d->api.cuGraphDestroy(graph);
        return sj_fail(d->ctx, SJ_E_NOMEM, "cuda: graph record");
    }
    g->graph = graph;
    sj_status st = SJ_OK;
    if (r != CUDA_SUCCESS) st = sj__cu_fail(d->ctx, &d->api, r, "cuStreamEndCapture");
    if (st == SJ_OK) st = collect_kernel_nodes(d, g);
    if (st == SJ_OK && (r = d->api.cuGraphInstantiate(&g->exec, g->graph, 0)) != CUDA_SUCCESS)
        st = sj__cu_fail(d->ctx, &d->api, r, "cuGraphInstantiate");
    if (st == SJ_OK) st = list_add(d->ctx, &d->graphs, g);
    if (st != SJ_OK) {
        graph_free(d, g);
        return st;
    }
    *out = g;
    return SJ_OK;
}

static sj_status cu_end_capture(void *impl, sj_graph_handle *out) {
    cu_device *d = impl;
    WITH_CTX(d, do_end_capture(d, out));
}

static sj_status do_replay(cu_device *d, cu_graph *g, int64_t active_extent) {
    for (size_t i = 0; i < g->n_nodes; i++) {
        cu_node *node = &g->nodes[i];
        if (node->extent == active_extent) continue;
        int64_t n = active_extent;
        void *args[3] = {&node->buffers, &node->info, &n};
        CUDA_KERNEL_NODE_PARAMS p = node->params;
        p.kernelParams = args;
        p.extra = NULL;
        CU_CALL(d, d->api.cuGraphExecKernelNodeSetParams(g->exec, node->node, &p),
                "set the active extent of a captured launch");
        node->extent = active_extent;
    }
    CU_CALL(d, d->api.cuGraphLaunch(g->exec, d->stream), "cuGraphLaunch");
    return SJ_OK;
}

static sj_status cu_replay(void *impl, sj_graph_handle g, int64_t active_extent) {
    cu_device *d = impl;
    WITH_CTX(d, do_replay(d, g, active_extent));
}

/* --- kernel timing (sj_device_set_timing): two events on the stream around
 * a run's kernels, made at the first use. */

static sj_status do_kernel_timer(cu_device *d, int what, uint64_t *ns) {
    if (!d->timer[0]) {
        CU_CALL(d, d->api.cuEventCreate(&d->timer[0], CU_EVENT_DEFAULT), "create a timing event");
        CU_CALL(d, d->api.cuEventCreate(&d->timer[1], CU_EVENT_DEFAULT), "create a timing event");
    }
    if (what == SJ_KERNEL_TIMER_START || what == SJ_KERNEL_TIMER_STOP) {
        CU_CALL(d, d->api.cuEventRecord(d->timer[what == SJ_KERNEL_TIMER_STOP], d->stream),
                "record a timing event");
        return SJ_OK;
    }
    float ms = 0;
    CU_CALL(d, d->api.cuEventElapsedTime(&ms, d->timer[0], d->timer[1]), "read the kernel time");
    *ns += (uint64_t)((double)ms * 1e6);
    return SJ_OK;
}

static sj_status cu_kernel_timer(void *impl, int what, uint64_t *ns) {
    cu_device *d = impl;
    WITH_CTX(d, do_kernel_timer(d, what, ns));
}

static void cu_destroy_graph(void *impl, sj_graph_handle g) {
    cu_device *d = impl;
    if (!g || !list_remove(&d->graphs, g)) return;
    if (push(d) != SJ_OK) return;
    graph_free(d, g);
    pop(d);
}

/* --- lifetime */

static void release(cu_device *d) {
    if (d->have_ctx && push(d) == SJ_OK) {
        if (d->capturing) {
            CUgraph graph = NULL;
            if (d->api.cuStreamEndCapture(d->stream, &graph) == CUDA_SUCCESS && graph)
                d->api.cuGraphDestroy(graph);
            d->capturing = false;
        }
        if (d->stream) d->api.cuStreamSynchronize(d->stream);
        for (size_t i = 0; i < d->graphs.n; i++) graph_free(d, d->graphs.items[i]);
        for (size_t i = 0; i < d->modules.n; i++) d->api.cuModuleUnload(d->modules.items[i]);
        for (size_t i = 0; i < d->allocs.n; i++)
            d->api.cuMemFree((CUdeviceptr)(uintptr_t)d->allocs.items[i]);
        for (int i = 0; i < 2; i++)
            if (d->timer[i]) d->api.cuEventDestroy(d->timer[i]);
        if (d->stream) d->api.cuStreamDestroy(d->stream);
        pop(d);
        d->api.cuDevicePrimaryCtxRelease(d->dev);
    }
    sj_free(d->ctx, d->graphs.items);
    sj_free(d->ctx, d->modules.items);
    sj_free(d->ctx, d->allocs.items);
    sj__cu_api_close(&d->api);
    sj_free(d->ctx, d);
}

static void cu_destroy(void *impl) { release(impl); }

static sj_status make_stream(cu_device *d) {
    SJ_TRY(push(d));
    CUresult r = d->api.cuStreamCreate(&d->stream, CU_STREAM_NON_BLOCKING);
    pop(d);
    if (r == CUDA_SUCCESS) return SJ_OK;
    d->stream = NULL;
    return sj__cu_fail(d->ctx, &d->api, r, "cuStreamCreate");
}

/* After a sticky error the context answers every call with it, so nothing
 * made on it is handed back one by one: the host records go, and resetting
 * the primary context frees the rest on the device. The reset takes the
 * primary context from any other user in the process too (an embedding
 * application's); it was just as lost for them. */
static sj_status cu_reset(void *impl) {
    cu_device *d = impl;
    for (size_t i = 0; i < d->graphs.n; i++) {
        cu_graph *g = d->graphs.items[i];
        sj_free(d->ctx, g->nodes);
        sj_free(d->ctx, g);
    }
    d->graphs.n = d->modules.n = d->allocs.n = 0;
    d->timer[0] = d->timer[1] = NULL;
    d->stream = NULL;
    d->capturing = false;
    if (d->have_ctx) {
        d->api.cuDevicePrimaryCtxRelease(d->dev);
        d->have_ctx = false;
    }
    CU_CALL(d, d->api.cuDevicePrimaryCtxReset(d->dev), "reset the GPU's primary context");
    CU_CALL(d, d->api.cuDevicePrimaryCtxRetain(&d->cuctx, d->dev), "retain the primary context");
    d->have_ctx = true;
    return make_stream(d);
}

static uint64_t cu_memory_capacity(void *impl) { return ((cu_device *)impl)->info.total_memory; }

static const sj_device_ops cuda_ops = {
    .name = "cuda",
    .flags = 0,
    .alloc = cu_alloc,
    .free = cu_free,
    .copy = cu_copy,
    .load_module = cu_load_module,
    .unload_module = cu_unload_module,
    .resolve_kernel = cu_resolve_kernel,
    .launch = cu_launch,
    .sync = cu_sync,
    .begin_capture = cu_begin_capture,
    .end_capture = cu_end_capture,
    .replay = cu_replay,
    .destroy_graph = cu_destroy_graph,
    .destroy = cu_destroy,
    .kernel_timer = cu_kernel_timer,
    .memory_capacity = cu_memory_capacity,
    .reset = cu_reset,
};

static sj_status describe(sj_ctx *ctx, const sj_cu_api *api, int ordinal, CUdevice *dev,
                          sj_cuda_device_info *info) {
    int count = 0;
    CUresult r = api->cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS) return sj__cu_fail(ctx, api, r, "cuDeviceGetCount");
    if (ordinal < 0 || ordinal >= count)
        return sj_fail(ctx, SJ_E_NO_DEVICE, "cuda: no GPU %d (the driver sees %d)", ordinal, count);
    memset(info, 0, sizeof *info);
    int major = 0, minor = 0, sms = 0;
    if ((r = api->cuDeviceGet(dev, ordinal)) != CUDA_SUCCESS ||
        (r = api->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                       *dev)) != CUDA_SUCCESS ||
        (r = api->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                       *dev)) != CUDA_SUCCESS ||
        (r = api->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, *dev)) !=
            CUDA_SUCCESS ||
        (r = api->cuDeviceGetName(info->name, (int)sizeof info->name, *dev)) != CUDA_SUCCESS ||
        (r = api->cuDeviceTotalMem(&info->total_memory, *dev)) != CUDA_SUCCESS ||
        (r = api->cuDriverGetVersion(&info->driver_version)) != CUDA_SUCCESS)
        return sj__cu_fail(ctx, api, r, "describe the GPU");
    info->ordinal = ordinal;
    info->sm = major * 10 + minor;
    info->multiprocessors = sms;
    return SJ_OK;
}

sj_status sj_cuda_probe(sj_ctx *ctx, const sj_cuda_device_config *cfg, sj_cuda_device_info *out) {
    sj_cuda_device_config defaults;
    if (!cfg) {
        sj_cuda_device_config_init(&defaults);
        cfg = &defaults;
    }
    if (!out) return sj_fail(ctx, SJ_E_INVALID_ARG, "cuda: probe without an output");
    sj_cu_api api;
    SJ_TRY(sj__cu_api_open(ctx, cfg->driver_path, &api));
    CUdevice dev;
    sj_status st = describe(ctx, &api, cfg->ordinal, &dev, out);
    sj__cu_api_close(&api);
    return st;
}

static sj_status open_gpu(cu_device *d, int ordinal) {
    SJ_TRY(describe(d->ctx, &d->api, ordinal, &d->dev, &d->info));
    CU_CALL(d, d->api.cuDevicePrimaryCtxRetain(&d->cuctx, d->dev), "retain the primary context");
    d->have_ctx = true;
    return make_stream(d);
}

sj_status sj_cuda_device_create(sj_ctx *ctx, const sj_cuda_device_config *cfg,
                                const sj_mdcache_policy *policy, sj_device **out) {
    sj_cuda_device_config defaults;
    if (!cfg) {
        sj_cuda_device_config_init(&defaults);
        cfg = &defaults;
    }
    if (!out) return sj_fail(ctx, SJ_E_INVALID_ARG, "cuda: device create without an output");
    *out = NULL;
    cu_device *d = sj_calloc(ctx, 1, sizeof *d);
    if (!d) return sj_fail(ctx, SJ_E_NOMEM, "cuda: device state");
    d->ctx = ctx;
    sj_status st = sj__cu_api_open(ctx, cfg->driver_path, &d->api);
    if (st == SJ_OK) st = open_gpu(d, cfg->ordinal);
    if (st != SJ_OK) {
        release(d);
        return st;
    }
    return sj_device_create(ctx, &cuda_ops, d, policy, out); /* owns d from here, even on failure */
}

#else

sj_status sj_cuda_probe(sj_ctx *ctx, const sj_cuda_device_config *cfg, sj_cuda_device_info *out) {
    return sj_fail(ctx, SJ_E_NO_DEVICE,
                   "cuda: shapejit was built without the CUDA toolkit (SJ_HAVE_CUDA off)");
}

sj_status sj_cuda_device_create(sj_ctx *ctx, const sj_cuda_device_config *cfg,
                                const sj_mdcache_policy *policy, sj_device **out) {
    if (out) *out = NULL;
    return sj_fail(ctx, SJ_E_NO_DEVICE,
                   "cuda: shapejit was built without the CUDA toolkit (SJ_HAVE_CUDA off)");
}

#endif
