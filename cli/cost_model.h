/* The per-request cost model `ladder fit MODEL` and `serve --ladder fit:K`
 * fit ladders with: the model runs here at a few extents and sizes, and
 * cost(n, E) = a + b*n + c*E + d*n*E + e*n^2 microseconds and run
 * memory(E) = m0 + m1*E + m2*E^2 bytes are fitted to the runs (least
 * squares, coefficients >= 0). */
#ifndef SJ_CLI_COST_MODEL_H
#define SJ_CLI_COST_MODEL_H

#include "cli/serving.h"
#include "shapejit/ladder.h"

enum { CLI_COST_MAX_GRID = 4 };

typedef struct cli_cost_fit {
    sj_ladder_cost cost;
    int n_points; /* timed (n, E) points */
    int n_grid;   /* extents measured */
    int64_t grid[CLI_COST_MAX_GRID];
    bool memory_known; /* the backend reported run memory (m0..m2 fitted) */
} cli_cost_fit;

/* Measures model (cloned; the caller keeps it) at up to 4 extents spread
 * geometrically over [lo, hi], each in a one-bucket engine configured by
 * base (its ladder is replaced), at 1, E/4, E/2 and E rows. Returns a CLI
 * exit status, the message printed as "shapejit CMD: ...". */
int cli_cost_measure(const char *cmd, sj_ctx *ctx, const sj_graph *model, const cli_engine_args *base,
                     int64_t lo, int64_t hi, cli_cost_fit *out);

#endif
