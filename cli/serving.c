/* Flags and environment into an engine, and the figures the serving
 * commands share. */
#include "cli/serving.h"
#include "shapejit/ext/bucketed_cache.h"
#include "cli/request_stream.h"
#include "serve/ladder_cost.h" /* sj_engine_warm_latency */

#include <stdint.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_store_path(const char *cmd, const char *flag, char *buf, size_t cap) {
    if (flag && !strcmp(flag, "none")) {
        buf[0] = '\0';
        return CLI_EXIT_OK;
    }
    if (flag) {
        if (!flag[0]) return cli_usage_error(cmd, "--store needs a path (or 'none')");
        if ((size_t)snprintf(buf, cap, "%s", flag) >= cap) return cli_fail(cmd, "store path too long");
        return CLI_EXIT_OK;
    }
    sj_status st = sj_engine_default_store_path(getenv("SHAPEJIT_STORE"), getenv("XDG_CACHE_HOME"),
                                                getenv("HOME"), buf, cap);
    if (st == SJ_E_NOT_FOUND)
        return cli_fail(cmd, "no store path: set SHAPEJIT_STORE or HOME, or pass --store PATH|none");
    if (st != SJ_OK) return cli_fail(cmd, "store path too long");
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
    if (a->cpu && strcmp(name, "host") != 0)
        return cli_usage_error(cmd, "--cpu is for --backend host");
    if (a->cuda_driver && strcmp(name, "cuda") != 0)
        return cli_usage_error(cmd, "--cuda-driver is for --backend cuda");
    sj_precision p;
    if (a->precision && sj_precision_from_name(a->precision, &p) != SJ_OK)
        return cli_usage_error(cmd, "unknown --precision '%s' (fp32, bf16 or fp16)", a->precision);
    if (a->tune_budget_ms && !a->tune) return cli_usage_error(cmd, "--tune-budget-ms needs --tune");
    if (a->tune && strcmp(name, "host") != 0) return cli_usage_error(cmd, "--tune is for --backend host");
    if (a->threads) {
        char *end;
        long v = strtol(a->threads, &end, 10);
        if (!a->threads[0] || *end || v < 1 || v > SJ_HOST_MAX_THREADS)
            return cli_usage_error(cmd, "--threads must be a count in 1..%d, got '%s'",
                                   SJ_HOST_MAX_THREADS, a->threads);
        if (v > 1 && strcmp(name, "host") != 0)
            return cli_usage_error(cmd, "--threads %ld is for --backend host", v);
    }
    if (a->tune_budget_ms) {
        char *end;
        long v = strtol(a->tune_budget_ms, &end, 10);
        if (!a->tune_budget_ms[0] || *end || v < 1 || v > 600000)
            return cli_usage_error(cmd, "--tune-budget-ms must be a count of milliseconds in 1..600000, got '%s'",
                                   a->tune_budget_ms);
    }
    return CLI_EXIT_OK;
}

/* --threads unset, host backend: this machine's CPUs shared among the
 * workers, at least one each, so workers x threads stays within the CPUs
 * (the library's own default is 1: how many CPUs a process may use is the
 * caller's policy). */
int cli_backend_threads(const cli_backend_args *a) {
    if (a->threads) return (int)strtol(a->threads, NULL, 10);
    if (a->name && strcmp(a->name, "host") != 0) return 1;
    long t = sysconf(_SC_NPROCESSORS_ONLN) / (a->devices > 1 ? a->devices : 1);
    return t < 1 ? 1 : t > SJ_HOST_MAX_THREADS ? SJ_HOST_MAX_THREADS : (int)t;
}

void cli_backend_config(const cli_backend_args *a, sj_engine_config *cfg) {
    cfg->backend = a->name;
    cfg->gpu_emit = a->emit;
    cfg->arch = a->arch;
    cfg->cuda_driver = a->cuda_driver;
    cfg->cpu = a->cpu;
    if (a->precision) sj_precision_from_name(a->precision, &cfg->precision); /* checked */
    cfg->tune = a->tune;
    if (a->tune_budget_ms) cfg->tune_budget_ms = (int)strtol(a->tune_budget_ms, NULL, 10);
    cfg->workers = a->devices;
    cfg->threads = cli_backend_threads(a);
}

int cli_engine_open(const char *cmd, sj_ctx *ctx, sj_graph *g, const cli_engine_args *a, sj_engine **out,
                    char *store_path, size_t cap) {
    *out = NULL;
    store_path[0] = '\0';
    const char *spec = a->ladder ? a->ladder : CLI_DEFAULT_LADDER;
    /* A bad spec is a usage error (exit 2), told before anything opens. */
    sj_ladder *l;
    int rc = CLI_EXIT_OK;
    if (sj_ladder_parse(ctx, spec, &l) != SJ_OK)
        rc = cli_usage_error(cmd, "--ladder: %s", sj_ctx_last_error(ctx));
    else
        sj_ladder_destroy(l);
    if (rc == CLI_EXIT_OK) rc = cli_backend_check(cmd, &a->backend);
    if (rc == CLI_EXIT_OK) rc = cli_store_path(cmd, a->store, store_path, cap);
    const char *url = NULL;
    char secret[CLI_SECRET_MAX + 1] = "";
    int lease_ms = SJ_REMOTE_DEFAULT_LEASE_MS;
    if (rc == CLI_EXIT_OK) rc = cli_remote_lease_ms(cmd, &a->remote, &lease_ms);
    if (rc == CLI_EXIT_OK) rc = cli_remote_resolve(cmd, &a->remote, &url, secret);
    if (rc != CLI_EXIT_OK) {
        sj_graph_destroy(g);
        return rc;
    }
    int64_t max_resident = 0;
    if (rc == CLI_EXIT_OK && a->max_resident) {
        char *end;
        long long v = strtoll(a->max_resident, &end, 10);
        if (!a->max_resident[0] || *end || v < 1 || v > INT32_MAX)
            rc = cli_usage_error(cmd, "--max-resident-buckets must be a count of at least 1, got '%s'",
                                 a->max_resident);
        max_resident = v;
    }
    int64_t native_after = 0;
    if (rc == CLI_EXIT_OK && a->native_after) {
        char *end;
        long long v = strtoll(a->native_after, &end, 10);
        if (!a->native_after[0] || *end || v < 1 || v > INT32_MAX)
            rc = cli_usage_error(cmd, "--native-after must be a count of runs of at least 1, got '%s'",
                                 a->native_after);
        else if (a->backend.name && strcmp(a->backend.name, "host") != 0)
            rc = cli_usage_error(cmd, "--native-after is for --backend host");
        else if (a->backend.cpu && strcmp(a->backend.cpu, "native") != 0)
            rc = cli_usage_error(cmd, "--native-after recompiles for this CPU; --cpu %s compiles every "
                                 "bucket for %s (leave --cpu native: it loads stored levels first)",
                                 a->backend.cpu, a->backend.cpu);
        native_after = v;
    }
    if (rc == CLI_EXIT_OK && a->tiered && a->backend.name && strcmp(a->backend.name, "host") != 0)
        rc = cli_usage_error(cmd, "--tiered is for --backend host");
    if (rc != CLI_EXIT_OK) {
        sj_graph_destroy(g);
        memset(secret, 0, sizeof secret);
        return rc;
    }
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.max_resident_buckets = (int)max_resident;
    cfg.native_after = (int)native_after;
    cfg.tiered = a->tiered;
    cfg.ladder = spec;
    cfg.store_path = store_path[0] ? store_path : NULL;
    /* Only the default may quietly degrade: a path the user named must work. */
    cfg.store_fallback_to_memory = a->store == NULL;
    cli_backend_config(&a->backend, &cfg);
    cfg.remote_url = url;
    cfg.remote_secret = secret;
    cfg.remote_secret_len = strlen(secret);
    cfg.remote_read_only = url && a->remote.read_only;
    cfg.remote_lease_ms = lease_ms;
    cfg.on_warning = cli_remote_print_warning;
    cfg.warning_user = (void *)cmd;
    cfg.store_only = a->store_only;
    sj_status st = sj_engine_open_graph(ctx, g, &cfg, out);
    memset(secret, 0, sizeof secret);
    __asm__ __volatile__("" : : "r"(secret) : "memory");
    if (st != SJ_OK) {
        /* The engine's message names the component and its value. */
        if (strstr(sj_ctx_last_error(ctx), "engine: store"))
            return cli_fail(cmd, "%s; --store none runs without one", sj_ctx_last_error(ctx));
        if (strstr(sj_ctx_last_error(ctx), "engine: remote"))
            return cli_fail(cmd, "--remote: %s", sj_ctx_last_error(ctx));
        return cli_fail_status(cmd, ctx, st);
    }
    if (sj_engine_warning(*out)[0]) fprintf(stderr, "shapejit %s: warning: %s\n", cmd, sj_engine_warning(*out));
    return CLI_EXIT_OK;
}

/* ", \"level_hits\": N, \"bucket_cpus\": {\"x86-64-v3\": 11}": how many ready
 * buckets came from each target CPU, so a fleet sees whether it runs the
 * portable levels a build machine stored or code compiled for itself; then
 * per ready bucket the CPU it serves from and where --native-after stands. */
static void cli_bucket_targets_member(FILE *f, sj_engine *e) {
    sj_bucketed_cache_stats cs;
    sj_bucketed_cache_stats_get(sj_engine_cache(e), &cs);
    fprintf(f, ", \"level_hits\": %llu, \"bucket_cpus\": {", (unsigned long long)cs.fallback_hits);
    int n = sj_engine_num_buckets(e), listed = 0;
    sj_engine_bucket_stats *b = calloc((size_t)n + 1, sizeof *b);
    for (int i = 0; b && i < n; i++)
        if (sj_engine_bucket_stats_get(e, i, &b[i]) != SJ_OK) b[i].cpu = NULL;
    for (int i = 0; b && i < n; i++) {
        const char *t = b[i].cpu;
        bool seen = !t;
        for (int j = 0; j < i && !seen; j++) seen = b[j].cpu && !strcmp(b[j].cpu, t);
        if (seen) continue;
        int count = 0;
        for (int j = i; j < n; j++) count += b[j].cpu && !strcmp(b[j].cpu, t);
        fprintf(f, "%s", listed++ ? ", " : "");
        cli_json_str(f, t);
        fprintf(f, ": %d", count);
    }
    static const char *const spec[] = {"none", "pending", "done", "failed"};
    fprintf(f, "}, \"specialised\": %llu, \"specialise_failures\": %llu, \"bucket_levels\": [",
            (unsigned long long)cs.specialised, (unsigned long long)cs.specialise_failures);
    listed = 0;
    for (int i = 0; b && i < n; i++) {
        if (!b[i].cpu) continue;
        fprintf(f, "%s{\"extent\": %lld, \"cpu\": ", listed++ ? ", " : "", (long long)b[i].hi);
        cli_json_str(f, b[i].cpu);
        fprintf(f, ", \"native_after\": \"%s\"}", spec[b[i].native]);
    }
    fputc(']', f);
    free(b);
}

void cli_stats_members(FILE *f, sj_engine *e) {
    sj_engine_stats s;
    sj_engine_stats_get(e, &s);
    fprintf(
        f,
        "\"memory_hits\": %llu, \"store_hits\": %llu, \"remote_hits\": %llu, \"compiles\": %llu, "
        "\"compile_ms\": %.3f, \"corrupt\": %llu, \"evictions\": %llu, \"store_errors\": %llu, "
        "\"one_offs\": %llu, \"compiled_buckets\": %d, \"total_buckets\": %d",
        (unsigned long long)s.memory_hits, (unsigned long long)s.store_hits,
        (unsigned long long)s.remote_hits, (unsigned long long)s.compiles, s.compile_ms,
        (unsigned long long)s.corrupt, (unsigned long long)s.evictions,
        (unsigned long long)s.store_errors, (unsigned long long)s.one_offs, s.buckets_ready, s.buckets);
    /* Repeated layers share kernels: launches - kernels were served by a
     * kernel compiled once for several launches. */
    fprintf(f,
            ", \"kernels\": %llu, \"launches\": %llu, \"kernels_reused\": %llu, \"stage_ms\": "
            "{\"lower\": %.3f, \"emit\": %.3f, \"optimise\": %.3f, \"codegen\": %.3f, \"load\": %.3f}",
            (unsigned long long)s.kernels, (unsigned long long)s.launches,
            (unsigned long long)(s.launches > s.kernels ? s.launches - s.kernels : 0), s.lower_ms,
            s.emit_ms, s.optimise_ms, s.codegen_ms, s.load_ms);
    /* Kernel objects compiled, and taken from the store instead (compiled
     * before for another bucket or model). */
    fprintf(f, ", \"objects_compiled\": %llu, \"objects_from_store\": %llu",
            (unsigned long long)s.objects_compiled, (unsigned long long)s.objects_found);
    /* Tiered compilation: quick code served first, swapped for the full code. */
    fprintf(f, ", \"quick_compiles\": %llu, \"tier_ups\": %llu, \"tier_up_failures\": %llu",
            (unsigned long long)s.quick_compiles, (unsigned long long)s.tier_ups,
            (unsigned long long)s.tier_up_failures);
    fprintf(f, ", \"store_bytes\": %lld, \"store_bytes_added\": %lld", (long long)s.store_bytes,
            (long long)s.store_bytes_added);
    /* The model's hash at open: "store" when its files were unchanged and
     * the weights' digests were kept, "hashed" when every byte was read. */
    fprintf(f, ", \"hash_ms\": %.3f, \"weight_digests\": \"%s\"", s.hash_ms,
            s.digests_from_store ? "store" : "hashed");
    fprintf(f,
            ", \"weight_bytes\": %llu, \"weight_mapped_bytes\": %llu, \"weight_packed_bytes\": %llu, "
            "\"run_bytes\": %llu, "
            "\"resident_buckets\": %d, "
            "\"resident_evictions\": %llu, \"peak_rss_bytes\": %llu, \"bucket_memory\": [",
            (unsigned long long)s.weight_bytes, (unsigned long long)s.weight_mapped_bytes,
            (unsigned long long)s.weight_packed_bytes, (unsigned long long)s.run_bytes, s.buckets_resident,
            (unsigned long long)s.resident_evictions, (unsigned long long)cli_peak_rss_bytes());
    bool first = true;
    for (int i = 0; i < s.buckets; i++) {
        sj_engine_bucket_stats b;
        if (sj_engine_bucket_stats_get(e, i, &b) != SJ_OK) continue;
        const sj_engine_memory m = b.memory;
        const int64_t hi = b.hi;
        if (!m.weight_bytes && !m.run_bytes) continue;
        /* peak: what a run of the bucket holds, its weights being shared;
         * estimated: read from the artifact of a bucket not loaded. */
        fprintf(f,
                "%s{\"extent\": %lld, \"weights_shared\": %llu, \"weights_mapped\": %llu, "
                "\"arena_bytes\": %llu, "
                "\"io_bytes\": %llu, \"peak_bytes\": %llu, \"resident\": %s, \"estimated\": %s}",
                first ? "" : ", ", (long long)hi, (unsigned long long)m.weight_bytes,
                (unsigned long long)m.weight_mapped_bytes,
                (unsigned long long)m.arena_bytes, (unsigned long long)m.io_bytes,
                (unsigned long long)(m.weight_bytes + m.run_bytes), m.resident ? "true" : "false",
                m.known && !m.loaded ? "true" : "false");
        first = false;
    }
    fputc(']', f);
    fprintf(f, ", \"device_lost\": %llu, \"device_resets\": %llu, \"reloads\": %llu",
            (unsigned long long)s.device_lost, (unsigned long long)s.device_resets,
            (unsigned long long)s.reloads);
    cli_bucket_targets_member(f, e);
    if (sj_engine_remote(e)) {
        fputs(", ", f);
        cli_remote_stats_members(f, sj_engine_remote(e));
    }
}

uint64_t cli_peak_rss_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %llu kB", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024u;
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
        sj_tensor_fill_seeded(&in[i], seed + (uint64_t)i);
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

int cli_warm_latency(const char *cmd, sj_ctx *ctx, sj_engine *e, int64_t rows, double budget_ns, double *us,
                     int64_t *extent) {
    if (sj_engine_warm_latency(e, rows, budget_ns, us, extent) != SJ_OK)
        return cli_fail(cmd, "%s", sj_ctx_last_error(ctx));
    return CLI_EXIT_OK;
}
