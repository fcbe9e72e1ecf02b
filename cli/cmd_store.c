/* shapejit store ls|stats|verify|gc|rm|export|import|explain: look after
 * the artifact store. Every subcommand takes --store PATH (else
 * $SHAPEJIT_STORE, $XDG_CACHE_HOME/shapejit/store.db, ~/.cache/shapejit/
 * store.db) and --json (one JSON value on stdout instead of text). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/serving.h"
#include "shapejit/ext/artifact.h"
#include "shapejit/ext/bucketed_cache.h"
#include "shapejit/remote.h"
#include "shapejit/store.h"

static const char usage[] =
    "usage: shapejit store SUBCOMMAND [--store PATH] [--json] ...\n"
    "  ls                          list every stored artifact with its key and the memory\n"
    "                              its bucket needs to serve: run memory (arena, padded\n"
    "                              inputs and outputs) and weights (one copy shared by\n"
    "                              every bucket of the graph)\n"
    "  stats [--remote URL]        entries and bytes; with a fleet tier (--remote, else\n"
    "                              $SHAPEJIT_REMOTE) also whether it answers, how fast,\n"
    "                              and its counters\n"
    "  verify                      decompress and hash-check every row (exit 1 if any is corrupt)\n"
    "  gc [--max-bytes N] [--keep-corrupt] [--max-weight-bytes W]\n"
    "                              remove corrupt rows, evict least recently used above N;\n"
    "                              bound the packed weights kept beside the store\n"
    "                              (STORE-weights) to W bytes, least recently used first\n"
    "  rm HASH_PREFIX              remove the rows of every graph whose hash starts so\n"
    "  export FILE [--graph PREFIX] write rows to FILE (all, or one graph's)\n"
    "  import FILE                 add the rows of FILE that pass the checks (each refused\n"
    "                              one is named, with why). The checks catch damage, not\n"
    "                              malice: rows hold native code that runs here, so import\n"
    "                              only archives from sources you trust\n"
    "  explain MODEL --rows N [--ladder SPEC] [--limit K]\n"
    "          [--backend host|interp|cuda [--emit llvm|nvrtc] [--arch sm_80|sm_90]]\n"
    "                              the stored rows nearest to the key a run at N rows\n"
    "                              looks up, and which key components differ\n"
    "                              with B's compiler (default host: this CPU and LLVM)\n"
    "                              (ladder default pow2:1:N rounded up; K default 3)\n"
    "  --store PATH   the store (default $SHAPEJIT_STORE, else\n"
    "                 $XDG_CACHE_HOME/shapejit/store.db, else ~/.cache/shapejit/store.db)\n"
    "  --json         machine-readable output\n";

typedef struct store_args {
    const char *store, *ladder, *backend, *emit, *arch, *graph;
    int64_t max_bytes, max_weight_bytes, rows, limit;
    bool json, keep_corrupt;
    cli_model_flags model;
    cli_remote_flags remote;
} store_args;

static void json_str(const char *s) {
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p < 0x20) printf("\\u%04x", *p);
        else putchar(*p);
    }
    putchar('"');
}

static void fmt_time(int64_t ms, char *buf, size_t cap) {
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The row's key and sizes, as an object the caller closes (ls adds members). */
static void print_entry_json(const sj_store_entry *e) {
    char gh[65], oh[65], when[32];
    sj_hash_hex(e->key.graph_hash, gh);
    sj_hash_hex(e->key.options_hash, oh);
    printf("{\"graph_hash\": \"%s\", \"extent\": %lld, \"options_hash\": \"%s\", \"target_triple\": ", gh,
           (long long)e->key.extent, oh);
    json_str(e->key.target_triple);
    printf(", \"target_cpu\": ");
    json_str(e->key.target_cpu);
    printf(", \"target_features\": ");
    json_str(e->key.target_features);
    printf(", \"artifact_version\": %u, \"shapejit_version\": ", e->key.artifact_version);
    json_str(e->key.shapejit_version);
    printf(", \"compiler_version\": ");
    json_str(e->key.compiler_version);
    fmt_time(e->last_used_ms, when, sizeof when);
    printf(", \"raw_bytes\": %lld, \"stored_bytes\": %lld, \"last_used\": \"%s\"", (long long)e->raw_bytes,
           (long long)e->stored_bytes, when);
}

/* The row's key and sizes on a line the caller ends (ls adds the memory). */
static void print_entry_text(const sj_store_entry *e) {
    char gh[65], oh[65], when[32];
    sj_hash_hex(e->key.graph_hash, gh);
    sj_hash_hex(e->key.options_hash, oh);
    fmt_time(e->last_used_ms, when, sizeof when);
    printf("%.16s  %8lld  opt %.8s  %s/%s%s%s  fmt %u  shapejit %s  %s  %lld -> %lld bytes  used %s", gh,
           (long long)e->key.extent, oh, e->key.target_triple, e->key.target_cpu[0] ? e->key.target_cpu : "-",
           e->key.target_features[0] ? "/" : "", e->key.target_features, e->key.artifact_version,
           e->key.shapejit_version, e->key.compiler_version, (long long)e->raw_bytes, (long long)e->stored_bytes,
           when);
}

typedef struct ls_state {
    bool json;
    int64_t n;
    sj_ctx *ctx; /* ls: decodes each row's artifact */
} ls_state;

/* What the row's bucket needs to serve, read from its launch plan, and
 * what tuning chose for it; rows that hold no launch plan (the
 * interpreter's) have no figure. */
static void print_memory(sj_ctx *ctx, const void *bytes, size_t len, bool json) {
    sj_artifact *a;
    if (sj_artifact_deserialize(ctx, bytes, len, &a) != SJ_OK) {
        printf(json ? ", \"run_bytes\": null" : "  run -\n");
        return;
    }
    sj_artifact_info in;
    sj_artifact_get_info(a, &in);
    char tuning[1024];
    cli_printable(in.tuning, tuning, sizeof tuning);
    if (json) {
        printf(", \"run_bytes\": %lld, \"arena_bytes\": %lld, \"io_bytes\": %lld, \"weight_bytes\": %lld, "
               "\"tuning\": ",
               (long long)in.run_bytes, (long long)in.arena_bytes, (long long)in.io_bytes,
               (long long)in.weight_bytes);
        json_str(tuning);
    } else {
        char run[32], arena[32], io[32], w[32];
        printf("  run %s (arena %s, io %s)  weights %s\n", cli_bytes((uint64_t)in.run_bytes, run, sizeof run),
               cli_bytes((uint64_t)in.arena_bytes, arena, sizeof arena),
               cli_bytes((uint64_t)in.io_bytes, io, sizeof io),
               cli_bytes((uint64_t)in.weight_bytes, w, sizeof w));
        if (tuning[0]) printf("    tuned: %s\n", tuning);
    }
    sj_artifact_destroy(a);
}

static int ls_visit(void *user, const sj_store_entry *e, const void *bytes, size_t len) {
    ls_state *s = user;
    if (s->json) {
        printf(s->n ? ",\n  " : "\n  ");
        print_entry_json(e);
        print_memory(s->ctx, bytes, len, true);
        printf("}");
    } else {
        print_entry_text(e);
        print_memory(s->ctx, bytes, len, false);
    }
    s->n++;
    return 0;
}

/* ls lists a corrupt row too, saying so (verify and gc act on it). */
static void ls_corrupt(void *user, const sj_store_entry *e, const char *why) {
    ls_state *s = user;
    char shown[512];
    cli_printable(why, shown, sizeof shown);
    if (s->json) {
        printf(s->n ? ",\n  " : "\n  ");
        print_entry_json(e);
        printf(", \"corrupt\": ");
        json_str(shown);
        printf("}");
    } else {
        print_entry_text(e);
        printf("  CORRUPT: %s\n", shown);
    }
    s->n++;
}

/* Why an imported record was refused, one line each on stderr. */
static void rejected_record(void *user, const sj_store_entry *e, const char *why) {
    char gh[65], shown[512];
    sj_hash_hex(e->key.graph_hash, gh);
    fprintf(stderr, "shapejit store import: rejected graph %.16s extent %lld: %s\n", gh,
            (long long)e->key.extent, cli_printable(why, shown, sizeof shown));
}

static void bad_row(void *user, const sj_store_entry *e, const char *why) {
    ls_state *s = user;
    char gh[65];
    sj_hash_hex(e->key.graph_hash, gh);
    if (s->json) {
        printf(s->n ? ",\n  " : "\n  ");
        printf("{\"graph_hash\": \"%s\", \"extent\": %lld, \"problem\": ", gh, (long long)e->key.extent);
        json_str(why);
        printf("}");
    } else {
        fprintf(stderr, "shapejit store verify: corrupt: graph %.16s extent %lld: %s\n", gh,
                (long long)e->key.extent, why);
    }
    s->n++;
}

static void explained(void *user, const sj_store_entry *e, unsigned differs) {
    ls_state *s = user;
    char list[256] = "";
    for (unsigned bit = 1; bit & SJ_KEY_ALL_; bit <<= 1)
        if (differs & bit) {
            if (list[0]) strncat(list, ", ", sizeof list - strlen(list) - 1);
            strncat(list, sj_store_key_component_name(bit), sizeof list - strlen(list) - 1);
        }
    if (s->json) {
        printf(s->n ? ",\n  " : "\n  ");
        printf("{\"differs\": [");
        int k = 0;
        for (unsigned bit = 1; bit & SJ_KEY_ALL_; bit <<= 1)
            if (differs & bit) printf("%s\"%s\"", k++ ? ", " : "", sj_store_key_component_name(bit));
        printf("], \"entry\": ");
        print_entry_json(e);
        printf("}}");
    } else {
        printf("%s: ", differs ? list : "identical (the key is stored)");
        print_entry_text(e);
        putchar('\n');
    }
    s->n++;
}

/* One get of a key nobody stores: a Redis answer of any kind (absent, or
 * a value the tier rejects) says the server is up and how far away it is;
 * bytes that are not a Redis reply (SJ_E_PARSE) say something else
 * listens there, which is a failure, not an answer. */
static int remote_ping(const char *cmd, sj_ctx *ctx, const store_args *a) {
    sj_remote *r = NULL;
    int rc = cli_remote_open(cmd, ctx, &a->remote, &r);
    if (rc != CLI_EXIT_OK || !r) return rc;
    static const uint8_t probe[SJ_REMOTE_KEY_SIZE] = {'s', 'h', 'a', 'p', 'e', 'j', 'i', 't', ' ',
                                                       'p', 'i', 'n', 'g'};
    void *bytes = NULL;
    size_t n = 0;
    double t0 = cli_now_ms();
    sj_status st = sj_remote_get(r, probe, &bytes, &n);
    double ms = cli_now_ms() - t0;
    sj_free(ctx, bytes);
    bool up = st == SJ_OK || st == SJ_E_NOT_FOUND || st == SJ_E_CORRUPT;
    char why[512];
    snprintf(why, sizeof why, "%s", up ? "" : sj_ctx_last_error(ctx));
    sj_remote_stats rs;
    sj_remote_stats_get(r, &rs);
    if (a->json) { /* a member of the stats object */
        printf(", \"remote\": {\"url\": ");
        json_str(sj_remote_url(r));
        printf(", \"reachable\": %s, \"ping_ms\": %.3f, \"error\": ", up ? "true" : "false", ms);
        json_str(why);
        printf(", \"read_only\": %s, ", a->remote.read_only ? "true" : "false");
        cli_remote_stats_members(stdout, r);
        printf("}");
    } else {
        printf("remote %s: %s in %.3f ms; %llu errors, %llu timeouts, %llu rejected\n",
               sj_remote_url(r),
               up                    ? "answered"
               : st == SJ_E_PARSE    ? "answered, but not with a Redis reply"
                                     : "no answer",
               ms, (unsigned long long)rs.errors,
               (unsigned long long)rs.timeouts, (unsigned long long)rs.rejected);
    }
    if (!up && st == SJ_E_PARSE)
        rc = cli_fail(cmd, "remote %s is not a Redis server (its reply is not a Redis reply): %s",
                      sj_remote_url(r), why);
    else if (!up)
        rc = cli_fail(cmd, "remote %s does not answer: %s", sj_remote_url(r), why);
    sj_remote_destroy(r);
    return rc;
}

static void find_identical(void *user, const sj_store_entry *e, unsigned differs) {
    (void)e;
    if (!differs) *(bool *)user = true;
}

static bool stored(sj_store *s, const sj_store_key *key) {
    bool found = false;
    return sj_store_explain(s, key, 1, find_identical, &found) == SJ_OK && found;
}

/* Which stored artifact this host would load, when its own CPU's is not
 * stored: the first of its compiler's fallback targets (the x86-64 levels
 * it can run, highest first) that the store holds. */
static void explain_levels(sj_store *s, sj_engine *e, const sj_store_key *own, bool json) {
    const sj_compiler *comp = sj_bucketed_cache_compiler(sj_engine_cache(e));
    const char *taken = stored(s, own) ? own->target_cpu : NULL, *why = "its own CPU's artifact is stored";
    for (int i = 0; !taken && i < comp->n_fallbacks; i++) {
        sj_compiler level = *comp;
        level.target_cpu = comp->fallbacks[i].cpu;
        level.target_features = comp->fallbacks[i].features;
        level.options = comp->fallbacks[i].options;
        level.options_len = comp->fallbacks[i].options_len;
        sj_store_key k;
        sj_bucketed_cache_key(sj_engine_graph(e), &level, own->extent, &k);
        if (stored(s, &k)) {
            taken = level.target_cpu;
            why = "no artifact for its own CPU; the highest stored level whose every feature it has";
        }
    }
    char levels[256] = "";
    for (int i = 0; i < comp->n_fallbacks; i++)
        snprintf(levels + strlen(levels), sizeof levels - strlen(levels), "%s%s", i ? ", " : "",
                 comp->fallbacks[i].cpu);
    if (json) {
        printf(", \"host_cpu\": ");
        json_str(own->target_cpu);
        printf(", \"levels_it_runs\": ");
        json_str(levels);
        printf(", \"takes\": ");
        if (taken) json_str(taken);
        else printf("null");
        printf(", \"why\": ");
        json_str(taken ? why : "nothing it can load is stored: it compiles for its own CPU");
        return;
    }
    if (taken)
        printf("this host (%s; levels it runs: %s) takes %s: %s\n", own->target_cpu,
               levels[0] ? levels : "none", taken, why);
    else
        printf("this host (%s; levels it runs: %s) finds nothing it can load: it compiles for its own CPU\n",
               own->target_cpu, levels[0] ? levels : "none");
}

static int do_explain(const char *cmd, sj_store *s, sj_ctx *ctx, const char *model, const store_args *a) {
    if (a->rows < 1) return cli_usage_error(cmd, "explain needs --rows N with N >= 1");
    cli_backend_args ba = {.name = a->backend, .emit = a->emit, .arch = a->arch};
    int rc = cli_backend_check(cmd, &ba);
    if (rc != CLI_EXIT_OK) return rc;
    sj_graph *g = NULL;
    rc = cli_load_model(cmd, ctx, model, &a->model, &g);
    if (rc != CLI_EXIT_OK) return rc;
    /* The key a run would look up is the one its engine makes: the same
     * compiler and options as `run --backend B`. store_only: nothing is
     * loaded, so explaining GPU rows needs no GPU. */
    char spec[64];
    int64_t p2 = 1;
    while (p2 < a->rows && p2 < SJ_MAX_EXTENT) p2 *= 2;
    snprintf(spec, sizeof spec, "pow2:1:%lld", (long long)p2);
    cli_engine_args ea = {.backend = ba, .ladder = a->ladder ? a->ladder : spec, .store = "none",
                          .remote.url = "none", .store_only = true};
    sj_engine *e;
    char no_store[8];
    rc = cli_engine_open(cmd, ctx, g, &ea, &e, no_store, sizeof no_store);
    if (rc != CLI_EXIT_OK) return rc;
    sj_store_key key;
    sj_status st = sj_engine_store_key(e, a->rows, &key);
    if (st != SJ_OK) {
        rc = cli_fail_status(cmd, ctx, st);
    } else {
        ls_state ls = {a->json, 0, ctx};
        if (a->json) printf("{\"extent\": %lld, \"nearest\": [", (long long)key.extent);
        st = sj_store_explain(s, &key, (int)a->limit, explained, &ls);
        if (a->json) printf("%s]", ls.n ? "\n" : "");
        else if (st == SJ_OK && ls.n == 0) printf("the store is empty: every bucket compiles\n");
        /* A native host compiler falls back on the stored CPU levels. */
        if (st == SJ_OK && sj_bucketed_cache_compiler(sj_engine_cache(e))->n_fallbacks)
            explain_levels(s, e, &key, a->json);
        if (a->json) printf("}\n");
        if (st != SJ_OK) rc = cli_fail_status(cmd, ctx, st);
    }
    sj_engine_close(e);
    return rc;
}

int cli_cmd_store(int argc, char **argv) {
    const char *cmd = "store";
    /* INT64_MIN: not given (so a given -1 or 0 can be refused) */
    store_args a = {.max_bytes = INT64_MIN, .max_weight_bytes = INT64_MIN, .limit = INT64_MIN};
    const cli_opt opts[] = {
        {"--store", CLI_OPT_STRING, &a.store},     {"--json", CLI_OPT_FLAG, &a.json},
        {"--max-bytes", CLI_OPT_INT, &a.max_bytes}, {"--keep-corrupt", CLI_OPT_FLAG, &a.keep_corrupt},
        {"--graph", CLI_OPT_STRING, &a.graph},     {"--rows", CLI_OPT_INT, &a.rows},
        {"--ladder", CLI_OPT_STRING, &a.ladder},   {"--backend", CLI_OPT_STRING, &a.backend},
        {"--emit", CLI_OPT_STRING, &a.emit},       {"--arch", CLI_OPT_STRING, &a.arch},
        {"--limit", CLI_OPT_INT, &a.limit},        {"--max-weight-bytes", CLI_OPT_INT, &a.max_weight_bytes},
        CLI_MODEL_OPTS(a.model),
        CLI_REMOTE_OPTS(a.remote),
    };
    const char *pos[2];
    int n_pos;
    cli_parse_result r = cli_parse(cmd, usage, argc, argv, opts, CLI_COUNT(opts), pos, 1, 2, &n_pos);
    if (r != CLI_PARSED) return cli_parse_exit(r);
    const char *sub = pos[0];
    static const char *const subs[] = {"ls", "stats", "verify", "gc", "rm", "export", "import", "explain"};
    static const int want_args[] = {0, 0, 0, 0, 1, 1, 1, 1};
    int which = -1;
    for (int i = 0; i < CLI_COUNT(subs); i++)
        if (!strcmp(sub, subs[i])) which = i;
    if (which < 0) return cli_usage_error(cmd, "unknown subcommand '%s' (ls, stats, verify, gc, rm, export, import, explain)", sub);
    if (n_pos - 1 != want_args[which])
        return cli_usage_error(cmd, "'%s' takes %s", sub, want_args[which] ? "one argument" : "no arguments");
    if (which != 1 && (a.remote.url || a.remote.secret_file || a.remote.read_only))
        return cli_usage_error(cmd, "'%s' has no fleet tier options (only 'stats' does)", sub);
    if (a.store && !strcmp(a.store, "none")) return cli_usage_error(cmd, "--store none: there is no store to look after");
    if (a.max_bytes != INT64_MIN && a.max_bytes < 0)
        return cli_usage_error(cmd, "--max-bytes must be >= 0 (0 empties the store), got %lld",
                               (long long)a.max_bytes);
    if (a.max_weight_bytes != INT64_MIN && (a.max_weight_bytes < 0 || which != 3))
        return cli_usage_error(cmd, a.max_weight_bytes < 0
                                        ? "--max-weight-bytes must be >= 0 (0 removes every packed weight), got %lld"
                                        : "--max-weight-bytes is an option of 'gc' (got %lld)",
                               (long long)a.max_weight_bytes);
    if (a.limit != INT64_MIN && (a.limit < 1 || a.limit > 1000))
        return cli_usage_error(cmd, "--limit must be in 1..1000, got %lld", (long long)a.limit);
    if (a.limit == INT64_MIN) a.limit = 3;
    char path[4096];
    int prc = cli_store_path(cmd, a.store, path, sizeof path);
    if (prc != CLI_EXIT_OK) return prc;
    sj_ctx *ctx = cli_ctx_create(cmd);
    if (!ctx) return CLI_EXIT_FAIL;
    sj_store_config cfg;
    sj_store_config_init(&cfg);
    cfg.path = path;
    sj_store *s = NULL;
    sj_status st = sj_store_open(ctx, &cfg, &s);
    if (st != SJ_OK) {
        int rc = cli_fail_status(cmd, ctx, st);
        sj_ctx_destroy(ctx);
        return rc;
    }
    int rc = CLI_EXIT_OK;
    ls_state ls = {a.json, 0, ctx};
    switch (which) {
    case 0: /* ls */
        if (a.json) printf("[");
        st = sj_store_scan(s, ls_visit, ls_corrupt, &ls);
        if (a.json) printf("%s]\n", ls.n ? "\n" : "");
        break;
    case 1: { /* stats */
        sj_store_stats ss;
        st = sj_store_stats_get(s, &ss);
        if (st != SJ_OK) break;
        if (a.json) {
            printf("{\"path\": ");
            json_str(cfg.path);
            printf(", \"entries\": %lld, \"stored_bytes\": %lld, \"raw_bytes\": %lld", (long long)ss.entries,
                   (long long)ss.stored_bytes, (long long)ss.raw_bytes);
        } else {
            printf("%s: %lld entries, %lld bytes stored (%lld raw)\n", cfg.path, (long long)ss.entries,
                   (long long)ss.stored_bytes, (long long)ss.raw_bytes);
        }
        rc = remote_ping(cmd, ctx, &a);
        if (a.json) printf("}\n");
        break;
    }
    case 2: { /* verify */
        int64_t checked = 0, bad = 0;
        if (a.json) printf("{\"corrupt\": [");
        st = sj_store_verify(s, bad_row, &ls, &checked, &bad);
        if (a.json) printf("%s], \"checked\": %lld}\n", ls.n ? "\n" : "", (long long)checked);
        else if (st == SJ_OK) printf("%lld checked, %lld corrupt\n", (long long)checked, (long long)bad);
        if (st == SJ_OK && bad) rc = cli_fail(cmd, "verify: %lld corrupt row(s); 'shapejit store gc' removes them", (long long)bad);
        break;
    }
    case 3: { /* gc */
        sj_store_gc_result g;
        st = sj_store_gc(s, a.max_bytes == INT64_MIN ? -1 : a.max_bytes, !a.keep_corrupt, &g);
        int64_t wfiles = 0, wbytes = 0;
        if (st == SJ_OK && a.max_weight_bytes != INT64_MIN) {
            /* a read-only store's folder is left as it is, as the store is */
            if (sj_store_read_only(s)) {
                rc = cli_fail(cmd, "%s: its packed weights are not pruned", sj_store_warning(s));
                break;
            }
            st = sj_engine_prune_weight_files(ctx, path, a.max_weight_bytes, &wfiles, &wbytes);
        }
        if (st != SJ_OK) break;
        if (a.json)
            printf("{\"corrupt_removed\": %lld, \"evicted\": %lld, \"bytes_freed\": %lld, "
                   "\"weight_files_removed\": %lld, \"weight_bytes_freed\": %lld}\n",
                   (long long)g.corrupt_removed, (long long)g.evicted, (long long)g.bytes_freed,
                   (long long)wfiles, (long long)wbytes);
        else
            printf("removed %lld corrupt, evicted %lld, freed %lld bytes; removed %lld packed weight files, "
                   "freed %lld bytes\n",
                   (long long)g.corrupt_removed, (long long)g.evicted, (long long)g.bytes_freed,
                   (long long)wfiles, (long long)wbytes);
        break;
    }
    case 4: { /* rm */
        int64_t n = 0;
        st = sj_store_rm_prefix(s, pos[1], &n);
        if (st == SJ_E_INVALID_ARG) {
            rc = cli_usage_error(cmd, "%s", sj_ctx_last_error(ctx));
            st = SJ_OK;
        } else if (st == SJ_OK) {
            printf(a.json ? "{\"removed\": %lld}\n" : "removed %lld\n", (long long)n);
        }
        break;
    }
    case 5: { /* export */
        int64_t n = 0;
        st = sj_store_export(s, pos[1], a.graph, &n);
        if (st == SJ_OK) printf(a.json ? "{\"exported\": %lld}\n" : "exported %lld\n", (long long)n);
        break;
    }
    case 6: { /* import */
        int64_t n = 0, bad = 0;
        st = sj_store_import_report(s, pos[1], rejected_record, NULL, &n, &bad);
        if (st == SJ_OK)
            printf(a.json ? "{\"imported\": %lld, \"rejected\": %lld}\n" : "imported %lld, rejected %lld\n",
                   (long long)n, (long long)bad);
        /* A rejected record is data that did not arrive: a script must not
         * read success from an import that lost some (each is named above). */
        if (st == SJ_OK && bad > 0)
            rc = cli_fail(cmd, "%lld of %lld records in %s were rejected (see above)", (long long)bad,
                          (long long)(n + bad), pos[1]);
        break;
    }
    case 7: /* explain */
        rc = do_explain(cmd, s, ctx, pos[1], &a);
        break;
    }
    if (st != SJ_OK) rc = cli_fail_status(cmd, ctx, st);
    sj_store_close(s);
    sj_ctx_destroy(ctx);
    return rc;
}
