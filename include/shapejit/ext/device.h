/* shapejit/ext/device.h — the device interface: memory, modules, kernels,
 * launches and graph capture behind one table of function pointers.
 *
 *   sj_device *dev;
 *   if (sj_host_device_create(ctx, NULL, &dev) != SJ_OK) return 1;  // NULL = default cache policy
 *   static const sj_native_kernel table[] = {{"twice", my_twice_kernel, NULL, 0}};
 *   sj_module *m;
 *   sj_device_load_module(dev, SJ_CODE_HOST_NATIVE, table, sizeof table, &m);
 *   sj_kernel_handle k;
 *   sj_kernel_attrs attrs;
 *   sj_module_kernel(m, "twice", &k, &attrs);  // resolve once, keep the handle
 *   ...
 *   sj_module_destroy(m);
 *   sj_device_destroy(dev);
 *
 * A device is one backend (the host, a CUDA GPU) plus what belongs to it and
 * to nothing else: its metadata info cache and its registry of loaded code
 * (each distinct piece of code loaded once; sj_device_code_stats_get). It
 * knows nothing of the layers
 * above it: executables resolve their kernel handles once and keep them, and
 * an op cache (shapejit/ext/op_cache.h) is a client of a device, never owned
 * by one. Memory a device hands out ("device memory") is addressed by
 * `void *` that only the device may dereference, unless the device reports
 * SJ_DEVICE_HOST_VISIBLE (the host device).
 *
 * Ownership and lifetime: sj_device_destroy releases the backend at once:
 * every device allocation, module and graph is freed and later calls through
 * the device (and through executables on it) fail with SJ_E_STATE ("device
 * released"), never crash. The sj_device struct itself lives until the last
 * object that holds it (a module, an executable) is destroyed too.
 *
 * Threads: every call on one device is serialised by the device; launches of
 * different threads on one device queue behind each other.
 *
 * Extension tier (include/shapejit/ext/): for backends, tools and tests
 * that work below sj_engine; it may change between minor versions.
 */
#ifndef SHAPEJIT_DEVICE_H
#define SHAPEJIT_DEVICE_H

#include "shapejit/common.h"
#include "shapejit/ext/metadata_cache.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The kernel ABI of every backend (same type as in the launch plan):
 * `buffers[i]` is the launch's i-th buffer, `info` its metadata words, and
 * kernels touch only the first `active_extent` entries of the symbolic dim.
 * `scratch` is SJ_HOST_SCRATCH_BYTES of working memory, 64-byte aligned,
 * the calling thread's own for the call (the host device makes one per
 * thread it runs kernels on, with the device): a kernel takes large
 * temporaries (the GEMM's packed tiles) from there, not from the stack, so
 * it runs on a caller's thread whatever that thread's stack size. */
typedef void (*sj_host_kernel_fn)(void *const *buffers, const int64_t *info,
                                  int64_t active_extent, void *scratch);

/* The row-range entry of a row-parallel host kernel: the same computation
 * as the kernel's sj_host_kernel_fn at `active_extent`, but only for rows
 * [row_begin, row_end) of the dim the kernel splits (rows of the symbolic
 * dim, 0 <= row_begin < row_end <= active_extent). Each row is computed by
 * the same code whatever the range, so a split run is bit-identical to a
 * whole one. */
typedef void (*sj_host_rows_fn)(void *const *buffers, const int64_t *info, int64_t active_extent,
                                int64_t row_begin, int64_t row_end, void *scratch);

/* The working memory every host kernel call gets (sj_host_kernel_fn). */
#define SJ_HOST_SCRATCH_BYTES ((size_t)512 * 1024)

/* What the bytes handed to sj_device_load_module are. */
typedef enum sj_code_format {
    SJ_CODE_HOST_OBJECT, /* a relocatable object file for the host (ELF), loaded by LLVM ORC */
    SJ_CODE_HOST_NATIVE, /* an array of sj_native_kernel (len = its size in bytes) */
    SJ_CODE_PTX,         /* PTX text */
    SJ_CODE_CUBIN        /* a CUDA binary */
} sj_code_format;

/* One kernel provided as a C function (tests, hand-written kernels).
 * `rows` (optional) makes it row-parallel: the host device may split its
 * rows over its threads, `row_work` (> 0 then) being the work of one row
 * in element operations, which decides whether a launch is worth it. */
typedef struct sj_native_kernel {
    const char *name; /* copied at load */
    sj_host_kernel_fn fn;
    sj_host_rows_fn rows;
    uint64_t row_work;
} sj_native_kernel;

typedef enum sj_copy_kind {
    SJ_COPY_H2D, /* dst device, src host */
    SJ_COPY_D2H, /* dst host, src device */
    SJ_COPY_D2D
} sj_copy_kind;

/* Attributes a kernel's code publishes, returned when the kernel is
 * resolved. 0 = not published. */
typedef struct sj_kernel_attrs {
    uint32_t max_threads; /* most threads per block the kernel supports */
    uint32_t tile_m;      /* output-row tile the kernel computes per block */
    uint32_t tile_n;      /* output-column tile */
    uint32_t tile_k;      /* contraction tile */
    /* Host: the work of one row (element operations at the bucket extent)
     * of a row-parallel kernel, one with a row-range entry (sj_host_rows_fn;
     * in host object code the symbol `K_rows`, its row work the uint64
     * `K_rows_work`); 0 = the kernel runs on one thread. */
    uint64_t row_work;
    /* Host: 0 = the range entry splits the active extent's rows; > 0 = it
     * splits this constant range instead (the columns of a matmul of few
     * rows: symbol `K_rows_extent`), and row_work is then the work of one
     * unit of it per active row. */
    uint64_t split_extent;
    /* Host, rows split (split_extent 0): split points fall on multiples of
     * this many rows (symbol `K_rows_step`); 0 = SJ_HOST_MIN_SPLIT_ROWS,
     * which every row tile and vector width of the emitters divides. 1 where
     * each row is a slice no tile or vector spans (a batch of images). */
    uint64_t split_step;
} sj_kernel_attrs;

/* Launch geometry at the bucket extent (GPU); the host ignores it. */
typedef struct sj_launch_dims {
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t shared_bytes;
} sj_launch_dims;

/* What a device's code registry has done (sj_device_code_stats_get): every
 * device loads the same code piece (format and bytes) once per generation,
 * however many modules (buckets, layers, models) carry it. */
typedef struct sj_device_code_stats {
    uint64_t objects_loaded; /* code pieces loaded, each the first of its bytes */
    uint64_t objects_shared; /* module loads of a piece served by one loaded already */
    int64_t objects_resident; /* pieces some module holds now (this generation's) */
} sj_device_code_stats;

typedef void *sj_kernel_handle; /* owned by its module */
typedef void *sj_graph_handle;  /* a captured launch sequence, owned by the device */

#define SJ_DEVICE_HOST_VISIBLE 1u /* device memory is plain host memory */

/* A backend. `impl` is the backend's own state, passed to every function.
 * All functions are called with the device's lock held, never after
 * `destroy`. Functions that can fail return sj_status and record a message
 * on `ctx` (the one given to sj_device_create). */
typedef struct sj_device_ops {
    const char *name; /* "host", "cuda" */
    unsigned flags;   /* SJ_DEVICE_* */
    sj_status (*alloc)(void *impl, size_t bytes, void **out); /* zero-filled */
    /* Must not free memory a launch already queued still reads (free
     * synchronously or in stream order): the metadata cache may evict an info
     * buffer right after the launch that used it was enqueued. */
    void (*free)(void *impl, void *ptr);
    sj_status (*copy)(void *impl, void *dst, const void *src, size_t bytes, sj_copy_kind kind);
    /* One piece of code: the device wrapper splits a bundle
     * (sj_device_load_module) and loads each distinct piece once. */
    sj_status (*load_module)(void *impl, sj_code_format fmt, const void *code, size_t len,
                             void **out_module);
    void (*unload_module)(void *impl, void *module);
    /* Resolves `name` in `module`; fills every attribute the code publishes
     * (zero for the rest). SJ_E_NOT_FOUND when the module has no such kernel. */
    sj_status (*resolve_kernel)(void *impl, void *module, const char *name,
                                sj_kernel_handle *out, sj_kernel_attrs *attrs);
    /* `buffers`: device memory holding the launch's buffer pointers;
     * `info`: device memory holding its metadata words (NULL when none). */
    sj_status (*launch)(void *impl, sj_kernel_handle k, const sj_launch_dims *dims,
                        void *const *buffers, const int64_t *info, int64_t active_extent);
    sj_status (*sync)(void *impl);
    /* Between begin_capture and end_capture, launches are recorded into a
     * graph instead of running. end_capture always ends the capture; on
     * failure *out is NULL. */
    sj_status (*begin_capture)(void *impl);
    sj_status (*end_capture)(void *impl, sj_graph_handle *out);
    /* Runs a captured graph's launches with `active_extent`. */
    sj_status (*replay)(void *impl, sj_graph_handle g, int64_t active_extent);
    void (*destroy_graph)(void *impl, sj_graph_handle g);
    /* Frees everything the backend still holds (memory, modules, graphs). */
    void (*destroy)(void *impl);
    /* Optional (NULL: kernel time is not measured). Device-side timing of
     * the kernels a run queues: SJ_KERNEL_TIMER_START marks the start of the
     * work queued next, _STOP its end; _READ, after the sync that follows,
     * adds the time between the two marks to *ns. */
    sj_status (*kernel_timer)(void *impl, int what, uint64_t *ns);
    /* Optional (NULL, or 0: unknown). The memory the device has in all, in
     * bytes, so a bucket whose run memory can never fit is refused before
     * anything is allocated. A fixed figure: may be called without the lock. */
    uint64_t (*memory_capacity)(void *impl);
    /* Optional (NULL: the backend never loses its context). Called, with
     * the lock held, after a function returned SJ_E_DEVICE_LOST (a kernel
     * faulted and took the context with it): forget every handle made so
     * far without passing it to the lost context (resetting the context
     * frees them), then make a fresh context for the calls that follow.
     * On failure the device stays lost and the next call tries again. */
    sj_status (*reset)(void *impl);
    /* Optional (NULL: replay runs every launch over all the rows). replay,
     * but each run of two or more launches that compute whole slices of the
     * rows (host row entries split at any row) takes them `rows` at a time,
     * every launch of the run over a sub-batch before the next sub-batch.
     * The caller vouches that such a launch's rows read only the same rows
     * of what earlier launches wrote (a plan's sub_rows: the graph's rows
     * are independent). The results are those of replay. */
    sj_status (*replay_rows)(void *impl, sj_graph_handle g, int64_t active_extent, int64_t rows);
} sj_device_ops;

enum { SJ_KERNEL_TIMER_START, SJ_KERNEL_TIMER_STOP, SJ_KERNEL_TIMER_READ };

typedef struct sj_device sj_device;
typedef struct sj_module sj_module;

/* Wraps a backend. `ops` must outlive the device; `impl` is owned by the
 * device from this call on, also when it fails (ops->destroy is called).
 * `policy`: the metadata info cache's policy (NULL = sj_mdcache_policy_init
 * defaults). */
SJ_API sj_status sj_device_create(sj_ctx *ctx, const sj_device_ops *ops, void *impl,
                                  const sj_mdcache_policy *policy, sj_device **out);
/* The host device: memory from the context allocator (64-byte aligned),
 * modules from host object files (LLVM ORC LLJIT) or native kernel tables,
 * capture = a recorded launch list. One thread: kernels run on the caller. */
SJ_API sj_status sj_host_device_create(sj_ctx *ctx, const sj_mdcache_policy *policy, sj_device **out);

/* Most threads a host device runs a kernel on. */
#define SJ_HOST_MAX_THREADS 256

typedef struct sj_host_device_config {
    const sj_mdcache_policy *policy; /* NULL = defaults */
    /* Threads a row-parallel kernel's rows are split over, the caller's
     * included (1..SJ_HOST_MAX_THREADS; 1 = everything on the caller). The
     * device owns threads - 1 workers, started here and joined when it is
     * released. A launch splits into parts (up to two per thread, claimed
     * by whichever thread is free) of at least SJ_HOST_MIN_SPLIT_ROWS rows
     * (the kernel's split_step where it publishes one) and min_part_work of
     * work; other kernels, and small extents, run on the caller alone. */
    int threads;
    /* The work (element operations) each part must have; 0 = the default,
     * 2^19, which repays handing a part to a thread that is awake. Tests set
     * 1 to split every launch of 2 * SJ_HOST_MIN_SPLIT_ROWS rows or more. */
    uint64_t min_part_work;
    /* Workers sleep between runs, and waking one costs tens to hundreds of
     * microseconds (more on a busy machine); workers still awake take parts
     * of any split launch, sleeping ones are woken only for a launch, or a
     * replayed run's split launches together, whose work per thread repays
     * it. 0 = the default: the device times its launches and wakes when a
     * thread's share takes twice what its wake-ups have cost; otherwise the
     * work (element operations) a thread's share must have. Tests set 1 to
     * wake them for every split. Results never depend on it. */
    uint64_t wake_share_work;
    /* A folder where weights the executables derive at load (a GEMM's
     * packed panels) are kept as files, made there by the first process
     * and mapped by every later one instead of made again; NULL (the
     * default) = made in memory each time. Files are written whole and
     * renamed into place, never rewritten: the folder may be deleted at
     * any time, but a file in it must not be truncated while a process
     * maps it. Results never depend on it. */
    const char *weight_dir;
} sj_host_device_config;

#define SJ_HOST_MIN_SPLIT_ROWS 16

SJ_API void sj_host_device_config_init(sj_host_device_config *cfg); /* threads 1 */
SJ_API sj_status sj_host_device_create_config(sj_ctx *ctx, const sj_host_device_config *cfg,
                                              sj_device **out);
/* Releases the backend (see above) and drops the caller's reference. NULL is
 * a no-op. */
SJ_API void sj_device_destroy(sj_device *dev);

SJ_API sj_ctx *sj_device_ctx(const sj_device *dev);
SJ_API const char *sj_device_name(const sj_device *dev);
SJ_API unsigned sj_device_flags(const sj_device *dev);
/* False once sj_device_destroy was called. */
SJ_API bool sj_device_alive(const sj_device *dev);
/* Device loss. A call that fails with SJ_E_DEVICE_LOST (a kernel fault: the
 * backend's context is gone, with every allocation, module, graph and info
 * buffer made on it) starts a new generation and resets the backend before
 * it returns, so the next call works on a fresh context. Handles made in an
 * older generation are gone: drop them without freeing (a fresh allocation
 * may have the same address). Executables check this themselves (see
 * sj_executable_stale); sj_module_kernel on an older module is SJ_E_STATE.
 * generation: the losses so far; resets: the backend resets that worked. */
SJ_API uint64_t sj_device_generation(const sj_device *dev);
SJ_API uint64_t sj_device_resets(const sj_device *dev);
/* The device's metadata info cache; valid while the device is and until
 * its next reset (NULL after release, or while a reset is failing). The
 * launch path uses it under the device's lock; a caller that uses it
 * directly must not do so while other threads run on the device. */
SJ_API sj_mdcache *sj_device_metadata_cache(sj_device *dev);

/* Checked wrappers of the backend functions; each fails with SJ_E_STATE
 * after release and SJ_E_INVALID_ARG for NULL/malformed arguments. */
SJ_API sj_status sj_device_alloc(sj_device *dev, size_t bytes, void **out);
SJ_API void sj_device_free(sj_device *dev, void *ptr); /* NULL, or after release: no-op */
SJ_API sj_status sj_device_copy(sj_device *dev, void *dst, const void *src, size_t bytes,
                                sj_copy_kind kind);
SJ_API sj_status sj_device_sync(sj_device *dev);
SJ_API sj_status sj_device_launch(sj_device *dev, sj_kernel_handle k, const sj_launch_dims *dims,
                                  void *const *buffers, const int64_t *info, int64_t active_extent);
/* Capture: SJ_E_STATE when one is already recording (begin) or none is
 * (end). Graphs still alive at the device's release are freed with it. */
SJ_API sj_status sj_device_begin_capture(sj_device *dev);
SJ_API sj_status sj_device_end_capture(sj_device *dev, sj_graph_handle *out);
SJ_API sj_status sj_device_replay(sj_device *dev, sj_graph_handle g, int64_t active_extent);
SJ_API void sj_device_destroy_graph(sj_device *dev, sj_graph_handle g); /* NULL: no-op */

/* Timing of executable runs on the device (sj_executable_run and _replay),
 * for reports and benchmarks; off by default, and then nothing is measured.
 * dispatch_ns is the host time spent issuing the kernels (every launch call
 * of an eager run; the one replay call of a replayed run), the cost capture
 * and replay exist to cut. kernel_ns is the device time of those kernels,
 * where the backend measures it (CUDA: events around them); on the host the
 * kernels run inside the dispatch, so dispatch_ns holds them. */
typedef struct sj_device_timing {
    uint64_t runs;        /* runs timed */
    uint64_t dispatch_ns; /* host time issuing their kernels */
    uint64_t kernel_ns;   /* device time of their kernels; 0 when not measured */
    bool kernel_measured; /* the backend measures kernel_ns */
} sj_device_timing;

/* Turns timing on (the counters start from zero) or off. */
SJ_API sj_status sj_device_set_timing(sj_device *dev, bool on);
SJ_API sj_status sj_device_timing_get(sj_device *dev, sj_device_timing *out);

/* Loads code as a module. The module holds a reference on the device; destroy
        * it with sj_module_destroy (NULL is a no-op; after the device's release it
        * only frees host memory). Kernel handles resolved from a module are valid
        * until it is destroyed. Code in an artifact's bundle of one module per
        * kernel (host objects, PTX, cubins) is loaded piece by piece, each piece
        * the device holds already in this generation only counted again, and
        * kernels are resolved from the piece that has them. */
SJ_API sj_status sj_device_load_module(sj_device *dev, sj_code_format fmt, const void *code, size_t len,
                                       sj_module **out);
SJ_API void sj_module_destroy(sj_module *m);
/* The device's code registry so far: every device (host, CUDA, any table)
 * loads each piece of a module (a code bundle's per-kernel objects, PTX or
 * cubins; any other blob whole) once per generation, keyed by its format
 * and BLAKE3, and a module holding the same bytes holds that piece again;
 * the code goes when the last module holding it does, and a device reset
 * drops the registry (the next load loads afresh). */
SJ_API sj_status sj_device_code_stats_get(sj_device *dev, sj_device_code_stats *out);
SJ_API sj_device *sj_module_device(const sj_module *m);
/* Resolves kernel `name` of `m` through the backend (no memo: callers keep
 * the handle, as executables do); attrs may be NULL. SJ_E_NOT_FOUND when the
 * module has no such kernel, SJ_E_STATE after the device's release. */
SJ_API sj_status sj_module_kernel(sj_module *m, const char *name, sj_kernel_handle *out,
                                  sj_kernel_attrs *attrs);

#ifdef __cplusplus
}
#endif
#endif
