/* What run, precompile, serve and bench share: flags and the environment
 * mapped into an engine's configuration (docs/cli.md: the CLI maps
 * environment variables into configuration, the library reads none), the
 * --stats JSON, seeded random inputs and a percentile helper. */
#ifndef SJ_CLI_SERVING_H
#define SJ_CLI_SERVING_H

#include <stdio.h>

#include "cli/cli.h"
#include "shapejit/engine.h"
#include "shapejit/ext/device.h" /* SJ_HOST_MAX_THREADS */
#include "shapejit/remote.h"

#define CLI_DEFAULT_LADDER SJ_ENGINE_DEFAULT_LADDER
/* The backend of run and serve without --backend: host (LLVM, this CPU),
 * what a user of the tool wants, wherever the build has it; a runtime-only
 * build neither compiles nor loads host code, so the interpreter there. */
#ifdef SJ_RUNTIME_ONLY
#define CLI_DEFAULT_BACKEND "interp"
#else
#define CLI_DEFAULT_BACKEND "host"
#endif

#define CLI_STORE_USAGE                                                                            \
    "  --store PATH|none  the artifact store (default $SHAPEJIT_STORE, else\n"                     \
    "                     $XDG_CACHE_HOME/shapejit/store.db, else\n"                               \
    "                     ~/.cache/shapejit/store.db); 'none' keeps nothing\n"

/* Where --store points: "none" -> "" (no store); NULL -> the default from
 * the environment. Fails when no default can be formed (no HOME). */
int cli_store_path(const char *cmd, const char *flag, char *buf, size_t cap);

/* The fleet tier (a shared Redis under the local store), from flags or the
 * environment: --remote URL|none, else $SHAPEJIT_REMOTE; the MAC secret from
 * --remote-secret-file FILE (its content, trailing newlines dropped), else
 * $SHAPEJIT_REMOTE_SECRET; --remote-read-only fetches but never publishes. */
typedef struct cli_remote_flags {
    const char *url;         /* NULL: $SHAPEJIT_REMOTE; "none": no tier */
    const char *secret_file; /* NULL: $SHAPEJIT_REMOTE_SECRET (the secret itself) */
    bool read_only;
    const char *lease_ms;    /* --remote-lease-ms as given; NULL: the library's default */
} cli_remote_flags;
#define CLI_REMOTE_OPTS(f)                                                                         \
    {"--remote", CLI_OPT_STRING, &(f).url},                                                        \
        {"--remote-secret-file", CLI_OPT_STRING, &(f).secret_file},                                \
        {"--remote-read-only", CLI_OPT_FLAG, &(f).read_only},                                      \
        {"--remote-lease-ms", CLI_OPT_STRING, &(f).lease_ms}
#define CLI_REMOTE_USAGE                                                                           \
    "  --remote URL|none  the fleet tier under the store: redis://[:PASSWORD@]HOST[:PORT][/DB]\n"  \
    "                     (default $SHAPEJIT_REMOTE; none: no tier). A local miss asks it;\n"      \
    "                     fresh compiles are published to it\n"                                   \
    "  --remote-secret-file FILE  the fleet's shared secret (default $SHAPEJIT_REMOTE_SECRET):\n"  \
    "                     values carry a MAC, and a value without a valid one is never loaded\n"  \
    "  --remote-read-only fetch from the tier, never publish to it\n"                             \
    "  --remote-lease-ms MS  one compile per fleet: a node compiling a key holds its lease\n"    \
    "                     (renewed while it compiles); the others wait for its value at\n"     \
    "                     most MS, then compile themselves (default 30000; 0: no leases)\n"

/* The URL and secret the flags (and the environment) name: *url NULL when
 * there is no tier; secret gets the secret ("" for none, NUL-terminated,
 * at most CLI_SECRET_MAX bytes; the caller wipes it). Returns a CLI exit
 * status, the message printed. */
#define CLI_SECRET_MAX 4096
/* --remote-lease-ms as a count (the library's default when not given). */
int cli_remote_lease_ms(const char *cmd, const cli_remote_flags *f, int *out);
int cli_remote_resolve(const char *cmd, const cli_remote_flags *f, const char **url, char *secret);
/* Creates the tier the flags (and the environment) name; *out stays NULL
 * when there is none. Returns a CLI exit status, the message printed. */
/* Prints a remote tier's warning as "shapejit CMD: warning: ..." (user = CMD). */
void cli_remote_print_warning(void *user, const char *message);
int cli_remote_open(const char *cmd, sj_ctx *ctx, const cli_remote_flags *f, sj_remote **out);
/* The tier's counters as JSON members (no braces), each prefixed "remote_":
 * "remote_misses": 0, ... (remote_hits is the cache's own counter). */
void cli_remote_stats_members(FILE *f, const sj_remote *r);
/* "leases: W won, N waited for another node (H got its value, C compiled
 * after all), E errors": the fleet's compile leases, for text summaries. */
void cli_remote_lease_summary(FILE *f, const sj_remote_stats *s);

/* Which backend, and how it compiles. */
typedef struct cli_backend_args {
    const char *name; /* "host" (NULL), "interp" or "cuda" */
    const char *emit; /* cuda: "llvm" (NULL: the NVPTX path) or "nvrtc" */
    const char *arch; /* cuda: "sm_80" or "sm_90" (NULL) */
    const char *cpu;  /* host: NULL or "native", x86-64-v2|v3|v4, or an LLVM CPU name */
    bool tune;                  /* host: --tune, schedules timed per bucket */
    const char *tune_budget_ms; /* --tune-budget-ms MS as given (NULL: the default) */
    int devices;      /* host devices; 0 = 1 */
    const char *precision; /* --precision: fp32 (NULL), bf16 or fp16 */
    const char *threads;   /* --threads N as given (NULL: the CPUs over the workers) */
    const char *cuda_driver; /* cuda: --cuda-driver PATH, NULL = libcuda.so.1 */
} cli_backend_args;

#define CLI_THREADS_OPTS(b) {"--threads", CLI_OPT_STRING, &(b).threads}
#define CLI_THREADS_USAGE                                                                          \
    "  --threads N        host: threads a request's row-parallel kernels (elementwise,\n"          \
    "                     matmul, softmax, layernorm, attention over the rows) split over,\n"    \
    "                     the caller included (1..256; default: the CPU count over the\n"      \
    "                     workers, at least 1); small requests stay on one thread and\n"      \
    "                     results are bit-identical to --threads 1\n"

#define CLI_CUDA_DRIVER_USAGE                                                                      \
    "  --cuda-driver PATH cuda: the driver library to open instead of libcuda.so.1 (a\n"            \
    "                     driver outside the loader's path; tests give a fake one)\n"

#define CLI_PRECISION_USAGE                                                                        \
    "  --precision P      fp32 (default), bf16 or fp16: matmul and gemm weights stored in P\n"      \
    "                     (rounded to nearest even), accumulated in fp32; everything else\n"     \
    "                     fp32 (docs/precision.md). Part of the store key\n"

#define CLI_TUNE_OPTS(b)                                                                           \
    {"--tune", CLI_OPT_FLAG, &(b).tune}, {"--tune-budget-ms", CLI_OPT_STRING, &(b).tune_budget_ms}
#define CLI_TUNE_USAGE                                                                             \
    "  --tune             host: for each bucket compiled, time the schedules that differ\n"        \
    "                     (fused or unfused attention) at its extent and half of it and keep\n"  \
    "                     the fastest; tuned code has store keys of its own and records its\n"   \
    "                     timings (store ls), so pass --tune wherever it should be loaded\n"     \
    "  --tune-budget-ms MS  the timing budget per bucket (default 200, 1..600000)\n"
/* a (checked by cli_backend_check) into cfg's backend, compile and
 * worker fields. */
/* The kernel threads a's engine runs with: --threads, else the default
 * (the CPUs over the workers, host backend). */
int cli_backend_threads(const cli_backend_args *a);
void cli_backend_config(const cli_backend_args *a, sj_engine_config *cfg);
/* Checks the names in a (usage errors, exit 2) without making anything. */
int cli_backend_check(const char *cmd, const cli_backend_args *a);

/* The flags every engine command shares, mapped (with the environment)
 * into an sj_engine_config by cli_engine_open. */
typedef struct cli_engine_args {
    cli_backend_args backend;
    const char *ladder; /* a SPEC; NULL = CLI_DEFAULT_LADDER */
    const char *store;  /* --store as given (NULL = default) */
    cli_remote_flags remote;
    /* Precompile for other machines: nothing will be loaded, so a GPU
     * backend needs no GPU. */
    bool store_only;
    const char *max_resident; /* --max-resident-buckets N as given (NULL: no bound) */
    const char *native_after; /* --native-after N as given (NULL: never) */
    bool tiered;              /* --tiered */
} cli_engine_args;

#define CLI_RESIDENT_USAGE                                                                         \
    "  --max-resident-buckets N  buckets holding run memory (arena, padded inputs and\n"            \
    "                     outputs) at most; the least recently run gives it back for\n"          \
    "                     another (code and the shared weights stay). Default: no bound\n"

#define CLI_NATIVE_AFTER_USAGE                                                                     \
    "  --native-after N   host, --cpu native: a bucket served from a stored CPU level\n"            \
    "                     is recompiled for this CPU in the background after N runs,\n"        \
    "                     stored, and swapped in (default: never)\n"

#define CLI_TIERED_USAGE                                                                           \
    "  --tiered           host: a bucket no store holds is compiled at -O0 first and\n"          \
    "                     serves at once; its -O3 code is compiled in the background,\n"      \
    "                     stored, and swapped in (default: off; the -O0 code is never\n"      \
    "                     stored)\n"

/* Process peak resident set (VmHWM) in bytes, 0 when the system does not say. */
uint64_t cli_peak_rss_bytes(void);

/* An engine over g (taken, also on failure) configured by a and the
 * environment; store_path (cap bytes) gets the store used, "" for none. A
 * default store that cannot be opened falls back to memory with a warning;
 * a --store PATH that cannot is an error. Returns a CLI exit status, the
 * message printed. */
int cli_engine_open(const char *cmd, sj_ctx *ctx, sj_graph *g, const cli_engine_args *a, sj_engine **out,
                    char *store_path, size_t cap);

/* The engine's counters as JSON members (no braces): "memory_hits": 1, ...,
 * the memory figures (weights shared by the buckets, run memory, per-bucket
 * arena and peak, the process's peak RSS) and the fleet tier's
 * (remote_misses, remote_errors, ...) when it has one. */
void cli_stats_members(FILE *f, sj_engine *e);

/* Seeded uniform values in [-1, 1) for every input at `extent`; input i
 * uses seed + i. in[] has one tensor per graph input; freed by the caller
 * also on failure. Returns a CLI exit status. */
int cli_random_inputs(const char *cmd, sj_ctx *ctx, const sj_graph *g, int64_t extent,
                      uint64_t seed, sj_tensor *in);

/* The median warm latency (microseconds) of requests of `rows` rows
 * (seeded random inputs) through e, leaving out the first, which makes the
 * bucket ready: at least 3 timed runs, more (at most 64) until budget_ns
 * is spent. *extent: the bucket they ran in. Returns a CLI exit status. */
int cli_warm_latency(const char *cmd, sj_ctx *ctx, sj_engine *e, int64_t rows, double budget_ns, double *us,
                     int64_t *extent);
/* s as a JSON string literal, quotes included. */
void cli_json_str(FILE *f, const char *s);

/* The q-quantile (0..1) of sorted values, nearest rank. */
double cli_percentile(const double *sorted, size_t n, double q);
int cli_cmp_double(const void *a, const void *b);

#endif
