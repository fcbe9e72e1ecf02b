/* ONNX ops on int64, int32 and bool graph values (and float ones where the
 * op is typed): casts, comparisons, logic, Where, Gather (embedding
 * lookups), Range and ConstantOfShape over the symbolic dim. Values known
 * at load time never get here (onnx_fold.c folds them). */
#include "formats/onnx/onnx_loader.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef const Onnx__NodeProto node_t;

static const char *in_name(const sj_onnx_loader *L, int i) {
    node_t *n = L->node;
    return i < (int)n->n_input && n->input[i] && n->input[i][0] ? n->input[i] : NULL;
}

static int n_inputs(const sj_onnx_loader *L) {
    int n = (int)L->node->n_input;
    while (n > 0 && !in_name(L, n - 1)) n--;
    return n;
}

static sj_status in_lookup(sj_onnx_loader *L, int i, sj_onnx_val **out) {
    const char *nm = in_name(L, i);
    *out = nm ? sj__onnx_lookup(L, nm) : NULL;
    if (!nm) return sj__onnx_node_fail(L, SJ_E_PARSE, "input %d is missing", i);
    if (!*out)
        return sj__onnx_node_fail(L, SJ_E_PARSE, "input '%s' is not defined (no graph input, "
                                 "initialiser or earlier node produces it)", nm);
    return SJ_OK;
}

/* Input i as a graph value of any dtype (constants become params). */
static sj_status in_value(sj_onnx_loader *L, int i, sj_value *out) {
    sj_onnx_val *v;
    SJ_TRY(in_lookup(L, i, &v));
    return sj__onnx_node_prefix(L, sj__onnx_as_value(L, v, out));
}

static sj_dtype dtype_of(sj_onnx_loader *L, sj_value v) {
    sj_value_desc d;
    sj_graph_value_desc(L->g, v, &d);
    return d.dtype;
}

static sj_status check_io(sj_onnx_loader *L, int min, int max) {
    int n = n_inputs(L);
    if (n < min || n > max)
        return sj__onnx_node_fail(L, SJ_E_PARSE, "has %d inputs, expected %d to %d", n, min, max);
    node_t *node = L->node;
    if (node->n_output < 1 || !node->output[0] || !node->output[0][0])
        return sj__onnx_node_fail(L, SJ_E_PARSE, "has no output");
    for (size_t i = 1; i < node->n_output; i++)
        if (node->output[i] && node->output[i][0])
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "output %zu ('%s') is not supported", i,
                                     node->output[i]);
    return SJ_OK;
}

static int64_t attr_i(const sj_onnx_loader *L, const char *name, int64_t def) {
    const Onnx__AttributeProto *a = sj__onnx_node_attr(L, name);
    return a ? a->i : def;
}

static sj_status onnx_to_dtype(sj_onnx_loader *L, int64_t onnx, const char *what, sj_dtype *out) {
    if (onnx >= 0 && onnx <= INT32_MAX && sj__onnx_dtype_to_sj((int32_t)onnx, out)) return SJ_OK;
    return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                             "%s %s is not supported (float32, int64, int32 and bool are)", what,
                             sj__onnx_dtype_name((int32_t)onnx));
}

/* ---- the mappers ---- */

static sj_status map_cast(sj_onnx_loader *L, bool like) {
    SJ_TRY(check_io(L, like ? 2 : 1, like ? 2 : 1));
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_value(L, 0, &x));
    sj_dtype to;
    if (like) {
        sj_onnx_val *t;
        SJ_TRY(in_lookup(L, 1, &t));
        int32_t od = t->v != SJ_NO_VALUE ? -1 : t->c.dtype;
        if (t->v != SJ_NO_VALUE) to = dtype_of(L, t->v);
        else SJ_TRY(onnx_to_dtype(L, od, "target_type", &to));
    } else {
        if (!sj__onnx_node_attr(L, "to")) return sj__onnx_node_fail(L, SJ_E_PARSE, "needs the attribute 'to'");
        SJ_TRY(onnx_to_dtype(L, attr_i(L, "to", 0), "cast to", &to));
    }
    if (to == dtype_of(L, x)) {
        sj_onnx_val *o;
        SJ_TRY(sj__onnx_define(L, L->node->output[0], &o));
        o->v = x;
        return SJ_OK;
    }
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_cast(L->g, x, to, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

static sj_status map_binary_typed(sj_onnx_loader *L, sj_op op) {
    SJ_TRY(check_io(L, 2, 2));
    sj_value a, b, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_value(L, 0, &a));
    SJ_TRY(in_value(L, 1, &b));
    if (op == SJ_OP_MOD) {
        bool is_float = dtype_of(L, a) == SJ_F32;
        int64_t fmod_attr = attr_i(L, "fmod", 0);
        if (is_float && !fmod_attr)
            return sj__onnx_node_fail(L, SJ_E_PARSE, "float Mod needs fmod=1");
        if (!is_float && fmod_attr)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                     "integer Mod with fmod=1 (sign of the dividend) is not "
                                     "supported; fmod=0 is");
    }
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_binary(L->g, op, a, b, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

static sj_status map_unary_typed(sj_onnx_loader *L, sj_op op) {
    SJ_TRY(check_io(L, 1, 1));
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_value(L, 0, &x));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_unary(L->g, op, x, &y)));
    if (op == SJ_OP_ISINF) {
        /* detect_negative / detect_positive = 0: and with the other sign */
        bool neg = attr_i(L, "detect_negative", 1) != 0, pos = attr_i(L, "detect_positive", 1) != 0;
        if (!neg || !pos) {
            float zero = 0;
            char name[64];
            snprintf(name, sizeof name, "onnx_const_%d", L->n_synth++);
            sj_value z, side;
            SJ_TRY(sj__onnx_node_prefix(L, sj_graph_param(L->g, name, 0, NULL, &zero, &z)));
            SJ_TRY(sj__onnx_node_prefix(L, sj_graph_binary(L->g, pos ? SJ_OP_GREATER : SJ_OP_LESS, x, z, &side)));
            if (!neg && !pos) SJ_TRY(sj__onnx_node_prefix(L, sj_graph_binary(L->g, SJ_OP_XOR, y, y, &y)));
            else SJ_TRY(sj__onnx_node_prefix(L, sj_graph_binary(L->g, SJ_OP_AND, y, side, &y)));
        }
    }
    return sj__onnx_def_out(L, 0, y, first);
}

static sj_status map_where(sj_onnx_loader *L) {
    SJ_TRY(check_io(L, 3, 3));
    sj_value c, a, b, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_value(L, 0, &c));
    SJ_TRY(in_value(L, 1, &a));
    SJ_TRY(in_value(L, 2, &b));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_where(L->g, c, a, b, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

static sj_status map_gather(sj_onnx_loader *L) {
    SJ_TRY(check_io(L, 2, 2));
    sj_value d, ix, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_value(L, 0, &d));
    SJ_TRY(in_value(L, 1, &ix));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_gather(L->g, d, ix, (int)attr_i(L, "axis", 0), &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* GatherND with batch_dims 0 on data whose leading dims (all but the last
 * one indexed) have size 1, as exporters write mask lookups at batch 1:
 * every valid index there is 0, so it is a Gather of the last indexed
 * axis by the last index column. */
static sj_status map_gather_nd(sj_onnx_loader *L) {
    SJ_TRY(check_io(L, 2, 2));
    if (attr_i(L, "batch_dims", 0) != 0)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "batch_dims other than 0 is not supported");
    sj_value d, ix, col, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_value(L, 0, &d));
    SJ_TRY(in_value(L, 1, &ix));
    sj_value_desc dd, id;
    SJ_TRY(sj_graph_value_desc(L->g, d, &dd));
    SJ_TRY(sj_graph_value_desc(L->g, ix, &id));
    if (id.shape.rank < 1) return sj__onnx_node_fail(L, SJ_E_SHAPE, "indices have rank 0");
    int64_t k = id.shape.dims[id.shape.rank - 1];
    if (k == SJ_DIM_SYM || k < 1 || k > dd.shape.rank)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "index tuples of length %lld for data of rank %d",
                                 (long long)k, dd.shape.rank);
    for (int i = 0; i < k - 1; i++)
        if (dd.shape.dims[i] != 1)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                     "GatherND is supported where the data's leading indexed dims "
                                     "have size 1 (batch 1); dim %d is not",
                                     i);
    /* data without its leading 1-dims, and the last index column */
    int64_t dims[SJ_MAX_RANK];
    int rank = 0;
    for (int i = (int)k - 1; i < dd.shape.rank; i++) dims[rank++] = dd.shape.dims[i];
    sj_value flat;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(L->g, d, rank, dims, &flat)));
    int64_t last = k - 1;
    char name[64];
    snprintf(name, sizeof name, "onnx_const_%d", L->n_synth++);
    sj_value lastv;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_param_typed(L->g, name, SJ_I64, 0, NULL, &last, &lastv)));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_gather(L->g, ix, lastv, id.shape.rank - 1, &col)));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_gather(L->g, flat, col, 0, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* A scalar input known at load time (a value in N allowed). */
static sj_status in_scalar(sj_onnx_loader *L, int i, const char *what, sj_onnx_sym *out,
                           bool *is_float, double *fval) {
    sj_onnx_val *v;
    SJ_TRY(in_lookup(L, i, &v));
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

/* Range(start, limit, delta): start and delta constants, the count a
 * constant or exactly the symbolic dim (positions 0..N-1 and the like). */
static sj_status map_range(sj_onnx_loader *L) {
    SJ_TRY(check_io(L, 3, 3));
    sj_onnx_sym s, l, d;
    bool fs, fl, fd;
    double vs, vl, vd;
    SJ_TRY(in_scalar(L, 0, "start", &s, &fs, &vs));
    SJ_TRY(in_scalar(L, 1, "limit", &l, &fl, &vl));
    SJ_TRY(in_scalar(L, 2, "delta", &d, &fd, &vd));
    sj_onnx_val *sv;
    SJ_TRY(in_lookup(L, 0, &sv));
    sj_dtype dt;
    SJ_TRY(onnx_to_dtype(L, sv->c.dtype, "a range of", &dt));
    if (s.n || d.n)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                 "start and delta must be constants (only the limit may depend "
                                 "on the symbolic dim)");
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
        sj_onnx_sym span = {l.c - s.c, l.n};
        if (span.n == 0) {
            int64_t n = d.c > 0 ? (span.c + d.c - 1) / d.c : (-span.c - d.c - 1) / -d.c;
            if (n < 1)
                return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "the range is empty (zero-size "
                                         "tensors are not supported)");
            count = n;
        } else if (span.n == 1 && span.c == 0 && d.c == 1) {
            count = SJ_DIM_SYM;
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
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_range(L->g, dt, vs, vd, count, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* ConstantOfShape over a shape with the symbolic dim (constant shapes fold). */
static sj_status map_const_of_shape(sj_onnx_loader *L) {
    SJ_TRY(check_io(L, 1, 1));
    sj_onnx_val *sv;
    SJ_TRY(in_lookup(L, 0, &sv));
    if (!(sv->has_const || sv->has_sym) || sv->c.f || sv->c.rank > 1 || sv->c.numel > SJ_MAX_RANK)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                 "the shape '%s' is not known when the model loads", sv->name);
    int64_t dims[SJ_MAX_RANK];
    for (int64_t k = 0; k < sv->c.numel; k++) {
        sj_onnx_sym x = sj__onnx_sym_at(sv, k);
        if (x.n == 1 && x.c == 0) dims[k] = SJ_DIM_SYM;
        else if (!x.n && x.c >= 1) dims[k] = x.c;
        else
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                     "shape entry %lld is %lld*%s%+lld: a dim must be >= 1 and "
                                     "constant or the symbolic dim",
                                     (long long)k, (long long)x.n, sj_graph_symbol(L->g),
                                     (long long)x.c);
    }
    int32_t odt = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    double value = 0;
    const Onnx__AttributeProto *a = sj__onnx_node_attr(L, "value");
    if (a && a->t) {
        sj_onnx_tensor t;
        char what[64];
        snprintf(what, sizeof what, "%s: node #%d: value", L->file, L->node_index);
        SJ_TRY(sj__onnx_tensor_decode(L->ctx, a->t, what, &L->ext, &t));
        odt = t.dtype;
        value = t.numel < 1 ? 0 : t.f ? (double)t.f[0] : (double)t.i[0];
        sj__onnx_tensor_release(L->ctx, &t);
    }
    sj_dtype dt;
    SJ_TRY(onnx_to_dtype(L, odt, "a value of", &dt));
    sj_value y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_fill(L->g, dt, value, (int)sv->c.numel, dims, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* Pow with an integer base or exponent (ONNX lets the two differ): computed
 * in float32 and converted to the base's type. */
static sj_status map_pow_typed(sj_onnx_loader *L, bool *done) {
    *done = false;
    if (n_inputs(L) != 2) return SJ_OK;
    sj_onnx_val *av, *bv;
    SJ_TRY(in_lookup(L, 0, &av));
    SJ_TRY(in_lookup(L, 1, &bv));
    sj_value a, b, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_value(L, 0, &a));
    SJ_TRY(in_value(L, 1, &b));
    sj_dtype ta = dtype_of(L, a), tb = dtype_of(L, b);
    if (ta == SJ_F32 && tb == SJ_F32) return SJ_OK; /* the float mapper's */
    *done = true;
    SJ_TRY(check_io(L, 2, 2));
    if (ta == SJ_BOOL || tb == SJ_BOOL)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "Pow of bool values");
    if (ta != SJ_F32) SJ_TRY(sj__onnx_node_prefix(L, sj_graph_cast(L->g, a, SJ_F32, &a)));
    if (tb != SJ_F32) SJ_TRY(sj__onnx_node_prefix(L, sj_graph_cast(L->g, b, SJ_F32, &b)));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_binary(L->g, SJ_OP_POW, a, b, &y)));
    if (ta != SJ_F32) SJ_TRY(sj__onnx_node_prefix(L, sj_graph_cast(L->g, y, ta, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

sj_status sj__onnx_map_typed(sj_onnx_loader *L, bool *done) {
    static const struct {
        const char *name;
        sj_op op;
    } binaries[] = {{"Equal", SJ_OP_EQUAL},     {"Less", SJ_OP_LESS},
                    {"LessOrEqual", SJ_OP_LESS_EQUAL}, {"Greater", SJ_OP_GREATER},
                    {"GreaterOrEqual", SJ_OP_GREATER_EQUAL}, {"And", SJ_OP_AND},
                    {"Or", SJ_OP_OR},           {"Xor", SJ_OP_XOR},
                    {"Mod", SJ_OP_MOD}},
      unaries[] = {{"Not", SJ_OP_NOT}, {"IsNaN", SJ_OP_ISNAN}, {"IsInf", SJ_OP_ISINF}};
    const char *op = L->node->op_type;
    if (!strcmp(op, "Pow")) return map_pow_typed(L, done);
    *done = true;
    for (size_t i = 0; i < sizeof binaries / sizeof binaries[0]; i++)
        if (!strcmp(op, binaries[i].name)) return map_binary_typed(L, binaries[i].op);
    for (size_t i = 0; i < sizeof unaries / sizeof unaries[0]; i++)
        if (!strcmp(op, unaries[i].name)) return map_unary_typed(L, unaries[i].op);
    if (!strcmp(op, "Cast")) return map_cast(L, false);
    if (!strcmp(op, "CastLike")) return map_cast(L, true);
    if (!strcmp(op, "Where")) return map_where(L);
    if (!strcmp(op, "Gather")) return map_gather(L);
    if (!strcmp(op, "GatherND")) return map_gather_nd(L);
    if (!strcmp(op, "Range")) return map_range(L);
    if (!strcmp(op, "ConstantOfShape")) return map_const_of_shape(L);
    *done = false;
    return SJ_OK;
}
