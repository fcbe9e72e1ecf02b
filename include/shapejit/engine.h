/* shapejit/engine.h — one object for the common job: a model, its ladder,
 * a store, a backend and the bucketed cache, behind open / run / close.
 *
 *   sj_engine_config cfg;
 *   sj_engine_config_init(&cfg);                  // host backend, pow2:1:65536, no store
 *   cfg.store_path = "/srv/shapejit/store.db";    // NULL: nothing persists
 *   sj_precision_from_name("bf16", &cfg.precision);   // SJ_PRECISION_FP32 by default
 *   sj_engine *e;
 *   if (sj_engine_open(ctx, "model.onnx", &cfg, &e) != SJ_OK)
 *       fprintf(stderr, "%s\n", sj_ctx_last_error(ctx));   // names the component and value
 *   sj_named_tensor in[] = {{"x", x}};            // x: an sj_tensor of [37, 64] floats
 *   sj_named_tensor out[1];                       // sj_engine_num_outputs(e) entries
 *   sj_engine_run(e, in, 1, out, 1, NULL);        // N = 37 from the inputs' shapes
 *   ...                                           // out[0].name, out[0].tensor: [37, ...]
 *   sj_tensor_free(ctx, &out[0].tensor);
 *   sj_engine_close(e);                           // one teardown for everything it opened
 *
 * The engine owns everything it opens (graph, ladder, store, remote tier,
 * compiler, devices, cache) and closes it in the right order; a failed open
 * leaves nothing open. The compile options travel inside the engine's
 * compiler, so there is no separate cache configuration to forget.
 *
 * The library reads no environment: the caller maps $SHAPEJIT_STORE and
 * friends into the config (sj_engine_default_store_path applies the
 * documented rule to values the caller passes in).
 *
 * Threads: sj_engine_run, sj_engine_precompile and the inspection calls may
 * be called from any number of threads at once; sj_engine_close only once
 * no other call is in flight.
 */
#ifndef SHAPEJIT_ENGINE_H
#define SHAPEJIT_ENGINE_H

#include "shapejit/common.h"
#include "shapejit/graph.h"
#include "shapejit/ladder.h"
#include "shapejit/model.h"
#include "shapejit/precision.h"
#include "shapejit/remote.h"
#include "shapejit/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ladder an engine uses when its config names none: one bucket per
 * power of two up to the largest extent. The CLI's and Python's defaults
 * are this one. */
#define SJ_ENGINE_DEFAULT_LADDER "pow2:1:65536"

typedef struct sj_engine_config {
    /* Set by sj_engine_config_init to the size of this struct the caller is built with;
     * leave it (see "Config structs" in shapejit/common.h). */
    size_t size;
    /* Buckets, as a ladder spec ("pow2:1:65536", "geo:1:1000:1.25",
     * "list:16,48,128"); NULL = SJ_ENGINE_DEFAULT_LADDER. */
    const char *ladder;
    /* The store file; NULL = none (nothing persists). */
    const char *store_path;
    /* "host" (NULL, default), "interp" (the reference interpreter) or "cuda". */
    const char *backend;
    /* cuda: "llvm" (NULL: the LLVM NVPTX path) or "nvrtc"; arch "sm_80" or
     * "sm_90" (NULL). */
    const char *gpu_emit;
    const char *arch;
    /* host: the CPU to compile for, NULL = this machine's. */
    const char *cpu;
    /* Concurrent runs of different buckets: devices the executables are
     * spread over (host); 0 = 1. */
    int workers;
    /* Kernel threads per run (host; 1..256, 0 = 1): each worker's device
     * splits the rows of row-parallel kernels (elementwise, matmul, softmax,
     * layernorm and attention over the symbolic dim's rows) over this many
     * threads, the calling one included; other kernels, and extents too
     * small to repay it, run on the caller. Results are bit-identical to
     * one thread. workers * threads threads may run at once. */
    int threads;
    /* Fleet tier: redis://[:PASSWORD@]HOST[:PORT][/DB], NULL = none; the MAC
     * secret (NULL = checksum-only frames); read_only fetches, never publishes. */
    const char *remote_url;
    const void *remote_secret;
    size_t remote_secret_len;
    bool remote_read_only;
    /* The fleet's compile lease per key (sj_remote_config.lease_ms): set to
     * SJ_REMOTE_DEFAULT_LEASE_MS by sj_engine_config_init; 0 = no leases. */
    int remote_lease_ms;
    /* Told once when the fleet tier finds values another secret signed (see
     * sj_remote_config.on_warning); NULL = not told. */
    void (*on_warning)(void *user, const char *message);
    void *warning_user;
    /* How the model file is read: the dynamic dim, fixed dims (see model.h).
     * Embedded by value, so the layout of sj_model_options is frozen (a
     * field added inside it would move every field below): a later loading
     * option is appended to this struct instead. */
    sj_model_options model;
    /* A size outside every bucket compiles a one-off at its exact extent
     * instead of failing with SJ_E_OUT_OF_RANGE. */
    bool one_off_out_of_range;
    /* Precompile for other machines: the compiler loads nothing, so a cuda
     * engine needs no GPU; sj_engine_run is then SJ_E_STATE. */
    bool store_only;
    /* A store file that cannot be used (not a database, read-only, no
     * directory) is replaced by an in-memory store instead of failing the
     * open; sj_engine_warning says why. For a default path the user never
     * named; a path they named should fail loudly (false, the default). */
    bool store_fallback_to_memory;
    /* Buckets holding run memory (arena, padded inputs and outputs) at
     * most; the least recently run is trimmed for another (its code and the
     * shared weights stay loaded). 0 = no bound; negative is refused. */
    int max_resident_buckets;
    /* The precision policy (shapejit/precision.h): SJ_PRECISION_FP32 (the
     * default), _BF16 or _FP16 (sj_precision_from_name converts "fp32",
     * "bf16", "fp16"); part of every bucket's store key. A backend that
     * cannot lower it fails naming the op and the policy; a value outside
     * the enum is SJ_E_INVALID_ARG. */
    sj_precision precision;
    /* host, cpu native: a bucket served from a stored CPU level (portable
     * code a build machine stored, not code for this CPU) is recompiled for
     * this CPU by one background thread once it has served this many runs,
     * stored (and published) like any compile, and swapped in for the next
     * run; runs in flight finish on the level's code. A failed recompile is
     * counted (sj_engine_stats) and the level keeps serving; no request
     * fails or waits for it. 0 = never (default); negative is refused. */
    int native_after;
    /* Host: time the schedules that differ for each bucket compiled (the
     * attention ones; the matmul ones in buckets of up to 8 rows:
     * shapejit/ext/compile.h) and keep the fastest, within tune_budget_ms per bucket
     * (1..600000; sj_engine_config_init sets 200). Tuned code is stored
     * under keys of its own with its timings, so a process that tunes
     * loads what a tuned precompile stored and tunes nothing. */
    bool tune;
    int tune_budget_ms;
    /* cuda: the driver library to open; NULL = "libcuda.so.1" (tests give
     * a fake driver's path). */
    const char *cuda_driver;
    /* Host, with a store file: weights derived at load (a GEMM's packed
     * panels, about as large as the weights) are kept as files in the
     * folder STORE_PATH-weights, written once by the first process that
     * makes them (a precompile, or the first run) and mapped by every later
     * process instead of made again; they are the page cache's pages,
     * shared by every process on the machine. The folder may be deleted at
     * any time (the next process makes them again); a file in it must not
     * be truncated while a process maps it. false = every process makes
     * them in memory. sj_engine_config_init sets true. */
    bool weight_files;
    /* Host: tiered compilation. A bucket that no store tier holds (memory,
     * the store, the fleet tier, a stored CPU level) is first compiled at
     * a low opt level (SJ_ENGINE_TIER_OPT_LEVEL) and serves at once; that
     * code is never stored or published. One background thread (the one
     * native_after uses) compiles the bucket as configured, stores and
     * publishes it, and swaps it in for the next run: runs in flight
     * finish on the quick code, no request waits for it. A failed full
     * compile is counted (sj_engine_stats.tier_up_failures) and the quick
     * code keeps serving. sj_engine_precompile, sj_engine_prepare_bucket
     * and one-offs compile the full code directly. Default false: it
     * halves a CNN's cold first result at small sizes (MobileNetV3 at 8:
     * 1.4 -> 0.7 s), costs at large ones (ResNet-18 at 8: 2.1 -> 3.7 s,
     * the -O0 request outlasting the compile it saves) and does nothing
     * for a transformer (BERT-base: weight packing dominates); the
     * figures are in docs/cli.md (--tiered). */
    bool tiered;
} sj_engine_config;

/* The opt level (sj_compile_options.opt_level) of a tiered engine's quick
 * code (host). 0: on a Zen 4 it compiles 5-7x faster than O3, where O1 and
 * O2 save nothing (without the vectorisers O1 even compiles slower), and
 * code whose time is in the C GEMM kernels (a transformer) runs nearly as
 * fast; code whose time is in generated loops (a CNN's gathers) runs
 * several times slower (docs/cli.md, --tiered). */
#define SJ_ENGINE_TIER_OPT_LEVEL 0

SJ_API void sj_engine_config_init(sj_engine_config *cfg);

/* The documented default store path, from the values of $SHAPEJIT_STORE,
 * $XDG_CACHE_HOME and $HOME the caller passes (each may be NULL or ""):
 * SHAPEJIT_STORE, else XDG_CACHE_HOME/shapejit/store.db, else
 * HOME/.cache/shapejit/store.db. SJ_E_NOT_FOUND when none is set,
 * SJ_E_INVALID_ARG when the result does not fit cap. */
SJ_API sj_status sj_engine_default_store_path(const char *shapejit_store, const char *xdg_cache_home,
                                              const char *home, char *out, size_t cap);

/* Bounds the packed weights engines keep beside the store at store_path
 * (STORE_PATH-weights, sj_engine_config.weight_files) to max_bytes (>= 0),
 * removing the least recently used files first (a process that maps or
 * writes one marks it used), and temporaries a crashed writer left over an
 * hour ago. A process mapping a removed file keeps its pages; the next one
 * packs the weight again. No folder: SJ_OK, nothing removed. Counts (may be
 * NULL) what was removed. SJ_E_INVALID_ARG for a negative bound or no path;
 * SJ_E_IO naming what could not be read or removed. */
SJ_API sj_status sj_engine_prune_weight_files(sj_ctx *ctx, const char *store_path, int64_t max_bytes,
                                              int64_t *files_removed, int64_t *bytes_removed);

typedef struct sj_engine sj_engine;

/* Loads the model file (.sjg, .onnx) and opens everything cfg names (cfg
 * NULL = defaults). Nothing is compiled yet. */
SJ_API sj_status sj_engine_open(sj_ctx *ctx, const char *model_path, const sj_engine_config *cfg,
                                sj_engine **out);
/* As sj_engine_open for a graph already built; the engine takes ownership
 * of g (also when it fails). */
SJ_API sj_status sj_engine_open_graph(sj_ctx *ctx, sj_graph *g, const sj_engine_config *cfg,
                                      sj_engine **out);
SJ_API void sj_engine_close(sj_engine *e); /* NULL is a no-op */

/* A tensor with the name of the model input or output it is. */
typedef struct sj_named_tensor {
           const char *name;
    sj_tensor tensor;
} sj_named_tensor;

/* Whether a run found its bucket ready or waited for it (a stall). */
typedef enum sj_run_wait {
    SJ_RUN_READY = 0, /* the executable was in memory */
    SJ_RUN_LOADED,    /* waited while it was loaded from the store or remote tier */
    SJ_RUN_COMPILED   /* waited while it was compiled in this process */
} sj_run_wait;

/* What one run did (optional). */
typedef struct sj_run_info {
    int64_t rows;   /* the request's size along the dynamic dim */
    int64_t bucket; /* the extent of the bucket it ran in */
    sj_run_wait wait;
} sj_run_info;

/* Runs one request. inputs: every model input once, in any order, by name,
 * each of the input's dtype and shape with the dynamic dim at the request's
 * size N (the same N for all). outputs: n_outputs >= sj_engine_num_outputs
 * entries, filled in the model's output order with names (borrowed from the
 * engine) and tensors allocated on the context (the caller frees each with
 * sj_tensor_free) at size N. info may be NULL. Errors: SJ_E_SHAPE or
 * SJ_E_INVALID_ARG naming the input and what differs; SJ_E_OUT_OF_RANGE
 * when N is outside every bucket. Nothing is allocated on failure. */
SJ_API sj_status sj_engine_run(sj_engine *e, const sj_named_tensor *inputs, int n_inputs,
                               sj_named_tensor *outputs, int n_outputs, sj_run_info *info);

/* The checks sj_engine_run makes before it runs anything (every input once
 * by name, dtype, shape, N the same for all and within the ladder unless
 * one_off_out_of_range), with no run: a caller that must copy or convert
 * its inputs first (a strided array made contiguous) checks them here
 * before paying for the copy. A tensor's bytes may be NULL here. rows (may
 * be NULL) is the request's N. Errors as sj_engine_run's; a failed check
 * is the caller's run failing, so it counts in run_failures. */
SJ_API sj_status sj_engine_check_inputs(sj_engine *e, const sj_named_tensor *inputs, int n_inputs,
                                        int64_t *rows);

/* Makes every bucket ready (compiled, or loaded from the store) with `jobs`
 * threads (0 = the CPU count); progress may be NULL. A store_only engine
 * fills the store and loads nothing. */
typedef void (*sj_engine_progress_fn)(void *user, int done, int total, int64_t extent);
SJ_API sj_status sj_engine_precompile(sj_engine *e, int jobs, sj_engine_progress_fn progress, void *user);

/* The context the engine was opened on: its errors are this context's
 * (sj_ctx_last_error), its outputs are allocated on it. NULL for NULL. */
SJ_API sj_ctx *sj_engine_ctx(const sj_engine *e);

/* The model as loaded, borrowed from the engine. */
SJ_API const sj_graph *sj_engine_graph(const sj_engine *e);
SJ_API int sj_engine_num_inputs(const sj_engine *e);
SJ_API int sj_engine_num_outputs(const sj_engine *e);
/* Input or output i: name, dtype, shape with SJ_DIM_SYM for the dynamic dim. */
SJ_API sj_status sj_engine_input(const sj_engine *e, int i, sj_value_desc *out);
SJ_API sj_status sj_engine_output(const sj_engine *e, int i, sj_value_desc *out);

/* Buckets: bucket i holds sizes [lo, hi], compiled at hi; ready when its
 * executable is in memory. */
SJ_API int sj_engine_num_buckets(const sj_engine *e);
SJ_API sj_status sj_engine_bucket(const sj_engine *e, int i, int64_t *lo, int64_t *hi, bool *ready);

/* Zero-stall serving. sj_engine_prepare_bucket makes bucket i ready
 * (compiled, or loaded from the store): a server calls it from a
 * background thread. sj_engine_run_ready is sj_engine_run that, with
 * promote, runs a request whose own bucket is not ready in the smallest
 * ready larger bucket at once (exact, as kernels run at the active extent)
 * instead of waiting for the compile; without a ready larger bucket it
 * waits as sj_engine_run does. The report (may be NULL) says which. */
typedef struct sj_engine_run_report {
    sj_run_info info; /* rows, the extent it ran in, and whether it waited */
    int own_bucket;   /* index of the bucket that holds the rows; -1 for a one-off */
    bool promoted;    /* ran in a larger ready bucket; its own was not ready */
} sj_engine_run_report;
SJ_API sj_status sj_engine_prepare_bucket(sj_engine *e, int i);
SJ_API sj_status sj_engine_run_ready(sj_engine *e, const sj_named_tensor *inputs, int n_inputs,
                              sj_named_tensor *outputs, int n_outputs, bool promote,
                              sj_engine_run_report *report);

/* What bucket i needs to serve: run memory (arena, padded inputs and
 * outputs, slot tables), held from its first run until it is trimmed, and
 * the weights it shares with every other bucket (one copy). Read from the
 * loaded executable, or for a bucket not loaded from the artifact
 * sj_engine_precompile handled; known is false when neither has been seen
 * (or the backend does not say, as the interpreter). */
typedef struct sj_engine_memory {
    uint64_t run_bytes, arena_bytes, io_bytes, weight_bytes;
    bool known, loaded, resident;
    /* Of weight_bytes, those read in place from the model's external-data
     * file (mapped read-only, not allocated). */
    uint64_t weight_mapped_bytes;
    /* Of weight_bytes, weights packed once into the GEMM's panels. */
    uint64_t weight_packed_bytes;
} sj_engine_memory;
SJ_API sj_status sj_engine_bucket_memory(const sj_engine *e, int i, sj_engine_memory *out);

/* Where bucket i stands with native_after: never asked (not serving a
 * stored CPU level), queued or compiling, swapped to code for this CPU, or
 * the recompile failed (the level keeps serving). */
typedef enum sj_engine_native_state {
    SJ_ENGINE_NATIVE_NONE = 0,
    SJ_ENGINE_NATIVE_PENDING,
    SJ_ENGINE_NATIVE_DONE,
    SJ_ENGINE_NATIVE_FAILED
} sj_engine_native_state;

/* Where bucket i stands with tiered compilation (sj_engine_config.tiered). */
typedef enum sj_engine_tier_state {
    SJ_ENGINE_TIER_NONE = 0,
    SJ_ENGINE_TIER_PENDING,
    SJ_ENGINE_TIER_DONE,
    SJ_ENGINE_TIER_FAILED
} sj_engine_tier_state;

/* Everything the engine knows of bucket i, in one call, for a caller that
 * reports on its buckets or fits a ladder (serving policy above the engine
 * needs nothing below it):
 *
 *   for (int i = 0; i < sj_engine_num_buckets(e); i++) {
 *       sj_engine_bucket_stats b;
 *       if (sj_engine_bucket_stats_get(e, i, &b) == SJ_OK && b.ready)
 *           printf("[%lld, %lld] %s: %llu runs, %llu rows padded\n", (long long)b.lo,
 *                  (long long)b.hi, b.cpu, (unsigned long long)b.runs,
 *                  (unsigned long long)b.padded_rows_allocated);
 *   }
 *
 * Padding comes in two figures that are not the same thing: rows ALLOCATED
 * (each run's buffers hold the bucket's extent: runs x hi - rows) and rows
 * COMPUTED (what the kernels ran over beyond the rows asked for, as the
 * backend reports it; kernels bounded by the active extent keep it 0). */
typedef struct sj_engine_bucket_stats {
    int64_t lo, hi; /* the sizes it holds; compiled at hi */
    bool ready;     /* its executable is in memory */
    /* The CPU its code was built for (the compiler's own, or the stored
     * level it was loaded from; "" for a backend without one); NULL while
     * not ready. Borrowed from the engine. */
    const char *cpu;
    sj_engine_native_state native;
    uint64_t runs;                  /* runs it served (a batch is one run) */
    uint64_t rows;                  /* the rows those runs asked for */
    uint64_t padded_rows_allocated; /* runs x hi - rows */
    int64_t padded_rows_computed;   /* -1 when the backend does not report its work */
    sj_engine_memory memory;        /* as sj_engine_bucket_memory */
    /* Tiered compilation: never served quick code (NONE), serving it while
     * its full code compiles (PENDING), swapped to the full code (DONE),
     * or the full compile failed and the quick code serves (FAILED). */
    sj_engine_tier_state tier;
} sj_engine_bucket_stats;
/* SJ_E_OUT_OF_RANGE for i outside 0..sj_engine_num_buckets - 1. */
SJ_API sj_status sj_engine_bucket_stats_get(const sj_engine *e, int i, sj_engine_bucket_stats *out);

typedef struct sj_engine_stats {
    uint64_t runs, run_failures;
    uint64_t memory_hits, store_hits, remote_hits, compiles, corrupt, store_errors, one_offs;
    double compile_ms;
    int buckets, buckets_ready;
    uint64_t evictions; /* rows the store evicted to stay under its size bound */
    uint64_t not_stored;        /* buckets compiled whose artifact the store refused to keep */
    uint64_t one_off_evictions; /* one-offs dropped for newer ones */
    uint64_t resident_evictions; /* buckets trimmed under max_resident_buckets */
    int buckets_resident;        /* buckets holding run memory now */
    uint64_t weight_bytes;       /* the loaded buckets' weights, counted once: they share them */
    uint64_t run_bytes;          /* run memory the resident buckets hold */
    uint64_t specialised;         /* level buckets swapped to code for this CPU (native_after) */
    uint64_t specialise_failures; /* such recompiles that failed */
    uint64_t weight_mapped_bytes; /* of weight_bytes, mapped from the model's files, not allocated */
    /* Of weight_bytes, weights packed once into the host GEMM's panels. A
     * bucket whose GEMMs read a weight packed holds the packed copy instead
     * of the weight; buckets of few rows read the weight itself, so with
     * both kinds loaded both are held. */
    uint64_t weight_packed_bytes;
    /* A kernel that fails on the GPU loses the device's context with
     * everything on it: the run fails with SJ_E_DEVICE_LOST naming the
     * kernel, the device resets, and every bucket loads again from its
     * artifact at its next run (no compile). */
    uint64_t device_lost;   /* runs that failed so */
    uint64_t device_resets; /* context resets that followed */
    uint64_t reloads;       /* buckets loaded again after a reset */
    /* Distinct kernels and the launches they serve, and ms per compile
     * stage, over this engine's compiles and loads
     * (shapejit/ext/bucketed_cache.h, sj_compile_stages). */
    uint64_t kernels, launches;
    double lower_ms, emit_ms, optimise_ms, codegen_ms, load_ms;
    /* The model's content hash at open: its ms, and whether the weights'
     * digests came from the store (its files unchanged since a process
     * hashed them) instead of from reading every weight byte. */
    double hash_ms;
    bool digests_from_store;
    /* Of this engine's compiles, kernel objects compiled, and those taken
     * from the store instead: compiled before, for another bucket or
     * another model, for this target and these options. */
    uint64_t objects_compiled, objects_found;
    /* The store's stored (compressed) bytes now, each shared part and base
     * counted once (sj_store_stats.stored_bytes), and their growth since
     * the engine opened it (negative when rows were evicted or removed);
     * 0 without a store. */
    int64_t store_bytes, store_bytes_added;
    /* Tiered compilation: buckets first served quick code, those swapped
     * to their full code since, and full compiles that failed (the quick
     * code kept serving). */
    uint64_t quick_compiles, tier_ups, tier_up_failures;
} sj_engine_stats;
SJ_API void sj_engine_stats_get(const sj_engine *e, sj_engine_stats *out);

/* What the engine compiles for, as messages name it: "host", "interp",
 * "nvptx sm_90", "nvrtc sm_80". */
SJ_API const char *sj_engine_target(const sj_engine *e);
/* The buckets (borrowed): padding figures, the spec with sj_ladder_format. */
SJ_API const sj_ladder *sj_engine_ladder(const sj_engine *e);
/* The fleet tier (borrowed; NULL without one): its counters, its URL, and
 * sj_remote_flush to publish what is queued before a deploy step ends. */
SJ_API sj_remote *sj_engine_remote(sj_engine *e);
/* Why the store fell back to memory (store_fallback_to_memory); "" when it
 * did not. */
SJ_API const char *sj_engine_warning(const sj_engine *e);

#ifdef __cplusplus
}
#endif
#endif
