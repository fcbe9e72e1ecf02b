/* shapejit/ext/bucketed_cache.h — compile once per bucket, run any size.
 *
 *   sj_ladder *l;  sj_ladder_pow2(ctx, 8, 256, &l);       // [1,8] [9,16] ... [129,256]
 *   sj_compiler comp = my_host_compiler(...);             // options, compile / load / run / destroy
 *   sj_bucketed_cache *c;
 *   if (sj_bucketed_cache_create(g, l, &comp, store, NULL, &c) != SJ_OK) ...;
 *   int64_t extent; void *exe;
 *   sj_bucketed_cache_get_or_compile(c, 17, &extent, &exe);   // extent 32, compiled once
 *   sj_cache_input in[] = {{"x", xdata, 64, true}};       // 17 rows of 64
 *   sj_tensor out[1];
 *   sj_bucketed_cache_run_padded(c, 17, 17, in, 1, NULL, 0, out, 1, &extent);
 *   sj_tensor_free(ctx, &out[0]);                         // [17, ...]: rows past 17 never leak
 *   sj_bucketed_cache_destroy(c);
 *
 * The cache is a (graph, ladder, compiler) tuple; the compiler carries its
 * own compile options, so another set of options is another compiler and
 * another cache, possibly over the same store. For a key, it
 * finds the bucket (binary search over the ladder), and returns the bucket's
 * executable: from memory (an acquire load, no lock, no allocation), else
 * from the store (get, then load), else compiled (compile, put, load).
 *
 * Threads: any number may call every function at once. Callers of one
 * bucket wait for a single compile of it; different buckets compile in
 * parallel; the hit path never takes a lock a compile holds. A failed
 * compile is reported to the callers that waited for it; the next call
 * tries again. An executable from get_or_compile is used by one thread at a
 * time (the compiler's contract); run_padded serialises runs per bucket.
 *
 * Ownership: the cache borrows the graph, the ladder, the store (may be
 * NULL: nothing persists) and the compiler's ctx; they must outlive it. It
 * owns the executables (destroyed with the cache) and a copy of the
 * compiler's options.
 *
 * Extension tier (include/shapejit/ext/): for backends, tools and tests
 * that work below sj_engine; it may change between minor versions.
 */
#ifndef SHAPEJIT_BUCKETED_CACHE_H
#define SHAPEJIT_BUCKETED_CACHE_H

#include "shapejit/engine.h"
#include "shapejit/ext/runtime.h"
#include "shapejit/ladder.h"
#include "shapejit/precision.h"
#include "shapejit/remote.h"
#include "shapejit/store.h"
#include "shapejit/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Another target whose stored artifacts a compiler's load accepts (a
 * portable x86-64 level a build machine stored, for a host that can run
 * it): its key fields, as sj_compiler's own. */
typedef struct sj_compiler_target {
    const char *cpu, *features;
    const void *options;
    size_t options_len;
} sj_compiler_target;

/* Where a compiler's time went, summed over its compiles and loads so far
 * (sj_compiler.stages). kernels are the distinct kernels its modules held,
 * launches the launches they serve: launches - kernels were served by a
 * kernel another launch of the same module already had (repeated layers
 * share code), so never compiled again. The stages, in ms: lower (graph to
 * kernels), emit (kernels to LLVM IR), optimise (the LLVM pipeline),
 * codegen (machine code), load (an artifact's bytes to an executable);
 * where a compile runs its kernels on several threads (the host's
 * sj_compile_options.threads), emit, optimise and codegen sum the threads'
 * times. A compiler fills what it measures, 0 for the rest. */
typedef struct sj_compile_stages {
    uint64_t kernels, launches;
    double lower_ms, emit_ms, optimise_ms, codegen_ms, load_ms;
    /* Kernel objects compiled, and taken from the store instead
     * (compile_from): a kernel another bucket or model compiled before. */
    uint64_t objects_compiled, objects_found;
} sj_compile_stages;

/* How a graph becomes something runnable: policy the cache does not know.
 * The target and toolchain strings and the options are part of the store
 * key. */
typedef struct sj_compiler {
    void *ctx;
    const char *target_triple, *target_cpu, *target_features; /* see sj_store_key */
    uint32_t artifact_version;
    const char *compiler_version;
    /* The canonical form of the options compile uses (opaque bytes, hashed
     * into the key; borrowed like the strings). They are the compiler's own,
     * so a cache can never key code by options it was not compiled with. */
    const void *options;
    size_t options_len;
    /* Targets the cache asks the store tiers for, best first, when they hold
     * nothing for the compiler's own target, before it compiles (borrowed;
     * NULL when n_fallbacks is 0). A compile is always for the own target. */
    const sj_compiler_target *fallbacks;
    int n_fallbacks;
    /* Compiles g at `extent` into artifact bytes allocated with sj_alloc on
     * the graph's context (the cache frees them). */
    sj_status (*compile)(void *ctx, const sj_graph *g, int64_t extent, void **artifact,
                         size_t *artifact_len);
    /* Makes an executable of artifact bytes compiled (now or in another
     * process) for g at extent; uploads params. Bytes it cannot use
     * (malformed, other target) are an error, and the cache recompiles. */
    sj_status (*load)(void *ctx, const sj_graph *g, int64_t extent, const void *artifact,
                      size_t artifact_len, void **exe);
    /* As sj_executable_run: inputs at the active extent (1..extent), in the
     * graph's input order; outputs with data NULL are allocated (caller
     * frees), sliced to the active extent. */
    sj_status (*run)(void *ctx, void *exe, int64_t active_extent, const sj_tensor *inputs,
                     sj_tensor *outputs);
    void (*destroy)(void *ctx, void *exe);
    /* Optional (NULL: the executable holds no run memory to give back).
     * trim: give back exe's run memory, keeping what load made (code,
     * weights); the next run makes it again. memory: what exe holds. */
    void (*trim)(void *ctx, void *exe);
    void (*memory)(void *ctx, void *exe, sj_executable_memory_info *out);
    /* Optional (NULL: no figure before a load). What an executable of these
     * artifact bytes would hold (resident false), read without loading, so
     * a precompile that only stores can say what each bucket will cost. */
    sj_status (*estimate)(void *ctx, const sj_graph *g, const void *artifact, size_t artifact_len,
                          sj_executable_memory_info *out);
    /* Optional (NULL: executables never go stale; a GPU's do). stale: exe's
     * device lost the context exe was loaded in (a kernel fault, see
     * sj_executable_stale). The cache then keeps each bucket's artifact
     * bytes (code and plan; weights come from the graph) and, before a
     * bucket's next run, loads it again from them: no store trip, no
     * compile. run_stepwise: as run, waiting for each launch (see
     * sj_executable_run_stepwise); the cache reruns a request that lost the
     * device that way once, on the reloaded bucket, so its error names the
     * kernel that faulted. */
    bool (*stale)(void *ctx, void *exe);
    sj_status (*run_stepwise)(void *ctx, void *exe, int64_t active_extent, const sj_tensor *inputs,
                              sj_tensor *outputs);
    /* Optional (NULL: no figures; zeros reported). stages: the compiler's
     * totals so far (sj_compile_stages); callable from any thread. */
    void (*stages)(void *ctx, sj_compile_stages *out);
    /* Optional (NULL: the store keeps the bytes whole). parts: the ranges
     * of artifact bytes that are compiled code, keyed by their content
     * (sj_store_part; *parts sj_alloc'ed on the graph's context), which the
     * local store keeps once for every artifact holding the same code. */
    sj_status (*parts)(void *ctx, const sj_graph *g, const void *artifact, size_t artifact_len,
                       sj_store_part **parts, int *n_parts);
    /* Optional (NULL: no names). part_names: for each part parts() gives,
     * in its order, a name of what decided its bytes (a kernel's module as
     * emitted, the target and options), which the local store keeps
     * beside the part (sj_store_name_parts); *names sj_alloc'ed; *n 0 when
     * the code cannot be named so. compile_from (NULL: compile is used): as
     * compile, but a part find(user, name) gives (sj_store_get_named_part)
     * is taken instead of compiled, so a kernel another model, bucket or
     * earlier compile made alike for this target and options is not
     * compiled again; find NULL is compile. */
    sj_status (*part_names)(void *ctx, const sj_graph *g, const void *artifact, size_t artifact_len,
                            uint8_t (**names)[32], int *n);
    sj_status (*compile_from)(void *ctx, const sj_graph *g, int64_t extent,
                              sj_status (*find)(void *user, const uint8_t name[32], void **bytes,
                                                size_t *len),
                              void *user, void **artifact, size_t *artifact_len);
} sj_compiler;

/* The reference interpreter as a compiler (backend "interp"): its artifact
 * names the graph (hash) and extent it was made for, which load checks;
 * its executable runs sj_interp_run at the active extent, so it is the
 * oracle the other backends are compared with through the same cache. */
SJ_API void sj_interp_compiler(sj_compiler *out);
/* The interpreter under a precision policy (shapejit/precision.h): its
 * executables run sj_graph_apply_precision's graph (one rounded copy of
 * the narrowed weights per executable), the reference for a backend that
 * compiles with that policy; the policy is part of its options, so of the
 * key. SJ_E_INVALID_ARG for a value outside the enum. */
SJ_API sj_status sj_interp_compiler_precision(sj_precision p, sj_compiler *out);

typedef struct sj_bucketed_cache_config {
    /* A key outside every bucket compiles a one-off executable at exactly
     * that extent (kept, and stored, for later calls) instead of failing
     * with SJ_E_OUT_OF_RANGE. */
    bool one_off_out_of_range;
    /* One-off executables kept in memory at most; the least recently used
     * is evicted (and counted) for a new one, so clients sending distinct
     * out-of-range sizes cannot grow memory without bound. 0 = 16. */
    int one_off_capacity;
    /* The fleet tier under the store (NULL: none), borrowed like the store
     * and on the graph's context: a store miss asks it, a fresh compile is
     * published to it without waiting (see sj_tiered_get / sj_tiered_put,
     * shapejit/ext/remote_tier.h). */
    sj_remote *remote;
    /* Buckets holding run memory (arena, padded inputs and outputs) at
     * most: a run of another bucket first trims the least recently run one
     * (compiler's trim), whose executable and weights stay loaded. 0 = no
     * bound; negative is refused. */
    int max_resident_buckets;
    /* A bucket whose executable came from a fallback target (a portable
     * CPU level a build machine stored) is made for the compiler's own
     * target by one background thread once it has served this many runs:
     * taken from the store tiers when they hold it, else compiled and
     * stored (and published) as any compile, then swapped in for the next
     * run; a run in flight finishes on the level's code, which is freed
     * after it. At most one such compile at a time; a failure is counted
     * (sj_bucketed_cache_specialise_error says why) and the bucket keeps
     * serving the level. 0 = never; negative is refused. Only runs through
     * the cache (run_padded, sj_engine_run) count and see the swap: an
     * executable pointer get_or_compile handed out is freed by it. */
    int native_after;
    /* Tiered compilation (NULL: off). A bucket a run (run_padded,
     * sj_engine_run) finds in no store tier (memory, the store, the remote
     * tier, the fallback targets) is first compiled by `quick` (the same
     * compiler at cheaper options: the host's at a lower opt level) and
     * loaded with the cache's own compiler, serving at once; those bytes
     * are never stored or published, so no process ever loads them as the
     * bucket's code. The bucket is queued at once to the background thread
     * native_after uses, which makes it with the cache's own compiler (from
     * the store tiers when another process put it there meanwhile, else a
     * compile that is stored and published) and swaps it in the same way:
     * the run in flight finishes on the quick code, no request waits. A
     * failed full compile is counted (tier_up_failures) and the quick code
     * keeps serving. Only quick's compile is used: its artifacts must be
     * bytes the cache's compiler loads. get_or_compile, precompile and
     * one-offs make the full code directly. The table is copied; its ctx
     * and options are borrowed and must outlive the cache. */
    const sj_compiler *quick;
} sj_bucketed_cache_config;

SJ_API void sj_bucketed_cache_config_init(sj_bucketed_cache_config *cfg);

typedef struct sj_bucketed_cache sj_bucketed_cache;

/* cfg may be NULL for defaults. The compiler needs compile, load, run and
 * destroy. */
SJ_API sj_status sj_bucketed_cache_create(const sj_graph *g, const sj_ladder *ladder, const sj_compiler *comp,
                                          sj_store *store, const sj_bucketed_cache_config *cfg,
                                          sj_bucketed_cache **out);
SJ_API void sj_bucketed_cache_destroy(sj_bucketed_cache *c);

/* The store key a cache over (g, comp) uses for `extent`: what `shapejit
 * store explain` compares stored rows with. Strings borrowed from comp. */
SJ_API void sj_bucketed_cache_key(const sj_graph *g, const sj_compiler *comp, int64_t extent,
                                  sj_store_key *out);

/* The bucket extent holding key and its executable (owned by the cache).
 * SJ_E_OUT_OF_RANGE when no bucket holds key (unless one-offs are on). A
 * one-off's executable stays valid only until it is evicted: run such keys
 * through run_padded, which holds them for the run. */
SJ_API sj_status sj_bucketed_cache_get_or_compile(sj_bucketed_cache *c, int64_t key, int64_t *extent,
                                                  void **exe);
/* Options per call: as get_or_compile, made by `comp` (another compiler
 * table: other options, even another target) instead of the cache's own.
 * A table equal to the cache's (same functions, ctx, strings and option
 * bytes) is the cache itself; any other gets buckets of its own over the
 * same graph, ladder, store and configuration, made at its first call, kept
 * (with a copy of its options) until the cache is destroyed and stored under
 * its own key. comp's ctx must outlive the cache. */
SJ_API sj_status sj_bucketed_cache_get_or_compile_with(sj_bucketed_cache *c, int64_t key,
                                                       const sj_compiler *comp, int64_t *extent,
                                                       void **exe);

/* One input of run_padded. `pad` true: data holds `rows` rows of `inner`
 * elements, the input's outer dim is the key, and the executable pads it to
 * the bucket extent. `pad` false (run_padded_mixed only): data holds the
 * whole input, whose shape does not depend on the key. */
typedef struct sj_cache_input {
    const char *name; /* the graph input's name */
    const float *data; /* elements of the input's dtype (cast for int64/int32/bool) */
    int64_t inner;
    bool pad;
} sj_cache_input;

/* Finds or compiles key's bucket, runs it on the given inputs (every graph
 * input named once) with `actual_rows` (1..bucket extent) rows, and returns
 * one tensor per graph output (allocated; caller frees each). output_inners[i]
 * > 0 says output i's outer dim is the key with that many elements per row:
 * it is returned sliced to actual_rows (checked). 0, or i past n_inners:
 * returned whole. The padding rows are never part of any result, also for
 * outputs that reduce over the key. *extent (may be NULL) gets the bucket
 * extent. run_padded requires every input to be padded (pad is ignored). */
SJ_API sj_status sj_bucketed_cache_run_padded(sj_bucketed_cache *c, int64_t key, int64_t actual_rows,
                                              const sj_cache_input *inputs, int n_inputs,
                                              const int64_t *output_inners, int n_inners,
                                              sj_tensor *outputs, int n_outputs, int64_t *extent);
SJ_API sj_status sj_bucketed_cache_run_padded_mixed(sj_bucketed_cache *c, int64_t key, int64_t actual_rows,
                                                    const sj_cache_input *inputs, int n_inputs,
                                                    const int64_t *output_inners, int n_inners,
                                                    sj_tensor *outputs, int n_outputs, int64_t *extent);

/* Bucket index for key, -1 when out of range. */
SJ_API int sj_bucketed_cache_bucket_for(const sj_bucketed_cache *c, int64_t key);
/* Buckets in all, and those whose executable is ready. */
SJ_API int sj_bucketed_cache_num_buckets(const sj_bucketed_cache *c);
SJ_API int sj_bucketed_cache_num_ready(const sj_bucketed_cache *c);
/* The target CPU bucket i's executable was made for: the compiler's own, or
 * the fallback target its stored artifact had; NULL while not ready. */
SJ_API const char *sj_bucketed_cache_bucket_target(const sj_bucketed_cache *c, int i);

/* Where bucket i stands with native_after: never asked (or not on a
 * level), queued or compiling, swapped to the own target, or failed. */
typedef enum sj_cache_specialise_state {
    SJ_SPECIALISE_NONE = 0,
    SJ_SPECIALISE_PENDING,
    SJ_SPECIALISE_DONE,
    SJ_SPECIALISE_FAILED
} sj_cache_specialise_state;
SJ_API sj_cache_specialise_state sj_bucketed_cache_bucket_specialise(const sj_bucketed_cache *c, int i);
/* Where bucket i stands with tiered compilation (config quick), in the
 * same states: never served quick code (NONE), serving it while its full
 * code is queued or compiling (PENDING), swapped to the full code (DONE),
 * or the full compile failed and the quick code keeps serving (FAILED). */
SJ_API sj_cache_specialise_state sj_bucketed_cache_bucket_tier(const sj_bucketed_cache *c, int i);
/* Waits until no background compile (a native_after recompile or a
 * tier-up) is queued or running. */
SJ_API void sj_bucketed_cache_specialise_wait(sj_bucketed_cache *c);
/* The first failed background compile's message into buf ("" when none
 * failed); a tier-up's starts "tier-up: ". */
SJ_API void sj_bucketed_cache_specialise_error(sj_bucketed_cache *c, char *buf, size_t cap);
/* Why the local store first refused to keep a compiled bucket, into buf
 * ("" when it never did): what a server tells once when its store fills. */
SJ_API void sj_bucketed_cache_store_error(sj_bucketed_cache *c, char *buf, size_t cap);
/* The compiler table the cache uses (its copy; valid while c lives). */
SJ_API const sj_compiler *sj_bucketed_cache_compiler(const sj_bucketed_cache *c);
/* Bucket i: keys [lo, hi], compiled at hi; *ready = its executable exists. */
SJ_API sj_status sj_bucketed_cache_bucket(const sj_bucketed_cache *c, int i, int64_t *lo, int64_t *hi,
                                          bool *ready);

/* Zero-stall: the smallest bucket at or above the one holding key whose
 * executable is ready, without compiling or loading anything; -1 when
 * none is (or key is outside every bucket). Running key's rows there is
 * exact: kernels run at the active extent. */
SJ_API int sj_bucketed_cache_ready_at_least(const sj_bucketed_cache *c, int64_t key);

/* Makes every bucket ready using `jobs` threads (precompile at deploy).
 * progress (may be NULL) is called after each bucket, from any thread,
 * never concurrently. Returns the first failure after all jobs stop; when
 * every bucket was made but the store refused to keep some (disk full, a
 * read-only file), SJ_E_IO naming their extents and the store's reason: a
 * deploy must not ship a store that lacks buckets. */
typedef void (*sj_cache_progress_fn)(void *user, int done, int total, int64_t extent);
SJ_API sj_status sj_bucketed_cache_precompile(sj_bucketed_cache *c, int jobs, sj_cache_progress_fn progress,
                                              void *user);

/* Precompile for another machine: every bucket's artifact into the store
 * (and the remote tier), compiled where they do not hold it, loading
 * nothing, so no executable is made and the cache stays cold. For a build
 * machine filling a store for a fleet whose devices it lacks (GPU code on
 * a CPU). A bucket already stored (its row verifies) counts as a store or
 * remote hit, a compiled one as a compile. SJ_E_STATE without a store and
 * a remote tier; otherwise as sj_bucketed_cache_precompile. */
SJ_API sj_status sj_bucketed_cache_precompile_stored(sj_bucketed_cache *c, int jobs,
                                                     sj_cache_progress_fn progress, void *user);

typedef struct sj_bucketed_cache_stats {
    uint64_t memory_hits;  /* executable already in memory */
    uint64_t store_hits;   /* loaded from the store */
    uint64_t remote_hits;  /* loaded from the remote tier (and written to the store) */
    uint64_t compiles;     /* compiled (store miss, corrupt entry, or no store) */
    double compile_ms;     /* total time in compile */
    uint64_t corrupt;      /* store rows (or loads) rejected as corrupt, then recompiled */
    uint64_t evictions;    /* rows the store handle evicted (shared by its users) */
    uint64_t store_errors; /* store failures worked around by compiling */
    uint64_t one_offs;     /* out-of-range keys compiled at their exact extent */
    uint64_t one_off_evictions; /* one-offs dropped for newer ones (one_off_capacity) */
    uint64_t not_stored;   /* buckets whose last compile the local store refused to keep */
    uint64_t resident_evictions; /* buckets trimmed to stay under max_resident_buckets */
    uint64_t fallback_hits; /* store or remote hits on a fallback target (a CPU level) */
    uint64_t specialised;         /* buckets swapped from a level to the own target (native_after) */
    uint64_t specialise_failures; /* such recompiles that failed (the level kept serving) */
    uint64_t quick_compiles;      /* buckets first compiled by the quick compiler (tiered) */
    double quick_compile_ms;      /* total time in those compiles */
    uint64_t tier_ups;            /* buckets swapped from quick code to the full code */
    uint64_t tier_up_failures;    /* such full compiles that failed (the quick code kept serving) */
    uint64_t device_lost; /* runs that failed with SJ_E_DEVICE_LOST (a kernel fault) */
    uint64_t reloads;     /* stale executables loaded again after their device was reset */
    sj_compile_stages stages; /* the compiler's (sj_compiler.stages) */
    /* The graph's content hash, made once at create: its time, and whether
     * the weights' digests came from the store (the model's files were
     * unchanged since they were hashed) instead of from reading the bytes. */
    double hash_ms;
    bool digests_from_store;
} sj_bucketed_cache_stats;

/* What bucket i's executable holds; for a bucket not loaded, what it will
 * hold, as the compiler estimated from the artifact a store-only precompile
 * handled (resident false); zeros when neither is known. */
SJ_API sj_status sj_bucketed_cache_bucket_memory(sj_bucketed_cache *c, int i,
                                                 sj_executable_memory_info *out);
SJ_API void sj_bucketed_cache_stats_get(const sj_bucketed_cache *c, sj_bucketed_cache_stats *out);

/* What padding cost bucket i, in two figures that are not the same thing:
 * padded rows ALLOCATED (memory: each run's buffers hold the bucket's
 * extent, so runs x extent - rows) and padded rows COMPUTED (work: the rows
 * its executable's kernels ran over beyond the rows asked for, as its
 * compiler's memory callback reports them; kernels bounded by the active
 * extent keep it 0), and the arena bytes a run of it holds. */
typedef struct sj_bucket_padding {
    int64_t extent;
    uint64_t runs;                  /* runs the cache served (a batch is one run) */
    uint64_t rows;                  /* the rows those runs asked for */
    uint64_t padded_rows_allocated; /* runs x extent - rows */
    int64_t padded_rows_computed;   /* -1 when the compiler does not report its work */
    uint64_t arena_bytes;           /* intermediates of one run, at the extent */
} sj_bucket_padding;
SJ_API sj_status sj_bucketed_cache_bucket_padding(sj_bucketed_cache *c, int i, sj_bucket_padding *out);

/* The cache inside an engine (borrowed, closed with it): for tools that
 * measure or drive its buckets directly, below sj_engine_run. */
SJ_API sj_bucketed_cache *sj_engine_cache(sj_engine *e);
/* The store key the bucket holding size n is kept under (strings borrowed
 * from the engine): what `shapejit store explain` compares stored rows
 * with. SJ_E_OUT_OF_RANGE when no bucket holds n. */
SJ_API sj_status sj_engine_store_key(const sj_engine *e, int64_t n, sj_store_key *out);

#ifdef __cplusplus
}
#endif
#endif
