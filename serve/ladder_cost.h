/* The per-request cost model ladders are fitted with (`ladder fit MODEL`,
 * --ladder fit:K in serve and the HTTP server): the model runs here at a
 * few extents and sizes, and cost(n, E) = a + b*n + c*E + d*n*E + e*n^2
 * microseconds and run memory(E) = m0 + m1*E + m2*E^2 bytes are fitted to
 * the runs (least squares, coefficients >= 0). Not installed.
 *
 *   sj_ladder_cost_fit m;
 *   if (sj_ladder_cost_measure(ctx, 1, 1024, open_one_bucket, &args, &m) == SJ_OK)
 *       sj_ladder_fit(ctx, sizes, n, &m.cost, 4, 0, &fit, &r);
 *
 * The engines are the caller's to configure (backend, CPU, precision): the
 * opener gets a one-bucket spec "list:E" and should keep nothing (no store,
 * no fleet tier), so that measuring never publishes throwaway buckets. */
#ifndef SJ_CACHE_LADDER_COST_H
#define SJ_CACHE_LADDER_COST_H

#include "serve/ladder_switch.h" /* sj_ladder_open_fn */
#include "shapejit/engine.h"
#include "shapejit/ladder.h"

enum { SJ_LADDER_COST_MAX_GRID = 4 };

typedef struct sj_ladder_cost_fit {
    sj_ladder_cost cost;
    int n_points; /* timed (n, E) points */
    int n_grid;   /* extents measured */
    int64_t grid[SJ_LADDER_COST_MAX_GRID];
    bool memory_known; /* the backend reported run memory (m0..m2 fitted) */
} sj_ladder_cost_fit;

/* Measures at up to 4 extents spread geometrically over [lo, hi], each in a
 * one-bucket engine from open, at 1, E/4, E/2 and E rows. Errors name the
 * extent and size; an opener's failure carries its why. */
sj_status sj_ladder_cost_measure(sj_ctx *ctx, int64_t lo, int64_t hi, sj_ladder_open_fn open, void *user,
                                 sj_ladder_cost_fit *out);

/* The median warm latency (microseconds) of requests of `rows` rows (seeded
 * inputs: input i uses seed rows + i) through e, leaving out the first,
 * which makes the bucket ready: at least 3 timed runs, more (at most 64)
 * until budget_ns is spent. *extent: the bucket they ran in. */
sj_status sj_engine_warm_latency(sj_engine *e, int64_t rows, double budget_ns, double *us, int64_t *extent);

#endif
