/* The op builders: each checks its operands, infers the result shape and
 * normalises its attributes (axes >= 0, reduction axes as a bitmask) before
 * appending, so nothing is appended when a check fails. */
#include "ir/builder_impl.h"

#include <math.h>
#include <string.h>

#define SHAPE(v) (&g->nodes[(v)].shape)
#define DTYPE(v) (g->nodes[(v)].dtype)
#define STR(shape) (sj__graph_shape_str(g, (shape)).s)

/* ---- element types ---- */

enum { T_F32 = 1u << SJ_F32, T_I64 = 1u << SJ_I64, T_I32 = 1u << SJ_I32, T_BOOL = 1u << SJ_BOOL,
       T_INT = T_I64 | T_I32, T_NUM = T_F32 | T_INT };

static const char *allowed_str(unsigned allowed) {
    switch (allowed) {
    case T_F32: return "float32";
    case T_BOOL: return "bool";
    case T_NUM: return "float32, int64 or int32";
    case T_INT: return "int64 or int32";
    default: return "another element type";
    }
}

/* Fails with SJ_E_SHAPE when operand `role` of op has a dtype outside allowed. */
static sj_status check_type(sj_graph *g, const char *op, const char *role, sj_value v,
                            unsigned allowed) {
    if (allowed & (1u << DTYPE(v))) return SJ_OK;
    return sj_fail(g->ctx, SJ_E_SHAPE, "%s: %s is %s %s; %s takes %s", op, role,
                   sj_dtype_name(DTYPE(v)), STR(SHAPE(v)), op, allowed_str(allowed));
}

static sj_status check_same_type(sj_graph *g, const char *op, sj_value a, sj_value b) {
    if (DTYPE(a) == DTYPE(b)) return SJ_OK;
    return sj_fail(g->ctx, SJ_E_SHAPE, "%s: operands have different element types: %s %s vs %s %s",
                   op, sj_dtype_name(DTYPE(a)), STR(SHAPE(a)), sj_dtype_name(DTYPE(b)),
                   STR(SHAPE(b)));
}

static unsigned unary_types(sj_op op) {
    switch (op) {
    case SJ_OP_NEG:
    case SJ_OP_ABS: return T_NUM;
    case SJ_OP_NOT: return T_BOOL;
    default: return T_F32;
    }
}

static unsigned binary_types(sj_op op) {
    switch (op) {
    case SJ_OP_POW: return T_F32;
    case SJ_OP_AND:
    case SJ_OP_OR:
    case SJ_OP_XOR: return T_BOOL;
    case SJ_OP_EQUAL: return T_NUM | T_BOOL;
    default: return T_NUM;
    }
}

/* ---- elementwise ---- */

sj_status sj_graph_unary(sj_graph *g, sj_op op, sj_value x, sj_value *out) {
    if (!g) return SJ_E_INVALID_ARG;
    if (!sj_op_is_unary(op) || op == SJ_OP_LEAKY_RELU || op == SJ_OP_CAST)
        return sj_fail(g->ctx, SJ_E_INVALID_ARG,
                       "unary: %s (op %d) is not a unary op taking no attribute", sj_op_name(op),
                       (int)op);
    SJ_TRY(sj__graph_check_value(g, sj_op_name(op), x));
    SJ_TRY(check_type(g, sj_op_name(op), "the operand", x, unary_types(op)));
    sj_node n = sj__node_blank(op);
    n.n_inputs = 1;
    n.inputs[0] = x;
    n.shape = *SHAPE(x);
    n.dtype = op == SJ_OP_ISNAN || op == SJ_OP_ISINF ? SJ_BOOL : DTYPE(x);
    return sj__graph_append(g, sj_op_name(op), &n, out);
}

sj_status sj_graph_leaky_relu(sj_graph *g, sj_value x, float alpha, sj_value *out) {
    if (!g) return SJ_E_INVALID_ARG;
    SJ_TRY(sj__graph_check_value(g, "leaky_relu", x));
    SJ_TRY(check_type(g, "leaky_relu", "the operand", x, T_F32));
    sj_node n = sj__node_blank(SJ_OP_LEAKY_RELU);
    n.n_inputs = 1;
    n.inputs[0] = x;
    n.attrs.alpha = alpha;
    n.shape = *SHAPE(x);
    return sj__graph_append(g, "leaky_relu", &n, out);
}

/* One dim pair under numpy broadcasting: equal (a symbolic dim only equals
 * itself), or one side is 1. */
static bool broadcast_dim(int64_t a, int64_t b, int64_t *out) {
    if (a == b || b == 1) {
        *out = a;
        return true;
    }
    if (a == 1) {
        *out = b;
        return true;
    }
    return false;
}

/* Right-aligned numpy broadcast of the first a_rank / b_rank dims. */
static bool broadcast_dims(const int64_t *a, int a_rank, const int64_t *b, int b_rank,
                           int64_t *out, int *out_rank) {
    int r = a_rank > b_rank ? a_rank : b_rank;
    for (int i = 0; i < r; i++) {
        int ia = a_rank - r + i, ib = b_rank - r + i;
        int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
        if (!broadcast_dim(da, db, &out[i])) return false;
    }
    *out_rank = r;
    return true;
}

/* Whether `from` broadcasts to exactly `to` (ONNX unidirectional). */
static bool broadcasts_to(const sj_shape *from, const sj_shape *to) {
    if (from->rank > to->rank) return false;
    for (int i = 0; i < from->rank; i++) {
        int64_t d = from->dims[i], t = to->dims[to->rank - from->rank + i];
        if (d != t && d != 1) return false;
    }
    return true;
}

sj_status sj_graph_binary(sj_graph *g, sj_op op, sj_value a, sj_value b, sj_value *out) {
    if (!g) return SJ_E_INVALID_ARG;
    if (!sj_op_is_binary(op))
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "binary: %s (op %d) is not a binary op",
                       sj_op_name(op), (int)op);
    const char *name = sj_op_name(op);
    SJ_TRY(sj__graph_check_value(g, name, a));
    SJ_TRY(sj__graph_check_value(g, name, b));
    SJ_TRY(check_type(g, name, "the first operand", a, binary_types(op)));
    SJ_TRY(check_same_type(g, name, a, b));
    sj_node n = sj__node_blank(op);
    n.n_inputs = 2;
    n.inputs[0] = a;
    n.inputs[1] = b;
    n.dtype = sj_op_is_compare(op) ? SJ_BOOL : DTYPE(a);
    const sj_shape *sa = SHAPE(a), *sb = SHAPE(b);
    if (!broadcast_dims(sa->dims, sa->rank, sb->dims, sb->rank, n.shape.dims, &n.shape.rank))
        return sj_fail(g->ctx, SJ_E_SHAPE, "%s: shapes do not broadcast: %s vs %s", name, STR(sa),
                       STR(sb));
    return sj__graph_append(g, name, &n, out);
}

/* ---- axes ---- */

static sj_status normalise_axis(sj_graph *g, const char *what, const sj_shape *s, int axis,
                                int *out) {
    if (axis < -s->rank || axis >= s->rank)
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "%s: axis %d is out of range for %s", what, axis,
                       STR(s));
    *out = axis < 0 ? axis + s->rank : axis;
    return SJ_OK;
}

sj_status sj_graph_reduce(sj_graph *g, sj_op op, sj_value x, int n_axes, const int *axes,
                          bool keepdims, sj_value *out) {
    if (!g) return SJ_E_INVALID_ARG;
    if (!sj_op_is_reduce(op))
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "reduce: %s (op %d) is not a reduction",
                       sj_op_name(op), (int)op);
    const char *name = sj_op_name(op);
    SJ_TRY(sj__graph_check_value(g, name, x));
    SJ_TRY(check_type(g, name, "the operand", x, T_F32));
    const sj_shape *s = SHAPE(x);
    if (n_axes < 0 || n_axes > s->rank || (n_axes > 0 && !axes))
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "%s: %d axes for %s", name, n_axes, STR(s));
    uint32_t mask = n_axes == 0 ? (1u << s->rank) - 1 : 0;
    for (int i = 0; i < n_axes; i++) {
        int a;
        SJ_TRY(normalise_axis(g, name, s, axes[i], &a));
        if (mask & (1u << a))
            return sj_fail(g->ctx, SJ_E_INVALID_ARG, "%s: axis %d listed twice for %s", name,
                           axes[i], STR(s));
        mask |= 1u << a;
    }
    sj_node n = sj__node_blank(op);
    n.n_inputs = 1;
    n.inputs[0] = x;
    n.attrs.axes = mask;
    n.attrs.keepdims = keepdims;
    for (int i = 0; i < s->rank; i++) {
        if (!(mask & (1u << i)))
            n.shape.dims[n.shape.rank++] = s->dims[i];
        else if (keepdims)
            n.shape.dims[n.shape.rank++] = 1;
    }
    return sj__graph_append(g, name, &n, out);
}

/* ---- contractions ---- */

sj_status sj_graph_matmul(sj_graph *g, sj_value a, sj_value b, sj_value *out) {
    if (!g) return SJ_E_INVALID_ARG;
    SJ_TRY(sj__graph_check_value(g, "matmul", a));
    SJ_TRY(sj__graph_check_value(g, "matmul", b));
    SJ_TRY(check_type(g, "matmul", "A", a, T_F32));
    SJ_TRY(check_type(g, "matmul", "B", b, T_F32));
    const sj_shape *sa = SHAPE(a), *sb = SHAPE(b);
    if (sa->rank < 1 || sb->rank < 1)
        return sj_fail(g->ctx, SJ_E_SHAPE, "matmul: operands need rank >= 1: %s vs %s", STR(sa),
                       STR(sb));
    /* numpy: a vector on the left is a row [1, K], on the right a column
     * [K, 1]; the added dim is dropped from the result again. */
    sj_shape pa = *sa, pb = *sb;
    if (pa.rank == 1) pa = (sj_shape){2, {1, sa->dims[0]}};
    if (pb.rank == 1) pb = (sj_shape){2, {sb->dims[0], 1}};
    if (pa.dims[pa.rank - 1] != pb.dims[pb.rank - 2])
        return sj_fail(g->ctx, SJ_E_SHAPE, "matmul: inner dims differ: %s vs %s", STR(sa),
                       STR(sb));
    sj_node n = sj__node_blank(SJ_OP_MATMUL);
    n.n_inputs = 2;
    n.inputs[0] = a;
    n.inputs[1] = b;
    if (!broadcast_dims(pa.dims, pa.rank - 2, pb.dims, pb.rank - 2, n.shape.dims, &n.shape.rank))
        return sj_fail(g->ctx, SJ_E_SHAPE, "matmul: batch dims do not broadcast: %s vs %s",
                       STR(sa), STR(sb));
    if (sa->rank > 1) n.shape.dims[n.shape.rank++] = pa.dims[pa.rank - 2];
    if (sb->rank > 1) n.shape.dims[n.shape.rank++] = pb.dims[pb.rank - 1];
    return sj__graph_append(g, "matmul", &n, out);
}

sj_status sj_graph_gemm(sj_graph *g, sj_value a, sj_value b, sj_value c, float alpha, float beta,
                        bool trans_a, bool trans_b, sj_value *out) {
    if (!g) return SJ_E_INVALID_ARG;
    SJ_TRY(sj__graph_check_value(g, "gemm", a));
    SJ_TRY(sj__graph_check_value(g, "gemm", b));
    if (c != SJ_NO_VALUE) SJ_TRY(sj__graph_check_value(g, "gemm", c));
    SJ_TRY(check_type(g, "gemm", "A", a, T_F32));
    SJ_TRY(check_type(g, "gemm", "B", b, T_F32));
    if (c != SJ_NO_VALUE) SJ_TRY(check_type(g, "gemm", "C", c, T_F32));
    const sj_shape *sa = SHAPE(a), *sb = SHAPE(b);
    if (sa->rank != 2 || sb->rank != 2)
        return sj_fail(g->ctx, SJ_E_SHAPE, "gemm: A and B need rank 2: %s vs %s", STR(sa),
                       STR(sb));
    int64_t m = sa->dims[trans_a ? 1 : 0], ka = sa->dims[trans_a ? 0 : 1];
    int64_t kb = sb->dims[trans_b ? 1 : 0], nn = sb->dims[trans_b ? 0 : 1];
    if (ka != kb)
        return sj_fail(g->ctx, SJ_E_SHAPE, "gemm: inner dims differ: %s%s vs %s%s", STR(sa),
                       trans_a ? "^T" : "", STR(sb), trans_b ? "^T" : "");
    sj_node n = sj__node_blank(SJ_OP_GEMM);
    n.n_inputs = 3;
    n.inputs[0] = a;
    n.inputs[1] = b;
    n.inputs[2] = c;
    n.attrs.alpha = alpha;
    n.attrs.beta = beta;
    n.attrs.trans_a = trans_a;
    n.attrs.trans_b = trans_b;
    n.shape = (sj_shape){2, {m, nn}};
    if (c != SJ_NO_VALUE && !broadcasts_to(SHAPE(c), &n.shape))
        return sj_fail(g->ctx, SJ_E_SHAPE, "gemm: C %s does not broadcast to the result %s",
                       STR(SHAPE(c)), STR(&n.shape));
    return sj__graph_append(g, "gemm", &n, out);
}

/* ---- row ops ---- */

sj_status sj_graph_softmax(sj_graph *g, sj_op op, sj_value x, int axis, sj_value *out) {
    if (!g) return SJ_E_INVALID_ARG;
    if (op != SJ_OP_SOFTMAX && op != SJ_OP_LOG_SOFTMAX)
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "softmax: %s (op %d) is not a softmax op",
                       sj_op_name(op), (int)op);
    const char *name = sj_op_name(op);
    SJ_TRY(sj__graph_check_value(g, name, x));
    SJ_TRY(check_type(g, name, "the operand", x, T_F32));
    sj_node n = sj__node_blank(op);
    n.n_inputs = 1;
    n.inputs[0] = x;
    n.shape = *SHAPE(x);
    SJ_TRY(normalise_axis(g, name, &n.shape, axis, &n.attrs.axis));
    return sj__graph_append(g, name, &n, out);
}

static sj_status check_affine(sj_graph *g, const char *role, sj_value v, const sj_shape *norm) {
    if (v == SJ_NO_VALUE) return SJ_OK;
    SJ_TRY(sj__graph_check_value(g, "layernorm", v));
    SJ_TRY(check_type(g, "layernorm", role, v, T_F32));
    if (broadcasts_to(SHAPE(v), norm)) return SJ_OK;
    return sj_fail(g->ctx, SJ_E_SHAPE,
                   "layernorm: %s %s does not broadcast to the normalised shape %s", role,
                   STR(SHAPE(v)), STR(norm));
}

sj_status sj_graph_layernorm(sj_graph *g, sj_value x, sj_value scale, sj_value bias, int axis,
                             float epsilon, sj_value *out) {
    if (!g) return SJ_E_INVALID_ARG;
    SJ_TRY(sj__graph_check_value(g, "layernorm", x));
    SJ_TRY(check_type(g, "layernorm", "the operand", x, T_F32));
    sj_node n = sj__node_blank(SJ_OP_LAYERNORM);
    n.n_inputs = 3;
    n.inputs[0] = x;
    n.inputs[1] = scale;
    n.inputs[2] = bias;
    n.attrs.epsilon = epsilon;
    n.shape = *SHAPE(x);
    SJ_TRY(normalise_axis(g, "layernorm", &n.shape, axis, &n.attrs.axis));
    sj_shape norm = {n.shape.rank - n.attrs.axis, {0}};
    memcpy(norm.dims, n.shape.dims + n.attrs.axis, (size_t)norm.rank * sizeof norm.dims[0]);
    SJ_TRY(check_affine(g, "scale", scale, &norm));
    SJ_TRY(check_affine(g, "bias", bias, &norm));
    return sj__graph_append(g, "layernorm", &n, out);
}

/* ---- layout ---- */

sj_status sj_graph_transpose(sj_graph *g, sj_value x, const int *perm, sj_value *out) {
    if (!g) return SJ_E_INVALID_ARG;
    SJ_TRY(sj__graph_check_value(g, "transpose", x));
    const sj_shape *s = SHAPE(x);
    if (s->rank > 0 && !perm)
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "transpose: perm is NULL for %s", STR(s));
    sj_node n = sj__node_blank(SJ_OP_TRANSPOSE);
    n.n_inputs = 1;
    n.inputs[0] = x;
    n.dtype = DTYPE(x);
    n.shape.rank = s->rank;
    unsigned seen = 0;
    for (int i = 0; i < s->rank; i++) {
        int p = perm[i];
        if (p < 0 || p >= s->rank || (seen & (1u << p)))
            return sj_fail(g->ctx, SJ_E_INVALID_ARG,
                           "transpose: perm entry %d (%d) makes no permutation of %s", i, p,
                           STR(s));
        seen |= 1u << p;
        n.attrs.perm[i] = p;
        n.shape.dims[i] = s->dims[p];
    }
    return sj__graph_append(g, "transpose", &n, out);
}

/* Product of the constant dims [from, to); -1 past SJ_MAX_ELEMENTS. */
static int64_t dims_product(const sj_shape *s, int from, int to) {
    sj_shape part = {to - from, {0}};
    memcpy(part.dims, s->dims + from, (size_t)part.rank * sizeof part.dims[0]);
    return sj_shape_numel(&part, 1);
}

/* The axis of s's k-th symbolic dim (k from 0), or s->rank past the last. */
static int sym_axis(const sj_shape *s, int k) {
    for (int i = 0; i < s->rank; i++)
        if (sj_dim_is_sym(s->dims[i]) && k-- == 0) return i;
    return s->rank;
}

/* The reshape rule from graph.h: the constant dims in front of the first
 * symbolic dim keep their product, and so does each symbolic dim's group
 * (its factor times the constant dims up to the next one), so every
 * symbolic index keeps the same elements in both shapes. A dim k * N + c
 * with c > 0 has no elements per symbolic index: it stays itself, and its
 * group's constant dims keep their product. */
static sj_status check_reshape(sj_graph *g, const sj_shape *from, const sj_shape *to) {
    int fs = sj_shape_sym_count(from), ts = sj_shape_sym_count(to);
    if (fs != ts)
        return sj_fail(g->ctx, SJ_E_SHAPE,
                       "reshape: %s to %s: the symbolic dim must appear as often in both shapes "
                       "(%d vs %d)",
                       STR(from), STR(to), fs, ts);
    if (fs == 0) {
        if (sj_shape_numel(from, 1) == sj_shape_numel(to, 1)) return SJ_OK;
        return sj_fail(g->ctx, SJ_E_SHAPE, "reshape: %s to %s: element counts differ", STR(from),
                       STR(to));
    }
    int fa = 0, ta = 0; /* where group k starts in each shape (-1: the prefix) */
    for (int k = -1; k < fs; k++) {
        int fe = sym_axis(from, k + 1), te = sym_axis(to, k + 1);
        /* a group's product counts its symbolic dim at extent 1: its factor */
        int64_t pf = dims_product(from, fa, fe), pt = dims_product(to, ta, te);
        if (k >= 0 && (sj_dim_offset(from->dims[fa]) || sj_dim_offset(to->dims[ta]))) {
            if (from->dims[fa] != to->dims[ta] ||
                dims_product(from, fa + 1, fe) != dims_product(to, ta + 1, te))
                return sj_fail(g->ctx, SJ_E_SHAPE,
                               "reshape: %s to %s: symbolic dim %d has a constant part, so it stays "
                               "one dim of its own with the same dims behind it",
                               STR(from), STR(to), k + 1);
        } else if (pf != pt) {
            if (k < 0)
                return sj_fail(g->ctx, SJ_E_SHAPE,
                               "reshape: %s to %s: the dims in front of the symbolic dim differ in "
                               "product (%lld vs %lld)",
                               STR(from), STR(to), (long long)pf, (long long)pt);
            return sj_fail(g->ctx, SJ_E_SHAPE,
                           "reshape: %s to %s: symbolic dim %d and the dims behind it hold %lld "
                           "vs %lld elements per symbolic index; a symbolic dim merges only with "
                           "the dims inside it",
                           STR(from), STR(to), k + 1, (long long)pf, (long long)pt);
        }
        fa = fe;
        ta = te;
    }
    return SJ_OK;
}

/* Parts at most of a reshape that merges the symbolic dim with the dims in
 * front of it (below): one slice, reshape and concat per row of them. */
#define FRONT_MERGE_MAX_PARTS 64

/* Whether `to` merges from's one symbolic dim S = k*N + c with F >= 2 rows
 * of the dims in front of it, as a Flatten of a [batch, seq] mask does:
 * [P, S, B] to [P / F, F * S * Bm, B / Bm] in products, the merged dim
 * (F*k*Bm) * N + F*c*Bm. *f: F, *bm: Bm; false when it does not. */
static bool front_merge(const sj_shape *from, const sj_shape *to, int64_t *f, int64_t *bm) {
    if (sj_shape_sym_count(from) != 1 || sj_shape_sym_count(to) != 1) return false;
    int a = sym_axis(from, 0), at = sym_axis(to, 0);
    int64_t p = dims_product(from, 0, a), pt = dims_product(to, 0, at);
    int64_t b = dims_product(from, a + 1, from->rank), bt = dims_product(to, at + 1, to->rank);
    if (p < 1 || pt < 1 || p == pt || p % pt || b < 1 || bt < 1 || b % bt) return false;
    *f = p / pt;
    *bm = b / bt;
    int64_t k = sj_dim_factor(from->dims[a]), c = sj_dim_offset(from->dims[a]);
    if (c && *bm > 1) return false; /* N + c merges with nothing behind it */
    int64_t kk, cc;
    if (sj_mul_overflow_i64(*f * k, *bm, &kk) || sj_mul_overflow_i64(*f * c, *bm, &cc) ||
        kk > SJ_MAX_SYM_FACTOR || cc > SJ_MAX_SYM_OFFSET)
        return false;
    return to->dims[at] == SJ_DIM_AFFINE(kk, cc);
}

/* In a padded buffer the rows of such a merge are no prefix (row f's
 * padding lies between rows f and f + 1), so it is no view. The merge is
 * built compact: each row's S * Bm block sliced out and placed at the
 * active extent of the rows before it by a concat of symbolic parts
 * (ir/layout_ops.c). The inverse (split: `to` takes F rows in front of S
 * out of from's merged dim, a flattened mask shaped back to [batch, 1, q,
 * S]) slices each block at its n-relative start into its row of a padded
 * result. Either way the padded side is [Pt, F, S, Bm, Bt] and the compact
 * one [Pt, F * S * Bm, Bt] in products. */
static sj_status reshape_by_rows(sj_graph *g, sj_value x, const sj_shape *to, int64_t f,
                                 int64_t bm, bool split, sj_value *out) {
    const sj_shape *from = SHAPE(x), *padded = split ? to : from;
    if (f > FRONT_MERGE_MAX_PARTS)
        return sj_fail(g->ctx, SJ_E_UNSUPPORTED,
                       "reshape: %s to %s %s the symbolic dim with %lld rows in front of it, "
                       "each copied as a part of its own; at most %d",
                       STR(from), STR(to), split ? "unmerges" : "merges", (long long)f,
                       FRONT_MERGE_MAX_PARTS);
    int a = sym_axis(padded, 0);
    int64_t s = padded->dims[a], pt = dims_product(padded, 0, a) / f;
    int64_t bt = dims_product(padded, a + 1, padded->rank) / bm;
    int64_t kb = sj_dim_factor(s) * bm, cb = sj_dim_offset(s) * bm;
    const int64_t rows[5] = {pt, f, s, bm, bt}, row[5] = {pt, 1, s, bm, bt};
    const int64_t compact[3] = {pt, SJ_DIM_AFFINE(f * kb, f * cb), bt};
    const int64_t block[3] = {pt, SJ_DIM_AFFINE(kb, cb), bt};
    sj_value src, acc = SJ_NO_VALUE;
    SJ_TRY(sj_graph_reshape(g, x, split ? 3 : 5, split ? compact : rows, &src));
    for (int64_t i = 0; i < f; i++) {
        const sj_slice_axis one_row[5] = {{0, 0, 1, pt}, {i, 0, 1, 1}, {0, 0, 1, s}, {0, 0, 1, bm},
                                          {0, 0, 1, bt}};
        const sj_slice_axis one_block[3] = {{0, 0, 1, pt}, {i * cb, i * kb, 1, block[1]},
                                            {0, 0, 1, bt}};
        sj_value piece;
        SJ_TRY(sj_graph_slice(g, src, split ? one_block : one_row, &piece));
        SJ_TRY(sj_graph_reshape(g, piece, split ? 5 : 3, split ? row : block, &piece));
        if (i == 0) acc = piece;
        else SJ_TRY(sj_graph_concat(g, acc, piece, 1, &acc));
    }
    return sj_graph_reshape(g, acc, to->rank, to->dims, out);
}

sj_status sj_graph_reshape(sj_graph *g, sj_value x, int rank, const int64_t *dims, sj_value *out) {
    if (!g) return SJ_E_INVALID_ARG;
    SJ_TRY(sj__graph_check_value(g, "reshape", x));
    sj_node n = sj__node_blank(SJ_OP_RESHAPE);
    n.n_inputs = 1;
    n.inputs[0] = x;
    n.dtype = DTYPE(x);
    SJ_TRY(sj__graph_make_shape(g, "reshape", rank, dims, SJ__DIMS_AFFINE, &n.shape));
    int64_t f, bm;
    if (front_merge(SHAPE(x), &n.shape, &f, &bm))
        return reshape_by_rows(g, x, &n.shape, f, bm, false, out);
    if (front_merge(&n.shape, SHAPE(x), &f, &bm))
        return reshape_by_rows(g, x, &n.shape, f, bm, true, out);
    SJ_TRY(check_reshape(g, SHAPE(x), &n.shape));
    return sj__graph_append(g, "reshape", &n, out);
}

/* ---- typed ops ---- */

sj_status sj_graph_cast(sj_graph *g, sj_value x, sj_dtype to, sj_value *out) {
    if (!g) return SJ_E_INVALID_ARG;
    SJ_TRY(sj__graph_check_value(g, "cast", x));
    if ((int)to < 0 || to >= SJ_DTYPE_COUNT_)
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "cast: element type %d does not exist", (int)to);
    sj_node n = sj__node_blank(SJ_OP_CAST);
    n.n_inputs = 1;
    n.inputs[0] = x;
    n.shape = *SHAPE(x);
    n.dtype = to;
    return sj__graph_append(g, "cast", &n, out);
}

sj_status sj_graph_where(sj_graph *g, sj_value cond, sj_value a, sj_value b, sj_value *out) {
    if (!g) return SJ_E_INVALID_ARG;
    SJ_TRY(sj__graph_check_value(g, "where", cond));
    SJ_TRY(sj__graph_check_value(g, "where", a));
    SJ_TRY(sj__graph_check_value(g, "where", b));
    SJ_TRY(check_type(g, "where", "the condition", cond, T_BOOL));
    SJ_TRY(check_same_type(g, "where", a, b));
    sj_node n = sj__node_blank(SJ_OP_WHERE);
    n.n_inputs = 3;
    n.inputs[0] = cond;
    n.inputs[1] = a;
    n.inputs[2] = b;
    n.dtype = DTYPE(a);
    int64_t ab[SJ_MAX_RANK];
    int ab_rank;
    const sj_shape *sc = SHAPE(cond), *sa = SHAPE(a), *sb = SHAPE(b);
    if (!broadcast_dims(sa->dims, sa->rank, sb->dims, sb->rank, ab, &ab_rank) ||
        !broadcast_dims(sc->dims, sc->rank, ab, ab_rank, n.shape.dims, &n.shape.rank))
        return sj_fail(g->ctx, SJ_E_SHAPE, "where: shapes do not broadcast: %s, %s, %s", STR(sc),
                       STR(sa), STR(sb));
    return sj__graph_append(g, "where", &n, out);
}

sj_status sj_graph_gather(sj_graph *g, sj_value data, sj_value indices, int axis, sj_value *out) {
    if (!g) return SJ_E_INVALID_ARG;
    SJ_TRY(sj__graph_check_value(g, "gather", data));
    SJ_TRY(sj__graph_check_value(g, "gather", indices));
    SJ_TRY(check_type(g, "gather", "the indices", indices, T_INT));
    const sj_shape *sd = SHAPE(data), *si = SHAPE(indices);
    sj_node n = sj__node_blank(SJ_OP_GATHER);
    n.n_inputs = 2;
    n.inputs[0] = data;
    n.inputs[1] = indices;
    n.dtype = DTYPE(data);
    if (sd->rank < 1)
        return sj_fail(g->ctx, SJ_E_SHAPE, "gather: data %s has rank 0", STR(sd));
    SJ_TRY(normalise_axis(g, "gather", sd, axis, &n.attrs.axis));
    int ax = n.attrs.axis;
    if (sj_dim_is_sym(sd->dims[ax]) && sj_shape_sym_count(si) > 0 && sj_shape_sym_count(sd) > 1)
        return sj_fail(g->ctx, SJ_E_UNSUPPORTED,
                       "gather: data %s has the symbolic dim more than once", STR(sd));
    if (sd->rank - 1 + si->rank > SJ_MAX_RANK)
        return sj_fail(g->ctx, SJ_E_SHAPE, "gather: data %s indexed by %s has rank %d (at most %d)",
                       STR(sd), STR(si), sd->rank - 1 + si->rank, SJ_MAX_RANK);
    for (int i = 0; i < ax; i++) n.shape.dims[n.shape.rank++] = sd->dims[i];
    for (int i = 0; i < si->rank; i++) n.shape.dims[n.shape.rank++] = si->dims[i];
    for (int i = ax + 1; i < sd->rank; i++) n.shape.dims[n.shape.rank++] = sd->dims[i];
    return sj__graph_append(g, "gather", &n, out);
}

static sj_status check_generated(sj_graph *g, const char *what, sj_dtype dtype) {
    if ((int)dtype < 0 || dtype >= SJ_DTYPE_COUNT_)
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "%s: element type %d does not exist", what,
                       (int)dtype);
    return SJ_OK;
}

sj_status sj_graph_range_from_n(sj_graph *g, sj_dtype dtype, double start, int64_t start_n,
                                double delta, int64_t count, sj_value *out) {
    if (!g) return SJ_E_INVALID_ARG;
    SJ_TRY(check_generated(g, "range", dtype));
    if (dtype == SJ_BOOL)
        return sj_fail(g->ctx, SJ_E_SHAPE, "range: a range of bool does not exist");
    if (!isfinite(start) || !isfinite(delta))
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "range: start %g and delta %g must be finite",
                       start, delta);
    if (start_n && (dtype == SJ_F32 || !g->sym_name || start_n < -SJ_MAX_SYM_FACTOR ||
                    start_n > SJ_MAX_SYM_FACTOR))
        return sj_fail(g->ctx, SJ_E_INVALID_ARG,
                       "range: a start %lld * n needs an integer range, a symbolic dim and a factor "
                       "within +-%lld",
                       (long long)start_n, (long long)SJ_MAX_SYM_FACTOR);
    sj_node n = sj__node_blank(SJ_OP_RANGE);
    n.dtype = dtype;
    n.attrs.first = start;
    n.attrs.start_n[0] = start_n;
    n.attrs.delta = delta;
    SJ_TRY(sj__graph_make_shape(g, "range", 1, &count, SJ__DIMS_AFFINE, &n.shape));
    return sj__graph_append(g, "range", &n, out);
}

sj_status sj_graph_range(sj_graph *g, sj_dtype dtype, double start, double delta, int64_t count,
                         sj_value *out) {
    return sj_graph_range_from_n(g, dtype, start, 0, delta, count, out);
}

sj_status sj_graph_fill(sj_graph *g, sj_dtype dtype, double value, int rank, const int64_t *dims,
                        sj_value *out) {
    if (!g) return SJ_E_INVALID_ARG;
    SJ_TRY(check_generated(g, "fill", dtype));
    sj_node n = sj__node_blank(SJ_OP_FILL);
    n.dtype = dtype;
    n.attrs.delta = dtype == SJ_BOOL ? (double)(value != 0)
                    : dtype == SJ_F32 ? (double)(float)value
                                      : value;
    SJ_TRY(sj__graph_make_shape(g, "fill", rank, dims, SJ__DIMS_AFFINE, &n.shape));
    return sj__graph_append(g, "fill", &n, out);
}
