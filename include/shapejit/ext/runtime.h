/* shapejit/ext/runtime.h — executables: one bucket's launch plan loaded on a
 * device, run at any active extent inside the bucket, eagerly or by replaying
 * a captured graph.
 *
 *   sj_executable *exe;
 *   if (sj_artifact_load(a, dev, g, &exe) != SJ_OK)         // shapejit/ext/artifact.h
 *       fprintf(stderr, "%s\n", sj_ctx_last_error(ctx));
 *   sj_tensor in[1] = {x}, out[1] = {0};    // x: [37, 64]; out data NULL: allocated here
 *   sj_executable_run(exe, 37, in, out);                    // eager launches
 *   sj_tensor_free(ctx, &out[0]);
 *   sj_executable_capture(exe);                             // record the bucket's launches once
 *   sj_executable_replay(exe, 12, in12, out12);             // replay at any extent <= 64
 *   sj_executable_destroy(exe);                             // releases the capture's pins
 *
 * An executable owns: a copy of the plan, its module (unless created from
 * one the caller keeps), references to its param buffers and its run
 * memory. Params come from a weight pool keyed by each param's content
 * hash: one copy per memory domain (the context's for host-addressable
 * memory, the device's otherwise) shared by every executable and engine
 * that uses the same bytes, freed with the last. The run memory (the
 * intermediate arena, sized by lowering's liveness plan, and one padded
 * buffer per graph input and output at the bucket extent E) is made by the
 * first run or capture, not at load; sj_executable_trim gives it back and
 * the next run makes it again. Between trims, after the first run (which
 * may fill the device's caches), runs allocate nothing. A run whose run
 * memory cannot be made fails with SJ_E_NOMEM naming the bucket and the
 * bytes; the executable stays usable.
 *
 * Running: `inputs` has one tensor per graph input in declaration order;
 * every symbolic dim (any axis, several axes) must equal `active_extent`
 * (1 <= active <= E, else SJ_E_OUT_OF_RANGE) and every other dim the graph's
 * (else SJ_E_SHAPE naming the input). Inputs are copied into the padded
 * buffers, the kernels run with the active extent, and outputs are copied
 * back sliced to it. `outputs`: one per graph output; when `data` is NULL the
 * tensor is allocated here through the context (free with sj_tensor_free),
 * otherwise it must already have the output's shape at the active extent and
 * is written in place (no allocation). On failure, outputs allocated by the
 * call are freed again.
 *
 * The graph is only read while the executable is made (shapes and params); it
 * need not outlive the executable. An executable is used by one thread at a
 * time; different executables may run concurrently (the device serialises
 * their launches). After the device's release every call fails with
 * SJ_E_STATE and sj_executable_destroy only frees host memory.
 *
 * Extension tier (include/shapejit/ext/): for backends, tools and tests
 * that work below sj_engine; it may change between minor versions.
 */
#ifndef SHAPEJIT_RUNTIME_H
#define SHAPEJIT_RUNTIME_H

#include "shapejit/ext/device.h"
#include "shapejit/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Made by sj_artifact_load (from a plan that lowering made; plans are not
 * part of the API). */
typedef struct sj_executable sj_executable;

/* Releases the capture (if any), the buffers and the module it owns. NULL is a
 * no-op. */
SJ_API void sj_executable_destroy(sj_executable *exe);

SJ_API int64_t sj_executable_extent(const sj_executable *exe); /* the bucket extent E */
SJ_API sj_device *sj_executable_device(const sj_executable *exe);
SJ_API int sj_executable_num_inputs(const sj_executable *exe);
SJ_API int sj_executable_num_outputs(const sj_executable *exe);

/* Eager: every launch through the op cache and the metadata info cache. */
SJ_API sj_status sj_executable_run(sj_executable *exe, int64_t active_extent, const sj_tensor *inputs,
                                   sj_tensor *outputs);

/* Records the bucket's launches once into a device graph (nothing runs);
 * the metadata info buffers it records are pinned until the capture is
 * released. SJ_E_STATE when the executable already has a capture. */
SJ_API sj_status sj_executable_capture(sj_executable *exe);
SJ_API bool sj_executable_has_capture(const sj_executable *exe);
/* Like sj_executable_run but replays the capture (SJ_E_STATE without one);
 * results equal eager runs. */
SJ_API sj_status sj_executable_replay(sj_executable *exe, int64_t active_extent,
                                      const sj_tensor *inputs, sj_tensor *outputs);
/* Like sj_executable_run, eager, but waiting for each launch before the
 * next: slower, and a kernel that fails on the device is named exactly
 * ("kernel K (launch #i of bucket E): ..."), where a run's error can only
 * name the launches in flight when the device reported it. */
SJ_API sj_status sj_executable_run_stepwise(sj_executable *exe, int64_t active_extent,
                                            const sj_tensor *inputs, sj_tensor *outputs);
/* True once the device lost the context exe was loaded in (a kernel fault,
 * SJ_E_DEVICE_LOST; see sj_device_generation): its code, memory and capture
 * are gone and every run fails with SJ_E_STATE. Destroy it (which frees
 * only host memory) and load the artifact again. */
SJ_API bool sj_executable_stale(const sj_executable *exe);
/* What a serving loop calls: replays when the executable has a capture,
 * otherwise runs eagerly. */
SJ_API sj_status sj_executable_run_or_replay(sj_executable *exe, int64_t active_extent,
                                             const sj_tensor *inputs, sj_tensor *outputs);
/* Destroys the capture and drops its pins; no capture = no-op. */
SJ_API void sj_executable_release_capture(sj_executable *exe);

/* Gives back the run memory (and the capture, which records it); the
 * weights stay. Not while another thread runs exe. NULL is a no-op. */
SJ_API void sj_executable_trim(sj_executable *exe);

typedef struct sj_executable_memory_info {
    uint64_t weight_bytes; /* params it uses: shared through the weight pool, not its own */
    uint64_t arena_bytes;  /* intermediates, from the liveness plan */
    uint64_t io_bytes;     /* padded inputs and outputs at E */
    uint64_t run_bytes;    /* what it holds while resident: arena + io + slot tables */
    bool resident;         /* run memory held now */
    uint64_t materialized, trimmed; /* times the run memory was made, given back */
    bool estimated;        /* read from an artifact, for a bucket not loaded (no executable) */
    /* The work its runs did: how many, the rows they asked for (their active
     * extents) and the rows its kernels ran over (the extent every launch of
     * a run is given, eager or replayed). rows_computed - rows_requested is
     * padding computed: 0 while every kernel is bounded by the active extent
     * (the plan's ABI). GPU grids are sized at the bucket extent; their
     * blocks past the active rows return at once, launched but computing
     * nothing. */
    uint64_t runs, rows_requested, rows_computed;
    /* Of weight_bytes, those read in place from a file mapping (ONNX
     * external data): file pages, not allocated memory. */
    uint64_t weight_mapped_bytes;
    /* Of weight_bytes, weights held in a GEMM's packed panels (made once at
     * load, shared like the weights themselves). */
    uint64_t weight_packed_bytes;
} sj_executable_memory_info;
SJ_API void sj_executable_memory(const sj_executable *exe, sj_executable_memory_info *out);

#ifdef __cplusplus
}
#endif
#endif
