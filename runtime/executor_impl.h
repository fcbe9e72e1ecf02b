/* An executable's state, shared by executor.c (create, check, destroy) and
 * exec_run.c (the launch path). Not installed. */
#ifndef SJ_RUNTIME_EXECUTOR_IMPL_H
#define SJ_RUNTIME_EXECUTOR_IMPL_H

#include "shapejit/ext/runtime.h"
#include "runtime/executable_create.h"
#include "device_impl.h"
#include "jit/lower/plan.h"

/* A graph input or output: its padded buffer at the bucket extent. */
typedef struct exe_io {
    char *name; /* owned copy, for messages */
    sj_shape shape;
    int64_t chunks_max; /* chunks at the bucket extent (the most any run makes) */
    void *buffer;       /* device memory, numel(shape at E) floats */
    size_t bytes;
} exe_io;

typedef struct exe_launch {
    int32_t kernel;
    sj_launch_dims dims;
    void *const *buffers;      /* device memory: this launch's slot pointers */
    const int64_t *words;      /* host copy of the info words */
    size_t n_words;
    const int64_t *info_owned; /* device memory: the same words, owned by the executable */
} exe_launch;

typedef struct exe_param {
    sj_value value;
    void *buffer;
} exe_param;

struct sj_executable {
    sj_device *dev; /* holds a reference */
    sj_ctx *ctx;
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
    void *arena;
    int64_t arena_bytes;
    /* the plan's slot tables, for the first run's upload_tables */
    int32_t n_launch_slots, n_words_total;
    int32_t *launch_slots, *first_slot, *first_word; /* first_word -1: none */
    sj_buffer_slot *slots;
    bool memory_ready; /* buffers, arena and tables made (first run or capture) */
    void *tables;       /* device memory: every launch's slot pointers */
    void *info_owned;   /* device memory: every launch's words */
    float *staging;     /* host, for devices whose memory the host cannot touch */
    sj_graph_handle graph; /* the capture, NULL when none */
    uint64_t graph_id;
};

/* Makes the working memory on first need (run, capture); called without
 * the device lock (allocation takes it), by the executable's one runner. */
sj_status sj_executable_ensure_memory(sj_executable *e);

#endif
