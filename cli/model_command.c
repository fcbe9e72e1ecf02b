/* The frame shared by commands that take one MODEL and only read it (hash,
 * print): parse the arguments, make a context, load, act, clean up. */
#include "cli/cli.h"

int cli_run_on_model(const char *cmd, const char *usage, int argc, char **argv,
                     cli_model_action act) {
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
    if (rc == CLI_EXIT_OK) rc = act(cmd, ctx, g);
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
    return rc;
}
