/* Lowering: a graph specialised at one bucket extent becomes kernels (see
 * kernel.h) and a launch plan (plan.h). Not installed.
 *
 *   sj_lowered *l;
 *   SJ_TRY(sj__lower(g, 64, &(sj_lower_options){.fusion = true, .prefix = "sj_ab12_"}, &l));
 *   for (int i = 0; i < l->n_kernels; i++) emit(&l->kernels[i]);  // each distinct kernel once
 *   ... l->plan ...  // launch i runs kernel l->plan.launches[i].kernel
 *   sj__lowered_destroy(l);
 */
#ifndef SJ_LOWER_LOWER_H
#define SJ_LOWER_LOWER_H

#include "compile/lower/kernel.h"
#include "plan/plan.h"

typedef struct sj_lower_options {
    bool fusion;        /* false: one kernel per op (a baseline and a debugging aid) */
    const char *prefix; /* prepended to every kernel name (keeps symbols unique) */
    bool attention;     /* with fusion: SJ_KK_ATTENTION kernels (emitters that have them) */
    /* with fusion: window gathers inlined into their reductions
     * (window_fuse.h) */
    bool windows;
    /* Params the policy narrows (sj__precision_mark) get slots of that
     * storage and loads that widen them (kernel.h `storage`). */
    sj_precision precision;
    /* fused where the scores have at least this many elements; 0 = SJ_ATTENTION_MIN_SCORES */
    int64_t attention_min_scores;
} sj_lower_options;

typedef struct sj_lowered {
    sj_ctx *ctx;
    /* The distinct kernels (kernel_share.h): launches of identical code,
     * as a model's repeated layers have, share one; the plan's launch i
     * runs kernels[plan.launches[i].kernel], and plan.kernels[j] names
     * kernels[j]. */
    int n_kernels;
    sj_kernel *kernels;
    sj_launch_plan plan;
    int64_t arena_bytes_no_reuse; /* what the arena would take without reuse */
} sj_lowered;

sj_status sj__lower(const sj_graph *g, int64_t extent, const sj_lower_options *o, sj_lowered **out);
void sj__lowered_destroy(sj_lowered *l);

#endif
