/* Builders of the layout ops that move data without arithmetic: slice,
 * concat, expand, trilu. Like shape_infer.c they check operands and infer
 * the result's shape before appending, so a failed call leaves the graph
 * unchanged. */
#include "ir/builder_impl.h"

#include <string.h>

#define SHAPE(v) (&g->nodes[(v)].shape)
#define STR(shape) (sj__graph_shape_str(g, (shape)).s)

/* ---- slice ---- */

/* A slice axis reads indices first(n) .. last(n), affine in the extent n;
 * staying inside [0, D(n)) is four constraints a * n + b >= 0. */
typedef struct lin {
    int64_t a, b;
} lin;

static void slice_constraints(int64_t in_dim, const sj_slice_axis *ax, lin c[4]) {
    int64_t dD = sj_dim_factor(in_dim), D0 = sj_dim_is_sym(in_dim) ? sj_dim_offset(in_dim) : in_dim;
    int64_t dL = sj_dim_factor(ax->len), L0 = sj_dim_is_sym(ax->len) ? sj_dim_offset(ax->len) : ax->len;
    lin first = {ax->start_n, ax->start};
    lin last = {ax->start_n + ax->step * dL, ax->start + ax->step * (L0 - 1)};
    c[0] = first;
    c[1] = (lin){dD - first.a, D0 - 1 - first.b};
    c[2] = last;
    c[3] = (lin){dD - last.a, D0 - 1 - last.b};
}

/* Largest n in [1, SJ_MAX_EXTENT] with every constraint met, given they
 * hold at 1; 0 when they do not. */
static int64_t constraints_limit(const lin *c, int n) {
    int64_t limit = SJ_MAX_EXTENT;
    for (int i = 0; i < n; i++) {
        if (c[i].a + c[i].b < 0) return 0;
        if (c[i].a < 0) {
            int64_t m = c[i].b / -c[i].a;
            if (m < limit) limit = m;
        }
    }
    return limit;
}

static int64_t slice_limit(const sj_shape *in, const sj_slice_axis *axes) {
    int64_t limit = SJ_MAX_EXTENT;
    for (int i = 0; i < in->rank; i++) {
        lin c[4];
        slice_constraints(in->dims[i], &axes[i], c);
        int64_t l = constraints_limit(c, 4);
        if (l < limit) limit = l;
    }
    return limit;
}

static void node_axes(const sj_node *nd, sj_slice_axis *axes) {
    for (int i = 0; i < nd->shape.rank; i++)
        axes[i] = (sj_slice_axis){nd->attrs.start[i], nd->attrs.start_n[i], nd->attrs.step[i],
                                  nd->shape.dims[i]};
}

int64_t sj__slice_extent_limit(const sj_graph *g, const sj_node *nd) {
    sj_slice_axis axes[SJ_MAX_RANK];
    node_axes(nd, axes);
    return slice_limit(&g->nodes[nd->inputs[0]].shape, axes);
}

/* Bounds on start, step and len keep every product above far from int64's
 * edges. */
#define SLICE_BOUND ((int64_t)1 << 40)

/* Whether slice axis a takes block f of an axis of F equal blocks, each
 * of a->len = k*N + c entries: step 1, from f * (k*n + c). Read as a view
 * it starts at the active extent of the blocks before it. */
static bool is_block(int64_t axis, const sj_slice_axis *a) {
    int64_t k = sj_dim_factor(a->len), c = sj_dim_offset(a->len);
    int64_t ka = sj_dim_factor(axis), ca = sj_dim_offset(axis);
    if (!sj_dim_is_sym(axis) || a->step != 1 || k < 1 || ka % k || a->start_n % k) return false;
    int64_t blocks = ka / k, f = a->start_n / k;
    return ca == blocks * c && f >= 0 && f < blocks && a->start == f * c;
}

sj_status sj_graph_slice(sj_graph *g, sj_value x, const sj_slice_axis *axes, sj_value *out) {
    if (!g) return SJ_E_INVALID_ARG;
    SJ_TRY(sj__graph_check_value(g, "slice", x));
    const sj_shape *s = SHAPE(x);
    if (s->rank > 0 && !axes)
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "slice: axes is NULL for %s", STR(s));
    sj_node n = sj__node_blank(SJ_OP_SLICE);
    n.n_inputs = 1;
    n.dtype = g->nodes[x].dtype;
    n.inputs[0] = x;
    n.shape.rank = s->rank;
    for (int i = 0; i < s->rank; i++) {
        const sj_slice_axis *a = &axes[i];
        if (a->step == 0 || a->step < -SLICE_BOUND || a->step > SLICE_BOUND ||
            a->start < -SLICE_BOUND || a->start > SLICE_BOUND || a->start_n < -SJ_MAX_SYM_FACTOR ||
            a->start_n > SJ_MAX_SYM_FACTOR)
            return sj_fail(g->ctx, SJ_E_INVALID_ARG,
                           "slice: axis %d of %s: start %lld%+lld*n, step %lld is out of range", i,
                           STR(s), (long long)a->start, (long long)a->start_n, (long long)a->step);
        if ((sj_dim_is_sym(a->len) || a->start_n) && !g->sym_name)
            return sj_fail(g->ctx, SJ_E_SHAPE,
                           "slice: axis %d depends on the symbolic dim but the graph has none", i);
        if ((sj_dim_is_sym(a->len) &&
             (sj_dim_factor(a->len) < 1 || sj_dim_factor(a->len) > SJ_MAX_SYM_FACTOR ||
              sj_dim_offset(a->len) > SJ_MAX_SYM_OFFSET)) ||
            a->len == 0 || a->len > SLICE_BOUND)
            return sj_fail(g->ctx, SJ_E_SHAPE,
                           "slice: axis %d has length %lld; lengths are >= 1 or a form of the "
                           "symbolic dim",
                           i, (long long)a->len);
        /* a run of k*n + c entries is a prefix of the padded axis only where
         * it starts at the axis's start and the axis is that long itself, or
         * one of the axis's equal blocks (a compact merge's rows) */
        if (sj_dim_is_sym(a->len) && a->len != SJ_DIM_SYM &&
            (a->len != s->dims[i] || a->start || a->start_n || a->step != 1) &&
            !is_block(s->dims[i], a)) {
            char len[96];
            sj_dim_format(a->len, g->sym_name, len, sizeof len);
            return sj_fail(g->ctx, SJ_E_UNSUPPORTED,
                           "slice: axis %d of %s takes %s entries from %lld step %lld; a form of "
                           "the symbolic dim other than itself is sliced whole or to constant "
                           "lengths",
                           i, STR(s), len, (long long)a->start, (long long)a->step);
        }
        n.attrs.start[i] = a->start;
        n.attrs.start_n[i] = a->start_n;
        n.attrs.step[i] = a->step;
        n.shape.dims[i] = a->len;
    }
    for (int i = 0; i < s->rank; i++) {
        lin c[4];
        slice_constraints(s->dims[i], &axes[i], c);
        if (!constraints_limit(c, 4))
            return sj_fail(g->ctx, SJ_E_SHAPE,
                           "slice: axis %d of %s: %lld entries from %lld%s step %lld read outside "
                           "the operand",
                           i, STR(s), (long long)sj_dim_at(axes[i].len, 1),
                           (long long)(axes[i].start + axes[i].start_n),
                           axes[i].start_n ? " (at n = 1)" : "", (long long)axes[i].step);
    }
    return sj__graph_append(g, "slice", &n, out);
}

/* ---- concat ---- */

sj_status sj_graph_concat(sj_graph *g, sj_value a, sj_value b, int axis, sj_value *out) {
    if (!g) return SJ_E_INVALID_ARG;
    SJ_TRY(sj__graph_check_value(g, "concat", a));
    SJ_TRY(sj__graph_check_value(g, "concat", b));
    const sj_shape *sa = SHAPE(a), *sb = SHAPE(b);
    if (sa->rank != sb->rank || sa->rank == 0)
        return sj_fail(g->ctx, SJ_E_SHAPE, "concat: %s and %s do not have one rank >= 1", STR(sa),
                       STR(sb));
    if (axis < -sa->rank || axis >= sa->rank)
        return sj_fail(g->ctx, SJ_E_SHAPE, "concat: axis %d is out of range for %s", axis, STR(sa));
    int ax = axis < 0 ? axis + sa->rank : axis;
    if (g->nodes[a].dtype != g->nodes[b].dtype)
        return sj_fail(g->ctx, SJ_E_SHAPE, "concat: operands have different element types: %s vs %s",
                       sj_dtype_name(g->nodes[a].dtype), sj_dtype_name(g->nodes[b].dtype));
    sj_node n = sj__node_blank(SJ_OP_CONCAT);
    n.n_inputs = 2;
    n.dtype = g->nodes[a].dtype;
    n.inputs[0] = a;
    n.inputs[1] = b;
    n.attrs.axis = ax;
    n.shape = *sa;
    for (int i = 0; i < sa->rank; i++) {
        if (i == ax) continue;
        if (sa->dims[i] != sb->dims[i])
            return sj_fail(g->ctx, SJ_E_SHAPE, "concat: %s and %s differ in dim %d", STR(sa),
                           STR(sb), i);
    }
    /* Joined along the symbolic axis, each part is placed at the active
     * extent of the parts before it (an offset k * n + c, which the kernels
     * take at run time), so the active part stays a prefix: a k1*N + c1
     * part and a k2*N + c2 part make (k1 + k2) * N + c1 + c2. */
    int64_t da = sa->dims[ax], db = sb->dims[ax];
    if (sj_dim_is_sym(da) || sj_dim_is_sym(db)) {
        int64_t k = sj_dim_factor(da) + sj_dim_factor(db);
        int64_t c = (sj_dim_is_sym(da) ? sj_dim_offset(da) : da) +
                    (sj_dim_is_sym(db) ? sj_dim_offset(db) : db);
        if (k > SJ_MAX_SYM_FACTOR || c > SJ_MAX_SYM_OFFSET)
            return sj_fail(g->ctx, SJ_E_UNSUPPORTED,
                           "concat: joining %s and %s along axis %d makes %lld * N + %lld; at "
                           "most %lld * N + %lld",
                           STR(sa), STR(sb), ax, (long long)k, (long long)c,
                           (long long)SJ_MAX_SYM_FACTOR, (long long)SJ_MAX_SYM_OFFSET);
        n.shape.dims[ax] = SJ_DIM_AFFINE(k, c);
    } else {
        n.shape.dims[ax] = da + db;
    }
    return sj__graph_append(g, "concat", &n, out);
}

/* ---- expand ---- */

sj_status sj_graph_expand(sj_graph *g, sj_value x, int rank, const int64_t *dims, sj_value *out) {
    if (!g) return SJ_E_INVALID_ARG;
    SJ_TRY(sj__graph_check_value(g, "expand", x));
    sj_shape t;
    SJ_TRY(sj__graph_make_shape(g, "expand", rank, dims, SJ__DIMS_AFFINE, &t));
    const sj_shape *s = SHAPE(x);
    sj_node n = sj__node_blank(SJ_OP_EXPAND);
    n.n_inputs = 1;
    n.dtype = g->nodes[x].dtype;
    n.inputs[0] = x;
    int r = s->rank > t.rank ? s->rank : t.rank;
    n.shape.rank = r;
    for (int i = 0; i < r; i++) {
        int is = s->rank - r + i, it = t.rank - r + i;
        int64_t ds = is >= 0 ? s->dims[is] : 1, dt = it >= 0 ? t.dims[it] : 1;
        if (ds == dt || dt == 1)
            n.shape.dims[i] = ds;
        else if (ds == 1)
            n.shape.dims[i] = dt;
        else
            return sj_fail(g->ctx, SJ_E_SHAPE, "expand: %s does not broadcast with %s", STR(s),
                           STR(&t));
    }
    return sj__graph_append(g, "expand", &n, out);
}

/* ---- trilu ---- */

sj_status sj_graph_trilu(sj_graph *g, sj_value x, bool upper, int64_t k, sj_value *out) {
    if (!g) return SJ_E_INVALID_ARG;
    SJ_TRY(sj__graph_check_value(g, "trilu", x));
    const sj_shape *s = SHAPE(x);
    if (s->rank < 2)
        return sj_fail(g->ctx, SJ_E_SHAPE, "trilu: %s has rank below 2", STR(s));
    /* beyond +-2^40 every entry is kept or every one is zeroed anyway */
    if (k > SLICE_BOUND) k = SLICE_BOUND;
    if (k < -SLICE_BOUND) k = -SLICE_BOUND;
    sj_node n = sj__node_blank(SJ_OP_TRILU);
    n.n_inputs = 1;
    n.dtype = g->nodes[x].dtype;
    n.inputs[0] = x;
    n.attrs.upper = upper;
    n.attrs.k = k;
    n.shape = *s;
    return sj__graph_append(g, "trilu", &n, out);
}

/* ---- gather_elements ---- */

sj_status sj_graph_gather_elements(sj_graph *g, sj_value data, sj_value indices, int axis,
                                   sj_value *out) {
    if (!g) return SJ_E_INVALID_ARG;
    SJ_TRY(sj__graph_check_value(g, "gather_elements", data));
    SJ_TRY(sj__graph_check_value(g, "gather_elements", indices));
    const sj_shape *sd = SHAPE(data), *si = SHAPE(indices);
    sj_dtype it = g->nodes[indices].dtype;
    if (it != SJ_I64 && it != SJ_I32)
        return sj_fail(g->ctx, SJ_E_SHAPE, "gather_elements: indices %s are %s, not int64 or int32",
                       STR(si), sj_dtype_name(it));
    if (sd->rank < 1 || sd->rank != si->rank)
        return sj_fail(g->ctx, SJ_E_SHAPE,
                       "gather_elements: data %s and indices %s do not have one rank >= 1", STR(sd),
                       STR(si));
    if (axis < -sd->rank || axis >= sd->rank)
        return sj_fail(g->ctx, SJ_E_SHAPE, "gather_elements: axis %d is out of range for %s", axis,
                       STR(sd));
    int ax = axis < 0 ? axis + sd->rank : axis;
    for (int i = 0; i < sd->rank; i++) {
        int64_t d = sd->dims[i], x = si->dims[i];
        if (i == ax || d == x || x == 1) continue;
        if (!sj_dim_is_sym(d) && !sj_dim_is_sym(x) && x <= d) continue;
        return sj_fail(g->ctx, SJ_E_SHAPE,
                       "gather_elements: indices %s reach past data %s on axis %d", STR(si), STR(sd),
                       i);
    }
    sj_node n = sj__node_blank(SJ_OP_GATHER_ELEMENTS);
    n.n_inputs = 2;
    n.inputs[0] = data;
    n.inputs[1] = indices;
    n.attrs.axis = ax;
    n.shape = *si;
    n.dtype = g->nodes[data].dtype;
    return sj__graph_append(g, "gather_elements", &n, out);
}

/* ---- gather_nd ---- */

sj_status sj_graph_gather_nd(sj_graph *g, sj_value data, sj_value indices, int batch_dims,
                             sj_value *out) {
    if (!g) return SJ_E_INVALID_ARG;
    SJ_TRY(sj__graph_check_value(g, "gather_nd", data));
    SJ_TRY(sj__graph_check_value(g, "gather_nd", indices));
    const sj_shape *sd = SHAPE(data), *si = SHAPE(indices);
    sj_dtype it = g->nodes[indices].dtype;
    if (it != SJ_I64 && it != SJ_I32)
        return sj_fail(g->ctx, SJ_E_SHAPE, "gather_nd: indices %s are %s, not int64 or int32", STR(si),
                       sj_dtype_name(it));
    int b = batch_dims, q = si->rank, r = sd->rank;
    if (b < 0 || b >= q || b >= r)
        return sj_fail(g->ctx, SJ_E_SHAPE,
                       "gather_nd: batch_dims %d must be below the ranks of data %s and indices %s", b,
                       STR(sd), STR(si));
    int64_t k = si->dims[q - 1];
    if (k < 1 || k > r - b)
        return sj_fail(g->ctx, SJ_E_SHAPE,
                       "gather_nd: index tuples of %s are not 1..%d coordinates into data %s past "
                       "batch_dims %d",
                       STR(si), r - b, STR(sd), b);
    for (int i = 0; i < b; i++)
        if (si->dims[i] != sd->dims[i] && si->dims[i] != 1)
            return sj_fail(g->ctx, SJ_E_SHAPE,
                           "gather_nd: batch dim %d of indices %s is neither data %s's nor 1", i, STR(si),
                           STR(sd));
    sj_node n = sj__node_blank(SJ_OP_GATHER_ND);
    n.shape.rank = q - 1 + r - b - (int)k;
    if (n.shape.rank > SJ_MAX_RANK)
        return sj_fail(g->ctx, SJ_E_SHAPE, "gather_nd: the result of data %s and indices %s has rank %d, "
                       "more than %d", STR(sd), STR(si), n.shape.rank, SJ_MAX_RANK);
    int o = 0;
    for (int i = 0; i < q - 1; i++) n.shape.dims[o++] = i < b ? sd->dims[i] : si->dims[i];
    for (int i = b + (int)k; i < r; i++) n.shape.dims[o++] = sd->dims[i];
    n.n_inputs = 2;
    n.inputs[0] = data;
    n.inputs[1] = indices;
    n.attrs.axis = b;
    n.dtype = g->nodes[data].dtype;
    return sj__graph_append(g, "gather_nd", &n, out);
}
