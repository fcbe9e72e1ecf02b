/* The precision policy's rule (see include/shapejit/precision.h): which
 * params a policy narrows, and the graph transform the interpreter runs as
 * the reference. Lowering and the runtime ask sj__precision_mark, so every
 * backend narrows exactly the params the reference rounds. */
#include <string.h>

#include "core/half.h"
#include "ir/graph_impl.h"
#include "shapejit/precision.h"

static const char *const names[SJ_PRECISION_COUNT_] = {"fp32", "bf16", "fp16"};

const char *sj_precision_name(sj_precision p) {
    return p >= 0 && p < SJ_PRECISION_COUNT_ ? names[p] : NULL;
}

sj_status sj_precision_from_name(const char *name, sj_precision *out) {
    if (!name) return SJ_E_NOT_FOUND;
    for (int i = 0; i < SJ_PRECISION_COUNT_; i++)
        if (!strcmp(name, names[i])) {
            *out = (sj_precision)i;
            return SJ_OK;
        }
    return SJ_E_NOT_FOUND;
}

/* Ops through which a param still is the contraction's operand, element
 * for element (they move elements, never compute). */
static bool moves_only(sj_op op) {
    return op == SJ_OP_TRANSPOSE || op == SJ_OP_RESHAPE || op == SJ_OP_SLICE || op == SJ_OP_EXPAND;
}

int sj__precision_mark(const sj_graph *g, sj_precision p, bool *narrow, sj_value *first_user) {
    if (narrow) memset(narrow, 0, (size_t)g->n_nodes * sizeof *narrow);
    if (first_user) *first_user = SJ_NO_VALUE;
    if (p == SJ_PRECISION_FP32) return 0;
    /* feeds[v]: the contraction v's value reaches as operand A or B, or -1.
     * Consumers come after their operands, so one backward pass sees every
     * consumer of v before v itself. */
    int count = 0;
    sj_value *feeds = sj_alloc(g->ctx, (size_t)(g->n_nodes ? g->n_nodes : 1) * sizeof *feeds);
    if (!feeds) return -1;
    for (int n = 0; n < g->n_nodes; n++) feeds[n] = SJ_NO_VALUE;
    for (int n = g->n_nodes - 1; n >= 0; n--) {
        const sj_node *nd = &g->nodes[n];
        if (nd->op == SJ_OP_MATMUL || nd->op == SJ_OP_GEMM) {
            for (int i = 0; i < 2; i++)
                if (feeds[nd->inputs[i]] == SJ_NO_VALUE || feeds[nd->inputs[i]] > n) feeds[nd->inputs[i]] = n;
        } else if (moves_only(nd->op) && feeds[n] != SJ_NO_VALUE) {
            sj_value u = nd->inputs[0];
            if (feeds[u] == SJ_NO_VALUE || feeds[u] > feeds[n]) feeds[u] = feeds[n];
        }
    }
    for (int n = 0; n < g->n_nodes; n++) {
        const sj_node *nd = &g->nodes[n];
        if (nd->op != SJ_OP_PARAM || nd->dtype != SJ_F32 || feeds[n] == SJ_NO_VALUE) continue;
        if (narrow) narrow[n] = true;
        if (first_user && (*first_user == SJ_NO_VALUE || feeds[n] < *first_user)) *first_user = feeds[n];
        count++;
    }
    sj_free(g->ctx, feeds);
    return count;
}

int sj_graph_precision_narrowed(const sj_graph *g, sj_precision p) {
    if (!g || !sj_precision_name(p)) return 0;
    int n = sj__precision_mark(g, p, NULL, NULL);
    return n < 0 ? 0 : n;
}

void sj__precision_round(sj_precision p, const float *src, void *dst, int64_t count) {
    uint16_t *d = dst;
    if (p == SJ_PRECISION_BF16)
        for (int64_t i = 0; i < count; i++) d[i] = sj_f32_to_bf16(src[i]);
    else
        for (int64_t i = 0; i < count; i++) d[i] = sj_f32_to_f16(src[i]);
}

static float round_trip(sj_precision p, float x) {
    return p == SJ_PRECISION_BF16 ? sj_bf16_to_f32(sj_f32_to_bf16(x)) : sj_f16_to_f32(sj_f32_to_f16(x));
}

sj_status sj_graph_apply_precision(const sj_graph *g, sj_precision p, sj_graph **out) {
    if (!g || !out) return sj_fail(g ? g->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *out = NULL;
    if (!sj_precision_name(p))
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "precision: %d is not fp32, bf16 or fp16", (int)p);
    bool *narrow = sj_calloc(g->ctx, (size_t)(g->n_nodes ? g->n_nodes : 1), sizeof *narrow);
    if (!narrow || sj__precision_mark(g, p, narrow, NULL) < 0) {
        sj_free(g->ctx, narrow);
        return sj_fail(g->ctx, SJ_E_NOMEM, "precision: out of memory");
    }
    sj_graph *c;
    sj_status st = sj_graph_clone(g, &c);
    if (st == SJ_OK) {
        for (int n = 0; n < c->n_nodes; n++) {
            if (!narrow[n]) continue;
            sj_node *nd = &c->nodes[n];
            int64_t count = sj_shape_numel(&nd->shape, 1);
            const float *src = nd->data;
            if (nd->map) { /* shared read-only with g: the rounding gets a buffer of its own */
                float *own = sj_alloc(c->ctx, (size_t)count * sizeof *own);
                if (!own) {
                    sj_graph_destroy(c);
                    sj_free(g->ctx, narrow);
                    return sj_fail(g->ctx, SJ_E_NOMEM, "precision: out of memory");
                }
                nd->data = own;
                nd->map = NULL; /* c->maps still holds the map until c goes */
            }
            for (int64_t i = 0; i < count; i++) nd->data[i] = round_trip(p, src[i]);
            nd->param_hashed = false; /* the clone copied the unrounded data's hash */
        }
        c->hash_valid = false;
        *out = c;
    }
    sj_free(g->ctx, narrow);
    return st;
}
