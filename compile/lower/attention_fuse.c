/* Attention pattern matching over the graph (see attention_fuse.h). Works on
 * the graph, before lowering decides homes: the chain's intermediates must
 * then never be given a home, and the p @ v node reads q, kT, v and the mask
 * directly. Matching is strict; whatever differs falls back to the unfused
 * kernels, which are always correct. */
#include <string.h>

#include "compile/lower/attention_fuse.h"

static bool scalar_param(const sj_graph *g, sj_value v, float *out) {
    const sj_node *n = &g->nodes[v];
    if (n->op != SJ_OP_PARAM || !n->data) return false;
    for (int i = 0; i < n->shape.rank; i++)
        if (n->shape.dims[i] != 1) return false;
    *out = n->data[0];
    return true;
}

/* Every dim of a (rank r, right-aligned into scores s) is s's or 1. */
static bool broadcasts_into(const sj_shape *a, const sj_shape *s, int batch_only) {
    if (a->rank > s->rank) return false;
    int off = s->rank - a->rank;
    int upto = batch_only ? a->rank - 2 : a->rank;
    for (int i = 0; i < upto; i++)
        if (a->dims[i] != 1 && a->dims[i] != s->dims[i + off]) return false;
    return true;
}

static bool head_dim_ok(int64_t d) { return d >= 1 && d <= SJ_ATTENTION_MAX_HEAD; }

/* The chain ending at root (a matmul), or false. */
static bool match(const sj_graph *g, const int *uses, int64_t extent, int64_t min_scores, sj_value root,
                  sj_attention_match *m, sj_value chain[4], int *n_chain) {
    const sj_node *pv = &g->nodes[root];
    if (pv->op != SJ_OP_MATMUL) return false;
    sj_value p = pv->inputs[0], v = pv->inputs[1];
    const sj_node *sm = &g->nodes[p];
    int r = sm->shape.rank;
    if (sm->op != SJ_OP_SOFTMAX || uses[p] != 1 || r < 2 || r > 4 || sm->attrs.axis != r - 1)
        return false;
    int64_t scores = 1;
    for (int i = 0; i < r; i++)
        if (sj_dim_offset(sm->shape.dims[i])) return false; /* the kernel's words hold factors only */
    for (int i = 0; i < r; i++) {
        int64_t d = sj_dim_at(sm->shape.dims[i], extent);
        if (d > min_scores) d = min_scores; /* no overflow */
        scores *= d;
        if (scores >= min_scores) break;
    }
    if (scores < min_scores) return false;
    *n_chain = 0;
    chain[(*n_chain)++] = p;
    sj_value s = sm->inputs[0];
    m->mask = SJ_NO_VALUE;
    m->scale = 1.0f;
    const sj_node *sn = &g->nodes[s];
    if (sn->op == SJ_OP_ADD && uses[s] == 1) {
        /* Either operand may be the mask; the scores are the other one,
         * shaped like the softmax input. */
        for (int side = 0; side < 2; side++) {
            sj_value sc = sn->inputs[side], mk = sn->inputs[1 - side];
            const sj_node *scn = &g->nodes[sc];
            if (scn->shape.rank != r || memcmp(scn->shape.dims, sm->shape.dims, sizeof(int64_t) * (size_t)r))
                continue;
            if (!broadcasts_into(&g->nodes[mk].shape, &sm->shape, 0)) continue;
            if (scn->op != SJ_OP_MATMUL && scn->op != SJ_OP_MUL && scn->op != SJ_OP_DIV) continue;
            m->mask = mk;
            chain[(*n_chain)++] = s;
            s = sc;
            sn = scn;
            break;
        }
        if (m->mask == SJ_NO_VALUE) return false;
    }
    if ((sn->op == SJ_OP_MUL || sn->op == SJ_OP_DIV) && uses[s] == 1) {
        float c;
        sj_value mm;
        if (scalar_param(g, sn->inputs[1], &c)) mm = sn->inputs[0];
        else if (sn->op == SJ_OP_MUL && scalar_param(g, sn->inputs[0], &c)) mm = sn->inputs[1];
        else return false;
        if (sn->op == SJ_OP_DIV) {
            if (c == 0.0f) return false;
            c = 1.0f / c;
        }
        m->scale = c;
        chain[(*n_chain)++] = s;
        s = mm;
        sn = &g->nodes[s];
    }
    if (sn->op != SJ_OP_MATMUL || uses[s] != 1) return false;
    if (sn->shape.rank != r || memcmp(sn->shape.dims, sm->shape.dims, sizeof(int64_t) * (size_t)r))
        return false;
    chain[(*n_chain)++] = s;
    sj_value q = sn->inputs[0], kt = sn->inputs[1];
    const sj_shape *qs = &g->nodes[q].shape, *ks = &g->nodes[kt].shape, *vs = &g->nodes[v].shape;
    if (qs->rank != r || ks->rank != r || vs->rank != r) return false;
    if (!broadcasts_into(qs, &sm->shape, 1) || !broadcasts_into(ks, &sm->shape, 1) ||
        !broadcasts_into(vs, &sm->shape, 1))
        return false;
    if (!head_dim_ok(qs->dims[r - 1]) || !head_dim_ok(vs->dims[r - 1])) return false;
    /* Broadcast batch dims of the output must be the scores' own. */
    for (int i = 0; i < r - 2; i++)
        if (pv->shape.dims[i] != sm->shape.dims[i]) return false;
    m->q = q;
    m->kt = kt;
    m->v = v;
    m->root = root;
    return true;
}

sj_status sj__attention_find(const sj_graph *g, int64_t extent, int64_t min_scores, sj_attention_match **out) {
    *out = NULL;
    int n = g->n_nodes;
    sj_attention_match *m = sj_calloc(g->ctx, (size_t)n, sizeof *m);
    int *uses = sj_calloc(g->ctx, (size_t)n, sizeof *uses);
    if (!m || !uses) {
        sj_free(g->ctx, m);
        sj_free(g->ctx, uses);
        return sj_fail(g->ctx, SJ_E_NOMEM, "lowering: out of memory (attention)");
    }
    for (int i = 0; i < n; i++) {
        m[i].root = -1;
        for (int j = 0; j < g->nodes[i].n_inputs; j++)
            if (g->nodes[i].inputs[j] != SJ_NO_VALUE) uses[g->nodes[i].inputs[j]]++;
    }
    /* An output is a use no fused kernel could serve. */
    for (int i = 0; i < g->n_outputs; i++) uses[g->outputs[i].value] += 2;
    for (int i = 0; i < n; i++) {
        sj_attention_match mt;
        sj_value chain[4];
        int nc = 0;
        if (!match(g, uses, extent, min_scores, i, &mt, chain, &nc)) continue;
        m[i] = mt;
        for (int c = 0; c < nc; c++) m[chain[c]].root = i;
    }
    sj_free(g->ctx, uses);
    *out = m;
    return SJ_OK;
}
