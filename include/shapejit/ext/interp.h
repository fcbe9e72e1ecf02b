/* shapejit/ext/interp.h — the reference interpreter, the oracle every backend is
 * tested against: plain loops over float32 data (accumulating in double),
 * no fusion, no cleverness.
 *
 *   sj_tensor in[1] = {x}, out[1];
 *   if (sj_interp_run(g, 37, in, out) == SJ_OK) { ...; sj_tensor_free(ctx, &out[0]); }
 *
 * inputs: one tensor per graph input, in declaration order, with the
 * symbolic dim equal to `extent` (ignored for a graph without one).
 * outputs: one per graph output, allocated here (caller frees each).
 * Shapes that do not match are SJ_E_SHAPE naming the input; on any failure
 * no output is left allocated.
 *
 * Extension tier (include/shapejit/ext/): for backends, tools and tests
 * that work below sj_engine; it may change between minor versions.
 */
#ifndef SHAPEJIT_INTERP_H
#define SHAPEJIT_INTERP_H

#include "shapejit/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

SJ_API sj_status sj_interp_run(const sj_graph *g, int64_t extent, const sj_tensor *inputs,
                               sj_tensor *outputs);

#ifdef __cplusplus
}
#endif
#endif
