/* shapejit hash MODEL: the graph's content hash in hex, the key the compile
 * cache and the store use (names and dead values do not change it). */
#include <stdio.h>

#include "cli/cli.h"

static const char usage[] =
    "usage: shapejit hash MODEL " CLI_MODEL_USAGE "\n"
    "  Prints the 64-hex-digit content hash of MODEL's graph.\n";

int cli_cmd_hash(int argc, char **argv) {
    const char *cmd = "hash";
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
        uint8_t h[32];
        char hex[65];
        sj_graph_hash(g, h);
        sj_hash_hex(h, hex);
        printf("%s\n", hex);
    }
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
    return rc;
}
