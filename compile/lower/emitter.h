/* Emitters: one per target, each turning lowered kernels into code. compile.c
 * picks one from its table by sj_target. Not installed. */
#ifndef SJ_LOWER_EMITTER_H
#define SJ_LOWER_EMITTER_H

#include "shapejit/ext/compile.h"
#include "plan/artifact_impl.h"
#include "compile/lower/lower.h"

typedef struct sj_emitter {
    const char *target; /* recorded in the artifact */
    /* Fills the artifact's triple, cpu, features, externs and code blobs;
     * a->plan already holds the plan, whose launch geometry (grid, block)
     * a GPU emitter sets. */
    sj_status (*build)(const sj_lowered *l, const sj_compile_options *o, sj_artifact *a);
    /* Code as text (NUL-terminated, sj_alloc'ed). */
    sj_status (*text)(const sj_lowered *l, const sj_compile_options *o, sj_emit_kind kind,
                      char **out, size_t *len);
    /* Bit p set: loads of a param stored in sj_precision p's type (a
     * kernel load's `storage`) are lowered; fp32 always is. */
    unsigned precisions;
    /* *out: whether lowering may fuse attention into one kernel for
     * options o (the schedule, and at AUTO the target's measured
     * preference); an error (a bad CPU name, no memory) fails the compile
     * rather than pick a schedule the key does not say. NULL: the target
     * has no fused attention kernel. */
    sj_status (*fuses_attention)(sj_ctx *ctx, const sj_compile_options *o, bool *out);
    /* Lowering inlines window gathers into their reductions (lower.h
     * `windows`), which the emitter's reductions then read through. */
    bool windows;
} sj_emitter;

extern const sj_emitter sj__host_emitter;
extern const sj_emitter sj__nvptx_emitter; /* compile/gpu/gpu_emitters.c */
extern const sj_emitter sj__nvrtc_emitter;

#endif
