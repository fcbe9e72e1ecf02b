/* Reshapes onto the graph and folded at load time: Reshape (0 and -1 of
 * the target resolved, a target in the symbolic dim), Flatten, Squeeze and
 * Unsqueeze. A symbolic dim merges only with the dims inside it, as a
 * multiple of the symbol (graph.h's reshape rule). */
#include "formats/onnx/onnx_fold.h"
#include "formats/onnx/onnx_node.h"

#include <string.h>

/* ---- folds ---- */

/* Axes of Squeeze/Unsqueeze: attribute (opset < 13) or constant input 1. */
static sj_status fold_axes(sj_onnx_loader *L, int64_t *axes, int *n) {
    const int64_t *av;
    size_t an;
    bool present;
    SJ_TRY(sj__onnx_attr_ints(L, "axes", &av, &an, &present));
    *n = 0;
    if (present) {
        for (size_t i = 0; i < an && i < SJ_ONNX_MAX_RANK; i++) axes[(*n)++] = av[i];
        return SJ_OK;
    }
    const char *nm = sj__onnx_in_name(L, 1);
    if (!nm) return SJ_OK;
    const sj_onnx_val *v = sj__onnx_lookup(L, nm);
    if (!v || !v->has_const || v->c.f || v->c.numel > SJ_ONNX_MAX_RANK)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "axes input '%s' is not a constant", nm);
    for (int64_t i = 0; i < v->c.numel; i++) axes[(*n)++] = v->c.i[i];
    return SJ_OK;
}

static sj_status squeeze_fold(sj_onnx_loader *L, bool un, const sj_onnx_fold *in, sj_onnx_fold *out) {
    int64_t axes[SJ_ONNX_MAX_RANK], dims[SJ_ONNX_MAX_RANK];
    int n, rank = 0;
    SJ_TRY(fold_axes(L, axes, &n));
    int out_rank = un ? in->rank + n : in->rank;
    if (out_rank > SJ_ONNX_MAX_RANK) return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "rank too large");
    bool mark[SJ_ONNX_MAX_RANK] = {false};
    for (int i = 0; i < n; i++) {
        int64_t a = axes[i] < 0 ? axes[i] + out_rank : axes[i];
        if (a < 0 || a >= out_rank) return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis out of range");
        mark[a] = true;
    }
    for (int i = 0, k = 0; i < out_rank; i++) {
        if (un) dims[rank++] = mark[i] ? 1 : in->dims[k++];
        else if (!(n ? mark[i] : in->dims[i] == 1)) dims[rank++] = in->dims[i];
    }
    return sj__onnx_fold_copy(L, in, rank, dims, out);
}

static sj_status fold_squeeze(sj_onnx_loader *L, const sj_onnx_op *op, sj_onnx_fold *in, int n,
                              sj_onnx_fold *out) {
    (void)op, (void)n;
    return squeeze_fold(L, false, &in[0], out);
}

static sj_status fold_unsqueeze(sj_onnx_loader *L, const sj_onnx_op *op, sj_onnx_fold *in, int n,
                                sj_onnx_fold *out) {
    (void)op, (void)n;
    return squeeze_fold(L, true, &in[0], out);
}

static sj_status fold_reshape(sj_onnx_loader *L, const sj_onnx_op *op, sj_onnx_fold *in, int n,
                              sj_onnx_fold *out) {
    (void)op;
    if (n != 2) return SJ_ONNX_NOT_FOLDED; /* Reshape-1's target attribute: the map's */
    const sj_onnx_fold *t = &in[1];
    int64_t dims[SJ_ONNX_MAX_RANK], known = 1, allowzero;
    int infer = -1;
    if (t->numel > SJ_ONNX_MAX_RANK) return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "target rank too large");
    SJ_TRY(sj__onnx_attr_int(L, "allowzero", 0, &allowzero));
    for (int64_t i = 0; i < t->numel; i++) {
        if (t->e[i].n) return SJ_ONNX_NOT_FOLDED; /* a symbolic target: a graph reshape */
        int64_t d = t->e[i].c;
        if (d == 0 && !allowzero) d = i < in[0].rank ? in[0].dims[i] : 0;
        if (d == -1) infer = (int)i, d = 1;
        if (d < 0) return sj__onnx_node_fail(L, SJ_E_SHAPE, "shape entry %lld", (long long)d);
        dims[i] = d;
        known *= d;
    }
    if (infer >= 0) {
        if (!known || in[0].numel % known)
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "cannot infer the -1 of the shape");
        dims[infer] = in[0].numel / known;
    }
    return sj__onnx_fold_copy(L, &in[0], (int)t->numel, dims, out);
}

/* ---- maps ---- */

/* Resolves ONNX Reshape's 0 (copy the input dim) and -1 (inferred). t[i]
 * is a constant entry unless sym[i] (sym may be NULL) is nonzero: a
 * symbolic dim (graph.h's encoding), as a Shape chain folds to. */

/* Elements per index of the group an axis lies in: group 0 is the dims in
 * front of the first symbolic dim, group j the j-th symbolic dim (counting
 * its factor) and the constant dims behind it. skip: an axis counted as 1.
 * -1 where the product passes what a tensor may hold (a target's constants
 * come straight from the file). */
static int64_t group_volume(const int64_t *dims, int rank, int group, int skip) {
    int64_t v = 1;
    for (int i = 0, gi = 0; i < rank; i++) {
        gi += sj_dim_is_sym(dims[i]);
        if (gi == group && i != skip &&
            (sj_mul_overflow_i64(v, sj_dim_at(dims[i], 1), &v) || v > SJ_MAX_ELEMENTS))
            return -1;
    }
    return v;
}

static int group_of(const int64_t *dims, int axis) {
    int g = 0;
    for (int i = 0; i <= axis; i++) g += sj_dim_is_sym(dims[i]);
    return g;
}

/* The -1 of a target beside a dim N + c, which merges with nothing (the
 * graph's reshape checks that the rest keeps its place): the input's one
 * symbolic dim itself when the rest of the target has none, else the ratio
 * of the constant dims. */
static sj_status infer_beside_offset(sj_onnx_loader *L, const sj_shape *in, const sj_shape *os,
                                     int infer, int64_t *out) {
    int in_sym = sj_shape_sym_count(in), out_sym = sj_shape_sym_count(os);
    int64_t in_const = 1, out_const = 1, sym = 0;
    for (int i = 0; i < in->rank; i++) {
        if (sj_dim_is_sym(in->dims[i])) sym = in->dims[i];
        else in_const *= in->dims[i]; /* an input's dims: its numel was checked */
    }
    for (int i = 0; i < os->rank; i++)
        if (!sj_dim_is_sym(os->dims[i]) && i != infer &&
            (sj_mul_overflow_i64(out_const, os->dims[i], &out_const) || out_const > SJ_MAX_ELEMENTS))
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "the target shape holds more than %lld elements",
                                      (long long)SJ_MAX_ELEMENTS);
    /* the -1 is the symbolic dim times the rows it takes from the rest (a
     * [batch, 1, N + 1] mask flattened: 4 * (N + 1)); sj_graph_reshape says
     * whether that merge can be built */
    if (in_sym == 1 && out_sym == 0 && out_const > 0 && in_const % out_const == 0) {
        int64_t r = in_const / out_const, k, c;
        if (!sj_mul_overflow_i64(r, sj_dim_factor(sym), &k) &&
            !sj_mul_overflow_i64(r, sj_dim_offset(sym), &c) && k <= SJ_MAX_SYM_FACTOR &&
            c <= SJ_MAX_SYM_OFFSET) {
            out[infer] = SJ_DIM_AFFINE(k, c);
            return SJ_OK;
        }
    }
    if (in_sym == out_sym && out_const > 0 && in_const % out_const == 0) {
        out[infer] = in_const / out_const;
        return SJ_OK;
    }
    return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                              "cannot infer the -1 of the shape beside a symbolic dim with a "
                              "constant part (N + c): give the shape in full");
}

static sj_status reshape_dims(sj_onnx_loader *L, const sj_shape *in, const int64_t *t,
                              const int64_t *sym, int n, bool allowzero, int64_t *out) {
    int infer = -1;
    for (int i = 0; i < n; i++) {
        if (sym && sym[i]) {
            out[i] = sym[i];
        } else if (t[i] == 0 && !allowzero) {
            if (i >= in->rank)
                return sj__onnx_node_fail(L, SJ_E_SHAPE,
                                         "shape entry %d is 0 (copy the input dim) but the input "
                                         "has rank %d",
                                         i, in->rank);
            out[i] = in->dims[i];
        } else if (t[i] == 0) {
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                     "shape entry %d is 0 with allowzero=1; zero-size tensors are "
                                     "not supported",
                                     i);
        } else if (t[i] == -1) {
            if (infer >= 0)
                return sj__onnx_node_fail(L, SJ_E_SHAPE, "shape has more than one -1");
            infer = i;
            out[i] = 1;
        } else if (t[i] < -1) {
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "shape entry %d is %lld", i, (long long)t[i]);
        } else {
            out[i] = t[i];
        }
    }
    if (infer < 0) return SJ_OK;
    sj_shape os = {n, {0}};
    memcpy(os.dims, out, (size_t)n * sizeof *out);
    bool offset = false;
    for (int i = 0; i < in->rank + n; i++)
        offset |= sj_dim_offset(i < in->rank ? in->dims[i] : out[i - in->rank]) != 0;
    if (offset) return infer_beside_offset(L, in, &os, infer, out);
    int in_sym = sj_shape_sym_count(in), out_sym = sj_shape_sym_count(&os);
    /* The -1 stands for the symbolic dim (times what it absorbs) when the
     * rest of the target has one symbolic dim fewer than the input. */
    bool is_sym = in_sym == out_sym + 1;
    if (!is_sym && in_sym != out_sym)
        return sj__onnx_node_fail(L, SJ_E_SHAPE,
                                  "cannot infer the -1 of the shape: the input has the symbolic dim "
                                  "%d times, the rest of the target %d",
                                  in_sym, out_sym);
    if (is_sym) out[infer] = SJ_DIM_SYM;
    int g = group_of(out, infer);
    int64_t front = group_volume(in->dims, in->rank, 0, -1);
    int64_t want = group_volume(in->dims, in->rank, g, -1);
    int64_t have = group_volume(out, n, g, is_sym ? -1 : infer);
    if (front < 0 || group_volume(out, n, 0, -1) < 0 || want < 0 || have < 0)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "the target shape holds more than %lld elements",
                                  (long long)SJ_MAX_ELEMENTS);
    int64_t out_front = group_volume(out, n, 0, -1);
    if (is_sym && g == 1 && front != out_front) {
        /* the -1 takes rows in front of the symbolic dim too (a flattened
         * [batch, seq] mask): sj_graph_reshape builds that merge compact */
        if (front % out_front || sj_mul_overflow_i64(want, front / out_front, &want))
            return sj__onnx_node_fail(L, SJ_E_SHAPE,
                                      "cannot infer the -1 of the shape: %lld elements in front of "
                                      "the symbolic dim in the input, %lld in the target",
                                      (long long)front, (long long)out_front);
    }
    if (have <= 0 || want <= 0 || want % have)
        return sj__onnx_node_fail(L, SJ_E_SHAPE,
                                  "cannot infer the -1 of the shape: %lld elements per %s in, %lld "
                                  "besides the -1",
                                  (long long)want, g ? "symbolic index" : "shape", (long long)have);
    if (is_sym && want / have > SJ_MAX_SYM_FACTOR)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                  "-1 would be %lld times the symbolic dim; at most %lld",
                                  (long long)(want / have), (long long)SJ_MAX_SYM_FACTOR);
    out[infer] = is_sym ? SJ_DIM_SYM_TIMES(want / have) : want / have;
    return SJ_OK;
}

static sj_status map_reshape(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    int64_t allowzero;
    SJ_TRY(sj__onnx_attr_int(L, "allowzero", 0, &allowzero));
    const int64_t *tv;
    int64_t sym_target[SJ_MAX_RANK], sym_dims[SJ_MAX_RANK], *sym = NULL;
    size_t tn;
    bool present;
    SJ_TRY(sj__onnx_attr_ints(L, "shape", &tv, &tn, &present)); /* opset 1-4 */
    if (present) { /* opset 1-4: the target is an attribute, the only input x */
        SJ_TRY(sj__onnx_check_inputs(L, 1, 1));
    } else {
        SJ_TRY(sj__onnx_check_inputs(L, 2, 2));
        sj_onnx_val *tvv;
        SJ_TRY(sj__onnx_in_val(L, 1, &tvv));
        if (tvv->has_sym) { /* dims computed from the symbolic dim: each must be N or constant */
            if (tvv->c.numel > SJ_MAX_RANK)
                return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "target rank %lld exceeds %d",
                                         (long long)tvv->c.numel, SJ_MAX_RANK);
            for (int64_t k = 0; k < tvv->c.numel; k++) {
                sj_onnx_sym x = sj__onnx_sym_at(tvv, k);
                sym_target[k] = x.c;
                sym_dims[k] = 0;
                if (x.n && !sj__onnx_sym_dim(x, &sym_dims[k]))
                    return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                             "shape entry %lld is %lld*%s%+lld: a dim must be "
                                             "constant or k*N + c with k >= 1, c >= 0",
                                             (long long)k, (long long)x.n, sj_graph_symbol(L->g),
                                             (long long)x.c);
            }
            tv = sym_target;
            sym = sym_dims;
            tn = (size_t)tvv->c.numel;
        } else {
            const sj_onnx_tensor *t;
            SJ_TRY(sj__onnx_in_ints(L, 1, "shape", &t));
            tv = t->i;
            tn = (size_t)t->numel;
        }
    }
    if (tn > SJ_MAX_RANK)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "target rank %zu exceeds %d", tn, SJ_MAX_RANK);
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, x, &s));
    int64_t dims[SJ_MAX_RANK];
    SJ_TRY(reshape_dims(L, &s, tv, sym, (int)tn, allowzero != 0, dims));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(L->g, x, (int)tn, dims, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* Flatten, Squeeze and Unsqueeze are reshapes to `dims`. */
static sj_status reshape_out(sj_onnx_loader *L, sj_value x, int rank, const int64_t *dims,
                             sj_value first) {
    sj_value y;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(L->g, x, rank, dims, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* [prod(dims[:axis]), prod(dims[axis:])]. The side holding the symbolic
 * dim k*N + c becomes (P*k)*N + P*c, P the product of its constant dims:
 * a view where the dim leads its side, a compact copy where dims lie in
 * front of it (sj_graph_reshape; a [batch, seq] mask flattened). N + c
 * merges with nothing behind it. */
static sj_status map_flatten(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    int64_t axis;
    SJ_TRY(sj__onnx_attr_int(L, "axis", 1, &axis));
    sj_value x, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, x, &s));
    int ax;
    SJ_TRY(sj__onnx_axis(L, axis, s.rank, s.rank + 1, &ax));
    int64_t out[2] = {1, 1}, sym_dim[2] = {0, 0}, behind[2] = {1, 1};
    int syms[2] = {0, 0};
    for (int i = 0; i < s.rank; i++) {
        int side = i >= ax;
        if (sj_dim_is_sym(s.dims[i])) {
            syms[side]++, sym_dim[side] = s.dims[i];
            continue;
        }
        if (sj_mul_overflow_i64(out[side], s.dims[i], &out[side]) || out[side] > SJ_MAX_ELEMENTS)
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "the flattened size is too large");
        if (syms[side]) behind[side] *= s.dims[i];
    }
    for (int side = 0; side < 2; side++) {
        if (!syms[side]) continue;
        int64_t k = sj_dim_factor(sym_dim[side]), c = sj_dim_offset(sym_dim[side]), kk, cc;
        const char *why = syms[side] > 1 ? "holds the symbolic dim twice"
                          : c && behind[side] > 1
                              ? "would merge a symbolic dim with a constant part (N + c) with the "
                                "dims behind it"
                          : sj_mul_overflow_i64(out[side], k, &kk) ||
                                  sj_mul_overflow_i64(out[side], c, &cc) || kk > SJ_MAX_SYM_FACTOR ||
                                  cc > SJ_MAX_SYM_OFFSET
                              ? "makes a multiple of the symbolic dim past the limits of k*N + c"
                              : NULL;
        if (why) {
            char shape[96];
            sj_shape_format(&s, sj_graph_symbol(L->g), shape, sizeof shape);
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "flattening %s at axis %d %s", shape,
                                     ax, why);
        }
        out[side] = SJ_DIM_AFFINE(kk, cc);
    }
    return reshape_out(L, x, 2, out, first);
}

/* The axes of (Un)Squeeze: an attribute before opset 13, an input from
 * then on; accept whichever the node carries. *present is false when
 * neither is given. */
static sj_status squeeze_axes(sj_onnx_loader *L, const int64_t **av, size_t *an, bool *present) {
    SJ_TRY(sj__onnx_attr_ints(L, "axes", av, an, present));
    if (!sj__onnx_in_name(L, 1)) return SJ_OK;
    if (*present) return sj__onnx_node_fail(L, SJ_E_PARSE, "axes given both as attribute and as input");
    const sj_onnx_tensor *t;
    SJ_TRY(sj__onnx_in_ints(L, 1, "axes", &t));
    *av = t->i;
    *an = (size_t)t->numel;
    *present = true;
    return SJ_OK;
}

/* Normalises axes against `rank`; each at most once. */
static sj_status norm_axes(sj_onnx_loader *L, const int64_t *av, size_t an, int rank, bool *is_axis) {
    for (int i = 0; i < rank; i++) is_axis[i] = false;
    for (size_t i = 0; i < an; i++) {
        int a;
        SJ_TRY(sj__onnx_axis(L, av[i], rank, rank, &a));
        if (is_axis[a]) return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis %d is given twice", a);
        is_axis[a] = true;
    }
    return SJ_OK;
}

static sj_status map_squeeze(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    const int64_t *av;
    size_t an;
    bool present;
    SJ_TRY(squeeze_axes(L, &av, &an, &present));
    sj_value x, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, x, &s));
    bool drop[SJ_MAX_RANK];
    if (present && an) {
        SJ_TRY(norm_axes(L, av, an, s.rank, drop));
        for (int i = 0; i < s.rank; i++) {
            if (!drop[i] || s.dims[i] == 1) continue;
            if (sj_dim_is_sym(s.dims[i]))
                return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "axis %d is %s, which is not always 1",
                                         i, s.dims[i] == SJ_DIM_SYM ? "the symbolic dim"
                                                                    : "a multiple of the symbolic dim");
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis %d has size %lld, not 1", i,
                                     (long long)s.dims[i]);
        }
    } else {
        /* no axes: every dim of size 1 (the symbolic dim is not one) */
        for (int i = 0; i < s.rank; i++) drop[i] = s.dims[i] == 1;
    }
    int64_t dims[SJ_MAX_RANK];
    int rank = 0;
    for (int i = 0; i < s.rank; i++)
        if (!drop[i]) dims[rank++] = s.dims[i];
    return reshape_out(L, x, rank, dims, first);
}

static sj_status map_unsqueeze(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    const int64_t *av;
    size_t an;
    bool present;
    SJ_TRY(squeeze_axes(L, &av, &an, &present));
    if (!present || !an) return sj__onnx_node_fail(L, SJ_E_PARSE, "has no axes");
    sj_value x, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, x, &s));
    if ((size_t)s.rank + an > SJ_MAX_RANK)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "the result has rank %zu (at most %d)",
                                 (size_t)s.rank + an, SJ_MAX_RANK);
    int rank = s.rank + (int)an;
    bool insert[SJ_MAX_RANK];
    SJ_TRY(norm_axes(L, av, an, rank, insert));
    int64_t dims[SJ_MAX_RANK];
    for (int i = 0, k = 0; i < rank; i++) dims[i] = insert[i] ? 1 : s.dims[k++];
    return reshape_out(L, x, rank, dims, first);
}


const sj_onnx_op sj__onnx_ops_reshape[] = {
    /* Reshape-1..4 take the target as an attribute, one input */
    {"Reshape", 1, 2, 1, 1, fold_reshape, map_reshape, SJ_OP_RESHAPE, 0},
    {"Flatten", 1, 1, 1, 1, NULL, map_flatten, SJ_OP_RESHAPE, 0},
    /* axes: an attribute before opset 13, a constant input 1 from then on */
    {"Squeeze", 1, 2, 1, 1, fold_squeeze, map_squeeze, SJ_OP_RESHAPE, SJ_ONNX_FOLD_DATA_ONLY},
    {"Unsqueeze", 1, 2, 1, 1, fold_unsqueeze, map_unsqueeze, SJ_OP_RESHAPE, SJ_ONNX_FOLD_DATA_ONLY},
};
const size_t sj__onnx_ops_reshape_n = sizeof sj__onnx_ops_reshape / sizeof sj__onnx_ops_reshape[0];
