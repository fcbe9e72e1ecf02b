/* A fake CUDA driver for tests on machines without a GPU: it exports the
 * entry points runtime/cuda_impl.h resolves, under the names cuda.h maps
 * them to (the definitions below use the plain names, and cuda.h's macros
 * give them their versioned ones, as for the real driver's callers).
 *
 * What it emulates: one sm_90 device; a primary context that a reset
 * replaces; device memory as host memory behind fake device addresses that
 * are never reused, so a stale pointer (freed, or of a reset context) is
 * caught instead of landing in a new allocation; synchronous copies and
 * fills; modules that list their kernels (PTX `.entry` names, cubin
 * `.text.<name>` sections) and hand out functions by name; launches checked
 * (geometry, that the buffer table and info pointers are device memory) and
 * counted; stream capture into graphs whose kernel nodes can be read,
 * instantiated, have their parameters set, and be replayed. Kernels do not
 * run: the outputs a test gets back are whatever the buffers held, so tests
 * on the fake check control flow (errors, resets, reloads, counts), never
 * results. Faults are injected per kernel name (fake_cuda.h) and reported as
 * the driver reports them: a sticky one by the next call that waits for the
 * device, after which every call on the context returns it until a reset.
 * The kernel ABI is shapejit's: (void *buffers, void *info, int64_t n). */
#include <cuda.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

#define FAKE_EXPORT __attribute__((visibility("default")))
#define FAKE_MAX_NAMES 256
#define FAKE_PARAMS 3 /* buffers, info, active extent */

typedef struct fake_alloc {
    CUdeviceptr addr;
    size_t bytes;
    unsigned char *host;
} fake_alloc;

struct CUfunc_st {
    struct CUmod_st *mod;
    char name[128];
};

struct CUmod_st {
    struct CUctx_st *ctx;
    int n_funcs;
    struct CUfunc_st funcs[FAKE_MAX_NAMES];
};

struct CUstream_st {
    struct CUctx_st *ctx;
    struct CUgraph_st *capture; /* the graph being recorded, or NULL */
};

struct CUgraphNode_st {
    CUfunction func;
    unsigned grid[3], block[3], shared;
    uint64_t vals[FAKE_PARAMS];
    void *ptrs[FAKE_PARAMS]; /* &vals[i]: what GetParams hands out */
};

struct CUgraph_st {
    struct CUctx_st *ctx;
    size_t n, cap;
    struct CUgraphNode_st **nodes;
};

struct CUgraphExec_st {
    struct CUctx_st *ctx;
    size_t n;
    struct CUgraphNode_st *from[1024]; /* the graph's node each one was made from */
    struct CUgraphNode_st nodes[1024];
};

struct CUevent_st {
    struct CUctx_st *ctx;
};

/* Everything a context owns, freed with it (a reset frees it all). */
typedef struct fake_list {
    void **items;
    size_t n, cap;
} fake_list;

struct CUctx_st {
    bool alive;
    int refs;
    CUresult pending; /* a fault raised, not yet reported */
    CUresult sticky;  /* reported: every call returns it until the reset */
    fake_alloc *allocs;
    size_t n_allocs, cap_allocs;
    fake_list modules, streams, graphs, execs, events;
};

typedef struct fake_fault {
    char kernel[128];
    CUresult error;
    int64_t min_extent;
} fake_fault;

#define FAKE_HISTORY 4096

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct CUctx_st *primary;
static fake_list contexts; /* every one made, kept so a stale handle stays recognisable */
static CUdeviceptr next_addr = 0x700000000000ull;
static fake_fault faults[64];
static int n_faults;
static fake_cuda_counters counters;
static int resets_to_fail;
static char history_names[FAKE_HISTORY][128]; /* the kernels of the last launches */
static __thread CUcontext ctx_stack[16];
static __thread int ctx_depth;

static bool list_add(fake_list *l, void *p) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        void **items = realloc(l->items, cap * sizeof *items);
        if (!items) return false;
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = p;
    return true;
}

static bool list_has(const fake_list *l, const void *p) {
    for (size_t i = 0; i < l->n; i++)
        if (l->items[i] == p) return true;
    return false;
}

static bool list_remove(fake_list *l, const void *p) {
    for (size_t i = 0; i < l->n; i++)
        if (l->items[i] == p) {
            l->items[i] = l->items[--l->n];
            return true;
        }
    return false;
}

static bool is_sticky(CUresult r) {
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ECC_UNCORRECTABLE: return true;
    default: return false;
    }
}

static void graph_free(struct CUgraph_st *g) {
    for (size_t i = 0; i < g->n; i++) free(g->nodes[i]);
    free(g->nodes);
    free(g);
}

/* Frees what the context owns; the struct stays (dead) for stale handles. */
static void ctx_destroy(struct CUctx_st *c) {
    for (size_t i = 0; i < c->n_allocs; i++) free(c->allocs[i].host);
    counters.live_allocs -= c->n_allocs;
    c->n_allocs = 0;
    counters.live_modules -= c->modules.n;
    for (size_t i = 0; i < c->modules.n; i++) free(c->modules.items[i]);
    for (size_t i = 0; i < c->streams.n; i++) free(c->streams.items[i]);
    for (size_t i = 0; i < c->graphs.n; i++) graph_free(c->graphs.items[i]);
    for (size_t i = 0; i < c->execs.n; i++) free(c->execs.items[i]);
    for (size_t i = 0; i < c->events.n; i++) free(c->events.items[i]);
    c->modules.n = c->streams.n = c->graphs.n = c->execs.n = c->events.n = 0;
    c->alive = false;
    if (c == primary) primary = NULL;
}

/* The current context, or why there is none usable. Caller holds mu. */
static CUresult current(struct CUctx_st **out) {
    *out = ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL;
    if (!*out) return CUDA_ERROR_INVALID_CONTEXT;
    if (!(*out)->alive) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    return (*out)->sticky;
}

/* A call that waits for the device: a fault raised meanwhile is reported
 * now and poisons the context. */
static CUresult wait_device(struct CUctx_st *c) {
    if (c->pending && !c->sticky) {
        c->sticky = c->pending;
        c->pending = CUDA_SUCCESS;
        counters.faults++;
    }
    return c->sticky;
}

static fake_alloc *find_alloc(struct CUctx_st *c, CUdeviceptr p, size_t bytes) {
    for (size_t i = 0; i < c->n_allocs; i++) {
        fake_alloc *a = &c->allocs[i];
        if (p >= a->addr && p - a->addr <= a->bytes && bytes <= a->bytes - (p - a->addr)) return a;
    }
    return NULL;
}

/* Host memory behind [p, p + bytes), or NULL (counted) outside every allocation. */
static unsigned char *host_of(struct CUctx_st *c, CUdeviceptr p, size_t bytes) {
    fake_alloc *a = find_alloc(c, p, bytes);
    if (!a) {
        counters.bad_pointers++;
        return NULL;
    }
    return a->host + (p - a->addr);
}

#define ENTER(c)                                                                                   \
    struct CUctx_st *c;                                                                            \
    pthread_mutex_lock(&mu);                                                                       \
    CUresult enter_r_ = current(&c);                                                               \
    if (enter_r_ != CUDA_SUCCESS) {                                                                \
        pthread_mutex_unlock(&mu);                                                                 \
        return enter_r_;                                                                           \
    }

static CUresult leave(CUresult r) {
    pthread_mutex_unlock(&mu);
    return r;
}

/* --- controls (fake_cuda.h) */

FAKE_EXPORT void fake_cuda_inject(const char *kernel, int error, int64_t min_extent) {
    pthread_mutex_lock(&mu);
    if (!kernel) {
        n_faults = 0;
    } else {
        int i = 0;
        while (i < n_faults && strcmp(faults[i].kernel, kernel) != 0) i++;
        if (error == 0) {
            if (i < n_faults) faults[i] = faults[--n_faults];
        } else if (i < n_faults || n_faults < (int)(sizeof faults / sizeof *faults)) {
            if (i == n_faults) n_faults++;
            snprintf(faults[i].kernel, sizeof faults[i].kernel, "%s", kernel);
            faults[i].error = (CUresult)error;
            faults[i].min_extent = min_extent;
        }
    }
    pthread_mutex_unlock(&mu);
}

FAKE_EXPORT void fake_cuda_fail_resets(int n) {
    pthread_mutex_lock(&mu);
    resets_to_fail = n;
    pthread_mutex_unlock(&mu);
}

FAKE_EXPORT void fake_cuda_counters_get(fake_cuda_counters *out) {
    pthread_mutex_lock(&mu);
    *out = counters;
    pthread_mutex_unlock(&mu);
}

FAKE_EXPORT const char *fake_cuda_launched(uint64_t i) {
    pthread_mutex_lock(&mu);
    const char *name = i < counters.launches && counters.launches - i <= FAKE_HISTORY
                           ? history_names[i % FAKE_HISTORY]
                           : NULL;
    pthread_mutex_unlock(&mu);
    return name;
}

/* --- driver, device, context */

/* A process the test cannot reach with dlsym (the CLI) gets its fault from
 * the environment: FAKE_CUDA_FAULT=KERNEL:ERROR:MIN_EXTENT, KERNEL as for
 * fake_cuda_inject ("*SUFFIX" matches by suffix), ERROR a CUresult number. */
static void fault_from_environment(void) {
    const char *spec = getenv("FAKE_CUDA_FAULT");
    char kernel[128];
    int error;
    long long min_extent;
    if (spec && sscanf(spec, "%127[^:]:%d:%lld", kernel, &error, &min_extent) == 3)
        fake_cuda_inject(kernel, error, min_extent);
}

CUresult CUDAAPI cuInit(unsigned int flags) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, fault_from_environment);
    return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int *v) {
    *v = 13000;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int *n) {
    *n = 1;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *d, int ordinal) {
    if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
    *d = 0;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice d) {
    if (d != 0 || len < 1) return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "shapejit fake CUDA device");
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    default: *v = 0; break;
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem(size_t *bytes, CUdevice d) {
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    *bytes = (size_t)80 << 30;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *out, CUdevice d) {
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&mu);
    if (!primary) {
        primary = calloc(1, sizeof *primary);
        if (!primary || !list_add(&contexts, primary)) {
            free(primary);
            primary = NULL;
            return leave(CUDA_ERROR_OUT_OF_MEMORY);
        }
        primary->alive = true;
        counters.contexts++;
    }
    primary->refs++;
    *out = primary;
    return leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice d) {
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&mu);
    if (!primary || primary->refs < 1) return leave(CUDA_ERROR_INVALID_CONTEXT);
    if (--primary->refs == 0) {
        /* a lost context's leftovers are the reset's to free */
        if (!primary->sticky)
            counters.left_at_release += primary->n_allocs + primary->modules.n + primary->streams.n +
                                    primary->graphs.n + primary->execs.n + primary->events.n;
        ctx_destroy(primary);
    }
    return leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice d) {
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&mu);
    if (resets_to_fail > 0) {
        resets_to_fail--;
        return leave(CUDA_ERROR_CONTAINED);
    }
    if (primary) ctx_destroy(primary);
    counters.resets++;
    return leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuCtxPushCurrent(CUcontext c) {
    if (ctx_depth == (int)(sizeof ctx_stack / sizeof *ctx_stack)) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    bool known = list_has(&contexts, c);
    if (!known) counters.bad_handles++;
    pthread_mutex_unlock(&mu);
    if (!known) return CUDA_ERROR_INVALID_CONTEXT;
    ctx_stack[ctx_depth++] = c;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPopCurrent(CUcontext *out) {
    if (ctx_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
    *out = ctx_stack[--ctx_depth];
    return CUDA_SUCCESS;
}

/* --- streams and events */

CUresult CUDAAPI cuStreamCreate(CUstream *out, unsigned int flags) {
    ENTER(c);
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!s || !list_add(&c->streams, s)) {
        free(s);
        return leave(CUDA_ERROR_OUT_OF_MEMORY);
    }
    s->ctx = c;
    *out = s;
    return leave(CUDA_SUCCESS);
}

static bool stream_ok(struct CUctx_st *c, CUstream s) {
    if (s == NULL || s == CU_STREAM_LEGACY || list_has(&c->streams, s)) return true;
    counters.bad_handles++;
    return false;
}

CUresult CUDAAPI cuStreamDestroy(CUstream s) {
    ENTER(c);
    if (!list_remove(&c->streams, s)) {
        counters.bad_handles++;
        return leave(CUDA_ERROR_INVALID_HANDLE);
    }
    free(s);
    return leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuStreamSynchronize(CUstream s) {
    ENTER(c);
    if (!stream_ok(c, s)) return leave(CUDA_ERROR_INVALID_HANDLE);
    return leave(wait_device(c));
}

CUresult CUDAAPI cuEventCreate(CUevent *out, unsigned int flags) {
    ENTER(c);
    struct CUevent_st *e = calloc(1, sizeof *e);
    if (!e || !list_add(&c->events, e)) {
        free(e);
        return leave(CUDA_ERROR_OUT_OF_MEMORY);
    }
    e->ctx = c;
    *out = e;
    return leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) {
    ENTER(c);
    if (!list_has(&c->events, e) || !stream_ok(c, s)) return leave(CUDA_ERROR_INVALID_HANDLE);
    return leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
    ENTER(c);
    if (!list_has(&c->events, a) || !list_has(&c->events, b)) {
        counters.bad_handles++;
        return leave(CUDA_ERROR_INVALID_HANDLE);
    }
    *ms = 0.001f;
    return leave(wait_device(c));
}

CUresult CUDAAPI cuEventDestroy(CUevent e) {
    ENTER(c);
    if (!list_remove(&c->events, e)) {
        counters.bad_handles++;
        return leave(CUDA_ERROR_INVALID_HANDLE);
    }
    free(e);
    return leave(CUDA_SUCCESS);
}

/* --- memory */

CUresult CUDAAPI cuMemAlloc(CUdeviceptr *out, size_t bytes) {
    ENTER(c);
    if (bytes == 0) return leave(CUDA_ERROR_INVALID_VALUE);
    if (c->n_allocs == c->cap_allocs) {
        size_t cap = c->cap_allocs ? c->cap_allocs * 2 : 64;
        fake_alloc *grown = realloc(c->allocs, cap * sizeof *grown);
        if (!grown) return leave(CUDA_ERROR_OUT_OF_MEMORY);
        c->allocs = grown;
        c->cap_allocs = cap;
    }
    unsigned char *host = malloc(bytes);
    if (!host) return leave(CUDA_ERROR_OUT_OF_MEMORY);
    memset(host, 0xA5, bytes); /* device memory starts as garbage */
    /* fresh addresses only: a stale pointer never finds a new allocation */
    c->allocs[c->n_allocs++] = (fake_alloc){next_addr, bytes, host};
    *out = next_addr;
    next_addr += (bytes + 4095) & ~(CUdeviceptr)4095;
    counters.live_allocs++;
    return leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemFree(CUdeviceptr p) {
    ENTER(c);
    for (size_t i = 0; i < c->n_allocs; i++)
        if (c->allocs[i].addr == p) {
            free(c->allocs[i].host);
            c->allocs[i] = c->allocs[--c->n_allocs];
            counters.live_allocs--;
            return leave(CUDA_SUCCESS);
        }
    counters.bad_pointers++;
    return leave(CUDA_ERROR_INVALID_VALUE);
}

static CUresult fill(CUdeviceptr p, unsigned char v, size_t n) {
    ENTER(c);
    unsigned char *h = host_of(c, p, n);
    if (!h) return leave(CUDA_ERROR_INVALID_VALUE);
    memset(h, v, n);
    return leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemsetD8(CUdeviceptr p, unsigned char v, size_t n) { return fill(p, v, n); }
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream s) {
    return fill(p, v, n);
}

/* Copies run at once; the synchronous ones wait for the device first. */
static CUresult copy(void *dst_host, CUdeviceptr dst, const void *src_host, CUdeviceptr src,
                     size_t n, bool waits) {
    ENTER(c);
    if (waits && wait_device(c) != CUDA_SUCCESS) return leave(c->sticky);
    unsigned char *d = dst_host ? dst_host : host_of(c, dst, n);
    const unsigned char *s = src_host ? src_host : host_of(c, src, n);
    if (!d || !s) return leave(CUDA_ERROR_INVALID_VALUE);
    memmove(d, s, n);
    return leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n) {
    return copy(NULL, dst, src, 0, n, true);
}
CUresult CUDAAPI cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n) {
    return copy(dst, 0, NULL, src, n, true);
}
CUresult CUDAAPI cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    return copy(NULL, dst, NULL, src, n, true);
}
CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
    return copy(NULL, dst, src, 0, n, false);
}
CUresult CUDAAPI cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream s) {
    return copy(dst, 0, NULL, src, n, false);
}
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
    return copy(NULL, dst, NULL, src, n, false);
}

/* --- modules */

static void add_name(struct CUmod_st *m, const char *name, size_t len) {
    if (m->n_funcs == FAKE_MAX_NAMES || len == 0 || len >= sizeof m->funcs[0].name) return;
    struct CUfunc_st *f = &m->funcs[m->n_funcs++];
    f->mod = m;
    memcpy(f->name, name, len);
    f->name[len] = '\0';
}

static bool ident(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '$';
}

/* PTX: every `.entry NAME`. */
static void ptx_names(struct CUmod_st *m, const char *ptx) {
    for (const char *p = strstr(ptx, ".entry"); p; p = strstr(p + 1, ".entry")) {
        const char *q = p + 6;
        while (*q == ' ' || *q == '\t') q++;
        const char *start = q;
        while (ident(*q)) q++;
        add_name(m, start, (size_t)(q - start));
    }
}

/* A cubin (64-bit ELF): every section named `.text.NAME`. The driver gets
 * no length with the image, so the headers are trusted as it trusts them. */
static void cubin_names(struct CUmod_st *m, const unsigned char *elf) {
    uint64_t shoff;
    uint16_t shentsize, shnum, shstrndx;
    memcpy(&shoff, elf + 0x28, 8);
    memcpy(&shentsize, elf + 0x3A, 2);
    memcpy(&shnum, elf + 0x3C, 2);
    memcpy(&shstrndx, elf + 0x3E, 2);
    if (shstrndx >= shnum || shentsize < 64) return;
    uint64_t strtab;
    memcpy(&strtab, elf + shoff + (uint64_t)shstrndx * shentsize + 0x18, 8);
    for (uint16_t i = 0; i < shnum; i++) {
        uint32_t name_off;
        memcpy(&name_off, elf + shoff + (uint64_t)i * shentsize, 4);
        const char *name = (const char *)elf + strtab + name_off;
        if (strncmp(name, ".text.", 6) == 0) add_name(m, name + 6, strlen(name + 6));
    }
}

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *out, const void *image, unsigned int n_opts,
                                    CUjit_option *opts, void **vals) {
    ENTER(c);
    for (unsigned i = 0; i < n_opts; i++)
        if (opts[i] == CU_JIT_ERROR_LOG_BUFFER) ((char *)vals[i])[0] = '\0';
    struct CUmod_st *m = calloc(1, sizeof *m);
    if (!m) return leave(CUDA_ERROR_OUT_OF_MEMORY);
    m->ctx = c;
    if (memcmp(image, "\177ELF", 4) == 0)
        cubin_names(m, image);
    else
        ptx_names(m, image);
    if (m->n_funcs == 0 || !list_add(&c->modules, m)) {
        free(m);
        return leave(CUDA_ERROR_INVALID_IMAGE);
    }
    counters.module_loads++;
    counters.live_modules++;
    *out = m;
    return leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuModuleUnload(CUmodule m) {
    ENTER(c);
    if (!list_remove(&c->modules, m)) {
        counters.bad_handles++;
        return leave(CUDA_ERROR_INVALID_HANDLE);
    }
    free(m);
    counters.live_modules--;
    return leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *out, CUmodule m, const char *name) {
    ENTER(c);
    if (!list_has(&c->modules, m)) {
        counters.bad_handles++;
        return leave(CUDA_ERROR_INVALID_HANDLE);
    }
    for (int i = 0; i < m->n_funcs; i++)
        if (strcmp(m->funcs[i].name, name) == 0) {
            *out = &m->funcs[i];
            counters.function_lookups++;
            return leave(CUDA_SUCCESS);
        }
    return leave(CUDA_ERROR_NOT_FOUND);
}

CUresult CUDAAPI cuModuleGetGlobal(CUdeviceptr *p, size_t *bytes, CUmodule m, const char *name) {
    ENTER(c);
    return leave(CUDA_ERROR_NOT_FOUND);
}

static bool func_ok(struct CUctx_st *c, CUfunction f) {
    if (f && list_has(&c->modules, f->mod)) return true;
    counters.bad_handles++;
    return false;
}

CUresult CUDAAPI cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction f) {
    ENTER(c);
    if (!func_ok(c, f)) return leave(CUDA_ERROR_INVALID_HANDLE);
    *v = a == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : 0;
    return leave(CUDA_SUCCESS);
}

/* --- launches */

static CUresult check_geometry(const unsigned grid[3], const unsigned block[3], unsigned shared) {
    if (!grid[0] || !grid[1] || !grid[2] || !block[0] || !block[1] || !block[2] ||
        grid[0] > 0x7fffffffu || grid[1] > 65535 || grid[2] > 65535 || block[0] > 1024 ||
        block[1] > 1024 || block[2] > 64 || shared > 48 * 1024)
        return CUDA_ERROR_INVALID_VALUE;
    if ((uint64_t)block[0] * block[1] * block[2] > 1024) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* The fault injected for a launch of f at extent n: sticky or not. */
static bool name_matches(const char *pattern, const char *name) {
    if (pattern[0] != '*') return strcmp(pattern, name) == 0;
    size_t p = strlen(pattern + 1), n = strlen(name);
    return n >= p && strcmp(name + n - p, pattern + 1) == 0;
}

static CUresult injected(CUfunction f, int64_t n, bool sticky) {
    for (int i = 0; i < n_faults; i++)
        if (name_matches(faults[i].kernel, f->name) && n >= faults[i].min_extent &&
            is_sticky(faults[i].error) == sticky)
            return faults[i].error;
    return CUDA_SUCCESS;
}

/* What the driver checks when a launch is made (or captured): geometry,
 * and the injected errors it would report at once. */
static CUresult check_launch(CUfunction f, const unsigned grid[3], const unsigned block[3],
                             unsigned shared, const uint64_t vals[3]) {
    CUresult r = check_geometry(grid, block, shared);
    return r != CUDA_SUCCESS ? r : injected(f, (int64_t)vals[2], false);
}

/* A kernel "runs": its pointers are checked and an injected fault raised.
 * A pointer outside device memory is what the real device would fault on
 * too. Caller holds mu. */
static void run_kernel(struct CUctx_st *c, CUfunction f, const uint64_t vals[3]) {
    CUresult fault = injected(f, (int64_t)vals[2], true);
    if (fault && !c->pending) c->pending = fault;
    for (int i = 0; i < 2; i++)
        if (vals[i] && !find_alloc(c, (CUdeviceptr)vals[i], 8)) {
            counters.bad_pointers++;
            if (!c->pending) c->pending = CUDA_ERROR_ILLEGAL_ADDRESS;
        }
    snprintf(history_names[counters.launches % FAKE_HISTORY], sizeof history_names[0], "%s",
             f->name);
    counters.launches++;
}

static struct CUgraphNode_st *node_new(CUfunction f, const unsigned grid[3], const unsigned block[3],
                                       unsigned shared, void **params) {
    struct CUgraphNode_st *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->func = f;
    memcpy(n->grid, grid, sizeof n->grid);
    memcpy(n->block, block, sizeof n->block);
    n->shared = shared;
    for (int i = 0; i < FAKE_PARAMS; i++) {
        memcpy(&n->vals[i], params[i], 8);
        n->ptrs[i] = &n->vals[i];
    }
    return n;
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                unsigned by, unsigned bz, unsigned shared, CUstream s,
                                void **params, void **extra) {
    ENTER(c);
    if (!func_ok(c, f) || !stream_ok(c, s)) return leave(CUDA_ERROR_INVALID_HANDLE);
    if (!params || extra) return leave(CUDA_ERROR_INVALID_VALUE);
    unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    uint64_t vals[FAKE_PARAMS];
    for (int i = 0; i < FAKE_PARAMS; i++) memcpy(&vals[i], params[i], 8);
    CUresult r = check_launch(f, grid, block, shared, vals);
    if (r != CUDA_SUCCESS) return leave(r);
    struct CUgraph_st *g = s && s != CU_STREAM_LEGACY ? s->capture : NULL;
    if (!g) {
        run_kernel(c, f, vals);
        return leave(CUDA_SUCCESS);
    }
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 16;
        struct CUgraphNode_st **nodes = realloc(g->nodes, cap * sizeof *nodes);
        if (!nodes) return leave(CUDA_ERROR_OUT_OF_MEMORY);
        g->nodes = nodes;
        g->cap = cap;
    }
    struct CUgraphNode_st *n = node_new(f, grid, block, shared, params);
    if (!n) return leave(CUDA_ERROR_OUT_OF_MEMORY);
    g->nodes[g->n++] = n;
    counters.captured++;
    return leave(CUDA_SUCCESS);
}

/* --- capture and graphs */

CUresult CUDAAPI cuStreamBeginCapture(CUstream s, CUstreamCaptureMode mode) {
    ENTER(c);
    if (!s || s == CU_STREAM_LEGACY || !list_has(&c->streams, s)) {
        counters.bad_handles++;
        return leave(CUDA_ERROR_INVALID_HANDLE);
    }
    if (s->capture) return leave(CUDA_ERROR_ILLEGAL_STATE);
    struct CUgraph_st *g = calloc(1, sizeof *g);
    if (!g || !list_add(&c->graphs, g)) {
        free(g);
        return leave(CUDA_ERROR_OUT_OF_MEMORY);
    }
    g->ctx = c;
    s->capture = g;
    return leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuStreamEndCapture(CUstream s, CUgraph *out) {
    ENTER(c);
    if (!s || s == CU_STREAM_LEGACY || !list_has(&c->streams, s)) {
        counters.bad_handles++;
        return leave(CUDA_ERROR_INVALID_HANDLE);
    }
    if (!s->capture) return leave(CUDA_ERROR_ILLEGAL_STATE);
    *out = s->capture;
    s->capture = NULL;
    return leave(CUDA_SUCCESS);
}

static bool graph_ok(struct CUctx_st *c, CUgraph g) {
    if (list_has(&c->graphs, g)) return true;
    counters.bad_handles++;
    return false;
}

CUresult CUDAAPI cuGraphGetNodes(CUgraph g, CUgraphNode *nodes, size_t *n) {
    ENTER(c);
    if (!graph_ok(c, g)) return leave(CUDA_ERROR_INVALID_HANDLE);
    if (nodes)
        for (size_t i = 0; i < *n && i < g->n; i++) nodes[i] = g->nodes[i];
    *n = g->n;
    return leave(CUDA_SUCCESS);
}

/* Whether node belongs to a live graph of c. */
static bool node_ok(struct CUctx_st *c, CUgraphNode node) {
    for (size_t i = 0; i < c->graphs.n; i++) {
        struct CUgraph_st *g = c->graphs.items[i];
        for (size_t j = 0; j < g->n; j++)
            if (g->nodes[j] == node) return true;
    }
    counters.bad_handles++;
    return false;
}

CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType *type) {
    ENTER(c);
    if (!node_ok(c, node)) return leave(CUDA_ERROR_INVALID_HANDLE);
    *type = CU_GRAPH_NODE_TYPE_KERNEL;
    return leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuGraphKernelNodeGetParams(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS *p) {
    ENTER(c);
    if (!node_ok(c, node)) return leave(CUDA_ERROR_INVALID_HANDLE);
    memset(p, 0, sizeof *p);
    p->func = node->func;
    p->gridDimX = node->grid[0];
    p->gridDimY = node->grid[1];
    p->gridDimZ = node->grid[2];
    p->blockDimX = node->block[0];
    p->blockDimY = node->block[1];
    p->blockDimZ = node->block[2];
    p->sharedMemBytes = node->shared;
    p->kernelParams = node->ptrs;
    return leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *out, CUgraph g, unsigned long long flags) {
    ENTER(c);
    if (!graph_ok(c, g)) return leave(CUDA_ERROR_INVALID_HANDLE);
    if (g->n > sizeof ((struct CUgraphExec_st *)0)->nodes / sizeof (struct CUgraphNode_st))
        return leave(CUDA_ERROR_NOT_SUPPORTED);
    struct CUgraphExec_st *x = calloc(1, sizeof *x);
    if (!x || !list_add(&c->execs, x)) {
        free(x);
        return leave(CUDA_ERROR_OUT_OF_MEMORY);
    }
    x->ctx = c;
    x->n = g->n;
    for (size_t i = 0; i < g->n; i++) {
        x->from[i] = g->nodes[i];
        x->nodes[i] = *g->nodes[i];
        for (int k = 0; k < FAKE_PARAMS; k++) x->nodes[i].ptrs[k] = &x->nodes[i].vals[k];
    }
    *out = x;
    return leave(CUDA_SUCCESS);
}

static bool exec_ok(struct CUctx_st *c, CUgraphExec x) {
    if (list_has(&c->execs, x)) return true;
    counters.bad_handles++;
    return false;
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec x, CUgraphNode node,
                                                const CUDA_KERNEL_NODE_PARAMS *p) {
    ENTER(c);
    if (!exec_ok(c, x)) return leave(CUDA_ERROR_INVALID_HANDLE);
    for (size_t i = 0; i < x->n; i++) {
        if (x->from[i] != node) continue;
        if (p->func != x->nodes[i].func || !p->kernelParams) return leave(CUDA_ERROR_INVALID_VALUE);
        for (int k = 0; k < FAKE_PARAMS; k++) memcpy(&x->nodes[i].vals[k], p->kernelParams[k], 8);
        return leave(CUDA_SUCCESS);
    }
    counters.bad_handles++;
    return leave(CUDA_ERROR_INVALID_HANDLE);
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec x, CUstream s) {
    ENTER(c);
    if (!exec_ok(c, x) || !stream_ok(c, s)) return leave(CUDA_ERROR_INVALID_HANDLE);
    for (size_t i = 0; i < x->n; i++) {
        struct CUgraphNode_st *n = &x->nodes[i];
        CUresult r = check_launch(n->func, n->grid, n->block, n->shared, n->vals);
        if (r != CUDA_SUCCESS) return leave(r);
    }
    counters.graph_launches++;
    for (size_t i = 0; i < x->n; i++) run_kernel(c, x->nodes[i].func, x->nodes[i].vals);
    return leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec x) {
    ENTER(c);
    if (!list_remove(&c->execs, x)) {
        counters.bad_handles++;
        return leave(CUDA_ERROR_INVALID_HANDLE);
    }
    free(x);
    return leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuGraphDestroy(CUgraph g) {
    ENTER(c);
    if (!list_remove(&c->graphs, g)) {
        counters.bad_handles++;
        return leave(CUDA_ERROR_INVALID_HANDLE);
    }
    graph_free(g);
    return leave(CUDA_SUCCESS);
}

/* --- errors */

static const struct {
    CUresult r;
    const char *name, *text;
} error_table[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_ECC_UNCORRECTABLE, "CUDA_ERROR_ECC_UNCORRECTABLE", "uncorrectable ECC error encountered"},
    {CUDA_ERROR_CONTAINED, "CUDA_ERROR_CONTAINED", "a device exception was contained; restart the process"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated"},
    {CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {CUDA_ERROR_ASSERT, "CUDA_ERROR_ASSERT", "device-side assert triggered"},
    {CUDA_ERROR_HARDWARE_STACK_ERROR, "CUDA_ERROR_HARDWARE_STACK_ERROR", "hardware stack error"},
    {CUDA_ERROR_ILLEGAL_INSTRUCTION, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "an illegal instruction was encountered"},
    {CUDA_ERROR_MISALIGNED_ADDRESS, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
    {CUDA_ERROR_INVALID_ADDRESS_SPACE, "CUDA_ERROR_INVALID_ADDRESS_SPACE", "operation not supported on global/shared address space"},
    {CUDA_ERROR_INVALID_PC, "CUDA_ERROR_INVALID_PC", "invalid program counter"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
};

static int error_index(CUresult r) {
    for (size_t i = 0; i < sizeof error_table / sizeof *error_table; i++)
        if (error_table[i].r == r) return (int)i;
    return -1;
}

CUresult CUDAAPI cuGetErrorName(CUresult r, const char **out) {
    int i = error_index(r);
    *out = i < 0 ? NULL : error_table[i].name;
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorString(CUresult r, const char **out) {
    int i = error_index(r);
    *out = i < 0 ? NULL : error_table[i].text;
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
