/* Layout onto the graph: Transpose, Concat, Expand, Tile and Trilu, and
 * the ops that are their input (Identity, inference Dropout). Concat and
 * Expand fold at load time when their inputs are known then. */
#include "formats/onnx/onnx_fold.h"
#include "formats/onnx/onnx_node.h"

#include <string.h>

/* ---- folds ---- */

static sj_status fold_concat(sj_onnx_loader *L, const sj_onnx_op *op, sj_onnx_fold *in, int n,
                             sj_onnx_fold *out) {
    (void)op;
    int64_t axis;
    SJ_TRY(sj__onnx_attr_int(L, "axis", 0, &axis));
    int rank = in[0].rank;
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis out of range");
    int64_t dims[SJ_ONNX_MAX_RANK];
    memcpy(dims, in[0].dims, sizeof dims);
    dims[axis] = 0;
    for (int i = 0; i < n; i++) {
        if (in[i].rank != rank) return sj__onnx_node_fail(L, SJ_E_SHAPE, "operand ranks differ");
        dims[axis] += in[i].dims[axis];
    }
    SJ_TRY(sj__onnx_fold_alloc(L, out, in[0].dtype, rank, dims));
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= dims[i];
    for (int i = (int)axis + 1; i < rank; i++) inner *= dims[i];
    int64_t at = 0;
    for (int64_t o = 0; o < outer; o++)
        for (int i = 0; i < n; i++) {
            int64_t run = in[i].dims[axis] * inner;
            memcpy(out->e + at, in[i].e + o * run, (size_t)run * sizeof *out->e);
            at += run;
        }
    return SJ_OK;
}

static sj_status fold_expand(sj_onnx_loader *L, const sj_onnx_op *op, sj_onnx_fold *in, int n,
                             sj_onnx_fold *out) {
    (void)op, (void)n;
    sj_onnx_fold t = {.rank = (int)in[1].numel};
    if (t.rank > SJ_ONNX_MAX_RANK) return sj__onnx_node_fail(L, SJ_E_SHAPE, "rank too large");
    for (int i = 0; i < t.rank; i++) {
        if (in[1].e[i].n) return SJ_ONNX_NOT_FOLDED; /* to a symbolic shape: a graph expand */
        t.dims[i] = in[1].e[i].c;
    }
    int rank;
    int64_t dims[SJ_ONNX_MAX_RANK];
    if (!sj__onnx_fold_bcast_shape(&in[0], &t, &rank, dims))
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "shape does not broadcast");
    SJ_TRY(sj__onnx_fold_alloc(L, out, in[0].dtype, rank, dims));
    for (int64_t i = 0; i < out->numel; i++) out->e[i] = in[0].e[sj__onnx_fold_bcast_index(&in[0], rank, dims, i)];
    return SJ_OK;
}

/* ---- maps ---- */

static sj_status map_transpose(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, x, &s));
    const int64_t *pv;
    size_t pn;
    bool present;
    SJ_TRY(sj__onnx_attr_ints(L, "perm", &pv, &pn, &present));
    int perm[SJ_MAX_RANK];
    if (present) {
        if ((int)pn != s.rank)
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "perm has %zu entries for rank %d", pn, s.rank);
        SJ_TRY(sj__onnx_int_axes(L, pv, pn, perm));
    } else {
        for (int i = 0; i < s.rank; i++) perm[i] = s.rank - 1 - i;
    }
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_transpose(L->g, x, perm, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* Concat of n operands, joined pairwise from the left. */
static sj_status map_concat(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    int n = (int)L->node->n_input;
    int64_t axis;
    if (!sj__onnx_node_attr(L, "axis") && L->opset >= 4)
        return sj__onnx_node_fail(L, SJ_E_PARSE, "needs the attribute 'axis'");
    SJ_TRY(sj__onnx_attr_int(L, "axis", 1, &axis));
    sj_value acc, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &acc));
    if (n == 1) return sj__onnx_alias_input(L);
    for (int i = 1; i < n; i++) {
        sj_value b;
        SJ_TRY(sj__onnx_in_value(L, i, &b));
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_concat(L->g, acc, b, (int)axis, &acc)));
    }
    return sj__onnx_def_out(L, 0, acc, first);
}

/* A shape input (Expand's, Tile's repeats) as dims; an entry that is an
 * affine form of the symbolic dim becomes that symbolic dim. */
static sj_status in_dims(sj_onnx_loader *L, int i, const char *what, int64_t *dims, int *rank) {
    sj_onnx_sym v[SJ_MAX_RANK];
    SJ_TRY(sj__onnx_in_syms(L, i, what, v, rank));
    for (int k = 0; k < *rank; k++) {
        if (!sj__onnx_sym_dim(v[k], &dims[k]))
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                     "%s entry %d (%lld%+lld*N) is no dim (zero-size and "
                                     "computed lengths are not supported)",
                                     what, k, (long long)v[k].c, (long long)v[k].n);
    }
    return SJ_OK;
}

static sj_status map_expand(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    int64_t dims[SJ_MAX_RANK];
    int rank = 0;
    SJ_TRY(in_dims(L, 1, "shape", dims, &rank));
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_expand(L->g, x, rank, dims, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* Tile: per repeated axis a, [.., d, ..] -> [.., 1, d, ..] -> expand to
 * [.., r, d, ..] -> [.., r * d, ..], which is numpy's tile. */
static sj_status map_tile(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    sj_value x, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, x, &s));
    const sj_onnx_tensor *t;
    SJ_TRY(sj__onnx_in_ints(L, 1, "repeats", &t));
    if (t->numel != s.rank)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "repeats has %lld entries for rank %d",
                                 (long long)t->numel, s.rank);
    sj_value y = x;
    for (int a = 0; a < s.rank; a++) {
        int64_t r = t->i[a];
        if (r < 1)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                     "repeat %lld on axis %d (zero-size tensors are not supported)",
                                     (long long)r, a);
        if (r == 1) continue;
        if (sj_dim_is_sym(s.dims[a]))
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                     "tiling the symbolic dim (axis %d) %lld times gives a length "
                                     "no shape here holds",
                                     a, (long long)r);
        if (s.rank + 1 > SJ_MAX_RANK)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "tiling rank %d needs rank %d (at most %d)",
                                     s.rank, s.rank + 1, SJ_MAX_RANK);
        int64_t up[SJ_MAX_RANK], wide[SJ_MAX_RANK];
        for (int i = 0, k = 0; i <= s.rank; i++) {
            up[i] = i == a ? 1 : s.dims[k++];
            wide[i] = i == a ? r : up[i];
        }
        sj_value u, w;
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(L->g, y, s.rank + 1, up, &u)));
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_expand(L->g, u, s.rank + 1, wide, &w)));
        s.dims[a] *= r;
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(L->g, w, s.rank, s.dims, &y)));
    }
    return sj__onnx_def_or_alias(L, x, y, first);
}

/* Trilu: k is an optional constant scalar input. */
static sj_status map_trilu(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    int64_t upper, k = 0;
    SJ_TRY(sj__onnx_attr_int(L, "upper", 1, &upper));
    if (sj__onnx_in_name(L, 1)) {
        sj_onnx_sym v[SJ_MAX_RANK];
        int n;
        SJ_TRY(sj__onnx_in_syms(L, 1, "k", v, &n));
        if (n != 1 || v[0].n)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "k must be one constant integer");
        k = v[0].c;
    }
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_trilu(L->g, x, upper != 0, k, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* Inference: the identity, and a mask output all true. Training (dropping
 * at random) is outside what shapejit computes. */
static sj_status map_dropout(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    const Onnx__NodeProto *n = L->node;
    const char *mask = n->n_output > 1 && n->output[1] && n->output[1][0] ? n->output[1] : NULL;
    int64_t is_test;
    SJ_TRY(sj__onnx_attr_int(L, "is_test", 1, &is_test)); /* opset < 7 */
    if (L->opset < 7 && !is_test)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                 "is_test=0 asks for training-mode dropout; only inference "
                                 "(identity) is supported");
    const char *mode = sj__onnx_in_name(L, 2);
    if (mode) {
        sj_onnx_val *m;
        SJ_TRY(sj__onnx_in_val(L, 2, &m));
        bool is_false = m->has_const && m->c.numel == 1 &&
                        (m->c.f ? m->c.f[0] == 0.0f : m->c.i[0] == 0);
        if (!is_false)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                     "training_mode input '%s' is not a constant false; only "
                                     "inference (identity) is supported",
                                     mode);
    }
    /* ratio (attribute or input 1) only matters in training */
    SJ_TRY(sj__onnx_alias_input(L));
    if (!mask) return SJ_OK;
    /* inference keeps every element: the mask is all true */
    sj_value x, m, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, x, &s));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_fill(L->g, SJ_BOOL, 1, s.rank, s.dims, &m)));
    return sj__onnx_def_out(L, 1, m, first);
}

static sj_status map_identity(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    return sj__onnx_alias_input(L);
}

const sj_onnx_op sj__onnx_ops_layout[] = {
    {"Transpose", 1, 1, 1, 1, NULL, map_transpose, SJ_OP_TRANSPOSE, 0},
    {"Concat", 1, SJ_ONNX_ANY, 1, 1, fold_concat, map_concat, SJ_OP_CONCAT, 0},
    {"Expand", 2, 2, 1, 1, fold_expand, map_expand, SJ_OP_EXPAND, 0},
    {"Tile", 2, 2, 1, 1, NULL, map_tile, SJ_OP_EXPAND, 0},
    {"Trilu", 1, 2, 1, 1, NULL, map_trilu, SJ_OP_TRILU, 0},
    {"Identity", 1, 1, 1, 1, sj__onnx_fold_unary, map_identity, SJ_OP_COUNT_, 0},
    /* inputs ratio and training_mode; output 1 is the mask */
    {"Dropout", 1, 3, 1, 2, NULL, map_dropout, SJ_OP_COUNT_, 0},
};
const size_t sj__onnx_ops_layout_n = sizeof sj__onnx_ops_layout / sizeof sj__onnx_ops_layout[0];
