/* Channels-last activations between a conv net's ops (onnx_layout.h). */
#include "formats/onnx/onnx_layout.h"

#include <string.h>

#include "formats/onnx/onnx_node.h"
#include "formats/onnx/onnx_op.h"

/* The ops whose mappers read every input through sj__onnx_in_value and
 * build shape-agnostic elementwise graph ops from them, so they compute the
 * same thing on [N, P, C] as on [N, C, D...]. */
static const char *const ELEMENTWISE[] = {
    "Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Neg", "Abs", "Exp", "Sqrt",
    "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Erf", "Clip", "HardSigmoid", "HardSwish", "Elu", "Gelu"};

static bool elementwise(const char *name) {
    for (size_t i = 0; i < sizeof ELEMENTWISE / sizeof ELEMENTWISE[0]; i++)
        if (!strcmp(name, ELEMENTWISE[i])) return true;
    return false;
}

/* The positions of an [N, C, D...] shape: the product of D. */
static int64_t positions(const sj_shape *s) {
    int64_t p = 1;
    for (int i = 2; i < s->rank; i++) p *= s->dims[i];
    return p;
}

static bool same_spatial(const sj_shape *a, const sj_shape *b) {
    if (a->rank != b->rank) return false;
    for (int i = 2; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

bool sj__onnx_in_channels_last(sj_onnx_loader *L, int i, sj_value *cl, sj_shape *nchw) {
    const char *name = sj__onnx_in_name(L, i);
    const sj_onnx_val *v = name ? sj__onnx_lookup(L, name) : NULL;
    *cl = SJ_NO_VALUE;
    if (!v || v->cl == SJ_NO_VALUE) return false;
    *cl = v->cl;
    *nchw = v->cl_shape;
    return true;
}

sj_status sj__onnx_def_channels_last(sj_onnx_loader *L, int i, sj_value cl, const sj_shape *nchw) {
    const char *name = i < (int)L->node->n_output ? L->node->output[i] : NULL;
    if (!name || !name[0]) return SJ_OK;
    sj_onnx_val *o;
    SJ_TRY(sj__onnx_define(L, name, &o));
    o->cl = cl;
    o->cl_shape = *nchw;
    return SJ_OK;
}

sj_status sj__onnx_channels_first(sj_onnx_loader *L, sj_onnx_val *v, sj_value *out) {
    int perm[3] = {0, 2, 1};
    sj_value t, y;
    SJ_TRY(sj_graph_transpose(L->g, v->cl, perm, &t));
    SJ_TRY(sj_graph_reshape(L->g, t, v->cl_shape.rank, v->cl_shape.dims, &y));
    SJ_TRY(sj_graph_set_name(L->g, y, v->name));
    v->v = y;
    *out = y;
    return SJ_OK;
}

/* Input i's value for the channels-last mapping into *sub (SJ_NO_VALUE: the
 * input as it is), with out's batch and channel dims broadcast against it.
 * False when the input keeps the node channels first: a channels-last one
 * of other positions, or one that varies over the positions. */
static bool substitute(sj_onnx_loader *L, int i, const sj_shape *ref, sj_shape *out, sj_value *sub,
                       sj_status *st) {
    *sub = SJ_NO_VALUE;
    const char *name = sj__onnx_in_name(L, i);
    if (!name) return true; /* an optional input not given */
    sj_onnx_val *v = sj__onnx_lookup(L, name);
    if (!v) return false; /* the mapper names what is missing */
    sj_shape s;
    if (v->cl != SJ_NO_VALUE) {
        s = v->cl_shape;
        if (!same_spatial(&s, ref) && positions(&s) != 1) return false;
        *sub = v->cl;
    } else {
        if (v->has_sym || v->runtime_dtype || (v->v == SJ_NO_VALUE && !v->has_const)) return false;
        sj_value x;
        if ((*st = sj__onnx_as_value(L, v, &x)) != SJ_OK) return false;
        if ((*st = sj__onnx_shape_of(L, x, &s)) != SJ_OK) return false;
        if (s.rank > ref->rank) return false;
        /* right-aligned against [N, C, D...]: every D must be 1 */
        sj_shape p = {.rank = ref->rank};
        int lead = ref->rank - s.rank;
        for (int d = 0; d < ref->rank; d++) p.dims[d] = d < lead ? 1 : s.dims[d - lead];
        for (int d = 2; d < p.rank; d++)
            if (p.dims[d] != 1) return false;
        if (s.rank > 1) {
            /* [n, c, 1...] as [n, 1, c]: the same elements in the same order */
            int64_t d3[3] = {p.dims[0], 1, p.dims[1]};
            if ((*st = sj__onnx_node_prefix(L, sj_graph_reshape(L->g, x, 3, d3, sub))) != SJ_OK)
                return false;
        }
        s = p;
    }
    for (int a = 0; a < 2; a++)
        if (out->dims[a] == 1) out->dims[a] = s.dims[a];
    return true;
}

sj_status sj__onnx_layout_try(sj_onnx_loader *L, const sj_onnx_op *op, bool *done) {
    *done = false;
    if (!elementwise(op->name)) return SJ_OK;
    int n = sj__onnx_n_inputs(L);
    if (n > (int)(sizeof L->subst / sizeof L->subst[0])) return SJ_OK;
    /* the output's positions: those of a channels-last input with more than one */
    sj_shape ref = {0};
    bool laid = false;
    for (int i = 0; i < n; i++) {
        sj_value cl;
        sj_shape s;
        if (!sj__onnx_in_channels_last(L, i, &cl, &s)) continue;
        if (!laid || (positions(&ref) == 1 && positions(&s) > 1)) ref = s;
        laid = true;
    }
    if (!laid) return SJ_OK;
    sj_shape out = ref;
    sj_value sub[sizeof L->subst / sizeof L->subst[0]];
    for (int i = 0; i < n; i++) {
        sj_status st = SJ_OK;
        if (!substitute(L, i, &ref, &out, &sub[i], &st)) return st;
    }
    memcpy(L->subst, sub, (size_t)n * sizeof sub[0]);
    L->n_subst = n;
    L->cl_out_shape = out;
    sj_status st = op->map(L, op);
    L->n_subst = 0;
    *done = st == SJ_OK;
    return st;
}

sj_status sj__onnx_layout_define(sj_onnx_loader *L, sj_onnx_val *o, sj_value y) {
    const sj_shape *nchw = &L->cl_out_shape;
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, y, &s));
    if (s.rank != 3 || s.dims[0] != nchw->dims[0] || s.dims[1] != positions(nchw) ||
        s.dims[2] != nchw->dims[1])
        return sj__onnx_node_fail(L, SJ_E_INTERNAL,
                                  "the channels-last result has rank %d, not [N, %lld, %lld]", s.rank,
                                  (long long)positions(nchw), (long long)nchw->dims[1]);
    o->cl = y;
    o->cl_shape = *nchw;
    return SJ_OK;
}
