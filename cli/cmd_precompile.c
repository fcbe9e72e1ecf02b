/* shapejit precompile MODEL --ladder SPEC: every bucket into the store at
 * deploy time, so the serving processes start warm. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/serving.h"
#include "shapejit/ext/backends.h"

static const char usage[] =
    "usage: shapejit precompile MODEL --ladder SPEC [--target host|nvptx|nvrtc|all]\n"
    "                           [--arch sm_80|sm_90] [--cpu C[,C...]] [--store PATH]\n"
    "                           [--remote URL|none] [--remote-secret-file FILE]\n"
    "                           [--remote-read-only] [--remote-lease-ms MS] [--jobs N]\n"
    "                           [--tune [--tune-budget-ms MS]] [--stats]\n"
    "                           [--precision fp32|bf16|fp16] " CLI_MODEL_USAGE "\n"
    "  Compiles every bucket of the ladder into the store (buckets already stored\n"
    "  are loaded and checked, not compiled again), then prints one summary line.\n"
    "  Progress: a bar on a terminal, one line per bucket otherwise.\n"
    "  --ladder SPEC      pow2:MIN:MAX, geo:MIN:MAX:RATIO or list:E1,E2,...\n"
    "  --target T         host (default), nvptx (LLVM NVPTX), nvrtc (CUDA C via NVRTC),\n"
    "                     or all: every target this build compiles for. GPU targets\n"
    "                     are compiled and stored, not loaded: no GPU is needed, so a\n"
    "                     CPU build machine can fill the store for a GPU fleet\n"
    "  --arch A           GPU targets: sm_80 or sm_90 (default)\n"
    "  --cpu C[,C...]     host target: the CPUs to compile for, each stored under its own\n"
    "                     key: native (default), x86-64-v2|v3|v4 (portable levels a fleet\n"
    "                     of differing CPUs loads from), or an LLVM CPU name\n"
    CLI_PRECISION_USAGE
    "  --jobs N           buckets compiled at once (default: the CPU count; with --tune 1,\n"
    "                     so no other compile is in a bucket's timings)\n"
    CLI_TUNE_USAGE
    /* clang-format off */
    CLI_STORE_USAGE
    CLI_REMOTE_USAGE
    /* clang-format on */
    "  --stats            print one JSON object of counters on stderr\n";

typedef struct progress {
    bool tty;
    const char *target;
    double t0;
} progress;

static void on_bucket(void *user, int done, int total, int64_t extent) {
    progress *p = user;
    double s = (cli_now_ms() - p->t0) / 1e3;
    if (!p->tty) {
        fprintf(stderr, "precompile %s: %d/%d buckets (extent %lld) %.2f s\n", p->target, done,
                total, (long long)extent, s);
        return;
    }
    enum { WIDTH = 30 };
    int filled = total ? done * WIDTH / total : WIDTH;
    char bar[WIDTH + 1];
    for (int i = 0; i < WIDTH; i++) bar[i] = i < filled ? '#' : '.';
    bar[WIDTH] = '\0';
    fprintf(stderr, "\r%s [%s] %d/%d buckets  extent %-8lld %6.1f s", p->target, bar, done, total,
            (long long)extent, s);
    if (done == total) fputc('\n', stderr);
    fflush(stderr);
}

/* What each bucket will hold once it serves, so a deploy sees a bucket too
 * big for its machines before any request reaches it (--stats has them
 * per bucket too). */
static void print_bucket_memory(sj_engine *e) {
    int n = sj_engine_num_buckets(e), known = 0;
    uint64_t weights = 0;
    for (int i = 0; i < n; i++) {
        sj_engine_memory m;
        int64_t lo, hi;
        bool ready;
        if (sj_engine_bucket_memory(e, i, &m) != SJ_OK || !m.known ||
            sj_engine_bucket(e, i, &lo, &hi, &ready) != SJ_OK)
            continue;
        char run[32];
        printf("%s%lld: %s", known++ ? ", " : "run memory per bucket once it serves (extent: bytes): ",
               (long long)hi, cli_bytes(m.run_bytes, run, sizeof run));
        if (m.weight_bytes > weights) weights = m.weight_bytes;
    }
    if (!known) return;
    char w[32];
    printf("; weights %s, one copy shared by every bucket\n", cli_bytes(weights, w, sizeof w));
}

/* Takes g: the engine owns it once opened. */
static int precompile_target(const char *cmd, sj_ctx *ctx, sj_graph *g, const cli_engine_args *ea,
                             int jobs, bool stats, double import_ms) {
    sj_engine *e;
    char store_path[4096];
    int rc = cli_engine_open(cmd, ctx, g, ea, &e, store_path, sizeof store_path);
    if (rc != CLI_EXIT_OK) return rc;
    const char *target = sj_engine_target(e);
    progress p = {.tty = isatty(STDERR_FILENO), .target = target, .t0 = cli_now_ms()};
    sj_status st = sj_engine_precompile(e, jobs, on_bucket, &p);
    double secs = (cli_now_ms() - p.t0) / 1e3;
    char why[1024];
    snprintf(why, sizeof why, "%s", st != SJ_OK ? sj_ctx_last_error(ctx) : "");
    sj_remote *remote = sj_engine_remote(e);
    sj_engine_stats s;
    sj_engine_stats_get(e, &s);
    if (st != SJ_OK && p.tty) fputc('\n', stderr);
    /* Buckets compiled but refused by the store still get the summary (which
     * counts them) before the error and exit 1. */
    if (st != SJ_OK && !s.not_stored) {
        rc = cli_fail_status(cmd, ctx, st);
    } else {
        /* Deploy steps end with the fleet holding every bucket. */
        if (remote) sj_remote_flush(remote);
        char spec[256];
        sj_ladder_format(sj_engine_ladder(e), spec, sizeof spec);
        printf("precompiled %d buckets of %s for %s in %.2f s: %llu compiled, %llu from the store, "
               "%llu corrupt rows replaced",
               s.buckets, spec, target, secs, (unsigned long long)s.compiles,
               (unsigned long long)(s.store_hits + s.remote_hits), (unsigned long long)s.corrupt);
        if (s.not_stored) printf(", %llu NOT STORED", (unsigned long long)s.not_stored);
        printf("; store %s", store_path[0] ? store_path : "none");
        if (remote) {
            sj_remote_stats rs;
            sj_remote_stats_get(remote, &rs);
            printf("; remote %s: %llu fetched, %llu published, %llu not published", sj_remote_url(remote),
                   (unsigned long long)s.remote_hits, (unsigned long long)rs.puts,
                   (unsigned long long)rs.dropped_puts);
            fputs("; ", stdout);
            cli_remote_lease_summary(stdout, &rs);
        }
        putchar('\n');
        print_bucket_memory(e);
        if (stats) {
            fprintf(stderr, "{\"target\": \"%s\", \"seconds\": %.3f, \"import_ms\": %.3f, ", target,
                    secs, import_ms);
            cli_stats_members(stderr, e);
            fprintf(stderr, "}\n");
        }
        if (st != SJ_OK) rc = cli_fail(cmd, "%s", why);
    }
    sj_engine_close(e);
    return rc;
}

/* Whether this build compiles for a GPU target (NVRTC needs the CUDA
 * toolkit at build time; NVPTX is LLVM's). */
static bool gpu_target_built(sj_ctx *ctx, sj_target t, char *why, size_t cap) {
    sj_gpu_compiler_config gcfg;
    sj_gpu_compiler_config_init(&gcfg);
    gcfg.options.target = t;
    sj_gpu_compiler *gc;
    sj_status st = sj_gpu_compiler_create(ctx, &gcfg, &gc);
    sj_gpu_compiler_destroy(gc);
    snprintf(why, cap, "%s", st == SJ_OK ? "" : sj_ctx_last_error(ctx));
    return st == SJ_OK;
}

#define CLI_MAX_CPUS 8

int cli_cmd_precompile(int argc, char **argv) {
    const char *cmd = "precompile";
    const char *ladder = NULL, *target = "host", *store = NULL, *arch = NULL, *cpus = NULL;
    const char *precision = NULL;
    int64_t jobs = 0;
    bool stats = false;
    cli_model_flags model = {0};
    cli_remote_flags remote = {0};
    cli_backend_args tune = {0}; /* --tune and its budget, for the host passes */
    const cli_opt opts[] = {
        {"--ladder", CLI_OPT_STRING, &ladder}, {"--target", CLI_OPT_STRING, &target},
        {"--store", CLI_OPT_STRING, &store},   {"--jobs", CLI_OPT_INT, &jobs},
        {"--stats", CLI_OPT_FLAG, &stats},     {"--arch", CLI_OPT_STRING, &arch},
        {"--cpu", CLI_OPT_STRING, &cpus},      CLI_TUNE_OPTS(tune),
        {"--precision", CLI_OPT_STRING, &precision},
        CLI_MODEL_OPTS(model),                 CLI_REMOTE_OPTS(remote),
    };
    const char *pos[1];
    int n_pos;
    cli_parse_result r =
        cli_parse(cmd, usage, argc, argv, opts, CLI_COUNT(opts), pos, 1, 1, &n_pos);
    if (r != CLI_PARSED) return cli_parse_exit(r);
    if (!ladder) return cli_usage_error(cmd, "--ladder SPEC is required (e.g. pow2:1:1024)");
    /* Tuning times each bucket: a second compile beside it would be in its timings. */
    if (jobs == 0 && tune.tune) jobs = 1;
    if (jobs == 0) jobs = sysconf(_SC_NPROCESSORS_ONLN) > 0 ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
    if (jobs < 1 || jobs > 256) return cli_usage_error(cmd, "--jobs must be in 1..256");
    static const char *const targets[] = {"host", "nvptx", "nvrtc"};
    bool want[3] = {false, false, false}, all = !strcmp(target, "all");
    for (int i = 0; i < 3; i++) want[i] = all || !strcmp(target, targets[i]);
    if (!want[0] && !want[1] && !want[2])
        return cli_usage_error(cmd, "unknown target '%s' (host, nvptx, nvrtc or all)", target);
    if (arch && !want[1] && !want[2])
        return cli_usage_error(cmd, "--arch is for the GPU targets (nvptx, nvrtc, all)");
    if (cpus && !want[0]) return cli_usage_error(cmd, "--cpu is for the host target");
    if ((tune.tune || tune.tune_budget_ms) && !want[0]) return cli_usage_error(cmd, "--tune is for the host target");
    if (tune.tune && cpus && strcmp(cpus, "native") != 0)
        return cli_usage_error(cmd, "--tune times the code on this machine, so it takes --cpu native only "
                                    "(a level or another CPU is stored, not run, here)");
    /* --cpu x86-64-v2,x86-64-v3: one host pass per CPU, into one store. */
    char cpu_list[1024];
    const char *host_cpus[CLI_MAX_CPUS] = {NULL};
    int n_cpus = 1;
    if (cpus) {
        if (snprintf(cpu_list, sizeof cpu_list, "%s", cpus) >= (int)sizeof cpu_list)
            return cli_usage_error(cmd, "--cpu list longer than %zu bytes", sizeof cpu_list - 1);
        n_cpus = 0;
        for (char *save = NULL, *c = strtok_r(cpu_list, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
            if (n_cpus == CLI_MAX_CPUS) return cli_usage_error(cmd, "--cpu names more than %d CPUs", CLI_MAX_CPUS);
            host_cpus[n_cpus++] = c;
        }
        if (!n_cpus) return cli_usage_error(cmd, "--cpu needs at least one CPU name");
    }
    cli_backend_args gpu_check = {.name = "cuda", .arch = arch, .precision = precision};
    int rc = cli_backend_check(cmd, &gpu_check);
    if (rc != CLI_EXIT_OK) return rc;

    sj_ctx *ctx = cli_ctx_create(cmd);
    if (!ctx) return CLI_EXIT_FAIL;
    /* One pass per host CPU, then one per GPU target. */
    for (int i = 0; rc == CLI_EXIT_OK && i < 3; i++) {
        if (!want[i]) continue;
        char why[512];
        if (i == 2 && all && precision && strcmp(precision, "fp32") != 0) {
            /* The CUDA C emitter lowers fp32 only; "all" leaves it out, saying so. */
            fprintf(stderr, "precompile: target %s skipped: precision %s not supported by target %s\n",
                    targets[i], precision, targets[i]);
            continue;
        }
        if (i > 0 && all &&
            !gpu_target_built(ctx, i == 1 ? SJ_TARGET_NVPTX : SJ_TARGET_NVRTC, why, sizeof why)) {
            /* "all" is what this build compiles for: say what is left out. */
            fprintf(stderr, "precompile: target %s skipped: %s\n", targets[i], why);
            continue;
        }
        for (int pass = 0; rc == CLI_EXIT_OK && pass < (i == 0 ? n_cpus : 1); pass++) {
            cli_engine_args ea = {.ladder = ladder, .store = store, .remote = remote};
            if (i == 0) {
                /* Another machine's CPU (a level, a named CPU) is stored, not
                 * loaded: this machine may not be able to run it. */
                const char *cpu = host_cpus[pass];
                ea.backend = (cli_backend_args){.name = "host", .devices = 1, .cpu = cpu, .tune = tune.tune,
                                                .tune_budget_ms = tune.tune_budget_ms,
                                                .precision = precision};
                ea.store_only = cpu && strcmp(cpu, "native") != 0;
            } else {
                ea.backend = (cli_backend_args){.name = "cuda", .emit = i == 1 ? "llvm" : "nvrtc",
                                                .arch = arch, .precision = precision};
                ea.store_only = true;
            }
            /* Each pass's engine owns its own copy of the model. */
            sj_graph *g = NULL;
            double t0 = cli_now_ms();
            rc = cli_load_model(cmd, ctx, pos[0], &model, &g);
            double import_ms = cli_now_ms() - t0;
            if (rc == CLI_EXIT_OK) rc = precompile_target(cmd, ctx, g, &ea, (int)jobs, stats, import_ms);
        }
    }
    sj_ctx_destroy(ctx);
    return rc;
}
