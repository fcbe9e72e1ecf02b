/* Recognises softmax(q @ kT * scale + mask) @ v in a graph, so lowering can
 * run it as one attention kernel (SJ_KK_ATTENTION) that never materialises
 * the [M, L] scores. Not installed.
 *
 *   sj_attention_match *m;                  // one entry per node, root >= 0 where fused
 *   SJ_TRY(sj__attention_find(g, extent, SJ_ATTENTION_MIN_SCORES, &m));   // extent: the bucket's
 *   if (m[n].root == n) ... lower node n from m[n].q, .kt, .v, .mask, .scale
 *   sj_free(g->ctx, m);
 *
 * Only the exact chain matches: matmul(q, kt) [* or / a scalar param]
 * [+ a float mask broadcast into the scores] -> softmax over the last axis ->
 * matmul(p, v), every intermediate used once and not an output, all four
 * operands of the scores' rank with equal or size-1 batch dims, head dims
 * constant and at most SJ_ATTENTION_MAX_HEAD, scores of at least
 * min_scores elements (SJ_ATTENTION_MIN_SCORES unless a schedule says
 * otherwise: compile.h's sj_attention_schedule). Anything else is left to
 * the unfused kernels. */
#ifndef SJ_LOWER_ATTENTION_FUSE_H
#define SJ_LOWER_ATTENTION_FUSE_H

#include "ir/graph_impl.h"
#include "runtime/host_code/host_code.h" /* SJ_ATTENTION_MAX_HEAD */

/* By default fused only where the scores, at the bucket extent, would have
 * at least this many elements (all heads and batches). Measured with
 * `precompile --tune` (AVX-512, one thread), fused time over unfused at the
 * bucket extent: the attention example (one head of 32) 1.64 at 8 tokens
 * (256 scores), 0.88 at 16, 0.39 at 32, 0.89 at 64 and 256, 0.58 at 1024;
 * an exported 4-head layer (heads of 8) 1.0 at 8 tokens, 0.66 at 16, 0.57
 * at 32. Below this the fused kernel's fixed cost (a 32-row tile for a few
 * rows) loses to the three small unfused kernels. */
#define SJ_ATTENTION_MIN_SCORES ((int64_t)1 << 10)


typedef struct sj_attention_match {
    sj_value root;            /* the p @ v node this node belongs to; -1 = not fused */
    sj_value q, kt, v, mask;  /* mask: SJ_NO_VALUE when there is none */
    float scale;              /* 1 when there is none */
} sj_attention_match;

/* out: n_nodes entries (sj_calloc'd on g->ctx; the caller frees). The
 * scores, scaled scores, masked scores and softmax nodes of a match get the
 * root too, so lowering can tell them apart from live values. */
sj_status sj__attention_find(const sj_graph *g, int64_t extent, int64_t min_scores, sj_attention_match **out);

#endif
