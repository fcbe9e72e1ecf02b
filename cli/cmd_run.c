/* shapejit run MODEL: one request through a backend, outputs as .npy.
 * Everything the user gave is checked before anything runs or is written:
 * input names, shapes against the model at the extent the files imply, and
 * that the files agree on that extent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/serving.h"
#include "shapejit/ext/onnx.h"
#include "shapejit/tensor.h"

static const char usage[] =
    "usage: shapejit run MODEL [--input NAME=FILE]... [--rows N] [--out DIR]\n"
    "                    [--backend host|interp|cuda] [--emit llvm|nvrtc] [--arch sm_80|sm_90]\n"
    "                    [--cuda-driver PATH]\n"
    "                    [--cpu native|x86-64-v2|x86-64-v3|x86-64-v4|NAME] [--tune [--tune-budget-ms MS]]\n"
    "                    [--ladder SPEC] [--store PATH|none] [--threads N]\n"
    "                    [--remote URL|none] [--remote-secret-file FILE] [--remote-read-only]\n"
    "                    [--remote-lease-ms MS]\n"
    "                    [--seed S] [--stats] [--max-resident-buckets N] [--precision P]\n"
    "                    " CLI_MODEL_USAGE "\n"
    "  Runs MODEL once through the bucketed cache (the request's bucket is taken\n"
    "  from memory, else the store, else compiled and stored) and writes\n"
    "  DIR/<output name>.npy for every output (DIR defaults to '.'; all outputs\n"
    "  are written or none).\n"
    "  --input NAME=FILE  a float32 C-order .npy file, or an ONNX TensorProto .pb,\n"
    "                     for input NAME; when any input is given, every input must be\n"
    "  --rows N           the symbolic dim's extent; without --input, inputs are\n"
    "                     seeded uniform random values in [-1, 1)\n"
    "  --seed S           seed of the random inputs (default 0; input i uses S+i)\n"
    "  --backend B        host (LLVM, this CPU; runs replay the bucket's captured\n"
    "                     launches), interp (the reference interpreter) or cuda\n"
    "                     (GPU 0, a CUDA graph per bucket; needs the NVIDIA driver);\n"
    "                     default " CLI_DEFAULT_BACKEND "\n"
    "  --emit P           cuda: llvm (LLVM NVPTX, default) or nvrtc (CUDA C via NVRTC)\n"
    CLI_CUDA_DRIVER_USAGE
    "  --arch A           cuda: sm_80 or sm_90 (default)\n"
    "  --cpu C            host: native (default; a stored x86-64 level this CPU runs is\n"
    "                     loaded before compiling), x86-64-v2|v3|v4, or an LLVM CPU name\n"
    CLI_PRECISION_USAGE
    CLI_TUNE_USAGE
    CLI_THREADS_USAGE
    "  --ladder SPEC      buckets: pow2:MIN:MAX, geo:MIN:MAX:RATIO or list:E1,E2,...\n"
    "                     (default " CLI_DEFAULT_LADDER ")\n"
    CLI_STORE_USAGE
    CLI_REMOTE_USAGE
    CLI_RESIDENT_USAGE
    "  --stats            print one JSON object of counters on stderr: extent (rows),\n"
    "                     bucket_extent, memory_hits, store_hits, compiles, compile_ms,\n"
    "                     corrupt, evictions, ...; load_ms (reading the model), ready_ms\n"
    "                     (opening the engine and store; hash_ms of it hashing the model,\n"
    "                     weight_digests \"store\" when its unchanged files' digests were\n"
    "                     kept), run_ms (the request, a bucket's load or compile); with\n"
    "                     a remote tier remote_hits, remote_misses, remote_errors,\n"
    "                     remote_timeouts, remote_rejected, remote_puts, ...\n";

typedef struct run_args {
    cli_list inputs;
    int64_t rows, seed;
    const char *out_dir, *ladder, *store;
    cli_backend_args backend;
    bool stats;
    cli_model_flags model;
    cli_remote_flags remote;
    const char *max_resident;
} run_args;

static void format_dims(const sj_tensor *t, char *buf, size_t cap) {
    sj_shape s = {.rank = t->rank};
    memcpy(s.dims, t->dims, sizeof s.dims);
    sj_shape_format(&s, NULL, buf, cap);
}

/* The extent the files imply: every symbolic dim of every input must
 * agree, with each other and with --rows when given. */
static int check_file_shape(const char *cmd, const sj_graph *g, const char *name,
                            const char *file, const sj_value_desc *d, const sj_tensor *t,
                            int64_t *extent, const char **extent_from) {
    const sj_shape *want = &d->shape;
    if (t->dtype != d->dtype)
        return cli_fail(cmd, "input %s: %s holds %s elements but the model wants %s", name, file,
                        sj_dtype_name(t->dtype), sj_dtype_name(d->dtype));
    char want_s[128], got_s[128];
    sj_shape_format(want, sj_graph_symbol(g), want_s, sizeof want_s);
    format_dims(t, got_s, sizeof got_s);
    if (t->rank != want->rank)
        return cli_fail(cmd, "input %s: %s has shape %s but the model wants %s", name, file, got_s,
                        want_s);
    for (int k = 0; k < t->rank; k++) {
        if (sj_dim_is_sym(want->dims[k]) && want->dims[k] != SJ_DIM_SYM)
            continue; /* k * N + c: the engine checks it once N is known */
        if (want->dims[k] != SJ_DIM_SYM) {
            if (t->dims[k] != want->dims[k])
                return cli_fail(cmd, "input %s: %s has shape %s but the model wants %s (dim %d)",
                                name, file, got_s, want_s, k);
            continue;
        }
        if (t->dims[k] < 1 || t->dims[k] > SJ_MAX_EXTENT)
            return cli_fail(cmd, "input %s: %s sets %s = %lld, outside 1..%lld", name, file,
                            sj_graph_symbol(g), (long long)t->dims[k], (long long)SJ_MAX_EXTENT);
        if (*extent > 0 && t->dims[k] != *extent)
            return cli_fail(cmd, "input %s: %s has shape %s, so %s = %lld, but %s sets %s = %lld",
                            name, file, got_s, sj_graph_symbol(g), (long long)t->dims[k],
                            *extent_from, sj_graph_symbol(g), (long long)*extent);
        *extent = t->dims[k];
        *extent_from = file;
    }
    return CLI_EXIT_OK;
}

static int file_inputs(const char *cmd, sj_ctx *ctx, const sj_graph *g, const run_args *a,
                       sj_tensor *in, int64_t *extent) {
    int n_in = sj_graph_num_inputs(g);
    const char **file_of = calloc((size_t)n_in + 1, sizeof *file_of);
    if (!file_of) return cli_fail(cmd, "out of memory");
    int rc = CLI_EXIT_OK;
    /* Names first: a typo is reported before any file is read. */
    for (int i = 0; rc == CLI_EXIT_OK && i < a->inputs.n; i++) {
        const char *spec = a->inputs.items[i];
        const char *eq = strchr(spec, '=');
        if (!eq || eq == spec || !eq[1]) {
            rc = cli_usage_error(cmd, "--input expects NAME=FILE, got '%s'", spec);
            break;
        }
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - spec), spec);
        int idx = sj_graph_find_input(g, name);
        if (idx < 0) {
            char known[512] = "";
            for (int k = 0; k < n_in; k++) {
                sj_value_desc d;
                sj_graph_input_desc(g, k, &d);
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", k ? ", " : "",
                         d.name);
            }
            rc = cli_usage_error(cmd, "--input %s: the model has no input '%s' (its inputs: %s)", spec,
                          name, n_in ? known : "none");
        } else if (file_of[idx]) {
            rc = cli_usage_error(cmd, "input '%s' given twice", name);
        } else {
            file_of[idx] = eq + 1;
        }
    }
    for (int i = 0; rc == CLI_EXIT_OK && i < n_in; i++)
        if (!file_of[i]) {
            sj_value_desc d;
            sj_graph_input_desc(g, i, &d);
            rc = cli_fail(cmd, "missing --input %s=FILE (when any input is given, every input must be)",
                          d.name);
        }
    const char *extent_from = "--rows";
    *extent = a->rows;
    for (int i = 0; rc == CLI_EXIT_OK && i < n_in; i++) {
        sj_value_desc d;
        sj_graph_input_desc(g, i, &d);
        size_t flen = strlen(file_of[i]);
        bool is_pb = flen > 3 && !strcasecmp(file_of[i] + flen - 3, ".pb");
        sj_status st = is_pb ? sj_onnx_tensor_read(ctx, file_of[i], &in[i])
                             : sj_npy_read(ctx, file_of[i], &in[i]);
        if (st != SJ_OK) {
            rc = cli_fail(cmd, "input %s: %s", d.name, sj_ctx_last_error(ctx));
            break;
        }
        rc = check_file_shape(cmd, g, d.name, file_of[i], &d, &in[i], extent, &extent_from);
    }
    free(file_of);
    return rc;
}

static bool inputs_use_symbol(const sj_graph *g) {
    for (int i = 0; i < sj_graph_num_inputs(g); i++) {
        sj_value_desc d;
        sj_graph_input_desc(g, i, &d);
        for (int k = 0; k < d.shape.rank; k++)
            if (sj_dim_is_sym(d.shape.dims[k])) return true;
    }
    return false;
}

static void print_summary(const sj_graph *g, const char *dir, const sj_tensor *out) {
    for (int i = 0; i < sj_graph_num_outputs(g); i++) {
        sj_value_desc d;
        sj_graph_output_desc(g, i, &d);
        char shape[128], path[4096];
        format_dims(&out[i], shape, sizeof shape);
        cli_output_path(dir, d.name, path, sizeof path);
        char name[1024];
        printf("%s: %s -> %s\n  [", cli_printable(d.name, name, sizeof name), shape, path);
        int64_t n = sj_tensor_numel(&out[i]);
        for (int64_t k = 0; k < n && k < 6; k++) {
            const sj_tensor *t = &out[i];
            if (t->dtype == SJ_I64) printf("%s%lld", k ? ", " : "", (long long)t->i64[k]);
            else if (t->dtype == SJ_I32) printf("%s%d", k ? ", " : "", (int)t->i32[k]);
            else if (t->dtype == SJ_BOOL) printf("%s%s", k ? ", " : "", t->b8[k] ? "true" : "false");
            else printf("%s%.6g", k ? ", " : "", t->data[k]);
        }
        printf("%s]\n", n > 6 ? ", ..." : "");
    }
}

static void print_stats(sj_engine *e, const run_args *a, const char *store_path, int64_t extent,
                        int64_t bucket_extent, double load_ms, double ready_ms, double run_ms) {
    /* So remote_puts counts this run's publishing, not a queue. */
    sj_remote *remote = sj_engine_remote(e);
    if (remote) sj_remote_flush(remote);
    fprintf(stderr, "{\"backend\": \"%s\", \"extent\": %lld, \"bucket_extent\": %lld, \"ladder\": ",
            a->backend.name, (long long)extent, (long long)bucket_extent);
    cli_json_str(stderr, a->ladder ? a->ladder : CLI_DEFAULT_LADDER);
    fprintf(stderr, ", \"store\": ");
    cli_json_str(stderr, store_path);
    if (remote) {
        fprintf(stderr, ", \"remote\": ");
        cli_json_str(stderr, sj_remote_url(remote));
    }
    fprintf(stderr, ", \"load_ms\": %.3f, \"ready_ms\": %.3f, \"run_ms\": %.3f, ", load_ms, ready_ms, run_ms);
    cli_stats_members(stderr, e);
    fprintf(stderr, "}\n");
}

/* Takes g: the engine owns it once opened. */
static int run(const char *cmd, sj_ctx *ctx, sj_graph *g, const run_args *a, double load_ms) {
    int n_in = sj_graph_num_inputs(g), n_out = sj_graph_num_outputs(g);
    sj_named_tensor *in = calloc((size_t)n_in + 1, sizeof *in);
    sj_named_tensor *out = calloc((size_t)n_out + 1, sizeof *out);
    sj_tensor *files = calloc((size_t)n_in + 1, sizeof *files);
    const char **names = calloc((size_t)n_out + 1, sizeof *names);
    int rc = in && out && files && names ? CLI_EXIT_OK : cli_fail(cmd, "out of memory");
    int64_t extent = a->rows;
    bool random = a->inputs.n == 0;
    if (rc == CLI_EXIT_OK && !random)
        rc = file_inputs(cmd, ctx, g, a, files, &extent);
    else if (rc == CLI_EXIT_OK && extent <= 0 && inputs_use_symbol(g))
        rc = cli_usage_error(cmd, "the model's symbolic dim %s needs --rows N or --input files",
                             sj_graph_symbol(g));
    double t0 = cli_now_ms(), run_ms = 0;
    sj_engine *e = NULL;
    char store_path[4096];
    cli_engine_args ea = {.backend = a->backend, .ladder = a->ladder, .store = a->store, .remote = a->remote,
                          .max_resident = a->max_resident};
    if (rc == CLI_EXIT_OK)
        rc = cli_engine_open(cmd, ctx, g, &ea, &e, store_path, sizeof store_path);
    else
        sj_graph_destroy(g);
    double ready_ms = cli_now_ms() - t0;
    /* Rows no bucket takes fail now, not after seconds of making random
     * inputs for them. */
    if (rc == CLI_EXIT_OK && random && extent > 0) {
        const sj_ladder *l = sj_engine_ladder(e);
        if (sj_ladder_find(l, extent) < 0) {
            char spec[256];
            sj_ladder_format(l, spec, sizeof spec);
            rc = cli_usage_error(cmd, "--rows %lld is above the largest bucket (%lld rows) of --ladder %s; "
                                 "give a ladder that reaches it",
                                 (long long)extent, (long long)sj_ladder_max(l), spec);
        }
    }
    if (rc == CLI_EXIT_OK && random)
        rc = cli_random_inputs(cmd, ctx, sj_engine_graph(e), extent > 0 ? extent : 1, (uint64_t)a->seed, files);
    sj_run_info info = {0};
    if (rc == CLI_EXIT_OK) {
        for (int i = 0; i < n_in; i++) {
            sj_value_desc d;
            sj_engine_input(e, i, &d);
            in[i] = (sj_named_tensor){d.name, files[i]};
        }
        double t1 = cli_now_ms();
        sj_status st = sj_engine_run(e, in, n_in, out, n_out, &info);
        run_ms = cli_now_ms() - t1;
        if (st != SJ_OK) rc = cli_fail_status(cmd, ctx, st);
    }
    sj_tensor *results = rc == CLI_EXIT_OK ? calloc((size_t)n_out + 1, sizeof *results) : NULL;
    if (rc == CLI_EXIT_OK && !results) rc = cli_fail(cmd, "out of memory");
    if (rc == CLI_EXIT_OK) {
        for (int i = 0; i < n_out; i++) {
            names[i] = out[i].name;
            results[i] = out[i].tensor;
        }
        rc = cli_write_outputs(cmd, ctx, a->out_dir, n_out, names, results);
    }
    if (rc == CLI_EXIT_OK) {
        print_summary(sj_engine_graph(e), a->out_dir, results);
        if (a->stats) print_stats(e, a, store_path, info.rows, info.bucket, load_ms, ready_ms, run_ms);
    }
    sj_engine_close(e);
    for (int i = 0; files && i < n_in; i++) sj_tensor_free(ctx, &files[i]);
    for (int i = 0; out && i < n_out; i++) sj_tensor_free(ctx, &out[i].tensor);
    free(results);
    free(in);
    free(out);
    free(files);
    free(names);
    return rc;
}

int cli_cmd_run(int argc, char **argv) {
    const char *cmd = "run";
    run_args a = {.rows = INT64_MIN, .seed = 0, .out_dir = ".", .backend.name = CLI_DEFAULT_BACKEND};
    const cli_opt opts[] = {
        {"--input", CLI_OPT_LIST, &a.inputs},   {"--rows", CLI_OPT_INT, &a.rows},
        {"--seed", CLI_OPT_INT, &a.seed},       {"--out", CLI_OPT_STRING, &a.out_dir},
        {"--backend", CLI_OPT_STRING, &a.backend.name}, {"--stats", CLI_OPT_FLAG, &a.stats},
        {"--emit", CLI_OPT_STRING, &a.backend.emit},    {"--arch", CLI_OPT_STRING, &a.backend.arch},
        {"--cuda-driver", CLI_OPT_STRING, &a.backend.cuda_driver},
        {"--cpu", CLI_OPT_STRING, &a.backend.cpu}, CLI_TUNE_OPTS(a.backend), CLI_THREADS_OPTS(a.backend),
        {"--precision", CLI_OPT_STRING, &a.backend.precision},
        {"--ladder", CLI_OPT_STRING, &a.ladder},   {"--store", CLI_OPT_STRING, &a.store},
        CLI_MODEL_OPTS(a.model),               CLI_REMOTE_OPTS(a.remote),
        {"--max-resident-buckets", CLI_OPT_STRING, &a.max_resident},
    };
    const char *pos[1];
    int n_pos;
    cli_parse_result r = cli_parse(cmd, usage, argc, argv, opts, CLI_COUNT(opts), pos, 1, 1, &n_pos);
    if (r != CLI_PARSED) return cli_parse_exit(r);
    bool rows_given = a.rows != INT64_MIN;
    if (!rows_given) a.rows = 0;
    else if (a.rows < 1 || a.rows > SJ_MAX_EXTENT)
        return cli_usage_error(cmd, "--rows must be in 1..%lld, got %lld", (long long)SJ_MAX_EXTENT,
                               (long long)a.rows);
    if (a.seed < 0) return cli_usage_error(cmd, "--seed must be >= 0");
    int brc = cli_backend_check(cmd, &a.backend);
    if (brc != CLI_EXIT_OK) return brc;
    if (!a.out_dir[0]) return cli_usage_error(cmd, "--out needs a directory");

    sj_ctx *ctx = cli_ctx_create(cmd);
    if (!ctx) return CLI_EXIT_FAIL;
    sj_graph *g = NULL;
    double t0 = cli_now_ms();
    int rc = cli_load_model(cmd, ctx, pos[0], &a.model, &g);
    /* Ignoring --rows would answer at the model's fixed size, not N. */
    if (rc == CLI_EXIT_OK && rows_given && !inputs_use_symbol(g))
        rc = cli_usage_error(cmd,
                             "--rows %lld: %s has no symbolic dim (declare one with "
                             "--dynamic-axis INPUT:AXIS)",
                             (long long)a.rows, pos[0]);
    if (rc == CLI_EXIT_OK)
        rc = run(cmd, ctx, g, &a, cli_now_ms() - t0); /* takes g */
    else
        sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
    return rc;
}
