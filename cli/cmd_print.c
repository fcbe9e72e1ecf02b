/* shapejit print MODEL: the model as canonical .sjg text on stdout (weights
 * inline), e.g. to look inside an .onnx file or to normalise a hand-written
 * graph. */
#include <stdio.h>

#include "cli/cli.h"

static const char usage[] =
    "usage: shapejit print MODEL " CLI_MODEL_USAGE "\n"
    "  Prints MODEL as .sjg text with every weight inline; the text loads back\n"
    "  to a graph with the same hash.\n";

int cli_cmd_print(int argc, char **argv) {
    const char *cmd = "print";
    cli_model_flags mf = {0};
    const cli_opt opts[] = {CLI_MODEL_OPTS(mf)};
    const char *pos[1];
    int n_pos;
    cli_parse_result r = cli_parse(cmd, usage, argc, argv, opts, CLI_COUNT(opts), pos, 1, 1, &n_pos);
    if (r != CLI_PARSED) return cli_parse_exit(r);
    sj_ctx *ctx = cli_ctx_create(cmd);
    if (!ctx) return CLI_EXIT_FAIL;
    sj_graph *g = NULL;
    int rc = cli_load_model(cmd, ctx, pos[0], &mf, &g);
    if (rc == CLI_EXIT_OK) {
        char *text;
        size_t len;
        sj_status st = sj_sjg_print(g, &text, &len);
        if (st != SJ_OK) {
            rc = cli_fail_status(cmd, ctx, st);
        } else {
            if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0)
                rc = cli_fail(cmd, "writing to stdout failed");
            sj_free(ctx, text);
        }
    }
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
    return rc;
}
