/* cli/cost_model.h: the library's cost model over engines opened from the
 * CLI's flags. */
#include "cli/cost_model.h"

#include <stdio.h>

typedef struct opener {
    const char *cmd;
    sj_ctx *ctx;
    const sj_graph *model;
    const cli_engine_args *base;
    int rc; /* the open's exit status: its message is printed already */
} opener;

static sj_status open_one(void *user, const char *spec, sj_engine **out, char *why, size_t cap) {
    opener *o = user;
    sj_graph *g;
    if (sj_graph_clone(o->model, &g) != SJ_OK) {
        snprintf(why, cap, "cannot copy the model: %s", sj_ctx_last_error(o->ctx));
        return SJ_E_NOMEM;
    }
    cli_engine_args ea = *o->base;
    ea.ladder = spec;
    char store_path[4096];
    o->rc = cli_engine_open(o->cmd, o->ctx, g, &ea, out, store_path, sizeof store_path);
    if (o->rc == CLI_EXIT_OK) return SJ_OK;
    snprintf(why, cap, "the message above says why");
    return SJ_E_STATE;
}

int cli_cost_measure(const char *cmd, sj_ctx *ctx, const sj_graph *model, const cli_engine_args *base,
                     int64_t lo, int64_t hi, sj_ladder_cost_fit *out) {
    opener o = {.cmd = cmd, .ctx = ctx, .model = model, .base = base, .rc = CLI_EXIT_OK};
    if (sj_ladder_cost_measure(ctx, lo, hi, open_one, &o, out) == SJ_OK) return CLI_EXIT_OK;
    return o.rc != CLI_EXIT_OK ? o.rc : cli_fail(cmd, "%s", sj_ctx_last_error(ctx));
}
