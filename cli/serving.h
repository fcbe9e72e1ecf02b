/* What run, precompile, serve and bench share: the store's default path
 * (CLI.md: the CLI maps environment variables into configuration, the
 * library reads none), a backend by name, a bucketed cache over both, the
 * --stats JSON, seeded random inputs and a percentile helper. */
#ifndef SJ_CLI_SERVING_H
#define SJ_CLI_SERVING_H

#include <stdio.h>

#include "cli/cli.h"
#include "shapejit/backends.h"
#include "shapejit/bucketed_cache.h"
#include "shapejit/remote.h"
#include "shapejit/store.h"

#define CLI_BACKENDS "host|interp|cuda"
#define CLI_DEFAULT_LADDER "pow2:1:65536"

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
} cli_remote_flags;
#define CLI_REMOTE_OPTS(f)                                                                         \
    {"--remote", CLI_OPT_STRING, &(f).url},                                                        \
        {"--remote-secret-file", CLI_OPT_STRING, &(f).secret_file},                                \
        {"--remote-read-only", CLI_OPT_FLAG, &(f).read_only}
#define CLI_REMOTE_USAGE                                                                           \
    "  --remote URL|none  the fleet tier under the store: redis://[:PASSWORD@]HOST[:PORT][/DB]\n"  \
    "                     (default $SHAPEJIT_REMOTE; none: no tier). A local miss asks it;\n"      \
    "                     fresh compiles are published to it\n"                                   \
    "  --remote-secret-file FILE  the fleet's shared secret (default $SHAPEJIT_REMOTE_SECRET):\n"  \
    "                     values carry a MAC, and a value without a valid one is never loaded\n"  \
    "  --remote-read-only fetch from the tier, never publish to it\n"

/* Creates the tier the flags (and the environment) name; *out stays NULL
 * when there is none. Returns a CLI exit status, the message printed. */
int cli_remote_open(const char *cmd, sj_ctx *ctx, const cli_remote_flags *f, sj_remote **out);
/* The tier's counters as JSON members (no braces), each prefixed "remote_":
 * "remote_misses": 0, ... (remote_hits is the cache's own counter). */
void cli_remote_stats_members(FILE *f, const sj_remote *r);

/* A backend's compiler: the interpreter, the host (LLVM, this CPU; `devices`
 * host devices, one per worker lets different buckets run at once) or cuda
 * (NVPTX or NVRTC code for one arch, run on GPU 0). */
typedef struct cli_backend {
    const char *name;
    char target[32];        /* what precompile and messages call it: host, nvptx sm_90, ... */
    sj_host_compiler *host; /* the host backend's, else NULL */
    sj_gpu_compiler *gpu;   /* the cuda backend's, else NULL */
    sj_compiler comp;
    sj_bucketed_cache_config cfg;
} cli_backend;

/* Which backend, and how it compiles. */
typedef struct cli_backend_args {
    const char *name; /* "host" (NULL), "interp" or "cuda" */
    const char *emit; /* cuda: "llvm" (NULL: the NVPTX path) or "nvrtc" */
    const char *arch; /* cuda: "sm_80" or "sm_90" (NULL) */
    int devices;      /* host devices; 0 = 1 */
} cli_backend_args;

/* Checks the names in a (usage errors, exit 2) without making anything. */
int cli_backend_check(const char *cmd, const cli_backend_args *a);
/* The backend a names: its compiler table and the cache config its keys
 * are made with. No device is needed (cuda makes its GPU at the first
 * load). Returns a CLI exit status, the message printed; cli_backend_close
 * frees it (also after a failure). */
int cli_backend_open(const char *cmd, sj_ctx *ctx, const cli_backend_args *a, cli_backend *b);
void cli_backend_close(cli_backend *b);

/* Everything a command needs to push requests through one cache. */
typedef struct cli_cache {
    sj_ctx *ctx;
    sj_ladder *ladder;
    sj_store *store;       /* NULL with --store none */
    sj_remote *remote;     /* the fleet tier, or NULL */
    char store_path[4096]; /* "" with --store none */
    cli_backend backend;
    sj_bucketed_cache *cache;
} cli_cache;

typedef struct cli_cache_args {
    cli_backend_args backend;
    const char *ladder; /* a SPEC; NULL = CLI_DEFAULT_LADDER */
    const char *store;  /* --store as given (NULL = default) */
    cli_remote_flags remote;
    /* Precompile for other machines: nothing will be loaded, so a GPU
     * backend needs no GPU. Otherwise cuda makes its device at open and a
     * machine without one fails there, before any compile. */
    bool store_only;
    /* Called with the backend's table before the cache is made, so a command
     * can put a wrapper around it (NULL: none). */
    void (*wrap)(void *user, sj_compiler *comp);
    void *wrap_user;
} cli_cache_args;

/* Opens store, ladder, compiler and cache for g (borrowed; it must outlive
 * the cache). Returns a CLI exit status, the message printed; on failure
 * everything opened is closed again. A default store that cannot be opened
 * falls back to memory with a warning; a --store PATH that cannot is an
 * error. */
int cli_cache_open(const char *cmd, sj_ctx *ctx, const sj_graph *g, const cli_cache_args *a,
                   cli_cache *out);
void cli_cache_close(cli_cache *c);

/* The cache's counters as JSON members (no braces): "memory_hits": 1, ...,
 * and the fleet tier's (remote_misses, remote_errors, ...) when it has one. */
void cli_stats_members(FILE *f, const cli_cache *c);

/* Seeded uniform values in [-1, 1) for every input at `extent`; input i
 * uses seed + i. in[] has one tensor per graph input; freed by the caller
 * also on failure. Returns a CLI exit status. */
int cli_random_inputs(const char *cmd, sj_ctx *ctx, const sj_graph *g, int64_t extent,
                      uint64_t seed, sj_tensor *in);

/* s as a JSON string literal, quotes included. */
void cli_json_str(FILE *f, const char *s);

/* The q-quantile (0..1) of sorted values, nearest rank. */
double cli_percentile(const double *sorted, size_t n, double q);
int cli_cmp_double(const void *a, const void *b);

#endif
