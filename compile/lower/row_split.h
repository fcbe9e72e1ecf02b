/* Which kernels may run their rows on several threads: lowering's proof,
 * which the host emitter turns into a row entry (host_emit.c) and the host
 * device into split launches. Not installed. */
#ifndef SJ_LOWER_ROW_SPLIT_H
#define SJ_LOWER_ROW_SPLIT_H

#include "compile/lower/kernel.h"

/* The dim of k's space whose rows may be computed apart: an output dim
 * bounded by the active extent (rows of the symbolic dim) such that every
 * row writes its own output elements, which no other row writes, and reads
 * nothing another row writes; so any split of it computes every row with
 * the same code. ATTENTION splits only its queries (m); MATMUL its rows
 * (m) where they are the symbolic dim, else a symbolic batch dim, whose
 * slices it computes whole. -1 when no dim qualifies: reductions over the
 * symbolic dim, outputs that overlap (a broadcast store), kernels without
 * one. *row_work is one row's work at the bucket extent (the product of
 * the other dims), 0 with -1. */
int sj__kernel_row_dim(const sj_kernel *k, uint64_t *row_work);

#endif
