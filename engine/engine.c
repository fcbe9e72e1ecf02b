/* sj_engine: the model, its ladder, the store tiers, the compiler and the
 * bucketed cache opened together in one order and closed in the reverse
 * one, so a failed open leaves nothing behind and a caller has one handle. */
#include "engine/engine_impl.h"
#include "runtime/weight_files.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A secret longer than this is a mistake (a wrong file), not a key. */
#define ENGINE_SECRET_MAX 4096

void sj_engine_config_init(sj_engine_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->size = sizeof *cfg;
    sj_model_options_init(&cfg->model);
    cfg->remote_lease_ms = SJ_REMOTE_DEFAULT_LEASE_MS;
    cfg->tune_budget_ms = 200;
    cfg->weight_files = true;
}

sj_status sj_engine_default_store_path(const char *shapejit_store, const char *xdg_cache_home,
                                       const char *home, char *out, size_t cap) {
    if (!out || !cap) return SJ_E_INVALID_ARG;
    out[0] = '\0';
    int n;
    if (shapejit_store && shapejit_store[0])
        n = snprintf(out, cap, "%s", shapejit_store);
    else if (xdg_cache_home && xdg_cache_home[0])
        n = snprintf(out, cap, "%s/shapejit/store.db", xdg_cache_home);
    else if (home && home[0])
        n = snprintf(out, cap, "%s/.cache/shapejit/store.db", home);
    else
        return SJ_E_NOT_FOUND;
    if (n < 0 || (size_t)n >= cap) {
        out[0] = '\0';
        return SJ_E_INVALID_ARG;
    }
    return SJ_OK;
}

void sj_engine_close(sj_engine *e) {
    if (!e) return;
    sj_ctx *ctx = e->ctx;
    /* The executables go before the compiler that made them; the remote
     * tier publishes what is still queued before the store closes. */
    sj_bucketed_cache_destroy(e->cache);
    sj_remote_destroy(e->remote);
    sj__backend_close(&e->backend);
    sj_store_close(e->store);
    sj_ladder_destroy(e->ladder);
    sj_free(ctx, e->inputs);
    sj_free(ctx, e->outputs);
    sj_free(ctx, e->warning);
    sj_graph_destroy(e->g);
    sj_free(ctx, e);
}

static sj_status open_store(sj_engine *e, const sj_engine_config *cfg) {
    if (!cfg->store_path) return SJ_OK;
    if (!cfg->store_path[0])
        return sj_fail(e->ctx, SJ_E_INVALID_ARG, "engine: store_path is empty (NULL: no store)");
    sj_store_config sc;
    sj_store_config_init(&sc);
    sc.path = cfg->store_path;
    sc.fallback_to_memory = cfg->store_fallback_to_memory;
    sj_status st = sj_store_open(e->ctx, &sc, &e->store);
    if (st != SJ_OK) {
        sj__error_prefix(e->ctx, "engine"); /* the store's message names it and the path */
        return st;
    }
    sj_store_stats ss;
    if (sj_store_stats_get(e->store, &ss) == SJ_OK) e->store_bytes_at_open = ss.stored_bytes;
    else sj_ctx_clear_error(e->ctx);
    /* The store's own warning (fallen back to memory, or read-only: new
     * artifacts not saved) names the path and the reason: said once, here. */
    if (sj_store_warning(e->store)[0] && !(e->warning = sj_strdup(e->ctx, sj_store_warning(e->store))))
        return sj_fail(e->ctx, SJ_E_NOMEM, "engine: out of memory");
    return SJ_OK;
}

static sj_status open_remote(sj_engine *e, const sj_engine_config *cfg) {
    if (!cfg->remote_url) {
        if (cfg->remote_secret_len || cfg->remote_read_only)
            return sj_fail(e->ctx, SJ_E_INVALID_ARG, "engine: %s without remote_url",
                           cfg->remote_read_only ? "remote_read_only" : "remote_secret");
        return SJ_OK;
    }
    if (cfg->remote_secret_len > ENGINE_SECRET_MAX)
        return sj_fail(e->ctx, SJ_E_INVALID_ARG, "engine: remote_secret of %zu bytes (at most %d)",
                       cfg->remote_secret_len, ENGINE_SECRET_MAX);
    if (cfg->remote_secret_len && !cfg->remote_secret)
        return sj_fail(e->ctx, SJ_E_INVALID_ARG,
                       "engine: remote_secret_len %zu with no remote_secret",
                       cfg->remote_secret_len);
    char secret[ENGINE_SECRET_MAX + 1];
    if (cfg->remote_secret_len) memcpy(secret, cfg->remote_secret, cfg->remote_secret_len);
    secret[cfg->remote_secret_len] = '\0';
    sj_status st = SJ_OK;
    if (strlen(secret) != cfg->remote_secret_len)
        st = sj_fail(e->ctx, SJ_E_INVALID_ARG, "engine: remote_secret holds a NUL byte");
    if (st == SJ_OK) {
        sj_remote_config rc;
        sj_remote_config_init(&rc);
        rc.url = cfg->remote_url;
        rc.secret = secret;
        rc.read_only = cfg->remote_read_only;
        rc.lease_ms = cfg->remote_lease_ms;
        rc.on_warning = cfg->on_warning;
        rc.warning_user = cfg->warning_user;
        st = sj_remote_create(e->ctx, &rc, &e->remote); /* copies the secret */
        if (st != SJ_OK) sj__error_prefix(e->ctx, "engine"); /* "remote tier: ..." */
    }
    /* Not left on the stack for a core dump to carry. */
    memset(secret, 0, sizeof secret);
    __asm__ __volatile__("" : : "r"(secret) : "memory");
    return st;
}

static sj_status describe_values(sj_engine *e) {
    e->n_inputs = sj_graph_num_inputs(e->g);
    e->n_outputs = sj_graph_num_outputs(e->g);
    e->inputs = sj_calloc(e->ctx, (size_t)e->n_inputs + 1, sizeof *e->inputs);
    e->outputs = sj_calloc(e->ctx, (size_t)e->n_outputs + 1, sizeof *e->outputs);
    if (!e->inputs || !e->outputs) return sj_fail(e->ctx, SJ_E_NOMEM, "engine: out of memory");
    for (int i = 0; i < e->n_inputs; i++) SJ_TRY(sj_graph_input_desc(e->g, i, &e->inputs[i]));
    for (int i = 0; i < e->n_outputs; i++) SJ_TRY(sj_graph_output_desc(e->g, i, &e->outputs[i]));
    return SJ_OK;
}

/* The caller's config as this library reads it (see "Config structs" in
 * shapejit/common.h); NULL = the defaults. */
static sj_status read_config(sj_ctx *ctx, const sj_engine_config *in, sj_engine_config *out) {
    sj_engine_config_init(out);
    if (!in) return SJ_OK;
    return sj__config_read(ctx, "sj_engine_config", in, SJ_CONFIG_SIZE(sj_engine_config, cuda_driver),
                           sizeof *out, out);
}

sj_status sj_engine_prune_weight_files(sj_ctx *ctx, const char *store_path, int64_t max_bytes,
                                       int64_t *files_removed, int64_t *bytes_removed) {
    if (files_removed) *files_removed = 0;
    if (bytes_removed) *bytes_removed = 0;
    char dir[4096];
    if (!ctx || !store_path || max_bytes < 0 || !sj__engine_weight_dir(store_path, dir, sizeof dir))
        return sj_fail(ctx, SJ_E_INVALID_ARG,
                       "engine: pruning weight files needs a store path and a bound >= 0 (got %lld)",
                       (long long)max_bytes);
    return sj__weight_files_prune(ctx, dir, max_bytes, files_removed, bytes_removed);
}

sj_status sj_engine_open_graph(sj_ctx *ctx, sj_graph *g, const sj_engine_config *cfg_in,
                               sj_engine **out) {
    if (out) *out = NULL;
    if (!ctx || !g || !out) {
        sj_graph_destroy(g);
        return ctx ? sj_fail(ctx, SJ_E_INVALID_ARG, "engine: open needs a graph and an out pointer")
                   : SJ_E_INVALID_ARG;
    }
    if (sj_graph_ctx(g) != ctx) {
        sj_graph_destroy(g);
        return sj_fail(ctx, SJ_E_INVALID_ARG, "engine: the graph belongs to another context");
    }
    sj_engine_config c;
    if (read_config(ctx, cfg_in, &c) != SJ_OK) {
        sj_graph_destroy(g);
        return SJ_E_INVALID_ARG;
    }
    const sj_engine_config *cfg = &c;
    sj_engine *e = sj_calloc(ctx, 1, sizeof *e);
    if (!e) {
        sj_graph_destroy(g);
        return sj_fail(ctx, SJ_E_NOMEM, "engine: out of memory");
    }
    e->ctx = ctx;
    e->g = g;
    e->store_only = cfg->store_only;
    const char *spec = cfg->ladder ? cfg->ladder : SJ_ENGINE_DEFAULT_LADDER;
    /* Cheap checks (names, the ladder) before the store and the compiler. */
    sj_status st = sj_ladder_parse(ctx, spec, &e->ladder);
    if (st != SJ_OK) sj__error_prefix(ctx, "engine: ladder '%s'", spec);
    if (st == SJ_OK) st = describe_values(e);
    if (st == SJ_OK) st = sj__engine_backend_open(ctx, cfg, &e->backend);
    if (st == SJ_OK) st = open_store(e, cfg);
    if (st == SJ_OK) st = open_remote(e, cfg);
    if (st == SJ_OK) {
        sj_bucketed_cache_config cc;
        sj_bucketed_cache_config_init(&cc);
        cc.one_off_out_of_range = cfg->one_off_out_of_range;
        cc.remote = e->remote;
        cc.max_resident_buckets = cfg->max_resident_buckets;
        cc.native_after = cfg->native_after;
        /* the registry refused tiered for a backend without a quick compiler */
        cc.quick = cfg->tiered && e->backend.quick.compile ? &e->backend.quick : NULL;
        st = sj_bucketed_cache_create(g, e->ladder, &e->backend.comp, e->store, &cc, &e->cache);
    }
    if (st != SJ_OK) {
        sj_engine_close(e);
        return st;
    }
    *out = e;
    return SJ_OK;
}

sj_status sj_engine_open(sj_ctx *ctx, const char *model_path, const sj_engine_config *cfg_in,
                         sj_engine **out) {
    if (out) *out = NULL;
    if (!ctx || !out) return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    if (!model_path || !model_path[0])
        return sj_fail(ctx, SJ_E_INVALID_ARG, "engine: no model path");
    sj_engine_config c;
    SJ_TRY(read_config(ctx, cfg_in, &c));
    const sj_engine_config *cfg = &c;
    sj_graph *g;
    sj_status st = sj_model_load(ctx, model_path, &cfg->model, &g);
    if (st != SJ_OK) {
        sj__error_prefix(ctx, "engine: model"); /* the loader's message names the file */
        return st;
    }
    return sj_engine_open_graph(ctx, g, cfg, out);
}

sj_status sj_engine_precompile(sj_engine *e, int jobs, sj_engine_progress_fn progress, void *user) {
    if (!e) return SJ_E_INVALID_ARG;
    if (jobs < 0)
        return sj_fail(e->ctx, SJ_E_INVALID_ARG, "engine: precompile jobs %d is negative", jobs);
    if (jobs == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        jobs = n > 0 ? (int)(n < 256 ? n : 256) : 1;
    }
    return e->store_only ? sj_bucketed_cache_precompile_stored(e->cache, jobs, progress, user)
                         : sj_bucketed_cache_precompile(e->cache, jobs, progress, user);
}

const sj_graph *sj_engine_graph(const sj_engine *e) { return e ? e->g : NULL; }
int sj_engine_num_inputs(const sj_engine *e) { return e ? e->n_inputs : 0; }
int sj_engine_num_outputs(const sj_engine *e) { return e ? e->n_outputs : 0; }

sj_status sj_engine_input(const sj_engine *e, int i, sj_value_desc *out) {
    if (!e || !out)
        return sj_fail(e ? e->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    if (i < 0 || i >= e->n_inputs)
        return sj_fail(e->ctx, SJ_E_OUT_OF_RANGE, "engine: input %d of %d does not exist", i,
                       e->n_inputs);
    *out = e->inputs[i];
    return SJ_OK;
}

sj_status sj_engine_output(const sj_engine *e, int i, sj_value_desc *out) {
    if (!e || !out)
        return sj_fail(e ? e->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    if (i < 0 || i >= e->n_outputs)
        return sj_fail(e->ctx, SJ_E_OUT_OF_RANGE, "engine: output %d of %d does not exist", i,
                       e->n_outputs);
    *out = e->outputs[i];
    return SJ_OK;
}

int sj_engine_num_buckets(const sj_engine *e) {
    return e ? sj_bucketed_cache_num_buckets(e->cache) : 0;
}

sj_status sj_engine_bucket(const sj_engine *e, int i, int64_t *lo, int64_t *hi, bool *ready) {
    if (!e) return SJ_E_INVALID_ARG;
    return sj_bucketed_cache_bucket(e->cache, i, lo, hi, ready);
}

sj_status sj_engine_bucket_memory(const sj_engine *e, int i, sj_engine_memory *out) {
    if (!e || !out) return sj_fail(e ? e->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    memset(out, 0, sizeof *out);
    sj_executable_memory_info m;
    int64_t lo, hi;
    bool loaded;
    SJ_TRY(sj_bucketed_cache_bucket(e->cache, i, &lo, &hi, &loaded));
    SJ_TRY(sj_bucketed_cache_bucket_memory(e->cache, i, &m));
    *out = (sj_engine_memory){.run_bytes = m.run_bytes,
                              .arena_bytes = m.arena_bytes,
                              .io_bytes = m.io_bytes,
                              .weight_bytes = m.weight_bytes,
                              .weight_mapped_bytes = m.weight_mapped_bytes,
                              .weight_packed_bytes = m.weight_packed_bytes,
                              /* a backend that holds no run memory (the
                               * interpreter) reports none: not a figure */
                              .known = m.estimated || (loaded && m.run_bytes > 0),
                              .loaded = loaded,
                              .resident = m.resident};
    return SJ_OK;
}

sj_status sj_engine_bucket_stats_get(const sj_engine *e, int i, sj_engine_bucket_stats *out) {
    if (!e || !out) return sj_fail(e ? e->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    memset(out, 0, sizeof *out);
    sj_engine_bucket_stats b = {0};
    SJ_TRY(sj_bucketed_cache_bucket(e->cache, i, &b.lo, &b.hi, &b.ready));
    SJ_TRY(sj_engine_bucket_memory(e, i, &b.memory));
    sj_bucket_padding p;
    SJ_TRY(sj_bucketed_cache_bucket_padding(e->cache, i, &p));
    b.runs = p.runs;
    b.rows = p.rows;
    b.padded_rows_allocated = p.padded_rows_allocated;
    b.padded_rows_computed = p.padded_rows_computed;
    b.cpu = sj_bucketed_cache_bucket_target(e->cache, i);
    switch (sj_bucketed_cache_bucket_specialise(e->cache, i)) {
    case SJ_SPECIALISE_NONE: b.native = SJ_ENGINE_NATIVE_NONE; break;
    case SJ_SPECIALISE_PENDING: b.native = SJ_ENGINE_NATIVE_PENDING; break;
    case SJ_SPECIALISE_DONE: b.native = SJ_ENGINE_NATIVE_DONE; break;
    case SJ_SPECIALISE_FAILED: b.native = SJ_ENGINE_NATIVE_FAILED; break;
    }
    /* the enums agree value for value */
    b.tier = (sj_engine_tier_state)sj_bucketed_cache_bucket_tier(e->cache, i);
    *out = b;
    return SJ_OK;
}

void sj_engine_stats_get(const sj_engine *e, sj_engine_stats *out) {
    memset(out, 0, sizeof *out);
    if (!e) return;
    sj_bucketed_cache_stats s;
    sj_bucketed_cache_stats_get(e->cache, &s);
    out->runs = atomic_load_explicit(&e->runs, memory_order_relaxed);
    out->run_failures = atomic_load_explicit(&e->run_failures, memory_order_relaxed);
    out->memory_hits = s.memory_hits;
    out->store_hits = s.store_hits;
    out->remote_hits = s.remote_hits;
    out->compiles = s.compiles;
    out->corrupt = s.corrupt;
    out->store_errors = s.store_errors;
    out->one_offs = s.one_offs;
    out->compile_ms = s.compile_ms;
    out->evictions = s.evictions;
    out->not_stored = s.not_stored;
    out->one_off_evictions = s.one_off_evictions;
    out->buckets = sj_bucketed_cache_num_buckets(e->cache);
    out->buckets_ready = sj_bucketed_cache_num_ready(e->cache);
    out->resident_evictions = s.resident_evictions;
    out->specialised = s.specialised;
    out->specialise_failures = s.specialise_failures;
    out->quick_compiles = s.quick_compiles;
    out->tier_ups = s.tier_ups;
    out->tier_up_failures = s.tier_up_failures;
    out->device_lost = s.device_lost;
    out->reloads = s.reloads;
    out->kernels = s.stages.kernels;
    out->launches = s.stages.launches;
    out->lower_ms = s.stages.lower_ms;
    out->emit_ms = s.stages.emit_ms;
    out->optimise_ms = s.stages.optimise_ms;
    out->codegen_ms = s.stages.codegen_ms;
    out->load_ms = s.stages.load_ms;
    out->objects_compiled = s.stages.objects_compiled;
    out->objects_found = s.stages.objects_found;
    sj_store_stats ss;
    if (e->store && sj_store_stats_get(e->store, &ss) == SJ_OK) {
        out->store_bytes = ss.stored_bytes;
        out->store_bytes_added = ss.stored_bytes - e->store_bytes_at_open;
    }
    out->hash_ms = s.hash_ms;
    out->digests_from_store = s.digests_from_store;
    out->device_resets = e->backend.resets ? e->backend.resets(e->backend.owner) : 0;
    /* Buckets share weights (every bucket uses every param), and those
     * that pack a weight share its packed copy: the engine's weights are
     * the largest bucket's unpacked ones beside the largest packed set. */
    uint64_t plain = 0;
    for (int i = 0; i < out->buckets; i++) {
        sj_executable_memory_info m;
        if (sj_bucketed_cache_bucket_memory(e->cache, i, &m) != SJ_OK || m.estimated) continue;
        if (m.weight_bytes - m.weight_packed_bytes > plain) {
            plain = m.weight_bytes - m.weight_packed_bytes;
            out->weight_mapped_bytes = m.weight_mapped_bytes;
        }
        if (m.weight_packed_bytes > out->weight_packed_bytes)
            out->weight_packed_bytes = m.weight_packed_bytes;
        if (m.resident) {
            out->buckets_resident++;
            out->run_bytes += m.run_bytes;
        }
    }
    out->weight_bytes = plain + out->weight_packed_bytes;
}

const char *sj_engine_target(const sj_engine *e) { return e ? e->backend.target : ""; }
const sj_ladder *sj_engine_ladder(const sj_engine *e) { return e ? e->ladder : NULL; }
sj_remote *sj_engine_remote(sj_engine *e) { return e ? e->remote : NULL; }
sj_ctx *sj_engine_ctx(const sj_engine *e) { return e ? e->ctx : NULL; }
const char *sj_engine_warning(const sj_engine *e) { return e && e->warning ? e->warning : ""; }
sj_bucketed_cache *sj_engine_cache(sj_engine *e) { return e ? e->cache : NULL; }

sj_status sj_engine_store_key(const sj_engine *e, int64_t n, sj_store_key *out) {
    if (!e || !out)
        return sj_fail(e ? e->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    int i;
    SJ_TRY(sj_ladder_bucket_for(e->ladder, n, &i));
    sj_bucketed_cache_key(e->g, &e->cache->comp, sj_ladder_extent(e->ladder, i), out);
    return SJ_OK;
}
