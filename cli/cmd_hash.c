/* shapejit hash MODEL: the graph's content hash in hex, the key the compile
 * cache and the store use (names and dead values do not change it). */
#include <stdio.h>

#include "cli/cli.h"

static const char usage[] =
    "usage: shapejit hash MODEL " CLI_MODEL_USAGE "\n"
    "  Prints the 64-hex-digit content hash of MODEL's graph.\n";

static int print_hash(const char *cmd, sj_ctx *ctx, const sj_graph *g) {
    (void)cmd, (void)ctx;
    uint8_t h[32];
    char hex[65];
    sj_graph_hash(g, h);
    sj_hash_hex(h, hex);
    printf("%s\n", hex);
    return CLI_EXIT_OK;
}

int cli_cmd_hash(int argc, char **argv) {
    return cli_run_on_model("hash", usage, argc, argv, print_hash);
}
