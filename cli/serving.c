/* Store, backend and cache setup shared by the serving commands. */
#include "cli/serving.h"
#include "cli/request_stream.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int cli_store_path(const char *cmd, const char *flag, char *buf, size_t cap) {
    int n;
    const char *env;
    if (flag && !strcmp(flag, "none")) {
        n = snprintf(buf, cap, "%s", "");
    } else if (flag) {
        if (!flag[0]) return cli_usage_error(cmd, "--store needs a path (or 'none')");
        n = snprintf(buf, cap, "%s", flag);
    } else if ((env = getenv("SHAPEJIT_STORE")) && env[0]) {
        n = snprintf(buf, cap, "%s", env);
    } else if ((env = getenv("XDG_CACHE_HOME")) && env[0]) {
        n = snprintf(buf, cap, "%s/shapejit/store.db", env);
    } else if ((env = getenv("HOME")) && env[0]) {
        n = snprintf(buf, cap, "%s/.cache/shapejit/store.db", env);
    } else {
        return cli_fail(cmd,
                        "no store path: set SHAPEJIT_STORE or HOME, or pass --store PATH|none");
    }
    if (n < 0 || (size_t)n >= cap) return cli_fail(cmd, "store path too long");
    return CLI_EXIT_OK;
}

int cli_backend_check(const char *cmd, const cli_backend_args *a) {
    const char *name = a->name ? a->name : "host";
    if (strcmp(name, "host") != 0 && strcmp(name, "interp") != 0 && strcmp(name, "cuda") != 0)
        return cli_usage_error(cmd, "unknown backend '%s' (host, interp or cuda)", name);
    bool cuda = !strcmp(name, "cuda");
    if ((a->emit || a->arch) && !cuda)
        return cli_usage_error(cmd, "%s is for --backend cuda", a->emit ? "--emit" : "--arch");
    if (a->emit && strcmp(a->emit, "llvm") != 0 && strcmp(a->emit, "nvrtc") != 0)
        return cli_usage_error(cmd, "unknown --emit '%s' (llvm or nvrtc)", a->emit);
    if (a->arch && strcmp(a->arch, "sm_80") != 0 && strcmp(a->arch, "sm_90") != 0)
        return cli_usage_error(cmd, "unknown --arch '%s' (sm_80 or sm_90)", a->arch);
    return CLI_EXIT_OK;
}

static int gpu_open(const char *cmd, sj_ctx *ctx, const cli_backend_args *a, cli_backend *b) {
    sj_gpu_compiler_config gcfg;
    sj_gpu_compiler_config_init(&gcfg);
    bool nvrtc = a->emit && !strcmp(a->emit, "nvrtc");
    gcfg.options.target = nvrtc ? SJ_TARGET_NVRTC : SJ_TARGET_NVPTX;
    gcfg.options.arch = a->arch;
    sj_status st = sj_gpu_compiler_create(ctx, &gcfg, &b->gpu);
    if (st != SJ_OK) return cli_fail_status(cmd, ctx, st);
    sj_gpu_compiler_table(b->gpu, &b->comp);
    sj_gpu_compiler_cache_config(b->gpu, &b->cfg);
    snprintf(b->target, sizeof b->target, "%s %s", nvrtc ? "nvrtc" : "nvptx",
             sj_gpu_compiler_arch(b->gpu));
    return CLI_EXIT_OK;
}

int cli_backend_open(const char *cmd, sj_ctx *ctx, const cli_backend_args *a, cli_backend *b) {
    memset(b, 0, sizeof *b);
    int rc = cli_backend_check(cmd, a);
    if (rc != CLI_EXIT_OK) return rc;
    b->name = a->name ? a->name : "host";
    snprintf(b->target, sizeof b->target, "%s", b->name);
    sj_bucketed_cache_config_init(&b->cfg);
    if (!strcmp(b->name, "interp")) {
        sj_interp_compiler(&b->comp);
        return CLI_EXIT_OK;
    }
    if (!strcmp(b->name, "cuda")) return gpu_open(cmd, ctx, a, b);
    sj_host_compiler_config hcfg;
    sj_host_compiler_config_init(&hcfg);
    hcfg.devices = a->devices > 0 ? a->devices : 1;
    sj_status st = sj_host_compiler_create(ctx, &hcfg, &b->host);
    if (st != SJ_OK) return cli_fail_status(cmd, ctx, st);
    sj_host_compiler_table(b->host, &b->comp);
    sj_host_compiler_cache_config(b->host, &b->cfg);
    return CLI_EXIT_OK;
}

void cli_backend_close(cli_backend *b) {
    sj_host_compiler_destroy(b->host);
    sj_gpu_compiler_destroy(b->gpu);
    b->host = NULL;
    b->gpu = NULL;
}

static int store_open(const char *cmd, sj_ctx *ctx, const char *flag, cli_cache *c) {
    int rc = cli_store_path(cmd, flag, c->store_path, sizeof c->store_path);
    if (rc != CLI_EXIT_OK || !c->store_path[0]) return rc;
    sj_store_config sc;
    sj_store_config_init(&sc);
    sc.path = c->store_path;
    /* Only the default may quietly degrade: a path the user named must work. */
    sc.fallback_to_memory = flag == NULL;
    sj_status st = sj_store_open(ctx, &sc, &c->store);
    /* the library's message names the store already */
    if (st != SJ_OK)
        return cli_fail(cmd, "%s; --store none runs without one", sj_ctx_last_error(ctx));
    if (!sj_store_persistent(c->store))
        fprintf(stderr, "shapejit %s: warning: store %s not usable (%s); nothing will persist\n",
                cmd, c->store_path, sj_store_warning(c->store));
    return CLI_EXIT_OK;
}

void cli_cache_close(cli_cache *c) {
    sj_bucketed_cache_destroy(c->cache);
    /* Publishes the compiles still queued before the process goes. */
    sj_remote_destroy(c->remote);
    cli_backend_close(&c->backend);
    sj_store_close(c->store);
    sj_ladder_destroy(c->ladder);
    memset(c, 0, sizeof *c);
}

int cli_cache_open(const char *cmd, sj_ctx *ctx, const sj_graph *g, const cli_cache_args *a,
                   cli_cache *out) {
    memset(out, 0, sizeof *out);
    out->ctx = ctx;
    const char *spec = a->ladder ? a->ladder : CLI_DEFAULT_LADDER;
    sj_status st = sj_ladder_parse(ctx, spec, &out->ladder);
    int rc =
        st == SJ_OK ? CLI_EXIT_OK : cli_usage_error(cmd, "--ladder: %s", sj_ctx_last_error(ctx));
    if (rc == CLI_EXIT_OK)
        rc = cli_backend_open(cmd, ctx, &a->backend, &out->backend);
    /* A server without its GPU fails here, before a compile is spent. */
    if (rc == CLI_EXIT_OK && out->backend.gpu && !a->store_only) {
        sj_device *dev;
        sj_status dst = sj_gpu_compiler_device(out->backend.gpu, &dev);
        if (dst != SJ_OK)
            rc = cli_fail(cmd, "--backend cuda needs a GPU (%s): %s", sj_status_str(dst),
                          sj_ctx_last_error(ctx));
    }
    if (rc == CLI_EXIT_OK) rc = store_open(cmd, ctx, a->store, out);
    if (rc == CLI_EXIT_OK) rc = cli_remote_open(cmd, ctx, &a->remote, &out->remote);
    out->backend.cfg.remote = out->remote;
    if (rc == CLI_EXIT_OK && a->wrap) a->wrap(a->wrap_user, &out->backend.comp);
    if (rc == CLI_EXIT_OK) {
        st = sj_bucketed_cache_create(g, out->ladder, &out->backend.comp, out->store,
                                      &out->backend.cfg, &out->cache);
        if (st != SJ_OK) rc = cli_fail_status(cmd, ctx, st);
    }
    if (rc != CLI_EXIT_OK) cli_cache_close(out);
    return rc;
}

void cli_stats_members(FILE *f, const cli_cache *cc) {
    const sj_bucketed_cache *c = cc->cache;
    sj_bucketed_cache_stats s;
    sj_bucketed_cache_stats_get(c, &s);
    fprintf(
        f,
        "\"memory_hits\": %llu, \"store_hits\": %llu, \"remote_hits\": %llu, \"compiles\": %llu, "
        "\"compile_ms\": %.3f, \"corrupt\": %llu, \"evictions\": %llu, \"store_errors\": %llu, "
        "\"one_offs\": %llu, \"compiled_buckets\": %d, \"total_buckets\": %d",
        (unsigned long long)s.memory_hits, (unsigned long long)s.store_hits,
        (unsigned long long)s.remote_hits, (unsigned long long)s.compiles, s.compile_ms,
        (unsigned long long)s.corrupt, (unsigned long long)s.evictions,
        (unsigned long long)s.store_errors, (unsigned long long)s.one_offs,
        sj_bucketed_cache_compiled_count(c), sj_bucketed_cache_total_buckets(c));
    if (cc->remote) {
        fputs(", ", f);
        cli_remote_stats_members(f, cc->remote);
    }
}

int cli_random_inputs(const char *cmd, sj_ctx *ctx, const sj_graph *g, int64_t extent,
                      uint64_t seed, sj_tensor *in) {
    for (int i = 0; i < sj_graph_num_inputs(g); i++) {
        sj_value_desc d;
        sj_graph_input_desc(g, i, &d);
        sj_shape s = sj_shape_at(&d.shape, extent);
        if (sj_shape_numel(&d.shape, extent) < 0)
            return cli_fail(cmd, "input %s at %s = %lld has more than 2^40 elements", d.name,
                            sj_graph_symbol(g), (long long)extent);
        sj_status st = sj_tensor_alloc_typed(ctx, d.dtype, s.rank, s.dims, &in[i]);
        if (st != SJ_OK) return cli_fail_status(cmd, ctx, st);
        uint64_t state = seed + (uint64_t)i;
        int64_t n = sj_tensor_numel(&in[i]);
        /* floats in [-1, 1); ints (token ids, positions) in [0, 8); bools 0/1 */
        for (int64_t k = 0; k < n; k++) {
            uint64_t r = cli_splitmix64(&state) >> 40;
            if (d.dtype == SJ_I64) in[i].i64[k] = (int64_t)(r & 7);
            else if (d.dtype == SJ_I32) in[i].i32[k] = (int32_t)(r & 7);
            else if (d.dtype == SJ_BOOL) in[i].b8[k] = (uint8_t)(r & 1);
            else in[i].data[k] = (float)((double)r / 8388608.0 - 1.0);
        }
    }
    return CLI_EXIT_OK;
}

void cli_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

int cli_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double cli_percentile(const double *sorted, size_t n, double q) {
    if (!n) return 0;
    size_t rank = (size_t)ceil(q * (double)n);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return sorted[rank - 1];
}
