/* Where a tensor at the active extent n (dense, row-major) sits inside its
 * layout at the bucket extent E: the executor copies inputs in and outputs
 * out along these chunks. The symbolic dim may be any axis, or several.
 * Not installed. */
#ifndef SJ_RUNTIME_PADDING_IMPL_H
#define SJ_RUNTIME_PADDING_IMPL_H

#include "shapejit/graph.h"

/* One contiguous run: `count` floats at `dense` in the active tensor and at
 * `padded` in the bucket layout (offsets in elements). */
typedef void (*sj_pad_chunk_fn)(void *user, int64_t dense, int64_t padded, int64_t count);

/* Calls fn for every chunk, in increasing offset order; returns how many.
 * Chunks cover the active tensor exactly; padding is never touched. */
int64_t sj__pad_chunks(const sj_shape *s, int64_t active, int64_t extent, sj_pad_chunk_fn fn,
                      void *user);
/* How many chunks sj__pad_chunks makes (no calls). */
int64_t sj__pad_chunk_count(const sj_shape *s, int64_t active);

#endif
