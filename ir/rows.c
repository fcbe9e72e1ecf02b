/* Row independence along the symbolic dim, proved from the graph: what
 * lets a server concatenate concurrent requests into one run and split the
 * outputs back. Each value is constant (computed from params only),
 * positional (computed from no input but varying along a symbolic dim: a
 * range of positions, a table sliced to n rows, a causal mask), or carries
 * the request rows on exactly one axis; every op is checked to keep row r
 * of its result a function of row r of its operands: no reduction,
 * contraction, normalisation, softmax, gather or slice across that axis, no
 * reshape that moves it, and no positional value beside it (in a stacked
 * batch a row's position is not its position in its own request).
 * Anything not shown safe is refused, with the op and the reason, so
 * batching is never guessed. */
#include "ir/row_forms.h"

#include <stdio.h>
#include <string.h>

#define CONST_VAL (-1)  /* no dependence on any input */
#define POSITIONAL (-2) /* no input, but varies along a symbolic dim */

typedef struct rows_state {
    const sj_graph *g;
    int *axis; /* per value: CONST_VAL, POSITIONAL or the axis carrying the rows */
    sj_row_form *form; /* per value no input reaches: its form, if affine */
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
    if (a != CONST_VAL && b != CONST_VAL) {
        /* both batched along the rows (attention's q and k of a batch) */
        if (a < ra - 2 && b < rb - 2 && aligned(a, ra, r) == aligned(b, rb, r)) {
            *out = aligned(a, ra, r);
            return true;
        }
        return refuse(st, v, "%s: %s", "both operands depend on the request rows");
    }
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

/* out = data[.., indices, ..] along attr axis: rows through constant data
 * picked by row indices (an embedding lookup), or rows of data picked
 * along another axis by constant indices. */
static bool gather_axis(rows_state *st, sj_value v, int *out) {
    const sj_node *n = &st->g->nodes[v];
    int d = st->axis[n->inputs[0]], i = st->axis[n->inputs[1]], ax = n->attrs.axis;
    int ri = st->g->nodes[n->inputs[1]].shape.rank;
    if (d >= 0 && i >= 0) return refuse(st, v, "%s: %s", "both operands depend on the request rows");
    if (i >= 0 && d == CONST_VAL) {
        *out = ax + i;
        return true;
    }
    if (d >= 0 && i == CONST_VAL) {
        if (d == ax) return refuse(st, v, "%s: %s", "picks along the request rows");
        *out = d < ax ? d : d - 1 + ri;
        return true;
    }
    return refuse(st, v, "%s: %s", "picks with positions along the dynamic dim");
}

/* Two operands of one rank working along attr axis, elementwise on the
 * others: a concat (which never joins along a symbolic dim) or
 * GatherElements (out[.., r, ..] reads data[.., r, ..] where the axis is
 * not the rows'). The rows on one axis in both, or beside a constant
 * (uniform along the rows). */
static bool paired_axis(rows_state *st, sj_value v, int *out) {
    const sj_node *n = &st->g->nodes[v];
    int a = st->axis[n->inputs[0]], b = st->axis[n->inputs[1]], r = a >= 0 ? a : b;
    if (a >= 0 && b >= 0 && a != b)
        return refuse(st, v, "%s: %s", "its operands carry the rows on different axes");
    if (n->attrs.axis == r) return refuse(st, v, "%s: %s", "picks along the request rows");
    *out = r;
    return true;
}

/* Whether index form f, over an index of shape is, reads row r's own
 * block of a k*N data axis at index position r: coefficient k on the
 * index's one symbolic axis (*p), every other coefficient (entry t of a
 * tuple) keeping the rest of the index inside [0, k). */
static bool reads_own_row(const sj_row_form *f, int t, const sj_shape *is, int skip, int64_t k, int *p) {
    if (sj_shape_sym_count(is) != 1) return false;
    int64_t lo, hi;
    lo = hi = f->c0[sj__row_form_pick(f, t)];
    for (int d = 0; d < is->rank; d++) {
        int64_t c = f->c[sj__row_form_pick(f, t)][d], span;
        if (sj_dim_is_sym(is->dims[d])) {
            *p = d;
            if (c != k || sj_dim_offset(is->dims[d])) return false;
            continue;
        }
        if (d == skip) continue;
        if (__builtin_mul_overflow(c, is->dims[d] - 1, &span)) return false;
        if (span < 0) lo += span;
        else hi += span;
    }
    return lo >= 0 && hi < k;
}

/* A gather whose data carries the rows on the gathered axis, picked by
 * index arithmetic over positions (mask[arange(batch) * seq + j] after a
 * flatten): row r of the result reads row r of the data only, the index's
 * symbolic axis then carrying the rows. */
static bool gather_own_rows(rows_state *st, const sj_node *n, int *out) {
    sj_value data = n->inputs[0], idx = n->inputs[1];
    int d = st->axis[data], ax = n->attrs.axis, p = -1;
    const sj_shape *ds = &st->g->nodes[data].shape, *is = &st->g->nodes[idx].shape;
    if (n->op == SJ_OP_GATHER) {
        if (d != ax || !st->form[idx].n ||
            !reads_own_row(&st->form[idx], 0, is, -1, sj_dim_factor(ds->dims[ax]), &p))
            return false;
        *out = ax + p;
        return true;
    }
    /* GatherND: the first coordinate reads the rows' axis (the first) as
     * above; the others do not move with the rows */
    const sj_row_form *f = &st->form[idx];
    int q = is->rank;
    int64_t kc = is->dims[q - 1];
    if (ax != 0 || d != 0 || !f->n || (f->n != kc && f->n != 1) ||
        !reads_own_row(f, 0, is, q - 1, sj_dim_factor(ds->dims[0]), &p) || p == q - 1)
        return false;
    for (int t = 1; t < kc; t++)
        if (f->c[sj__row_form_pick(f, t)][p]) return false;
    *out = p;
    return true;
}

/* A value no input reaches: positional where it varies along a symbolic
 * dim by position (a range over it, a constant table sliced to n rows, a
 * mask by position over it) or comes from a positional value. */
static int const_kind(const rows_state *st, const sj_node *n) {
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] != SJ_NO_VALUE && st->axis[n->inputs[k]] == POSITIONAL) return POSITIONAL;
    if (!sj_shape_sym_count(&n->shape)) return CONST_VAL;
    switch (n->op) {
    case SJ_OP_RANGE: return POSITIONAL;
    case SJ_OP_TRILU: return POSITIONAL;
    case SJ_OP_SLICE:
        for (int i = 0; i < n->shape.rank; i++)
            if (n->attrs.start_n[i] ||
                (sj_dim_is_sym(n->shape.dims[i]) &&
                 !sj_dim_is_sym(st->g->nodes[n->inputs[0]].shape.dims[i])))
                return POSITIONAL;
        return CONST_VAL;
    default: return CONST_VAL;
    }
}

static bool value_axis(rows_state *st, sj_value v, int *out) {
    const sj_node *n = &st->g->nodes[v];
    int x = n->n_inputs > 0 && n->inputs[0] != SJ_NO_VALUE ? st->axis[n->inputs[0]] : CONST_VAL;
    if (n->op == SJ_OP_PARAM) {
        *out = CONST_VAL;
        sj__row_form_of(st->g, st->form, v, &st->form[v]);
        return true;
    }
    bool rows = false, positional = false;
    for (int k = 0; k < n->n_inputs; k++) {
        if (n->inputs[k] == SJ_NO_VALUE) continue;
        rows |= st->axis[n->inputs[k]] >= 0;
        positional |= st->axis[n->inputs[k]] == POSITIONAL;
    }
    if (rows && positional && (n->op == SJ_OP_GATHER || n->op == SJ_OP_GATHER_ND) &&
        gather_own_rows(st, n, out))
        return true;
    if (rows && positional)
        return refuse(st, v, "%s: %s",
                      "combines the request rows with values that depend on their positions "
                      "(in a batch a row's position is not its position in its request)");
    if (!rows && n->op != SJ_OP_INPUT) {
        *out = const_kind(st, n);
        sj__row_form_of(st->g, st->form, v, &st->form[v]);
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
    if (sj_op_is_binary(n->op) || n->op == SJ_OP_WHERE) {
        int r = n->shape.rank, res = CONST_VAL;
        for (int k = 0; k < n->n_inputs; k++) {
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
    if (n->op == SJ_OP_GATHER) return gather_axis(st, v, out);
    if (n->op == SJ_OP_MATMUL) return matmul_axis(st, v, out);
    if (n->op == SJ_OP_GEMM) return gemm_axis(st, v, out);
    if (n->op == SJ_OP_CONCAT || n->op == SJ_OP_GATHER_ELEMENTS) return paired_axis(st, v, out);
    /* the rest carry the rows of their first operand (a layernorm's scale
     * and bias are checked below) */
    if (x < 0) return refuse(st, v, "%s: %s", "its first operand does not carry the request rows");
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
    case SJ_OP_EXPAND:
        *out = aligned(x, st->g->nodes[n->inputs[0]].shape.rank, n->shape.rank);
        return true;
    case SJ_OP_SLICE:
        /* every row whole, in order: the rows' axis read as it is */
        if (n->attrs.start[x] || n->attrs.start_n[x] || n->attrs.step[x] != 1 ||
            n->shape.dims[x] != st->g->nodes[n->inputs[0]].shape.dims[x])
            return refuse(st, v, "%s: %s", "slices the request rows");
        *out = x;
        return true;
    case SJ_OP_TRILU:
        if (x >= n->shape.rank - 2) return refuse(st, v, "%s: %s", "masks by position along the request rows");
        *out = x;
        return true;
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
    st.form = sj_calloc(g->ctx, (size_t)g->n_nodes + 1, sizeof *st.form);
    if (!st.axis || !st.form) {
        sj_free(g->ctx, st.axis);
        sj_free(g->ctx, st.form);
        return sj_fail(g->ctx, SJ_E_NOMEM, "rows: out of memory");
    }
    bool ok = true;
    for (sj_value v = 0; ok && v < g->n_nodes; v++) {
        int a = CONST_VAL;
        ok = value_axis(&st, v, &a);
        const sj_shape *s = &g->nodes[v].shape;
        /* a constant part joined to the rows (k * N + c) is no request's */
        if (ok && a >= 0 &&
            (a >= s->rank || !sj_dim_is_sym(s->dims[a]) || sj_dim_offset(s->dims[a]) ||
             sj_shape_sym_count(s) != 1))
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
    sj_free(g->ctx, st.form);
    *out = ok;
    return SJ_OK;
}
