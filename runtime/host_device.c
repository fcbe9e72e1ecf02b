/* The host device: context-allocated memory on a ledger (so release frees
 * what is left), modules from native kernel tables or host object files,
 * capture as a recorded launch list replayed for any active extent, and
 * row-parallel kernels split over the device's threads (host_pool.h), the
 * same way eager and replayed. */
#include "runtime/device_impl.h"
#include "runtime/host_code/host_jit_impl.h"
#include "runtime/host_pool.h"
#include "runtime/runtime_only.h"
#include "core/array.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HOST_ALIGN 64 /* a cache line; also enough for any vector load the emitters use */

/* Element operations a part of a split launch must have to repay handing it
 * to an awake worker (about 10 us of matmul on this project's machine; the
 * claim, the cache lines moved, the wait for the last part). */
#define DEFAULT_MIN_PART_WORK (1u << 19)
/* Waking sleeping workers for a launch (host_pool.c) costs it tens of
 * microseconds on an idle machine and hundreds on a busy one: 30 to 400 us
 * measured on this project's 2-vCPU VM, where the woken worker often takes
 * the caller's own CPU; ffn at N=64 (two 1M-operation matmuls) took 38 us
 * on one thread and 70 to 115 us on two when every launch woke the worker.
 * No constant serves both machines, so the device times its launches (each
 * kernel's pace, ns_per_work; what a wake-up added, wake_ns) and wakes the
 * sleepers only when each thread's share of a launch takes WAKE_REPAY times
 * what a wake-up costs (2: a share must outlast the wake-up with a margin);
 * the parts of smaller launches go to the workers already awake (spinning
 * after the launch before), or to the caller. */
#define WAKE_REPAY 2
/* Before a kernel is timed: 50 operations a nanosecond (a matmul with
 * AVX-512 on one core); before a wake-up is: 50 us. */
#define PRIOR_NS_PER_WORK 0.02
#define PRIOR_WAKE_NS 50000.0
/* A launch (or run) that declines to wake lowers the wake-up estimate by
 * 1/WAKE_DECAY, so a cost measured under load is retried once the load may
 * have passed (about 100 declines from an 8x estimate). A wake-up's cost
 * moves the estimate by 1/8 of the difference, and counts at most
 * WAKE_OUTLIER times the estimate: one launch stalled by a burst of load
 * (measured up to 1.4 ms) must not stop the wake-ups for the next hundreds. */
#define WAKE_DECAY 64
#define WAKE_OUTLIER 4
/* Parts per thread: the threads claim parts (host_pool.c), so more parts
 * than threads even out a thread that starts late. */
#define PARTS_PER_THREAD 2

/* Sits right before every allocation's aligned start. */
typedef struct mem_header {
    struct mem_header *prev, *next;
    void *raw;
} mem_header;

typedef struct host_kernel {
    struct host_kernel *next;
    sj_host_kernel_fn fn;
    sj_host_rows_fn rows; /* NULL: not row-parallel */
    sj_kernel_attrs attrs; /* attrs.row_work: a row's work when rows is set */
    double ns_per_work;    /* learnt under the device lock; 0 = not timed yet */
    char name[];
} host_kernel;

typedef struct host_module {
    struct host_module *prev, *next;
    host_kernel *kernels;    /* native: the table; object: those resolved so far */
    sj_host_jit_module *jit; /* NULL for a native table */
} host_module;

typedef struct host_launch {
    host_kernel *k;
    void *const *buffers;
    const int64_t *info;
} host_launch;

typedef struct host_graph {
    struct host_graph *prev, *next;
    host_launch *launches;
    size_t n, cap;
} host_graph;

typedef struct host_device {
    sj_ctx *ctx;
    mem_header memory;     /* sentinels of circular lists */
    host_module modules;
    host_graph graphs;
    host_graph *recording; /* the capture in progress */
    sj_host_jit *jit;      /* created with the first object module */
    sj_host_pool *pool;    /* NULL with one thread */
    /* The calling thread's kernel scratch (SJ_HOST_SCRATCH_BYTES): one run
     * at a time holds the device's lock, so one serves every caller; the
     * pool's workers have their own. */
    void *scratch, *scratch_base;
    uint64_t min_part_work;
    uint64_t wake_share_work; /* 0: wake when the estimates below say it repays */
    /* Learnt under the device lock (launches hold it): what a launch that
     * woke the workers took beyond an even share of its work, at the pace
     * the caller measured for that kernel (a moving average). */
    double wake_ns;
} host_device;

#define LIST_INIT(s) ((s)->prev = (s)->next = (s))
#define LIST_INSERT(s, e)                                                                          \
    do {                                                                                           \
        (e)->next = (s)->next;                                                                     \
        (e)->prev = (s);                                                                           \
        (s)->next->prev = (e);                                                                     \
        (s)->next = (e);                                                                           \
    } while (0)
#define LIST_REMOVE(e)                                                                             \
    do {                                                                                           \
        (e)->prev->next = (e)->next;                                                               \
        (e)->next->prev = (e)->prev;                                                               \
    } while (0)

static sj_status host_alloc(void *impl, size_t bytes, void **out) {
    host_device *h = impl;
    size_t total;
    if (sj_add_overflow_size(bytes, sizeof(mem_header) + HOST_ALIGN, &total))
        return sj_fail(h->ctx, SJ_E_NOMEM, "host device: allocation of %zu bytes", bytes);
    char *raw = sj_alloc(h->ctx, total);
    if (!raw)
        return sj_fail(h->ctx, SJ_E_NOMEM, "host device: out of memory for %zu bytes", bytes);
    uintptr_t start = ((uintptr_t)(raw + sizeof(mem_header)) + HOST_ALIGN - 1) &
                      ~(uintptr_t)(HOST_ALIGN - 1);
    mem_header *hd = (mem_header *)start - 1;
    hd->raw = raw;
    LIST_INSERT(&h->memory, hd);
    memset((void *)start, 0, bytes);
    *out = (void *)start;
    return SJ_OK;
}

static void host_free(void *impl, void *ptr) {
    host_device *h = impl;
    if (!ptr) return;
    mem_header *hd = (mem_header *)ptr - 1;
    LIST_REMOVE(hd);
    sj_free(h->ctx, hd->raw);
}

static sj_status host_copy(void *impl, void *dst, const void *src, size_t bytes,
                           sj_copy_kind kind) {
    (void)impl;
    (void)kind;
    memmove(dst, src, bytes);
    return SJ_OK;
}

static host_kernel *new_kernel(sj_ctx *ctx, const char *name, sj_host_kernel_fn fn) {
    size_t len = strlen(name) + 1;
    host_kernel *k = sj_calloc(ctx, 1, sizeof *k + len);
    if (!k) return NULL;
    k->fn = fn;
    memcpy(k->name, name, len);
    return k;
}

static void free_module(host_device *h, host_module *m) {
    host_kernel *k = m->kernels;
    while (k) {
        host_kernel *next = k->next;
        sj_free(h->ctx, k);
        k = next;
    }
#ifndef SJ_RUNTIME_ONLY
    if (m->jit) sj__host_jit_remove(h->jit, m->jit);
#endif
    sj_free(h->ctx, m);
}

static sj_status load_native(host_device *h, host_module *m, const void *code, size_t len) {
    if (len % sizeof(sj_native_kernel) != 0)
        return sj_fail(h->ctx, SJ_E_INVALID_ARG,
                       "host device: a native module's size (%zu bytes) is not a whole number "
                       "of sj_native_kernel entries",
                       len);
    const sj_native_kernel *table = code;
    size_t n = len / sizeof *table;
    for (size_t i = 0; i < n; i++) {
        if (!table[i].name || !table[i].fn || strlen(table[i].name) >= 64)
            return sj_fail(h->ctx, SJ_E_INVALID_ARG,
                           "host device: native kernel #%zu has no name, a name of 64 bytes or "
                           "more, or no function",
                           i);
        if (!table[i].rows != !table[i].row_work)
            return sj_fail(h->ctx, SJ_E_INVALID_ARG,
                           "host device: native kernel '%s' has %s; a row-parallel kernel needs "
                           "both a row entry and its row work",
                           table[i].name, table[i].rows ? "a row entry but no row work"
                                                        : "a row work but no row entry");
        for (size_t j = 0; j < i; j++)
            if (strcmp(table[i].name, table[j].name) == 0)
                return sj_fail(h->ctx, SJ_E_INVALID_ARG,
                               "host device: native kernel '%s' appears twice", table[i].name);
        host_kernel *k = new_kernel(h->ctx, table[i].name, table[i].fn);
        if (!k) return sj_fail(h->ctx, SJ_E_NOMEM, "host device: out of memory");
        k->rows = table[i].rows;
        k->attrs.row_work = table[i].row_work;
        k->next = m->kernels;
        m->kernels = k;
    }
    return SJ_OK;
}

static sj_status host_load_module(void *impl, sj_code_format fmt, const void *code, size_t len,
                                  void **out) {
    host_device *h = impl;
    *out = NULL;
    if (fmt != SJ_CODE_HOST_NATIVE && fmt != SJ_CODE_HOST_OBJECT)
        return sj_fail(h->ctx, SJ_E_MISMATCH,
                       "host device: cannot load %s code (a GPU format)",
                       fmt == SJ_CODE_PTX ? "PTX" : fmt == SJ_CODE_CUBIN ? "cubin" : "unknown");
    host_module *m = sj_calloc(h->ctx, 1, sizeof *m);
    if (!m) return sj_fail(h->ctx, SJ_E_NOMEM, "host device: out of memory");
    sj_status st;
    if (fmt == SJ_CODE_HOST_NATIVE) {
        st = load_native(h, m, code, len);
    } else {
#ifdef SJ_RUNTIME_ONLY
        /* Object code needs LLVM's ORC to link; kernel tables need nothing. */
        st = sj_fail(h->ctx, SJ_E_UNSUPPORTED, "host device: %s", SJ_RUNTIME_ONLY_NO_HOST_CODE);
#else
        st = h->jit ? SJ_OK : sj__host_jit_create(h->ctx, &h->jit);
        if (st == SJ_OK) st = sj__host_jit_add_object(h->jit, code, len, &m->jit);
#endif
    }
    if (st != SJ_OK) {
        free_module(h, m);
        return st;
    }
    LIST_INSERT(&h->modules, m);
    *out = m;
    return SJ_OK;
}

static void host_unload_module(void *impl, void *module) {
    host_module *m = module;
    LIST_REMOVE(m);
    free_module(impl, m);
}

#ifndef SJ_RUNTIME_ONLY
/* Attributes an object module publishes for kernel K: an optional data symbol
 * `K_attrs`, four uint32 {max_threads, tile_m, tile_n, tile_k}; and, for a
 * row-parallel kernel, its row entry `K_rows` with the uint64 `K_rows_work`
 * (and optionally `K_rows_extent`, `K_rows_step`). */
/* The uint64 at data symbol `K<suffix>` of kernel K, 0 when absent. */
static sj_status symbol_u64(host_device *h, host_module *m, const host_kernel *k, const char *suffix,
                            uint64_t *out) {
    char sym[96];
    snprintf(sym, sizeof sym, "%s%s", k->name, suffix);
    uint64_t addr;
    *out = 0;
    SJ_TRY(sj__host_jit_lookup(h->jit, m->jit, sym, 0, &addr));
    if (addr) memcpy(out, (const void *)(uintptr_t)addr, sizeof *out);
    return SJ_OK;
}

static sj_status object_attrs(host_device *h, host_module *m, host_kernel *k) {
    char sym[96];
    snprintf(sym, sizeof sym, "%s_attrs", k->name);
    uint64_t addr;
    SJ_TRY(sj__host_jit_lookup(h->jit, m->jit, sym, 0, &addr));
    if (addr) {
        const uint32_t *v = (const uint32_t *)(uintptr_t)addr;
        k->attrs = (sj_kernel_attrs){v[0], v[1], v[2], v[3], 0, 0, 0};
    }
    snprintf(sym, sizeof sym, "%s_rows", k->name);
    SJ_TRY(sj__host_jit_lookup(h->jit, m->jit, sym, 0, &addr));
    if (!addr) return SJ_OK;
    k->rows = (sj_host_rows_fn)(uintptr_t)addr;
    SJ_TRY(symbol_u64(h, m, k, "_rows_work", &k->attrs.row_work));
    if (!k->attrs.row_work)
        return sj_fail(h->ctx, SJ_E_CORRUPT,
                       "host device: kernel '%s' has a row entry but no row work (%s_rows_work)",
                       k->name, k->name);
    /* Optional: the entry splits a constant range (columns), not the rows;
     * the step of the row split points (rows that are whole slices). */
    SJ_TRY(symbol_u64(h, m, k, "_rows_extent", &k->attrs.split_extent));
    return symbol_u64(h, m, k, "_rows_step", &k->attrs.split_step);
}

/* A kernel of an object module, found by its symbol and cached on the
 * module's list. */
static sj_status resolve_object(host_device *h, host_module *m, const char *name,
                                sj_kernel_handle *out, sj_kernel_attrs *attrs) {
    uint64_t addr;
    SJ_TRY(sj__host_jit_lookup(h->jit, m->jit, name, 1, &addr));
    host_kernel *k = new_kernel(h->ctx, name, (sj_host_kernel_fn)(uintptr_t)addr);
    if (!k) return sj_fail(h->ctx, SJ_E_NOMEM, "host device: out of memory");
    sj_status st = object_attrs(h, m, k);
    if (st != SJ_OK) {
        sj_free(h->ctx, k);
        return st;
    }
    k->next = m->kernels;
    m->kernels = k;
    *out = k;
    *attrs = k->attrs;
    return SJ_OK;
}
#endif

static sj_status host_resolve_kernel(void *impl, void *module, const char *name,
                                     sj_kernel_handle *out, sj_kernel_attrs *attrs) {
    host_device *h = impl;
    host_module *m = module;
    for (host_kernel *k = m->kernels; k; k = k->next)
        if (strcmp(k->name, name) == 0) {
            *out = k;
            *attrs = k->attrs;
            return SJ_OK;
        }
#ifndef SJ_RUNTIME_ONLY
    if (m->jit) return resolve_object(h, m, name, out, attrs);
#endif
    return sj_fail(h->ctx, SJ_E_NOT_FOUND, "host device: no kernel '%s'", name);
}

/* What a split launch of k at n divides: n rows, or (split_extent) that
 * constant range of units, each of them then worth row_work per active row. */
static int64_t split_units(const host_kernel *k, int64_t n) {
    return k->attrs.split_extent ? (int64_t)k->attrs.split_extent : n;
}
static uint64_t unit_work(const host_kernel *k, int64_t n) {
    if (!k->attrs.split_extent) return k->attrs.row_work;
    return k->attrs.row_work > UINT64_MAX / (uint64_t)n ? UINT64_MAX : k->attrs.row_work * (uint64_t)n;
}

/* Work of `units` units of a launch of k at n. */
static uint64_t units_work(const host_kernel *k, int64_t n, int64_t units) {
    uint64_t w = unit_work(k, n);
    return w > UINT64_MAX / (uint64_t)units ? UINT64_MAX : w * (uint64_t)units;
}

/* The split points' step: SJ_HOST_MIN_SPLIT_ROWS rows, or the kernel's own
 * (rows that are whole slices), or one unit of a constant range (the kernel
 * sized its units: whole panels, vectors). */
static int64_t split_step(const host_kernel *k) {
    if (k->attrs.split_extent) return 1;
    return k->attrs.split_step ? (int64_t)k->attrs.split_step : SJ_HOST_MIN_SPLIT_ROWS;
}

/* Parts a launch of k at extent n splits its units [lo, hi) into (1: the
 * caller alone) and their bounds: whole blocks of SJ_HOST_MIN_SPLIT_ROWS
 * rows (or units of a constant range), the last part taking the rest, so
 * every split point is lo plus a multiple of it (of every row tile and
 * vector width the emitters use; a sub-batch's lo is one of them, or its
 * rows are whole slices) and a part has at least min_part_work of work. */
static int split(const host_device *h, const host_kernel *k, int64_t n, int64_t lo, int64_t hi,
                 int64_t *bounds) {
    int64_t units = hi - lo, step = split_step(k);
    if (!h->pool || !k->rows || units < 2 * step) return 1;
    int64_t blocks = units / step;
    int64_t parts = (int64_t)sj__host_pool_threads(h->pool) * PARTS_PER_THREAD;
    if (parts > SJ_HOST_MAX_THREADS) parts = SJ_HOST_MAX_THREADS;
    if (parts > blocks) parts = blocks;
    uint64_t work = units_work(k, n, units);
    if ((uint64_t)parts > work / h->min_part_work) parts = (int64_t)(work / h->min_part_work);
    if (parts < 2) return 1;
    for (int64_t p = 0; p < parts; p++) bounds[p] = lo + step * (blocks * p / parts);
    bounds[parts] = hi;
    return (int)parts;
}

static uint64_t clock_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A moving average's step toward x by 1/shift. */
static void average(double *avg, double x, int shift) { *avg += (x - *avg) / (double)shift; }

/* A wake-up's cost into the estimate (at most WAKE_OUTLIER times it). */
static void learn_wake(host_device *h, double cost) {
    double cap = WAKE_OUTLIER * (h->wake_ns > PRIOR_WAKE_NS ? h->wake_ns : PRIOR_WAKE_NS);
    average(&h->wake_ns, cost < cap ? cost : cap, 8);
}

/* The caller's time per operation of k, from a launch of rows * k's row
 * work over `units` of its units; returns the launch's time beyond an even
 * share of its work (what the threads' sharing cost it, 0 for a perfect
 * split). */
static double learn(host_device *h, host_kernel *k, int64_t n, int64_t units,
                    const sj_host_pool_timing *t) {
    if (t->caller_rows > 0) {
        double pace = (double)t->caller_ns / ((double)t->caller_rows * (double)unit_work(k, n));
        if (k->ns_per_work == 0) k->ns_per_work = pace;
        else average(&k->ns_per_work, pace, 8);
    }
    double share = (double)units_work(k, n, units) * k->ns_per_work / sj__host_pool_threads(h->pool);
    return (double)t->wall_ns > share ? (double)t->wall_ns - share : 0;
}

/* A thread's share of `units` units of a launch of k at n: its work, and
 * its time at k's pace. */
static uint64_t share_work(const host_device *h, const host_kernel *k, int64_t n, int64_t units) {
    return units_work(k, n, units) / (uint64_t)sj__host_pool_threads(h->pool);
}
static double share_ns(const host_device *h, const host_kernel *k, int64_t n, int64_t units) {
    return (double)share_work(h, k, n, units) * (k->ns_per_work ? k->ns_per_work : PRIOR_NS_PER_WORK);
}

/* Whether shares of share_ns (one launch's, or a run's split launches'
 * together) repay waking the sleeping workers: WAKE_REPAY times what a
 * wake-up costs; with a configured wake_share_work, a share of that much
 * work (share_work). A decline lowers the estimate (WAKE_DECAY). */
static bool worth_waking(host_device *h, uint64_t work, double ns) {
    if (h->wake_share_work) return work >= h->wake_share_work;
    if (ns >= WAKE_REPAY * h->wake_ns) return true;
    h->wake_ns -= h->wake_ns / WAKE_DECAY;
    return false;
}

/* Whether a split launch of k at n wakes the sleeping workers (those awake
 * claim parts either way; the caller runs whatever is left). `run_wakes`:
 * the replay this launch is part of woke them at its start, so a worker
 * that fell asleep since is woken again. */
static bool wake_for(host_device *h, const host_kernel *k, int64_t n, int64_t units, bool run_wakes) {
    if (sj__host_pool_awake(h->pool) == sj__host_pool_threads(h->pool) - 1) return false;
    return run_wakes || worth_waking(h, share_work(h, k, n, units), share_ns(h, k, n, units));
}

/* Runs a launch of k at n over its units [lo, hi) (a sub-batch's rows, or
 * all of them; only a row entry runs a part). In a replay that woke the
 * workers at its start (run_wakes), adds the split launches' costs beyond
 * an even share to *run_cost, which the replay learns from as one wake-up;
 * otherwise a launch that woke them is learnt from alone. */
static void run_kernel_range(host_device *h, host_kernel *k, void *const *buffers,
                             const int64_t *info, int64_t n, int64_t lo, int64_t hi,
                             bool run_wakes, double *run_cost) {
    int64_t bounds[SJ_HOST_MAX_THREADS + 1];
    int parts = split(h, k, n, lo, hi, bounds);
    bool whole = lo == 0 && hi == split_units(k, n);
    if (parts > 1) {
        bool wake = wake_for(h, k, n, hi - lo, run_wakes);
        sj_host_pool_timing t;
        sj__host_pool_run(h->pool, k->rows, buffers, info, n, bounds, parts, wake, h->scratch, &t);
        double cost = learn(h, k, n, hi - lo, &t);
        if (run_wakes) *run_cost += cost;
        else if (t.woke) learn_wake(h, cost);
    } else if (!whole) {
        k->rows(buffers, info, n, lo, hi, h->scratch);
    } else if (h->pool && k->rows && split_units(k, n) >= 2 * split_step(k)) {
        uint64_t t0 = clock_ns(); /* a kernel the caller ran alone: its pace all the same */
        k->fn(buffers, info, n, h->scratch);
        learn(h, k, n, split_units(k, n),
              &(sj_host_pool_timing){.caller_ns = clock_ns() - t0, .caller_rows = split_units(k, n)});
    } else {
        k->fn(buffers, info, n, h->scratch);
    }
}

static void run_kernel(host_device *h, host_kernel *k, void *const *buffers,
                       const int64_t *info, int64_t n, bool run_wakes, double *run_cost) {
    run_kernel_range(h, k, buffers, info, n, 0, split_units(k, n), run_wakes, run_cost);
}

static sj_status host_launch_kernel(void *impl, sj_kernel_handle kh, const sj_launch_dims *dims,
                                    void *const *buffers, const int64_t *info,
                                    int64_t active_extent) {
    host_device *h = impl;
    (void)dims;
    host_kernel *k = kh;
    host_graph *g = h->recording;
    if (!g) {
        run_kernel(h, k, buffers, info, active_extent, false, NULL);
        return SJ_OK;
    }
    if (!sj__array_reserve(h->ctx, (void **)&g->launches, &g->cap, g->n + 1, sizeof *g->launches))
        return sj_fail(h->ctx, SJ_E_NOMEM, "host device: out of memory while capturing");
    g->launches[g->n++] = (host_launch){k, buffers, info};
    return SJ_OK;
}

static sj_status host_sync(void *impl) {
    (void)impl;
    return SJ_OK;
}

static sj_status host_begin_capture(void *impl) {
    host_device *h = impl;
    h->recording = sj_calloc(h->ctx, 1, sizeof *h->recording);
    if (!h->recording) return sj_fail(h->ctx, SJ_E_NOMEM, "host device: out of memory");
    return SJ_OK;
}

static sj_status host_end_capture(void *impl, sj_graph_handle *out) {
    host_device *h = impl;
    host_graph *g = h->recording;
    h->recording = NULL;
    LIST_INSERT(&h->graphs, g);
    *out = g;
    return SJ_OK;
}

/* Whether a replay of g at n wakes the sleeping workers at its start: when
 * its split launches' shares together repay a wake-up. Paid once a run, a
 * wake-up then serves every split launch (a worker spins while a launch it
 * helped is in flight, and SPIN_NS after), where a launch too small to repay
 * one alone would leave the sleepers asleep through the whole run. */
static bool replay_wakes(host_device *h, const host_graph *g, int64_t n) {
    if (!h->pool || sj__host_pool_awake(h->pool) == sj__host_pool_threads(h->pool) - 1) return false;
    uint64_t work = 0;
    double ns = 0;
    int64_t bounds[SJ_HOST_MAX_THREADS + 1];
    for (size_t i = 0; i < g->n; i++) {
        const host_kernel *k = g->launches[i].k;
        if (split(h, k, n, 0, split_units(k, n), bounds) < 2) continue;
        uint64_t w = share_work(h, k, n, split_units(k, n));
        work = work > UINT64_MAX - w ? UINT64_MAX : work + w;
        ns += share_ns(h, k, n, split_units(k, n));
    }
    return work > 0 && worth_waking(h, work, ns);
}

/* Whether a launch of k computes any range of the active rows alone, each
 * row a whole slice (an image of a batch): a row entry over the rows, split
 * at any row. */
static bool runs_slices(const host_kernel *k) {
    return k->rows && !k->attrs.split_extent && k->attrs.split_step == 1;
}

/* Replays g at n; with `rows` (0: none), each run of two or more launches
 * that compute slices (runs_slices) takes the rows `rows` at a time, every
 * launch of the run over a sub-batch before the next sub-batch: what one
 * launch writes for a sub-batch is read back from cache by the next, where
 * a whole batch's activations went through memory between them. The
 * caller vouches that such a launch's rows read only the same rows of what
 * earlier launches wrote (the graph's rows are independent). */
static sj_status replay_by(host_device *h, const host_graph *g, int64_t n, int64_t rows) {
    bool wakes = replay_wakes(h, g, n);
    if (wakes) sj__host_pool_wake(h->pool);
    double run_cost = 0;
    for (size_t i = 0; i < g->n;) {
        size_t end = i;
        if (rows > 0 && rows < n)
            while (end < g->n && runs_slices(g->launches[end].k)) end++;
        if (end - i < 2) {
            run_kernel(h, g->launches[i].k, g->launches[i].buffers, g->launches[i].info, n, wakes,
                       &run_cost);
            i++;
            continue;
        }
        for (int64_t lo = 0; lo < n; lo += rows) {
            int64_t hi = n - lo > rows ? lo + rows : n;
            for (size_t j = i; j < end; j++)
                run_kernel_range(h, g->launches[j].k, g->launches[j].buffers, g->launches[j].info, n,
                                 lo, hi, wakes, &run_cost);
        }
        i = end;
    }
    if (wakes) learn_wake(h, run_cost); /* what the run's wake-up cost its split launches */
    return SJ_OK;
}

static sj_status host_replay(void *impl, sj_graph_handle gh, int64_t active_extent) {
    return replay_by(impl, gh, active_extent, 0);
}

static sj_status host_replay_rows(void *impl, sj_graph_handle gh, int64_t active_extent, int64_t rows) {
    return replay_by(impl, gh, active_extent, rows);
}

static void free_graph(host_device *h, host_graph *g) {
    sj_free(h->ctx, g->launches);
    sj_free(h->ctx, g);
}

static void host_destroy_graph(void *impl, sj_graph_handle gh) {
    host_graph *g = gh;
    LIST_REMOVE(g);
    free_graph(impl, g);
}

static void host_destroy(void *impl) {
    host_device *h = impl;
    sj__host_pool_destroy(h->pool);
    if (h->recording) free_graph(h, h->recording);
    while (h->graphs.next != &h->graphs) host_destroy_graph(h, h->graphs.next);
    while (h->modules.next != &h->modules) host_unload_module(h, h->modules.next);
#ifndef SJ_RUNTIME_ONLY
    sj__host_jit_destroy(h->jit);
#endif
    while (h->memory.next != &h->memory) host_free(h, h->memory.next + 1);
    sj__host_scratch_free(h->ctx, h->scratch_base);
    sj_free(h->ctx, h);
}

/* Physical memory: a run memory larger than it can never be made (the
 * kernel's overcommit may grant the allocation, and the process is killed
 * when the pages are touched). */
static uint64_t host_memory_capacity(void *impl) {
    (void)impl;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

static const sj_device_ops host_ops = {
    .name = "host",
    .flags = SJ_DEVICE_HOST_VISIBLE,
    .alloc = host_alloc,
    .free = host_free,
    .copy = host_copy,
    .load_module = host_load_module,
    .unload_module = host_unload_module,
    .resolve_kernel = host_resolve_kernel,
    .launch = host_launch_kernel,
    .sync = host_sync,
    .begin_capture = host_begin_capture,
    .end_capture = host_end_capture,
    .replay = host_replay,
    .destroy_graph = host_destroy_graph,
    .destroy = host_destroy,
    .memory_capacity = host_memory_capacity,
    .replay_rows = host_replay_rows,
};

void sj_host_device_config_init(sj_host_device_config *cfg) {
    if (cfg)
        *cfg = (sj_host_device_config){.policy = NULL, .threads = 1, .min_part_work = 0,
                                       .wake_share_work = 0};
}

sj_status sj_host_device_create_config(sj_ctx *ctx, const sj_host_device_config *cfg,
                                       sj_device **out) {
    if (!ctx || !cfg || !out)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *out = NULL;
    if (cfg->threads < 1 || cfg->threads > SJ_HOST_MAX_THREADS)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "host device: threads %d outside 1..%d",
                       cfg->threads, SJ_HOST_MAX_THREADS);
    host_device *h = sj_calloc(ctx, 1, sizeof *h);
    if (!h) return sj_fail(ctx, SJ_E_NOMEM, "host device: out of memory");
    h->ctx = ctx;
    h->min_part_work = cfg->min_part_work ? cfg->min_part_work : DEFAULT_MIN_PART_WORK;
    h->wake_share_work = cfg->wake_share_work;
    h->wake_ns = PRIOR_WAKE_NS;
    LIST_INIT(&h->memory);
    LIST_INIT(&h->modules);
    LIST_INIT(&h->graphs);
    if (!(h->scratch = sj__host_scratch_alloc(ctx, &h->scratch_base))) {
        sj_free(ctx, h);
        return sj_fail(ctx, SJ_E_NOMEM, "host device: out of memory for the kernels' scratch");
    }
    if (cfg->threads > 1) {
        sj_status st = sj__host_pool_create(ctx, cfg->threads, &h->pool);
        if (st != SJ_OK) {
            sj__host_scratch_free(ctx, h->scratch_base);
            sj_free(ctx, h);
            return st;
        }
    }
    SJ_TRY(sj_device_create(ctx, &host_ops, h, cfg->policy, out));
    if (cfg->weight_dir && !((*out)->weight_dir = sj_strdup(ctx, cfg->weight_dir))) {
        sj_device_destroy(*out);
        *out = NULL;
        return sj_fail(ctx, SJ_E_NOMEM, "host device: out of memory");
    }
    return SJ_OK;
}

sj_status sj_host_device_create(sj_ctx *ctx, const sj_mdcache_policy *policy, sj_device **out) {
    sj_host_device_config cfg;
    sj_host_device_config_init(&cfg);
    cfg.policy = policy;
    return sj_host_device_create_config(ctx, &cfg, out);
}
