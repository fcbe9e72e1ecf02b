/* Content-addressed kernels within one lowering: launches whose kernels
 * would get the same code share one kernel, so an emitter builds and
 * compiles it once (issue #33: a BERT encoder's 12 identical layers were
 * compiled 12 times). Not installed.
 *
 * What decides a kernel's code is its whole sj_kernel except the name: the
 * kind, the space (dims at the bucket extent, which are symbolic), the
 * reduced dims, output strides and offset, every expression (ops, dtypes,
 * constants' bit patterns) and every load (launch-local buffer index,
 * dtype, storage precision, strides, offsets). Weights never enter a
 * kernel: params reach it as launch buffers (plan slots), so layers that
 * differ only in their weights share code. What is the same for the whole
 * module (target, CPU features, opt level, schedules, precision policy)
 * is the emitter's, not the kernel's, and so is the same for every kernel
 * a module shares. */
#ifndef SJ_LOWER_KERNEL_SHARE_H
#define SJ_LOWER_KERNEL_SHARE_H

#include "compile/lower/lower.h"

/* k's canonical description: a tagged little-endian serialisation of every
 * field that decides its code (floats as bit patterns, so -0.0 and 0.0
 * differ), the name left out. *out is sj_alloc'ed. */
sj_status sj__kernel_describe(sj_ctx *ctx, const sj_kernel *k, uint8_t **out, size_t *len);

/* Merges l's kernels with equal descriptions: the first of each keeps its
 * name and place, the later copies are dropped, and every launch names the
 * kept one (the plan's kernel table shrinks to the distinct kernels, in
 * first-use order). Kernels are found by the BLAKE3 of their description
 * and merged only when the descriptions compare equal byte for byte, so a
 * hash collision can never merge different code. Expects the plan lowering
 * made (kernel table parallel to l->kernels). */
sj_status sj__lowered_share_kernels(sj_lowered *l);

/* Names every kernel of l (and its plan entry) by its code: "sjk_" and a
 * hash of its description without the bucket extent, so identical code
 * compiled for several buckets is identical bytes. Expects shared kernels
 * (sj__lowered_share_kernels). */
sj_status sj__lowered_name_kernels(sj_lowered *l);

#endif
