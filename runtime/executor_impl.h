/* An executable's state, shared by executor.c (create, check, destroy) and
 * exec_run.c (the launch path). Not installed. */
#ifndef SJ_RUNTIME_EXECUTOR_IMPL_H
#define SJ_RUNTIME_EXECUTOR_IMPL_H

#include "shapejit/ext/runtime.h"
#include "runtime/executable_create.h"
#include "runtime/device_impl.h"
#include "plan/plan.h"
#include "runtime/weight_pool.h"

/* A graph input or output: its padded buffer at the bucket extent. */
typedef struct exe_io {
    char *name; /* owned copy, for messages */
    sj_shape shape;
    sj_dtype dtype;
    size_t esize;       /* bytes per element */
    int64_t chunks_max; /* chunks at the bucket extent (the most any run makes) */
    void *buffer;       /* device memory, numel(shape at E) floats */
    size_t bytes;
} exe_io;

typedef struct exe_launch {
    int32_t kernel;
    int32_t first_slot; /* into the slot-pointer table */
    sj_launch_dims dims;
    void *const *buffers;      /* device memory: this launch's slot pointers */
    const int64_t *words;      /* host copy of the info words */
    size_t n_words;
    const int64_t *info_owned; /* device memory: the same words, owned by the executable */
} exe_launch;

typedef struct exe_param {
    sj_value value;
    void *buffer; /* from the weight pool: shared with every executable of the same bytes */
    size_t bytes;
    bool mapped;  /* buffer lies in a file mapping (the pool entry holds it) */
    /* An SJ_SLOT_PACKED's copy of the weight in a GEMM's panels: its
     * layout words (plan.h); a plain param has packed false. */
    bool packed;
    int64_t pack[SJ_PACK_WORDS];
} exe_param;

struct sj_executable {
    sj_device *dev; /* holds a reference */
    sj_ctx *ctx;
    /* The device generation its handles (module, kernels, memory, capture,
     * weights) were made in: after a reset they are gone, and the
     * executable only drops them (sj_executable_stale). */
    uint64_t gen;
    sj_module *module;
    bool owns_module;
    int64_t extent;
    bool has_sym;
    int32_t n_kernels;
    sj_kernel_desc *kernels;
    sj_kernel_handle *handles; /* resolved at create, one per kernel: launches read them */
    int32_t n_launches;
    exe_launch *launches;
    int64_t *words; /* host copy of every launch's words */
    int n_inputs, n_outputs, n_params;
    exe_io *inputs, *outputs;
    exe_param *params;
    sj_weight_pool *weights; /* where params came from: the context's or the device's */
    /* The distinct file mappings params lie in (the pool entries hold
     * them): checked around every run, as kernels read them in place. */
    sj_weight_map **maps;
    int n_maps;
    /* Run memory, made by the first run (or capture) and released by
     * sj_executable_trim: loading or precompiling a bucket costs none. */
    bool resident;
    int32_t n_slots, n_launch_slots;
    sj_buffer_slot *slots;  /* the plan's, to lay run memory out again after a trim */
    int32_t *launch_slots;
    int64_t arena_bytes;    /* the plan's: intermediates packed by liveness */
    int64_t sub_rows;       /* the plan's: a replay's sub-batch (0 = whole) */
    void *arena;
    void *tables;       /* device memory: every launch's slot pointers */
    void *info_owned;   /* device memory: every launch's words */
    float *staging;     /* host, for devices whose memory the host cannot touch */
    uint64_t materialized, trimmed; /* how often run memory was made and released */
    uint64_t runs, rows_requested, rows_computed; /* under the device lock, like the rest */
    sj_graph_handle graph; /* the capture, NULL when none */
    uint64_t graph_id;
};

/* Whether e's handles are still those of the device's context (caller
 * holds the device lock). */
static inline bool sj_exe_current(const sj_executable *e) {
    return !e->dev->lost && e->gen == atomic_load(&e->dev->generation) &&
           atomic_load(&e->dev->alive);
}

/* Makes the run memory when it is not there; caller holds the device lock.
 * A failure (SJ_E_NOMEM) fails this request only and leaves nothing half
 * made: a later run tries again. */
sj_status sj__exe_make_resident(sj_executable *e);

/* Params from the weight pool, and back (exec_memory.c). */
sj_status sj__exe_acquire_params(sj_executable *e, const sj_launch_plan *p, const sj_graph *g);
void sj__exe_release_params(sj_executable *e);
/* Whether every file mapping e's params lie in still holds what was
 * mapped (sj__weight_map_check); SJ_E_CORRUPT naming the file otherwise. */
sj_status sj__exe_check_mapped(sj_executable *e);

#endif
