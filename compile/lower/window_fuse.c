/* Window gathers (window_fuse.h). */
#include "compile/lower/window_fuse.h"

#include <stdint.h>
#include <string.h>

/* A constant int table of constant axes: two (taps and positions, either
 * order) for a window, any number from one for a table gather. */
static bool const_table(const sj_node *t, bool window) {
    if (t->op != SJ_OP_PARAM || !t->bytes || (t->dtype != SJ_I32 && t->dtype != SJ_I64) ||
        t->shape.rank < 1 || (window && t->shape.rank != 2))
        return false;
    for (int i = 0; i < t->shape.rank; i++)
        if (t->shape.dims[i] < 1 || t->shape.dims[i] >= INT32_MAX)
            return false;
    return true;
}

/* A reduction over exactly axis `taps` of its operand (any keepdims). */
static bool folds_taps(const sj_node *r, int taps, bool max_ok) {
    if (!sj_op_is_reduce(r->op) || (r->op == SJ_OP_REDUCE_MAX && !max_ok)) return false;
    return r->attrs.axes == 1u << taps;
}

/* Whether product c of window v (taps on axes ax, ax + 1) has v's shape, but
 * for axes after the taps where v has 1: a conv of few channels
 * (onnx_op_conv.c) multiplies its taps [N, P, K * C, 1] by the weight
 * [K * C, M], each tap's value read once for the M output channels. */
static bool tap_product_shape(const sj_node *v, const sj_node *c, int ax) {
    if (c->shape.rank != v->shape.rank) return false;
    for (int i = 0; i < c->shape.rank; i++)
        if (c->shape.dims[i] != v->shape.dims[i] && (i <= ax + 1 || v->shape.dims[i] != 1))
            return false;
    return true;
}

static bool is_window(const sj_graph *g, const int *uses, const int *consumer, sj_value v) {
    const sj_node *nd = &g->nodes[v];
    if (nd->op != SJ_OP_GATHER || uses[v] != 1) return false;
    const sj_node *d = &g->nodes[nd->inputs[0]], *t = &g->nodes[nd->inputs[1]];
    int r = d->shape.rank, ax = nd->attrs.axis;
    if (!const_table(t, false) || d->dtype != SJ_F32 || r < 1) return false;
    int64_t len = d->shape.dims[ax];
    if (len < 1 || len >= INT32_MAX) return false;
    const sj_node *c = &g->nodes[consumer[v]];
    /* a table gather: one term of an elementwise expression */
    if (sj_op_is_elementwise(c->op) && c->dtype == SJ_F32) return true;
    if (!const_table(t, true)) return false;
    /* the table's two axes are the result's ax and ax + 1; either may be
     * the taps */
    if (folds_taps(c, ax, true) || folds_taps(c, ax + 1, true)) return true;
    if (c->op != SJ_OP_MUL || uses[consumer[v]] != 1) return false;
    sj_value other = c->inputs[0] == v ? c->inputs[1] : c->inputs[0];
    if (other == v || g->nodes[other].dtype != SJ_F32 || !tap_product_shape(nd, c, ax)) return false;
    const sj_node *red = &g->nodes[consumer[consumer[v]]];
    return folds_taps(red, ax, false) || folds_taps(red, ax + 1, false);
}

/* Whether v is a gather through a constant table along `axis` of its data. */
static bool table_gather(const sj_graph *g, sj_value v, int axis) {
    const sj_node *nd = &g->nodes[v];
    return nd->op == SJ_OP_GATHER && nd->attrs.axis == axis && const_table(&g->nodes[nd->inputs[1]], false);
}

/* The concat gather v reads past (window_fuse.h's *pad), or SJ_NO_VALUE.
 * gathers[c]: how many of concat c's uses are table gathers along its axis. */
static sj_value padded_data(const sj_graph *g, const int *uses, const int *gathers, sj_value v) {
    const sj_node *nd = &g->nodes[v];
    if (!table_gather(g, v, nd->attrs.axis)) return SJ_NO_VALUE;
    sj_value c = nd->inputs[0];
    const sj_node *cat = &g->nodes[c];
    int ax = nd->attrs.axis;
    if (cat->op != SJ_OP_CONCAT || cat->attrs.axis != ax || uses[c] != gathers[c]) return SJ_NO_VALUE;
    const sj_node *x = &g->nodes[cat->inputs[0]], *fill = &g->nodes[cat->inputs[1]];
    int64_t len = x->shape.dims[ax];
    if (x->dtype != SJ_F32 || fill->op != SJ_OP_FILL || fill->shape.dims[ax] != 1 || sj_dim_is_sym(len) ||
        len < 1 || len >= INT32_MAX)
        return SJ_NO_VALUE;
    return c;
}

sj_status sj__window_find(const sj_graph *g, bool **out, sj_value **pad_out) {
    *out = NULL;
    *pad_out = NULL;
    int n = g->n_nodes;
    bool *win = sj_calloc(g->ctx, (size_t)(n ? n : 1), sizeof *win);
    sj_value *pad = sj_calloc(g->ctx, (size_t)(n ? n : 1), sizeof *pad);
    int *uses = sj_calloc(g->ctx, (size_t)(n ? n : 1), sizeof *uses);
    int *consumer = sj_calloc(g->ctx, (size_t)(n ? n : 1), sizeof *consumer);
    int *gathers = sj_calloc(g->ctx, (size_t)(n ? n : 1), sizeof *gathers);
    if (!win || !pad || !uses || !consumer || !gathers) {
        sj_free(g->ctx, win);
        sj_free(g->ctx, pad);
        sj_free(g->ctx, uses);
        sj_free(g->ctx, consumer);
        sj_free(g->ctx, gathers);
        return sj_fail(g->ctx, SJ_E_NOMEM, "lowering: out of memory (windows)");
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < g->nodes[i].n_inputs; j++) {
            sj_value u = g->nodes[i].inputs[j];
            if (u == SJ_NO_VALUE) continue;
            uses[u]++;
            consumer[u] = i;
            if (j == 0 && table_gather(g, i, g->nodes[u].attrs.axis)) gathers[u]++;
        }
    /* An output is a use no fused kernel could serve. */
    for (int i = 0; i < g->n_outputs; i++) uses[g->outputs[i].value] += 2;
    for (int i = 0; i < n; i++) {
        win[i] = is_window(g, uses, consumer, i);
        pad[i] = padded_data(g, uses, gathers, i);
    }
    sj_free(g->ctx, uses);
    sj_free(g->ctx, consumer);
    sj_free(g->ctx, gathers);
    *out = win;
    *pad_out = pad;
    return SJ_OK;
}
