/* Row independence along the symbolic dim, proved from the graph: what
 * lets a server concatenate concurrent requests into one run and split the
 * outputs back. Each value is either constant (computed from params only)
 * or carries the request rows on exactly one axis, and every op is checked
 * to keep row r of its result a function of row r of its operands: no
 * reduction, contraction, normalisation or softmax over that axis, no
 * reshape that moves it. Anything not shown safe is refused, with the op
 * and the reason, so batching is never guessed. */
#include "ir/graph_impl.h"

#include <stdio.h>
#include <string.h>

#define CONST_VAL (-1) /* no dependence on any input */

typedef struct rows_state {
    const sj_graph *g;
    int *axis; /* per value: CONST_VAL or the axis carrying the rows */
    char *why;
    size_t cap;
} rows_state;

static bool refuse(rows_state *st, sj_value v, const char *fmt, const char *detail) {
    const sj_node *n = &st->g->nodes[v];
    char what[160];
    if (n->name)
        snprintf(what, sizeof what, "%s '%s'", sj_op_name(n->op), n->name);
    else
        snprintf(what, sizeof what, "%s (value %d)", sj_op_name(n->op), (int)v);
    if (st->why && st->cap) snprintf(st->why, st->cap, fmt, what, detail);
    return false;
}

/* Operand axis `a` of rank `ra` as an axis of a broadcast result of rank `r`. */
static int aligned(int a, int ra, int r) { return a + (r - ra); }

/* Product of dims [from, to), a symbolic one counting its factor. */
static int64_t prod(const sj_shape *s, int from, int to) {
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= sj_dim_at(s->dims[i], 1);
    return p;
}

static bool matmul_axis(rows_state *st, sj_value v, int *out) {
    const sj_node *n = &st->g->nodes[v];
    int a = st->axis[n->inputs[0]], b = st->axis[n->inputs[1]];
    int ra = st->g->nodes[n->inputs[0]].shape.rank, rb = st->g->nodes[n->inputs[1]].shape.rank;
    int r = n->shape.rank;
    if (a != CONST_VAL && b != CONST_VAL)
        return refuse(st, v, "%s: %s", "both operands depend on the request rows");
    if (a != CONST_VAL) {
        if (a == ra - 1) return refuse(st, v, "%s: %s", "contracts over the request rows");
        /* rows of a (M) or a batch axis of it */
        *out = aligned(a, ra, r);
    } else if (b != CONST_VAL) {
        if (rb == 1 || b == rb - 2) return refuse(st, v, "%s: %s", "contracts over the request rows");
        *out = aligned(b, rb, r);
    } else {
        *out = CONST_VAL;
    }
    return true;
}

static bool gemm_axis(rows_state *st, sj_value v, int *out) {
    const sj_node *n = &st->g->nodes[v];
    int a = st->axis[n->inputs[0]], b = st->axis[n->inputs[1]];
    int c = n->inputs[2] != SJ_NO_VALUE ? st->axis[n->inputs[2]] : CONST_VAL;
    int from_ab = CONST_VAL;
    if (a != CONST_VAL && b != CONST_VAL)
        return refuse(st, v, "%s: %s", "both operands depend on the request rows");
    if (a != CONST_VAL) {
        /* A is [M, K] (or [K, M] transposed): rows must be M. */
        if (a != (n->attrs.trans_a ? 1 : 0)) return refuse(st, v, "%s: %s", "contracts over the request rows");
        from_ab = 0;
    } else if (b != CONST_VAL) {
        if (b != (n->attrs.trans_b ? 0 : 1)) return refuse(st, v, "%s: %s", "contracts over the request rows");
        from_ab = 1;
    }
    if (c != CONST_VAL) {
        int rc = st->g->nodes[n->inputs[2]].shape.rank;
        int ca = aligned(c, rc, 2);
        if (from_ab != CONST_VAL && ca != from_ab)
            return refuse(st, v, "%s: %s", "its bias carries the rows on another axis");
        from_ab = ca;
    }
    *out = from_ab;
    return true;
}

static bool reshape_axis(rows_state *st, sj_value v, int x, int *out) {
    const sj_node *n = &st->g->nodes[v];
    const sj_shape *in = &st->g->nodes[n->inputs[0]].shape, *os = &n->shape;
    int b = -1;
    for (int i = 0; i < os->rank; i++)
        if (sj_dim_is_sym(os->dims[i])) b = i;
    if (b < 0 || sj_shape_sym_count(os) != 1)
        return refuse(st, v, "%s: %s", "does not keep the request rows as one axis");
    /* Row-major: rows stay rows when the block before them and each row's
     * block (the rows' axis, whose factor merges dims into it, and what
     * follows) keep their sizes. */
    if (prod(in, 0, x) != prod(os, 0, b) || prod(in, x, in->rank) != prod(os, b, os->rank))
        return refuse(st, v, "%s: %s", "moves elements between request rows");
    *out = b;
    return true;
}

static bool value_axis(rows_state *st, sj_value v, int *out) {
    const sj_node *n = &st->g->nodes[v];
    int x = n->n_inputs > 0 && n->inputs[0] != SJ_NO_VALUE ? st->axis[n->inputs[0]] : CONST_VAL;
    if (n->op == SJ_OP_PARAM) {
        *out = CONST_VAL;
        return true;
    }
    if (n->op == SJ_OP_INPUT) {
        int k = -1;
        for (int i = 0; i < n->shape.rank; i++)
            if (n->shape.dims[i] == SJ_DIM_SYM) k = i;
        if (k < 0) return refuse(st, v, "%s: %s", "has no dynamic dim, so requests cannot be stacked");
        if (sj_shape_sym_count(&n->shape) != 1 || k != 0)
            return refuse(st, v, "%s: %s", "does not have the dynamic dim first, and only there");
        *out = 0;
        return true;
    }
    if (sj_op_is_unary(n->op)) {
        *out = x;
        return true;
    }
    if (sj_op_is_binary(n->op)) {
        int r = n->shape.rank, res = CONST_VAL;
        for (int k = 0; k < 2; k++) {
            int a = st->axis[n->inputs[k]];
            if (a == CONST_VAL) continue;
            int al = aligned(a, st->g->nodes[n->inputs[k]].shape.rank, r);
            if (res != CONST_VAL && res != al)
                return refuse(st, v, "%s: %s", "its operands carry the rows on different axes");
            res = al;
        }
        *out = res;
        return true;
    }
    if (x == CONST_VAL && n->op != SJ_OP_MATMUL && n->op != SJ_OP_GEMM) {
        bool all_const = true;
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] != SJ_NO_VALUE && st->axis[n->inputs[k]] != CONST_VAL) all_const = false;
        if (all_const) {
            *out = CONST_VAL;
            return true;
        }
    }
    switch (n->op) {
    case SJ_OP_REDUCE_SUM:
    case SJ_OP_REDUCE_MEAN:
    case SJ_OP_REDUCE_MAX: {
        if (n->attrs.axes & (1u << x)) return refuse(st, v, "%s: %s", "reduces over the request rows");
        int below = 0;
        for (int i = 0; i < x; i++) below += (n->attrs.axes >> i) & 1;
        *out = n->attrs.keepdims ? x : x - below;
        return true;
    }
    case SJ_OP_MATMUL: return matmul_axis(st, v, out);
    case SJ_OP_GEMM: return gemm_axis(st, v, out);
    case SJ_OP_SOFTMAX:
    case SJ_OP_LOG_SOFTMAX:
        if (n->attrs.axis == x) return refuse(st, v, "%s: %s", "normalises over the request rows");
        *out = x;
        return true;
    case SJ_OP_LAYERNORM:
        if (x >= n->attrs.axis) return refuse(st, v, "%s: %s", "normalises over the request rows");
        for (int k = 1; k < n->n_inputs; k++)
            if (n->inputs[k] != SJ_NO_VALUE && st->axis[n->inputs[k]] != CONST_VAL)
                return refuse(st, v, "%s: %s", "its scale or bias depends on the request rows");
        *out = x;
        return true;
    case SJ_OP_TRANSPOSE:
        for (int j = 0; j < n->shape.rank; j++)
            if (n->attrs.perm[j] == x) {
                *out = j;
                return true;
            }
        return refuse(st, v, "%s: %s", "drops the request rows");
    case SJ_OP_RESHAPE: return reshape_axis(st, v, x, out);
    default: return refuse(st, v, "%s: %s", "is not known to keep rows apart");
    }
}

sj_status sj_graph_rows_independent(const sj_graph *g, bool *out, char *why, size_t why_cap) {
    if (!g || !out) return SJ_E_INVALID_ARG;
    *out = false;
    if (why && why_cap) why[0] = '\0';
    if (!g->sym_name) {
        if (why && why_cap) snprintf(why, why_cap, "the graph has no symbolic dim");
        return SJ_OK;
    }
    rows_state st = {.g = g, .why = why, .cap = why_cap};
    st.axis = sj_calloc(g->ctx, (size_t)g->n_nodes + 1, sizeof *st.axis);
    if (!st.axis) return sj_fail(g->ctx, SJ_E_NOMEM, "rows: out of memory");
    bool ok = true;
    for (sj_value v = 0; ok && v < g->n_nodes; v++) {
        int a = CONST_VAL;
        ok = value_axis(&st, v, &a);
        const sj_shape *s = &g->nodes[v].shape;
        if (ok && a != CONST_VAL &&
            (a < 0 || a >= s->rank || !sj_dim_is_sym(s->dims[a]) || sj_shape_sym_count(s) != 1))
            ok = refuse(&st, v, "%s: %s", "does not keep the request rows on one dynamic axis");
        st.axis[v] = a;
    }
    for (int i = 0; ok && i < g->n_outputs; i++) {
        sj_value v = g->outputs[i].value;
        if (st.axis[v] != 0 || g->nodes[v].shape.dims[0] != SJ_DIM_SYM) {
            if (why && why_cap)
                snprintf(why, why_cap,
                         "output '%s' does not carry the request rows, one per entry, on its "
                         "first axis",
                         g->outputs[i].name);
            ok = false;
        }
    }
    sj_free(g->ctx, st.axis);
    *out = ok;
    return SJ_OK;
}
