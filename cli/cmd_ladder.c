/* shapejit ladder fit: the bucket ladder fitted to a trace of request
 * sizes (sj_ladder_fit), with what pow2 with as many buckets would cost.
 * With a MODEL the cost model is measured here (cli/cost_model.h, shared
 * with serve --ladder fit:K). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cost_model.h"
#include "cli/request_stream.h"
#include "cli/serving.h"
#include "shapejit/ladder.h"

static const char usage[] =
    "usage: shapejit ladder fit [MODEL | --model MODEL] (--trace FILE | --synthetic SPEC) --buckets K\n"
    "                           [--memory MB] [--store PATH|none] [--backend host|interp]\n"
    "                           [--cpu C] " CLI_MODEL_USAGE "\n"
    "  Prints the list: ladder of at most K buckets whose expected cost per request\n"
    "  over the trace is least, its run memory, and the same figures for pow2 with\n"
    "  as many buckets.\n"
    "  MODEL              measure the cost on this machine: the model runs at up to 4\n"
    "                     extents across the trace's range and 4 sizes each, and\n"
    "                     cost(n, E) = a + b*n + c*E + d*n*E + e*n^2 us and run memory\n"
    "                     m0 + m1*E + m2*E^2 bytes are fitted to the runs (least\n"
    "                     squares, coefficients >= 0). Without it the cost is the\n"
    "                     rows a bucket computes, E, as for runtimes that run whole\n"
    "                     padded buckets\n"
    "  --buckets K        at most K buckets (1..4096); fewer when fewer cost less or\n"
    "                     the trace has fewer distinct sizes (thinned to at most 512)\n"
    "  --memory MB        the buckets' run memory summed stays within MB MiB (needs MODEL)\n"
    "  --trace FILE       one size per line ('#' comments)\n" CLI_SYNTHETIC_USAGE
    /* clang-format off */
    "  --store PATH|none  where the measuring buckets are kept (default none)\n"
    /* clang-format on */
    "  --backend B        host (default) or interp, for the measured model\n"
    "  --cpu C            host: native (default), x86-64-v2|v3|v4, or an LLVM CPU name\n";

/* pow2 with k buckets over sizes up to max: the power of two >= max and
 * the k - 1 below it (fewer when they reach 1). */
static sj_status pow2_like(sj_ctx *ctx, int64_t max, int k, sj_ladder **out) {
    int64_t top = 1;
    while (top < max) top *= 2;
    int64_t ext[64];
    int n = 0;
    for (int64_t e = top; n < k && n < 64 && e >= 1; e /= 2) n++;
    for (int i = 0; i < n; i++) ext[i] = top >> (n - 1 - i);
    return sj_ladder_list(ctx, ext, n, out);
}

static int print_result(const char *label, const sj_ladder *l, const sj_ladder_fit_result *r,
                        const char *unit, bool memory) {
    /* "list:" and up to 11 bytes per extent (10 digits and a comma) */
    size_t cap = 8 + 11 * (size_t)sj_ladder_num_buckets(l);
    char *spec = malloc(cap), mem[32];
    if (!spec) return cli_fail("ladder", "out of memory");
    sj_ladder_format(l, spec, cap);
    printf("%-7s %s  expected %.4g %s per request", label, spec, r->expected_cost, unit);
    if (memory) printf(", run memory %s", cli_bytes((uint64_t)r->memory_bytes, mem, sizeof mem));
    printf(" (%d bucket%s)\n", r->buckets, r->buckets == 1 ? "" : "s");
    free(spec);
    return CLI_EXIT_OK;
}

static int fit_command(int argc, char **argv) {
    const char *cmd = "ladder";
    const char *trace = NULL, *synthetic = NULL, *store = NULL, *backend = NULL, *cpu = NULL,
               *model_flag = NULL;
    int64_t k = 0, memory_mb = INT64_MIN; /* INT64_MIN: --memory not given */
    cli_model_flags model = {0};
    const cli_opt opts[] = {
        {"--trace", CLI_OPT_STRING, &trace},     {"--synthetic", CLI_OPT_STRING, &synthetic},
        {"--buckets", CLI_OPT_INT, &k},          {"--memory", CLI_OPT_INT, &memory_mb},
        {"--store", CLI_OPT_STRING, &store},     {"--backend", CLI_OPT_STRING, &backend},
        {"--cpu", CLI_OPT_STRING, &cpu},         {"--model", CLI_OPT_STRING, &model_flag},
        CLI_MODEL_OPTS(model),
    };
    const char *pos[1];
    int n_pos;
    cli_parse_result r = cli_parse(cmd, usage, argc, argv, opts, CLI_COUNT(opts), pos, 0, 1, &n_pos);
    if (r != CLI_PARSED) return cli_parse_exit(r);
    if (model_flag && n_pos) return cli_usage_error(cmd, "give the model once: MODEL or --model MODEL");
    if (model_flag) pos[n_pos++] = model_flag;
    if (!trace == !synthetic) return cli_usage_error(cmd, "give one of --trace FILE or --synthetic SPEC");
    if (k < 1 || k > SJ_LADDER_MAX_BUCKETS)
        return cli_usage_error(cmd, "--buckets must be in 1..%d, got %lld", SJ_LADDER_MAX_BUCKETS, (long long)k);
    if (memory_mb != INT64_MIN && (memory_mb < 1 || memory_mb > ((int64_t)1 << 30)))
        return cli_usage_error(cmd, "--memory must be a size in MiB in 1..2^30, got %lld", (long long)memory_mb);
    if (memory_mb == INT64_MIN) memory_mb = 0;
    if (memory_mb && n_pos == 0)
        return cli_usage_error(cmd, "--memory needs a MODEL: the run memory per bucket is measured on it");
    if (n_pos == 0 && (backend || cpu || store || model.dynamic || model.dynamic_axis || model.dims.n))
        return cli_usage_error(cmd, "--store, --backend, --cpu and the model flags need a MODEL");
    /* The one-bucket engines that measure are not the user's ladder: they
     * keep nothing unless a store is named. */
    cli_engine_args ea = {.backend = {.name = backend, .cpu = cpu}, .store = store ? store : "none"};
    if (backend && strcmp(backend, "host") && strcmp(backend, "interp"))
        return cli_usage_error(cmd, "--backend must be host or interp, got '%s'", backend);
    int rc = cli_backend_check(cmd, &ea.backend);
    if (rc != CLI_EXIT_OK) return rc;
    cli_stream s;
    rc = trace ? cli_stream_trace(cmd, trace, &s) : cli_stream_synthetic(cmd, synthetic, &s);
    if (rc != CLI_EXIT_OK) return rc;
    if (s.n == 0) {
        cli_stream_free(&s);
        return cli_fail(cmd, "the trace %s holds no sizes", trace ? trace : synthetic);
    }
    int64_t lo = s.sizes[0];
    for (size_t i = 0; i < s.n; i++)
        if (s.sizes[i] < lo) lo = s.sizes[i];
    sj_ctx *ctx = cli_ctx_create(cmd);
    if (!ctx) {
        cli_stream_free(&s);
        return CLI_EXIT_FAIL;
    }
    /* No MODEL: the rows each bucket computes. */
    sj_ladder_cost cost = {.c = 1};
    const char *unit = "rows";
    bool memory_known = false;
    sj_graph *g = NULL;
    if (n_pos == 1) {
        rc = cli_load_model(cmd, ctx, pos[0], &model, &g);
        sj_ladder_cost_fit m;
        if (rc == CLI_EXIT_OK) rc = cli_cost_measure(cmd, ctx, g, &ea, lo, s.max, &m);
        if (rc == CLI_EXIT_OK) {
            memory_known = m.memory_known;
            if (memory_mb && !memory_known)
                rc = cli_fail(cmd, "--memory: backend %s does not report run memory (use --backend host)",
                              backend ? backend : "host");
            cost = m.cost;
            unit = "us";
            printf("cost model (%s, measured here over %d runs at extent%s", backend ? backend : "host",
                   m.n_points, m.n_grid > 1 ? "s" : "");
            for (int i = 0; i < m.n_grid; i++) printf("%s %lld", i ? "," : "", (long long)m.grid[i]);
            printf("): cost(n, E) = %.4g + %.4g*n + %.4g*E + %.4g*n*E + %.4g*n^2 us", cost.a, cost.b, cost.c,
                   cost.d, cost.e);
            if (memory_known)
                printf("; run memory(E) = %.4g + %.4g*E + %.4g*E^2 bytes\n", cost.m0, cost.m1, cost.m2);
            else
                printf("; run memory not reported by this backend\n");
        }
    } else {
        printf("cost model: rows computed, cost(n, E) = E (no MODEL measured)\n");
    }
    sj_ladder *fit = NULL, *p2 = NULL;
    sj_ladder_fit_result fr, pr;
    if (rc == CLI_EXIT_OK &&
        sj_ladder_fit(ctx, s.sizes, s.n, &cost, (int)k, (double)memory_mb * 1048576.0, &fit, &fr) != SJ_OK)
        rc = cli_fail_status(cmd, ctx, SJ_E_INVALID_ARG);
    if (rc == CLI_EXIT_OK && (pow2_like(ctx, s.max, fr.buckets, &p2) != SJ_OK ||
                              sj_ladder_expected(ctx, p2, s.sizes, s.n, &cost, &pr) != SJ_OK))
        rc = cli_fail_status(cmd, ctx, SJ_E_INVALID_ARG);
    if (rc == CLI_EXIT_OK) {
        bool mem = n_pos == 1 && memory_known;
        printf("trace: %zu requests, sizes %lld..%lld, %d distinct sizes considered\n", s.n, (long long)lo,
               (long long)s.max, fr.candidates);
        rc = print_result("fitted", fit, &fr, unit, mem);
        if (rc == CLI_EXIT_OK) rc = print_result("pow2", p2, &pr, unit, mem);
        if (fr.buckets < k && fr.buckets == fr.candidates)
            printf("note: %d bucket%s, not %lld: the fit chooses among %d extent%s (the trace's distinct "
                   "sizes, thinned to at most 512)\n",
                   fr.buckets, fr.buckets == 1 ? "" : "s", (long long)k, fr.candidates,
                   fr.candidates == 1 ? "" : "s");
        else if (fr.buckets < k)
            printf("note: %d bucket%s, not %lld: more would not cost less%s\n", fr.buckets,
                   fr.buckets == 1 ? "" : "s", (long long)k, memory_mb ? " within the memory budget" : "");
        if (memory_mb && pr.memory_bytes > (double)memory_mb * 1048576.0)
            printf("note: pow2 with as many buckets needs more than the %lld MiB budget\n", (long long)memory_mb);
        printf("the fitted ladder's expected cost is %.3gx pow2's\n",
               pr.expected_cost > 0 ? fr.expected_cost / pr.expected_cost : 1.0);
    }
    sj_ladder_destroy(fit);
    sj_ladder_destroy(p2);
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
    cli_stream_free(&s);
    return rc;
}

int cli_cmd_ladder(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "fit")) return fit_command(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(usage, stdout);
        return CLI_EXIT_OK;
    }
    if (argc < 2) return cli_usage_error("ladder", "a subcommand is needed: fit");
    char shown[128];
    return cli_usage_error("ladder", "unknown subcommand '%s' (fit)", cli_printable(argv[1], shown, sizeof shown));
}
