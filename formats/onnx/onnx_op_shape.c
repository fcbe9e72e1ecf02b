/* Values known at load time or computed from the symbolic dim: Shape,
 * Size, Constant, Range and ConstantOfShape. They fold when their inputs
 * are constants; over the symbolic dim they become graph ranges and fills. */
#include "formats/onnx/onnx_fold.h"
#include "formats/onnx/onnx_node.h"

#include <math.h>
#include <string.h>

/* ---- folds ---- */

/* ConstantOfShape's value attribute: (dtype, value), default float 0. */
static sj_status fill_value(sj_onnx_loader *L, int32_t *dtype, double *value) {
    *dtype = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    *value = 0;
    sj_onnx_tensor t;
    bool present;
    SJ_TRY(sj__onnx_attr_tensor(L, "value", "value", &t, &present));
    if (!present) return SJ_OK;
    if (t.numel != 1) {
        sj__onnx_tensor_release(L->ctx, &t);
        return sj__onnx_node_fail(L, SJ_E_PARSE, "attribute 'value' has %lld elements, not 1",
                                 (long long)t.numel);
    }
    *dtype = t.dtype;
    *value = t.f ? (double)t.f[0] : (double)t.i[0];
    sj__onnx_tensor_release(L->ctx, &t);
    return SJ_OK;
}

static sj_status fold_const_of_shape(sj_onnx_loader *L, const sj_onnx_op *op, sj_onnx_fold *in,
                                     int n, sj_onnx_fold *out) {
    (void)op, (void)n;
    int64_t dims[SJ_ONNX_MAX_RANK];
    if (in->numel > SJ_ONNX_MAX_RANK) return sj__onnx_node_fail(L, SJ_E_SHAPE, "rank too large");
    for (int64_t i = 0; i < in->numel; i++) {
        if (in->e[i].n) return SJ_ONNX_NOT_FOLDED; /* a symbolic shape: a graph fill */
        dims[i] = in->e[i].c;
    }
    int32_t dt;
    double v;
    SJ_TRY(fill_value(L, &dt, &v));
    if (sj__onnx_dtype_is_float(dt) && !sj__onnx_fold_whole((float)v)) return SJ_ONNX_NOT_FOLDED;
    SJ_TRY(sj__onnx_fold_alloc(L, out, dt, (int)in->numel, dims));
    for (int64_t i = 0; i < out->numel; i++) out->e[i] = (sj_onnx_sym){(int64_t)v, 0};
    return SJ_OK;
}

static sj_status fold_range(sj_onnx_loader *L, const sj_onnx_op *op, sj_onnx_fold *in, int n_in,
                            sj_onnx_fold *out) {
    (void)op, (void)n_in;
    for (int k = 0; k < 3; k++)
        if (in[k].numel != 1 || in[k].e[0].n) return SJ_ONNX_NOT_FOLDED; /* symbolic: a graph range */
    int64_t s = in[0].e[0].c, l = in[1].e[0].c, d = in[2].e[0].c;
    if (d == 0) return sj__onnx_node_fail(L, SJ_E_SHAPE, "delta is 0");
    int64_t n = d > 0 ? (l - s + d - 1) / d : (s - l - d - 1) / -d;
    if (n < 0) n = 0;
    int64_t dims[1] = {n};
    SJ_TRY(sj__onnx_fold_alloc(L, out, in[0].dtype, 1, dims));
    for (int64_t i = 0; i < n; i++) out->e[i] = (sj_onnx_sym){s + i * d, 0};
    return SJ_OK;
}

/* ---- maps ---- */

/* Shape and Size read only the input's (static or symbolic) shape. */
static sj_status input_shape(sj_onnx_loader *L, int *rank, int64_t *dims, int64_t *factor) {
    const char *nm = sj__onnx_in_name(L, 0);
    const sj_onnx_val *v = nm ? sj__onnx_lookup(L, nm) : NULL;
    if (!v) return sj__onnx_node_fail(L, SJ_E_PARSE, "input 0 is missing or undefined");
    if (v->v != SJ_NO_VALUE || v->cl != SJ_NO_VALUE) {
        sj_shape s = v->cl_shape; /* channels last: the shape ONNX gives it */
        if (v->cl == SJ_NO_VALUE) {
            sj_value_desc d;
            SJ_TRY(sj_graph_value_desc(L->g, v->v, &d));
            s = d.shape;
        }
        *rank = s.rank;
        for (int i = 0; i < s.rank; i++) {
            factor[i] = sj_dim_factor(s.dims[i]);
            dims[i] = factor[i] ? sj_dim_offset(s.dims[i]) : s.dims[i];
        }
        return SJ_OK;
    }
    if (!v->has_const && !v->has_sym)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "input '%s' has no shape shapejit knows", nm);
    *rank = v->c.rank;
    for (int i = 0; i < v->c.rank; i++) factor[i] = 0, dims[i] = v->c.dims[i];
    return SJ_OK;
}

static sj_status fold_shape(sj_onnx_loader *L, bool size, sj_onnx_fold *out) {
    int rank = 0;
    int64_t dims[SJ_ONNX_MAX_RANK];
    int64_t factor[SJ_ONNX_MAX_RANK];
    SJ_TRY(input_shape(L, &rank, dims, factor));
    if (size) {
        sj_onnx_sym p = {1, 0};
        int n_sym = 0;
        for (int i = 0; i < rank; i++) {
            if (factor[i]) n_sym++;
            if (factor[i] && dims[i])
                return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                         "cannot fold Size: axis %d has a constant part beside %s", i,
                                         sj__onnx_sym_name(L));
            p.c *= factor[i] ? factor[i] : dims[i];
        }
        if (n_sym > 1)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                     "cannot fold Size: the element count grows with %s^%d", sj__onnx_sym_name(L),
                                     n_sym);
        if (n_sym) p = (sj_onnx_sym){0, p.c};
        SJ_TRY(sj__onnx_fold_alloc(L, out, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0, NULL));
        out->e[0] = p;
        return SJ_OK;
    }
    int64_t start, end;
    SJ_TRY(sj__onnx_attr_int(L, "start", 0, &start));
    SJ_TRY(sj__onnx_attr_int(L, "end", rank, &end));
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = start < 0 ? 0 : start > rank ? rank : start;
    end = end < start ? start : end > rank ? rank : end;
    int64_t n = end - start;
    SJ_TRY(sj__onnx_fold_alloc(L, out, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, &n));
    for (int64_t i = 0; i < n; i++)
        out->e[i] = (sj_onnx_sym){dims[start + i], factor[start + i]};
    return SJ_OK;
}

/* Shape and Size are always known at load time, up to the symbolic dim:
 * they need no fold, their maps define known values. */
static sj_status map_shape(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    sj_onnx_fold out = {0};
    SJ_TRY(fold_shape(L, false, &out));
    return sj__onnx_fold_put(L, &out);
}

static sj_status map_size(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    sj_onnx_fold out = {0};
    SJ_TRY(fold_shape(L, true, &out));
    return sj__onnx_fold_put(L, &out);
}

/* A scalar input known at load time (a value in N allowed). */
static sj_status in_scalar(sj_onnx_loader *L, int i, const char *what, sj_onnx_sym *out,
                           bool *is_float, double *fval) {
    sj_onnx_val *v;
    SJ_TRY(sj__onnx_in_val(L, i, &v));
    if (!(v->has_const || v->has_sym) || v->c.numel != 1)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                 "%s '%s' is not a scalar known when the model loads (it is "
                                 "computed from tensor data)",
                                 what, v->name);
    *is_float = v->c.f != NULL;
    *fval = v->c.f ? (double)v->c.f[0] : 0;
    *out = v->c.f ? (sj_onnx_sym){0, 0} : sj__onnx_sym_at(v, 0);
    if (v->c.f) *fval = v->c.f[0];
    return SJ_OK;
}

/* Range(start, limit, delta): delta constant, start a constant or (an
 * integer range) k * N + c (a decode step's positions after N cached
 * tokens), the count a constant or an affine form of the symbolic dim
 * (positions 0..N-1 and the like). */
static sj_status map_range(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    /* Set by in_scalar on success; initialised for the compiler, which at
     * -O3 cannot see that every path past a failure returns. */
    sj_onnx_sym s = {0, 0}, l = {0, 0}, d = {0, 0};
    bool fs = false, fl = false, fd = false;
    double vs = 0, vl = 0, vd = 0;
    SJ_TRY(in_scalar(L, 0, "start", &s, &fs, &vs));
    SJ_TRY(in_scalar(L, 1, "limit", &l, &fl, &vl));
    SJ_TRY(in_scalar(L, 2, "delta", &d, &fd, &vd));
    sj_onnx_val *sv;
    SJ_TRY(sj__onnx_in_val(L, 0, &sv));
    sj_dtype dt;
    SJ_TRY(sj__onnx_to_dtype(L, sv->c.dtype, "a range of", &dt));
    if (d.n || (s.n && (fs || fl || fd)))
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                 "delta must be a constant, and a start that depends on the "
                                 "symbolic dim needs an integer range");
    int64_t count;
    if (fs || fl || fd) {
        if (!fs || !fl || !fd || vd == 0)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "a float range needs constant bounds");
        double n = ceil((vl - vs) / vd);
        count = n < 1 ? 1 : (int64_t)n;
        if (n < 1)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "the range is empty (zero-size tensors "
                                     "are not supported)");
        s.c = 0;
    } else {
        if (d.c == 0) return sj__onnx_node_fail(L, SJ_E_SHAPE, "delta is 0");
        sj_onnx_sym span = {l.c - s.c, l.n - s.n};
        if (span.n == 0) {
            int64_t n = d.c > 0 ? (span.c + d.c - 1) / d.c : (-span.c - d.c - 1) / -d.c;
            if (n < 1)
                return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "the range is empty (zero-size "
                                         "tensors are not supported)");
            count = n;
        } else if (d.c == 1 && sj__onnx_sym_dim(span, &count)) {
            /* count is k * N + c */
        } else {
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                     "the range from %lld to %lld*%s%+lld step %lld has a length "
                                     "that is neither constant nor %s",
                                     (long long)s.c, (long long)l.n, sj_graph_symbol(L->g),
                                     (long long)l.c, (long long)d.c, sj_graph_symbol(L->g));
        }
        vs = (double)s.c;
        vd = (double)d.c;
    }
    sj_value y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_range_from_n(L->g, dt, vs, s.n, vd, count, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* ConstantOfShape over a shape with the symbolic dim (constant shapes fold). */
static sj_status map_const_of_shape(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    sj_onnx_val *sv;
    SJ_TRY(sj__onnx_in_val(L, 0, &sv));
    if (!(sv->has_const || sv->has_sym) || sv->c.f || sv->c.rank > 1 || sv->c.numel > SJ_MAX_RANK)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                 "the shape '%s' is not known when the model loads", sv->name);
    int64_t dims[SJ_MAX_RANK];
    for (int64_t k = 0; k < sv->c.numel; k++) {
        sj_onnx_sym x = sj__onnx_sym_at(sv, k);
        if (!sj__onnx_sym_dim(x, &dims[k]))
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                     "shape entry %lld is %lld*%s%+lld: a dim must be a constant "
                                     ">= 1 or k*N + c with k >= 1, c >= 0",
                                     (long long)k, (long long)x.n, sj_graph_symbol(L->g),
                                     (long long)x.c);
    }
    int32_t odt;
    double value;
    SJ_TRY(fill_value(L, &odt, &value));
    sj_dtype dt;
    SJ_TRY(sj__onnx_to_dtype(L, odt, "a value of", &dt));
    sj_value y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_fill(L->g, dt, value, (int)sv->c.numel, dims, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* Constant: its one attribute (value, value_float(s), value_int(s)) as a
 * value known at load time. */
static sj_status map_constant(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    const Onnx__NodeProto *n = L->node;
    if (n->n_attribute != 1)
        return sj__onnx_node_fail(L, SJ_E_PARSE, "needs exactly one attribute, has %zu",
                                 n->n_attribute);
    const Onnx__AttributeProto *a = n->attribute[0];
    const char *an = a->name ? a->name : "";
    sj_onnx_val *o;
    SJ_TRY(sj__onnx_define(L, n->output[0], &o));
    sj_onnx_tensor *c = &o->c;
    memset(c, 0, sizeof *c);
    if (!strcmp(an, "value") && sj__onnx_attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)) {
        bool present;
        SJ_TRY(sj__onnx_attr_tensor(L, "value", "Constant value", c, &present));
        o->has_const = true;
        return SJ_OK;
    }
    bool is_float = !strcmp(an, "value_float") || !strcmp(an, "value_floats");
    bool is_int = !strcmp(an, "value_int") || !strcmp(an, "value_ints");
    bool list = !strcmp(an, "value_floats") || !strcmp(an, "value_ints");
    if (!is_float && !is_int)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "attribute '%s' is not supported", an);
    size_t count = list ? (is_float ? a->n_floats : a->n_ints) : 1;
    c->dtype = is_float ? ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT : ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    c->rank = list ? 1 : 0;
    c->dims[0] = (int64_t)count;
    c->numel = (int64_t)count;
    void *data = sj_alloc(L->ctx, count * (is_float ? sizeof(float) : sizeof(int64_t)));
    if (!data) return sj_fail(L->ctx, SJ_E_NOMEM, "out of memory");
    if (is_float) {
        c->f = data;
        if (list)
            memcpy(c->f, a->floats, count * sizeof(float));
        else
            c->f[0] = a->f;
    } else {
        c->i = data;
        if (list)
            memcpy(c->i, a->ints, count * sizeof(int64_t));
        else
            c->i[0] = a->i;
    }
    o->has_const = true;
    return SJ_OK;
}

const sj_onnx_op sj__onnx_ops_shape[] = {
    {"Shape", 1, 1, 1, 1, NULL, map_shape, SJ_OP_COUNT_, 0},
    {"Size", 1, 1, 1, 1, NULL, map_size, SJ_OP_COUNT_, 0},
    {"Constant", 0, 0, 1, 1, NULL, map_constant, SJ_OP_COUNT_, 0},
    {"Range", 3, 3, 1, 1, fold_range, map_range, SJ_OP_RANGE, 0},
    {"ConstantOfShape", 1, 1, 1, 1, fold_const_of_shape, map_const_of_shape, SJ_OP_FILL, 0},
};
const size_t sj__onnx_ops_shape_n = sizeof sj__onnx_ops_shape / sizeof sj__onnx_ops_shape[0];
