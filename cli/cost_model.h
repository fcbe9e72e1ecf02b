/* The cost model (serve/ladder_cost.h) measured with engines the CLI's
 * flags configure: what `ladder fit MODEL` and `serve --ladder fit:K`
 * (without --listen) use. */
#ifndef SJ_CLI_COST_MODEL_H
#define SJ_CLI_COST_MODEL_H

#include "serve/ladder_cost.h"
#include "cli/serving.h"

/* Measures model (cloned; the caller keeps it) over [lo, hi] in one-bucket
 * engines configured by base (its ladder replaced). Returns a CLI exit
 * status, the message printed as "shapejit CMD: ...". */
int cli_cost_measure(const char *cmd, sj_ctx *ctx, const sj_graph *model, const cli_engine_args *base,
                     int64_t lo, int64_t hi, sj_ladder_cost_fit *out);

#endif
