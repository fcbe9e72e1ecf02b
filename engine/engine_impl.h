/* The engine's state, shared by its files. Not installed. */
#ifndef SJ_ENGINE_IMPL_H
#define SJ_ENGINE_IMPL_H

#include "shapejit/ext/backends.h"
#include "shapejit/engine.h"

#include "backends/backend_registry.h"
#include "cache/bucketed_cache_impl.h"

/* Opens cfg's backend through the registry (backends/backend_registry.h),
 * after the checks that are the engine's own (precision, workers, threads,
 * native_after). Errors start "engine: " and name the field and its value;
 * nothing stays open. */
sj_status sj__engine_backend_open(sj_ctx *ctx, const sj_engine_config *cfg, sj__backend *out);
/* The folder beside store_path where host devices keep packed weights
 * (STORE_PATH-weights) into out; false when it does not fit or the path is
 * empty. */
bool sj__engine_weight_dir(const char *store_path, char *out, size_t cap);

struct sj_engine {
    sj_ctx *ctx;
    sj_graph *g;
    sj_ladder *ladder;
    sj_store *store;   /* NULL: nothing persists */
    int64_t store_bytes_at_open; /* its stored bytes when opened (sj_store_stats) */
    sj_remote *remote; /* the fleet tier, or NULL */
    sj__backend backend;
    sj_bucketed_cache *cache;
    bool store_only;
    char *warning; /* why the store fell back to memory, or NULL */
    int n_inputs, n_outputs;
    sj_value_desc *inputs, *outputs; /* the graph's, names borrowed from it */
    _Atomic uint64_t runs, run_failures;
};

#endif
