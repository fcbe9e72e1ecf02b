/* sj_compile: lower a graph at a bucket extent, hand the kernels to the
 * target's emitter, package the result as an artifact. */
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/hash.h"
#include "ir/graph_impl.h"
#include "compile/lower/emitter.h"
#include "compile/lower/kernel_share.h"

static const sj_emitter *const emitters[] = {[SJ_TARGET_HOST] = &sj__host_emitter,
                                             [SJ_TARGET_NVPTX] = &sj__nvptx_emitter,
                                             [SJ_TARGET_NVRTC] = &sj__nvrtc_emitter};

/* A policy the emitter cannot lower is refused, naming the first op it
 * narrows: code that silently computed in float32 would be keyed, stored and
 * served as bf16. */
static sj_status check_precision(const sj_graph *g, const sj_compile_options *o,
                                 const sj_emitter *em) {
    if (o->precision == SJ_PRECISION_FP32 || (em->precisions >> o->precision) & 1u) return SJ_OK;
    sj_value user = SJ_NO_VALUE;
    int n = sj__precision_mark(g, o->precision, NULL, &user);
    if (n < 0) return sj_fail(g->ctx, SJ_E_NOMEM, "compile: out of memory");
    const sj_node *nd = user != SJ_NO_VALUE ? &g->nodes[user] : NULL;
    return sj_fail(g->ctx, SJ_E_UNSUPPORTED,
                   "precision %s not supported by target %s for op %s%s%s%s",
                   sj_precision_name(o->precision), em->target,
                   nd ? sj_op_name(nd->op) : "matmul", nd && nd->name ? " '" : "",
                   nd && nd->name ? nd->name : "", nd && nd->name ? "'" : "");
}

static sj_status pick(const sj_graph *g, const sj_compile_options *o, const sj_emitter **out) {
    if (o->target < 0 || (size_t)o->target >= sizeof emitters / sizeof emitters[0] ||
        !emitters[o->target])
        return sj_fail(g->ctx, SJ_E_UNSUPPORTED, "compile: target %d has no emitter in this build",
                       (int)o->target);
    if (o->opt_level < 0 || o->opt_level > 3)
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "compile: opt level %d not in 0..3", o->opt_level);
    if (o->blas_min_work < 0)
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "compile: negative blas_min_work");
    if (o->threads < 0)
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "compile: threads %d is negative (0 = one per CPU)",
                       o->threads);
    if (!sj_precision_name(o->precision))
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "compile: precision %d is not fp32, bf16 or fp16",
                       (int)o->precision);
    if (o->attention < SJ_ATTENTION_AUTO || o->attention > SJ_ATTENTION_UNFUSED)
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "compile: attention schedule %d is not AUTO, FUSED or UNFUSED",
                       (int)o->attention);
    if (o->matmul < SJ_MATMUL_AUTO || o->matmul > SJ_MATMUL_TILED)
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "compile: matmul schedule %d is not AUTO or TILED",
                       (int)o->matmul);
    *out = emitters[o->target];
    SJ_TRY(check_precision(g, o, *out));
    return SJ_OK;
}

static sj_status lower(const sj_graph *g, const sj_emitter *em, int64_t extent,
                       const sj_compile_options *o, uint8_t hash[32], sj_lowered **out) {
    sj_graph_hash(g, hash);
    bool attention = false;
    if (em->fuses_attention) SJ_TRY(em->fuses_attention(g->ctx, o, &attention));
    sj_lower_options lo = {
        .fusion = o->fusion,
        .attention = attention,
        .attention_min_scores = o->attention == SJ_ATTENTION_FUSED ? 1 : 0,
        .windows = em->windows,
        .precision = o->precision};
    SJ_TRY(sj__lower(g, extent, &lo, out));
    /* Kernels are named by their code, not by graph or bucket: each
     * module's symbols are its own (a JITDylib on the host, a CUDA module),
     * and identical code then stays identical bytes across buckets and
     * models, which the store keeps once. */
    sj_status st = sj__lowered_name_kernels(*out);
    if (st != SJ_OK) {
        sj__lowered_destroy(*out);
        *out = NULL;
    }
    return st;
}

sj_status sj_compile(const sj_graph *g, int64_t extent, const sj_compile_options *o,
                     sj_artifact **out) {
    sj_compile_options defaults;
    if (!o) {
        sj_compile_options_init(&defaults);
        o = &defaults;
    }
    *out = NULL;
    const sj_emitter *em = NULL;
    SJ_TRY(pick(g, o, &em));
    uint8_t hash[32];
    sj_lowered *l;
    uint64_t t0 = sj__now_ns();
    SJ_TRY(lower(g, em, extent, o, hash, &l));
    uint64_t lower_ns = sj__now_ns() - t0;
    sj_artifact *a;
    sj_status st = sj__artifact_new(g->ctx, &a);
    if (st == SJ_OK) {
        a->times.lower_ns = lower_ns;
        memcpy(a->graph_hash, hash, sizeof hash);
        a->options_hash = sj_compile_options_hash(o);
        st = sj__artifact_set_string(a, &a->target, em->target);
        if (st == SJ_OK) st = sj__artifact_set_string(a, &a->shapejit_version, sj_version_string());
        if (st == SJ_OK) st = sj__artifact_set_string(a, &a->llvm_version, SJ_LLVM_VERSION_STRING);
        if (st == SJ_OK) {
            a->plan = l->plan; /* moves: the lowered result no longer owns it */
            memset(&l->plan, 0, sizeof l->plan);
            st = em->build(l, o, a);
        }
        if (st == SJ_OK)
            *out = a;
        else
            sj_artifact_destroy(a);
    }
    sj__lowered_destroy(l);
    return st;
}

sj_status sj_emit_text(const sj_graph *g, int64_t extent, const sj_compile_options *o,
                       sj_emit_kind kind, char **out, size_t *len) {
    sj_compile_options defaults;
    if (!o) {
        sj_compile_options_init(&defaults);
        o = &defaults;
    }
    const sj_emitter *em = NULL;
    SJ_TRY(pick(g, o, &em));
    if (!em->text)
        return sj_fail(g->ctx, SJ_E_UNSUPPORTED, "emit: target %s has no text form", em->target);
    uint8_t hash[32];
    sj_lowered *l;
    SJ_TRY(lower(g, em, extent, o, hash, &l));
    sj_status st = em->text(l, o, kind, out, len);
    sj__lowered_destroy(l);
    return st;
}

sj_status sj_compile_kernel_counts(const sj_graph *g, int64_t extent, const sj_compile_options *o,
                                   int *kernels, int *matmuls) {
    sj_compile_options defaults;
    if (!o) {
        sj_compile_options_init(&defaults);
        o = &defaults;
    }
    const sj_emitter *em = NULL;
    SJ_TRY(pick(g, o, &em));
    uint8_t hash[32];
    sj_lowered *l;
    SJ_TRY(lower(g, em, extent, o, hash, &l));
    /* Launches, as before kernels were shared: the tuner compares the
     * schedules' plans by them, and reports count what runs. */
    *kernels = l->plan.n_launches;
    *matmuls = 0;
    for (int i = 0; i < l->plan.n_launches; i++)
        *matmuls += l->kernels[l->plan.launches[i].kernel].kind == SJ_KK_MATMUL;
    sj__lowered_destroy(l);
    return SJ_OK;
}

sj_status sj_compile_kernel_count(const sj_graph *g, int64_t extent, const sj_compile_options *o,
                                  int *out) {
    int matmuls;
    return sj_compile_kernel_counts(g, extent, o, out, &matmuls);
}
