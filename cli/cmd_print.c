/* shapejit print MODEL: the model as canonical .sjg text on stdout (weights
 * inline), e.g. to look inside an .onnx file or to normalise a hand-written
 * graph. */
#include <stdio.h>

#include "cli/cli.h"

static const char usage[] =
    "usage: shapejit print MODEL " CLI_MODEL_USAGE "\n"
    "  Prints MODEL as .sjg text with every weight inline; the text loads back\n"
    "  to a graph with the same hash.\n";

static int print_sjg(const char *cmd, sj_ctx *ctx, const sj_graph *g) {
    char *text;
    size_t len;
    sj_status st = sj_sjg_print(g, &text, &len);
    if (st != SJ_OK) return cli_fail_status(cmd, ctx, st);
    fwrite(text, 1, len, stdout); /* a short write sets the error flag cli_stdout_done reads */
    int rc = cli_stdout_done(cmd, CLI_EXIT_OK);
    sj_free(ctx, text);
    return rc;
}

int cli_cmd_print(int argc, char **argv) {
    return cli_run_on_model("print", usage, argc, argv, print_sjg);
}
