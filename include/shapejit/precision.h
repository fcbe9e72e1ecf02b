/* shapejit/precision.h — the precision policy: which values are stored
 * narrower than float32, and the rounding every backend and the reference
 * interpreter share.
 *
 *   sj_precision p;
 *   if (sj_precision_from_name("bf16", &p) != SJ_OK) ...;   // "fp32", "bf16", "fp16"
 *   sj_graph *r;
 *   sj_graph_apply_precision(g, p, &r);   // g with its narrowed weights rounded
 *   sj_interp_run(r, n, in, out);          // the reference a bf16 backend must match
 *   sj_graph_destroy(r);
 *
 * The rule (one place; docs/precision.md says the same):
 *  - fp32 (the default) changes nothing.
 *  - bf16 / fp16 narrow the *weights of contractions*: a float32 param that
 *    reaches operand A or B of a matmul or gemm, directly or through layout
 *    ops that only move elements (transpose, reshape, slice, expand), is
 *    stored in the policy's type, rounded once to nearest, ties to even
 *    (bf16: the top 16 bits of the float32; fp16: IEEE binary16 with
 *    subnormals; NaN stays NaN, overflow becomes infinity). Every reader of
 *    a narrowed param (the matmul, and any other op that reads it, e.g. a
 *    gather from tied embeddings) sees the rounded value, widened exactly.
 *  - Everything else stays float32: contractions accumulate in float32;
 *    reductions, softmax, log-softmax, layernorm and elementwise ops compute
 *    in float32 on float32 values; gemm's C, layernorm's scale and bias,
 *    integer and bool values are never narrowed; activations (values
 *    computed per request) are stored in float32 between ops.
 * So a bf16 result differs from fp32 only by the weights' rounding, and a
 * backend is tested against sj_graph_apply_precision's graph under the
 * same tolerance as at fp32. The policy is part of the compile options and
 * so of every store key; a target that cannot lower it fails naming the op
 * and the policy, never silently computing in float32.
 */
#ifndef SHAPEJIT_PRECISION_H
#define SHAPEJIT_PRECISION_H

#include "shapejit/common.h"
#include "shapejit/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sj_precision {
    SJ_PRECISION_FP32 = 0,
    SJ_PRECISION_BF16 = 1,
    SJ_PRECISION_FP16 = 2,
    SJ_PRECISION_COUNT_
} sj_precision;

/* "fp32", "bf16", "fp16"; NULL for a value outside the enum. */
SJ_API const char *sj_precision_name(sj_precision p);
/* Inverse of sj_precision_name; SJ_E_NOT_FOUND for any other name
 * (NULL included), *out untouched. */
SJ_API sj_status sj_precision_from_name(const char *name, sj_precision *out);

/* How many params of g the policy narrows (0 for fp32). */
SJ_API int sj_graph_precision_narrowed(const sj_graph *g, sj_precision p);

/* A clone of g whose narrowed params hold their rounded values (still
 * float32): running it through the interpreter is the policy's reference.
 * For fp32 an exact clone. */
SJ_API sj_status sj_graph_apply_precision(const sj_graph *g, sj_precision p, sj_graph **out);

#ifdef __cplusplus
}
#endif
#endif
