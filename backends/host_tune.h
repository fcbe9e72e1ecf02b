/* Per-bucket schedule tuning for the host compiler (precompile --tune). Not
 * installed.
 *
 *   sj_artifact *a;
 *   SJ_TRY(sj__host_tune(g, extent, &options, 200, &a));  // 200 ms budget
 *   // a: the fastest schedule's code; sj_artifact_info.tuning says why
 *
 * The schedules (shapejit/ext/compile.h) are the attention ones
 * (sj_attention_schedule: the fused kernel loses to the unfused ones at
 * small extents and wins at large ones, and where the two cross depends on
 * the model and the machine) and, in a bucket of 2..SJ_MATMUL_ROWS_MAX
 * rows, the matmul ones (sj_matmul_schedule: every row in registers while
 * the weights stream past, or 4-row register tiles, which win once the
 * weights sit in cache and the rows fill a tile); every pairing of the
 * dimensions that differ is a candidate. A bucket where none differs is
 * compiled once and not timed. Otherwise each is loaded on a host device of
 * its own (no serving run's lock is in its timings) and run on seeded
 * inputs at the bucket's extent and at half of it; the smaller sum of the
 * two medians wins. Each schedule and size gets an equal share of
 * budget_ms: after one warm-up run, runs are timed until the share is spent
 * and at least 3 were, stopping early at twice the share (so a model whose
 * 3 runs take longer than the budget overruns it by those runs). When the
 * winner is within TUNE_NOISE of the schedule AUTO would pick, AUTO's pick
 * is kept, so noise never flips a choice. Clocks are monotonic. The code
 * is timed on this machine: tune where the fleet's CPU is. */
#ifndef SJ_CACHE_HOST_TUNE_H
#define SJ_CACHE_HOST_TUNE_H

#include "shapejit/ext/artifact.h"
#include "shapejit/ext/compile.h"

sj_status sj__host_tune(const sj_graph *g, int64_t extent, const sj_compile_options *base, int budget_ms,
                       sj_artifact **out);

#endif
