/* Per-bucket schedule tuning for the host compiler (precompile --tune). Not
 * installed.
 *
 *   sj_artifact *a;
 *   SJ_TRY(sj_host_tune(g, extent, &options, dev, 200, &a));  // 200 ms budget
 *   // a: the fastest schedule's code; sj_artifact_info.tuning says why
 *
 * The schedules are the attention ones (shapejit/ext/compile.h,
 * sj_attention_schedule): the fused kernel loses to the unfused ones at
 * small extents and wins at large ones, and where the two cross depends on
 * the model and the machine. A graph in which they give the same code is
 * compiled once and not timed. Otherwise each is loaded on `dev` and run on
 * seeded inputs at the bucket's extent and at half of it; the smaller sum
 * of the two medians wins. Timings are bounded by budget_ms for the bucket
 * (each schedule gets an equal share, at least one timed run at each
 * size); when the winner is within TUNE_NOISE of the schedule AUTO would
 * pick, AUTO's pick is kept, so noise never flips a choice. Clocks are
 * monotonic. */
#ifndef SJ_CACHE_HOST_TUNE_H
#define SJ_CACHE_HOST_TUNE_H

#include "shapejit/ext/artifact.h"
#include "shapejit/ext/compile.h"

sj_status sj_host_tune(const sj_graph *g, int64_t extent, const sj_compile_options *base, sj_device *dev,
                       int budget_ms, sj_artifact **out);

#endif
