/* The engine's state, shared by its files. Not installed. */
#ifndef SJ_ENGINE_IMPL_H
#define SJ_ENGINE_IMPL_H

#include "shapejit/ext/backends.h"
#include "shapejit/engine.h"

#include "cache/bucketed_cache_impl.h"

/* A backend by name: the compiler table and whatever object owns it. */
typedef struct sj_engine_backend {
    sj_host_compiler *host; /* backend "host", else NULL */
    sj_gpu_compiler *gpu;   /* backend "cuda", else NULL */
    sj_compiler comp;
    char target[48]; /* "host", "interp", "nvptx sm_90", ... */
} sj_engine_backend;

/* Makes the compiler cfg names (backend, gpu_emit, arch, cpu, workers,
 * threads). Errors name the field and its value; nothing stays open. */
sj_status sj__engine_backend_open(sj_ctx *ctx, const sj_engine_config *cfg, sj_engine_backend *out);
void sj__engine_backend_close(sj_engine_backend *b);

/* The context resets of gc's device so far (0 before it is made);
 * gpu_compiler.c. */
uint64_t sj__gpu_compiler_resets(sj_gpu_compiler *gc);

struct sj_engine {
    sj_ctx *ctx;
    sj_graph *g;
    sj_ladder *ladder;
    sj_store *store;   /* NULL: nothing persists */
    sj_remote *remote; /* the fleet tier, or NULL */
    sj_engine_backend backend;
    sj_bucketed_cache *cache;
    bool store_only;
    char *warning; /* why the store fell back to memory, or NULL */
    int n_inputs, n_outputs;
    sj_value_desc *inputs, *outputs; /* the graph's, names borrowed from it */
    _Atomic uint64_t runs, run_failures;
};

#endif
