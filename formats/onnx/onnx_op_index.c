/* Indexing onto the graph: Slice (bounds constant or in the symbolic dim),
 * Split, Gather, GatherND and GatherElements. Slice and Gather
 * fold at load time when their inputs are known then. */
#include "formats/onnx/onnx_fold.h"
#include "formats/onnx/onnx_node.h"

#include <stdio.h>
#include <string.h>

/* ---- folds ---- */

static sj_status fold_gather(sj_onnx_loader *L, const sj_onnx_op *op, sj_onnx_fold *in, int n,
                             sj_onnx_fold *out) {
    (void)op, (void)n;
    const sj_onnx_fold *d = &in[0], *ix = &in[1];
    int64_t axis;
    SJ_TRY(sj__onnx_attr_int(L, "axis", 0, &axis));
    if (axis < 0) axis += d->rank;
    if (axis < 0 || axis >= d->rank || d->rank - 1 + ix->rank > SJ_ONNX_MAX_RANK)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis out of range");
    int64_t dims[SJ_ONNX_MAX_RANK];
    int rank = 0;
    for (int i = 0; i < axis; i++) dims[rank++] = d->dims[i];
    for (int i = 0; i < ix->rank; i++) dims[rank++] = ix->dims[i];
    for (int i = (int)axis + 1; i < d->rank; i++) dims[rank++] = d->dims[i];
    SJ_TRY(sj__onnx_fold_alloc(L, out, d->dtype, rank, dims));
    int64_t pre = 1, len = d->dims[axis], post = 1;
    for (int i = 0; i < axis; i++) pre *= d->dims[i];
    for (int i = (int)axis + 1; i < d->rank; i++) post *= d->dims[i];
    for (int64_t p = 0; p < pre; p++)
        for (int64_t j = 0; j < ix->numel; j++) {
            if (ix->e[j].n) return SJ_ONNX_NOT_FOLDED; /* an index that grows with N */
            int64_t k = ix->e[j].c < 0 ? ix->e[j].c + len : ix->e[j].c;
            if (k < 0 || k >= len)
                return sj__onnx_node_fail(L, SJ_E_SHAPE, "index %lld is out of range for %lld",
                                         (long long)ix->e[j].c, (long long)len);
            memcpy(out->e + (p * ix->numel + j) * post, d->e + (p * len + k) * post,
                   (size_t)post * sizeof *out->e);
        }
    return SJ_OK;
}

/* Slice of a folded tensor (constant dims) by constant bounds. */
static sj_status fold_slice(sj_onnx_loader *L, const sj_onnx_op *op, sj_onnx_fold *in, int n_in,
                            sj_onnx_fold *out) {
    (void)op;
    if (n_in < 3) return SJ_ONNX_NOT_FOLDED; /* Slice-1's bounds are attributes: the map's */
    const sj_onnx_fold *x = &in[0];
    int64_t st[SJ_ONNX_MAX_RANK], step[SJ_ONNX_MAX_RANK], dims[SJ_ONNX_MAX_RANK];
    for (int i = 0; i < x->rank; i++) st[i] = 0, step[i] = 1, dims[i] = x->dims[i];
    int64_t n = n_in > 1 ? in[1].numel : 0;
    if (n_in < 3 || in[2].numel != n || (n_in > 3 && in[3].numel != n) || (n_in > 4 && in[4].numel != n))
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "starts, ends, axes and steps differ in length");
    for (int64_t i = 0; i < n; i++) {
        for (int k = 1; k < n_in; k++)
            if (in[k].e[i].n) return SJ_ONNX_NOT_FOLDED; /* bounds in N: a graph slice */
        int64_t a = n_in > 3 ? in[3].e[i].c : i;
        if (a < 0) a += x->rank;
        if (a < 0 || a >= x->rank) return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis out of range");
        int64_t d = x->dims[a], s = in[1].e[i].c, e = in[2].e[i].c, sp = n_in > 4 ? in[4].e[i].c : 1;
        if (sp == 0) return sj__onnx_node_fail(L, SJ_E_SHAPE, "step 0");
        if (s < 0) s += d;
        if (e < 0) e += d;
        if (sp > 0) {
            s = s < 0 ? 0 : s > d ? d : s;
            e = e < 0 ? 0 : e > d ? d : e;
        } else {
            s = s < 0 ? -1 : s > d - 1 ? d - 1 : s;
            e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
        }
        int64_t len = sp > 0 ? (e - s + sp - 1) / sp : (s - e - sp - 1) / -sp;
        st[a] = s;
        step[a] = sp;
        dims[a] = len < 0 ? 0 : len;
    }
    SJ_TRY(sj__onnx_fold_alloc(L, out, x->dtype, x->rank, dims));
    for (int64_t o = 0; o < out->numel; o++) {
        int64_t rem = o, off = 0, stride = 1;
        for (int i = x->rank - 1; i >= 0; i--) {
            int64_t pos = rem % dims[i];
            rem /= dims[i];
            off += (st[i] + pos * step[i]) * stride;
            stride *= x->dims[i];
        }
        out->e[o] = x->e[off];
    }
    return SJ_OK;
}

/* ---- maps ---- */

/* "Up to the end" and "from before the start" in ONNX are huge numbers;
 * past this any bound is clamped. */
#define BOUND_HUGE ((int64_t)1 << 40)

/* One axis of an ONNX Slice on a dim that is `dim` (constant or the
 * symbolic dim) into an sj_slice_axis, with ONNX's clamping. Exact for
 * every extent or an error naming the axis. */
static sj_status slice_axis(sj_onnx_loader *L, int axis, int64_t dim, sj_onnx_sym s, sj_onnx_sym e,
                            int64_t step, sj_slice_axis *out) {
    if (step == 0) return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis %d has step 0", axis);
    const char *sym = sj_graph_symbol(L->g);
    if (sj_dim_is_sym(dim) && dim != SJ_DIM_SYM) {
        /* k*N: whole, or a constant head (a padded axis's active part is its
         * first k*n entries, so no other start is a fixed place) */
        int64_t k = sj_dim_factor(dim);
        bool to_end = (e.n == k && e.c == 0) || (!e.n && e.c >= BOUND_HUGE);
        if (!s.n && s.c == 0 && step == 1 && to_end) {
            *out = (sj_slice_axis){0, 0, 1, dim};
            return SJ_OK;
        }
        if (!s.n && !e.n && s.c >= 0 && e.c > s.c && e.c < BOUND_HUGE && step > 0) {
            *out = (sj_slice_axis){s.c, 0, step, (e.c - s.c + step - 1) / step};
            return SJ_OK;
        }
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                  "axis %d is %lld*%s: bounds %lld%+lld*%s .. %lld%+lld*%s step %lld; "
                                  "a multiple of the symbolic dim is sliced whole or to a constant "
                                  "head",
                                  axis, (long long)k, sym, (long long)s.c, (long long)s.n, sym,
                                  (long long)e.c, (long long)e.n, sym, (long long)step);
    }
    if (dim != SJ_DIM_SYM) {
        if (s.n || e.n) {
            /* x[:N] of a constant table: n rows from a constant start */
            if (s.n == 0 && e.n == 1 && step == 1 && e.c == s.c && s.c >= 0) {
                *out = (sj_slice_axis){s.c, 0, 1, SJ_DIM_SYM};
                return SJ_OK;
            }
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                     "axis %d (size %lld): bounds %lld%+lld*%s .. %lld%+lld*%s step "
                                     "%lld give no fixed or %s-long result",
                                     axis, (long long)dim, (long long)s.c, (long long)s.n, sym,
                                     (long long)e.c, (long long)e.n, sym, (long long)step, sym);
        }
        int64_t st = s.c, en = e.c;
        if (st < 0) st += dim;
        if (en < 0) en += dim;
        if (step > 0) {
            st = st < 0 ? 0 : st > dim ? dim : st;
            en = en < 0 ? 0 : en > dim ? dim : en;
        } else {
            st = st < 0 ? 0 : st > dim - 1 ? dim - 1 : st;
            en = en < -1 ? -1 : en > dim - 1 ? dim - 1 : en;
        }
        int64_t len = step > 0 ? (en - st + step - 1) / step : (st - en + (-step) - 1) / (-step);
        if (len <= 0)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                     "axis %d is sliced to nothing; zero-size tensors are not "
                                     "supported",
                                     axis);
        *out = (sj_slice_axis){st, 0, step, len};
        return SJ_OK;
    }
    /* the symbolic dim: constant bounds count from N when negative */
    if (!s.n) {
        if (s.c <= -BOUND_HUGE) s = (sj_onnx_sym){step > 0 ? 0 : -1, 0};
        else if (s.c >= BOUND_HUGE) s = (sj_onnx_sym){step > 0 ? 0 : -1, 1};
        else if (s.c < 0) s = (sj_onnx_sym){s.c, 1};
    }
    if (!e.n) {
        if (e.c >= BOUND_HUGE) e = step > 0 ? (sj_onnx_sym){0, 1} : (sj_onnx_sym){-1, 1};
        else if (e.c <= -BOUND_HUGE) e = step > 0 ? (sj_onnx_sym){0, 0} : (sj_onnx_sym){-1, 0};
        else if (e.c < 0) e = (sj_onnx_sym){e.c, 1};
    }
    if (step > 0 && s.n == 1 && s.c >= 0) s = (sj_onnx_sym){0, 1}; /* clamped to N */
    if (step > 0 && e.n == 1 && e.c > 0) e = (sj_onnx_sym){0, 1};
    sj_onnx_sym span = step > 0 ? (sj_onnx_sym){e.c - s.c, e.n - s.n} : (sj_onnx_sym){s.c - e.c, s.n - e.n};
    int64_t as = step > 0 ? step : -step;
    if (span.n == 1 && span.c == 0 && as == 1) {
        *out = (sj_slice_axis){s.c, s.n, step, SJ_DIM_SYM};
        return SJ_OK;
    }
    if (span.n == 0 && span.c > 0) {
        *out = (sj_slice_axis){s.c, s.n, step, (span.c + as - 1) / as};
        return SJ_OK;
    }
    return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                             "axis %d is the symbolic dim %s: bounds %lld%+lld*%s .. %lld%+lld*%s "
                             "step %lld give a length that is neither constant nor %s",
                             axis, sym, (long long)s.c, (long long)s.n, sym, (long long)e.c,
                             (long long)e.n, sym, (long long)step, sym);
}

/* The identity slice of every axis of s. */
static void slice_all(const sj_shape *s, sj_slice_axis *axes) {
    for (int i = 0; i < s->rank; i++) axes[i] = (sj_slice_axis){0, 0, 1, s->dims[i]};
}

/* Slice-1 (attributes) and Slice-10+ (inputs starts, ends, axes, steps). */
static sj_status map_slice(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    sj_onnx_sym starts[SJ_MAX_RANK], ends[SJ_MAX_RANK];
    int64_t axes_v[SJ_MAX_RANK], steps[SJ_MAX_RANK];
    int n = 0, n_axes = -1, n_steps = -1, ne = 0;
    if (L->opset < 10) {
        SJ_TRY(sj__onnx_check_inputs(L, 1, 1));
        const int64_t *sv, *ev, *av;
        size_t sn, en, an;
        bool sp, ep, ap;
        SJ_TRY(sj__onnx_attr_ints(L, "starts", &sv, &sn, &sp));
        SJ_TRY(sj__onnx_attr_ints(L, "ends", &ev, &en, &ep));
        SJ_TRY(sj__onnx_attr_ints(L, "axes", &av, &an, &ap));
        if (!sp || !ep) return sj__onnx_node_fail(L, SJ_E_PARSE, "needs starts and ends");
        if (sn > SJ_MAX_RANK || en != sn || (ap && an != sn))
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "starts, ends and axes differ in length");
        n = ne = (int)sn;
        for (int i = 0; i < n; i++) {
            starts[i] = (sj_onnx_sym){sv[i], 0};
            ends[i] = (sj_onnx_sym){ev[i], 0};
            if (ap) axes_v[i] = av[i];
        }
        if (ap) n_axes = n;
    } else {
        SJ_TRY(sj__onnx_check_inputs(L, 3, 5));
        SJ_TRY(sj__onnx_in_syms(L, 1, "starts", starts, &n));
        SJ_TRY(sj__onnx_in_syms(L, 2, "ends", ends, &ne));
        if (sj__onnx_in_name(L, 3)) {
            sj_onnx_sym a[SJ_MAX_RANK];
            SJ_TRY(sj__onnx_in_syms(L, 3, "axes", a, &n_axes));
            for (int i = 0; i < n_axes; i++) {
                if (a[i].n) return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "axes depend on the symbolic dim");
                axes_v[i] = a[i].c;
            }
        }
        if (sj__onnx_in_name(L, 4)) {
            sj_onnx_sym st[SJ_MAX_RANK];
            SJ_TRY(sj__onnx_in_syms(L, 4, "steps", st, &n_steps));
            for (int i = 0; i < n_steps; i++) {
                if (st[i].n) return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "steps depend on the symbolic dim");
                steps[i] = st[i].c;
            }
        }
        if (ne != n || (n_axes >= 0 && n_axes != n) || (n_steps >= 0 && n_steps != n))
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "starts, ends, axes and steps differ in length");
    }
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, x, &s));
    sj_slice_axis axes[SJ_MAX_RANK];
    slice_all(&s, axes);
    bool seen[SJ_MAX_RANK] = {false};
    for (int i = 0; i < n; i++) {
        int64_t a = n_axes >= 0 ? axes_v[i] : i;
        int ax;
        SJ_TRY(sj__onnx_axis(L, a, s.rank, s.rank, &ax));
        if (seen[ax]) return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis %d is given twice", ax);
        seen[ax] = true;
        SJ_TRY(slice_axis(L, ax, s.dims[ax], starts[i], ends[i], n_steps >= 0 ? steps[i] : 1,
                          &axes[ax]));
    }
    bool identity = true;
    for (int i = 0; i < s.rank; i++)
        identity &= axes[i].start == 0 && axes[i].start_n == 0 && axes[i].step == 1 &&
                    axes[i].len == s.dims[i];
    if (identity) return sj__onnx_alias_input(L);
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_slice(L->g, x, axes, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* Split: consecutive slices of one axis, sized by the `split` input
 * (opset 13+) or attribute, by num_outputs (opset 18+, the last part
 * smaller), or equally. */
static sj_status map_split(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    const Onnx__NodeProto *node = L->node;
    int n_out = (int)node->n_output;
    if (n_out < 1) return sj__onnx_node_fail(L, SJ_E_PARSE, "has no outputs");
    int64_t axis, num;
    SJ_TRY(sj__onnx_attr_int(L, "axis", 0, &axis));
    SJ_TRY(sj__onnx_attr_int(L, "num_outputs", 0, &num));
    sj_value x, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &x));
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, x, &s));
    int ax;
    SJ_TRY(sj__onnx_axis(L, axis, s.rank, s.rank, &ax));
    int64_t dim = s.dims[ax];
    if (sj_dim_is_sym(dim))
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                 "splitting the symbolic dim %s (axis %d) gives parts whose "
                                 "lengths depend on it",
                                 sj_graph_symbol(L->g), ax);
    const int64_t *sv = NULL;
    size_t sn = 0;
    bool sp;
    SJ_TRY(sj__onnx_attr_ints(L, "split", &sv, &sn, &sp));
    if (sj__onnx_in_name(L, 1)) {
        const sj_onnx_tensor *t;
        SJ_TRY(sj__onnx_in_ints(L, 1, "split", &t));
        sv = t->i;
        sn = (size_t)t->numel;
        sp = true;
    }
    int64_t sizes[64];
    if (n_out > 64) return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "more than 64 outputs");
    if (sp) {
        if ((int)sn != n_out)
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "split has %zu sizes for %d outputs", sn, n_out);
        int64_t total = 0;
        for (int i = 0; i < n_out; i++) {
            sizes[i] = sv[i];
            if (sizes[i] < 1)
                return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                         "part %d has size %lld; zero-size tensors are not supported",
                                         i, (long long)sizes[i]);
            total += sizes[i];
        }
        if (total != dim)
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "split sizes add up to %lld, axis %d has %lld",
                                     (long long)total, ax, (long long)dim);
    } else {
        if (num && num != n_out)
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "num_outputs is %lld but the node has %d outputs",
                                     (long long)num, n_out);
        int64_t part = num ? (dim + n_out - 1) / n_out : dim / n_out;
        if (!num && dim % n_out)
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis %d (%lld) does not split into %d equal parts",
                                     ax, (long long)dim, n_out);
        for (int i = 0; i < n_out; i++) {
            sizes[i] = i < n_out - 1 ? part : dim - part * (n_out - 1);
            if (sizes[i] < 1)
                return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                         "part %d would be empty; zero-size tensors are not supported", i);
        }
    }
    int64_t at = 0;
    for (int i = 0; i < n_out; i++) {
        sj_slice_axis axes[SJ_MAX_RANK];
        slice_all(&s, axes);
        axes[ax] = (sj_slice_axis){at, 0, 1, sizes[i]};
        at += sizes[i];
        if (!node->output[i] || !node->output[i][0]) continue;
        sj_value y;
        if (n_out == 1) return sj__onnx_alias_input(L);
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_slice(L->g, x, axes, &y)));
        SJ_TRY(sj__onnx_def_out(L, i, y, first));
    }
    return SJ_OK;
}

/* Gather (embedding lookups): data and indices of their own dtypes. */
static sj_status map_gather(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    sj_value d, ix, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &d));
    SJ_TRY(sj__onnx_in_value(L, 1, &ix));
    int64_t axis;
    SJ_TRY(sj__onnx_attr_int(L, "axis", 0, &axis));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_gather(L->g, d, ix, (int)axis, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* data and indices as graph values of their own dtypes, into a builder
 * that takes one integer attribute (GatherElements' axis, GatherND's
 * batch_dims). */
static sj_status map_indexed(sj_onnx_loader *L, int attr,
                             sj_status (*build)(sj_graph *, sj_value, sj_value, int, sj_value *)) {
    sj_onnx_val *dv, *iv;
    SJ_TRY(sj__onnx_in_val(L, 0, &dv));
    SJ_TRY(sj__onnx_in_val(L, 1, &iv));
    sj_value d, ix, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_node_prefix(L, sj__onnx_as_value(L, dv, &d)));
    SJ_TRY(sj__onnx_node_prefix(L, sj__onnx_as_value(L, iv, &ix)));
    SJ_TRY(sj__onnx_node_prefix(L, build(L->g, d, ix, attr, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

static sj_status map_gather_nd(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    int64_t batch_dims;
    SJ_TRY(sj__onnx_attr_int(L, "batch_dims", 0, &batch_dims));
    if (batch_dims < 0 || batch_dims >= SJ_MAX_RANK)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "batch_dims %lld is out of range", (long long)batch_dims);
    return map_indexed(L, (int)batch_dims, sj_graph_gather_nd);
}

static sj_status map_gather_elements(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    int64_t axis;
    SJ_TRY(sj__onnx_attr_int(L, "axis", 0, &axis));
    return map_indexed(L, (int)axis, sj_graph_gather_elements);
}

const sj_onnx_op sj__onnx_ops_index[] = {
    /* Slice-1 has one input (bounds as attributes), Slice-10 three to five */
    {"Slice", 1, 5, 1, 1, fold_slice, map_slice, SJ_OP_SLICE, 0},
    /* any output may be left unnamed */
    {"Split", 1, 2, 0, SJ_ONNX_ANY, NULL, map_split, SJ_OP_SLICE, 0},
    {"Gather", 2, 2, 1, 1, fold_gather, map_gather, SJ_OP_GATHER, 0},
    {"GatherND", 2, 2, 1, 1, NULL, map_gather_nd, SJ_OP_GATHER_ND, 0},
    {"GatherElements", 2, 2, 1, 1, NULL, map_gather_elements, SJ_OP_GATHER_ELEMENTS, 0},
};
const size_t sj__onnx_ops_index_n = sizeof sj__onnx_ops_index / sizeof sj__onnx_ops_index[0];
