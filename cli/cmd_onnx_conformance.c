/* shapejit onnx-conformance DIR: the ONNX backend node tests against a
 * backend; a line per failure, the counts last. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "tools/conformance/conformance.h"

static const char usage[] =
    "usage: shapejit onnx-conformance DIR [--backend interp|host] [--only REGEX] [--verbose]\n"
    "  Runs every ONNX backend node test under DIR (each test folder holds\n"
    "  model.onnx and test_data_set_N/input_K.pb, output_K.pb) and compares\n"
    "  each output with rtol 1e-3, atol 1e-7 (NaN where NaN is expected).\n"
    "  Prints a line per failure, then 'N passed, N failed, N unsupported'.\n"
    "  Exit status 1 when any test failed.\n"
    "  --backend B    interp (the reference interpreter, default) or host (LLVM\n"
    "                 host code; graphs with a symbolic dim are compiled for a\n"
    "                 larger bucket, so padding is checked too)\n"
    "  --only REGEX   only tests whose folder name matches (POSIX extended)\n"
    "  --verbose      also a line per unsupported test, saying why\n";

/* user: the --verbose flag (bool). */
static void report(void *user, const sj_onnx_test_result *r) {
    bool verbose = *(const bool *)user;
    if (r->outcome == SJ_ONNX_TEST_FAILED)
        printf("FAILED %s: %s\n", r->name, r->message);
    else if (r->outcome == SJ_ONNX_TEST_UNSUPPORTED && verbose)
        printf("unsupported %s: %s\n", r->name, r->message);
}

int cli_cmd_onnx_conformance(int argc, char **argv) {
    const char *cmd = "onnx-conformance";
    const char *backend = "interp", *only = NULL;
    bool verbose = false;
    const cli_opt opts[] = {
        {"--backend", CLI_OPT_STRING, &backend},
        {"--only", CLI_OPT_STRING, &only},
        {"--verbose", CLI_OPT_FLAG, &verbose},
    };
    const char *pos[1];
    int n_pos;
    cli_parse_result r = cli_parse(cmd, usage, argc, argv, opts, CLI_COUNT(opts), pos, 1, 1, &n_pos);
    if (r != CLI_PARSED) return cli_parse_exit(r);
    if (strcmp(backend, "interp") && strcmp(backend, "host"))
        return cli_usage_error(cmd, "unknown backend '%s' (available: interp, host)", backend);
    sj_ctx *ctx = cli_ctx_create(cmd);
    if (!ctx) return CLI_EXIT_FAIL;
    sj_onnx_backend be = sj_onnx_backend_interp();
    if (!strcmp(backend, "host")) {
        sj_status st = sj_onnx_backend_host_create(ctx, &be);
        if (st != SJ_OK) {
            int rc = cli_fail_status(cmd, ctx, st);
            sj_ctx_destroy(ctx);
            return rc;
        }
    }
    sj_onnx_conformance_options o;
    sj_onnx_conformance_options_init(&o);
    o.only = only;
    o.report = report;
    o.report_user = &verbose;
    sj_onnx_conformance_summary sum;
    sj_status st = sj_onnx_conformance_run(ctx, pos[0], &be, &o, &sum);
    int rc;
    if (st == SJ_E_INVALID_ARG) {
        rc = cli_usage_error(cmd, "%s", sj_ctx_last_error(ctx));
    } else if (st != SJ_OK) {
        rc = cli_fail_status(cmd, ctx, st);
    } else {
        printf("%d passed, %d failed, %d unsupported\n", sum.passed, sum.failed, sum.unsupported);
        rc = sum.failed ? CLI_EXIT_FAIL : CLI_EXIT_OK;
    }
    fflush(stdout);
    sj_onnx_backend_destroy(&be);
    sj_ctx_destroy(ctx);
    return rc;
}
