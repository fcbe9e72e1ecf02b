/* ONNX operators onto the graph builder. Each mapper reads the node's
 * inputs and attributes (with the defaults of the opset in use) and defines
 * the node's outputs; anything it cannot express exactly is an error. */
#include "formats/onnx/onnx_loader.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef const Onnx__NodeProto node_t;

/* ---- attributes ---- */

/* IR version 1 models may leave `type` unset; fall back to which field is. */
static bool attr_is(const Onnx__AttributeProto *a, Onnx__AttributeProto__AttributeType t) {
    if (a->has_type) return a->type == t;
    switch (t) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: return a->has_i;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: return a->has_f;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS: return a->n_ints > 0;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS: return a->n_floats > 0;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: return a->t != NULL;
    default: return false;
    }
}

static sj_status attr_int(sj_onnx_loader *L, const char *name, int64_t def, int64_t *out) {
    const Onnx__AttributeProto *a = sj__onnx_node_attr(L, name);
    *out = def;
    if (!a) return SJ_OK;
    if (!attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT))
        return sj__onnx_node_fail(L, SJ_E_PARSE, "attribute '%s' is not an int", name);
    *out = a->i;
    return SJ_OK;
}

static sj_status attr_float(sj_onnx_loader *L, const char *name, float def, float *out) {
    const Onnx__AttributeProto *a = sj__onnx_node_attr(L, name);
    *out = def;
    if (!a) return SJ_OK;
    if (!attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT))
        return sj__onnx_node_fail(L, SJ_E_PARSE, "attribute '%s' is not a float", name);
    *out = a->f;
    return SJ_OK;
}

/* *present is false when the attribute is absent. */
static sj_status attr_ints(sj_onnx_loader *L, const char *name, const int64_t **vals, size_t *n,
                           bool *present) {
    const Onnx__AttributeProto *a = sj__onnx_node_attr(L, name);
    *vals = NULL;
    *n = 0;
    *present = a != NULL;
    if (!a) return SJ_OK;
    if (!attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS))
        return sj__onnx_node_fail(L, SJ_E_PARSE, "attribute '%s' is not a list of ints", name);
    *vals = a->ints;
    *n = a->n_ints;
    return SJ_OK;
}

/* ---- inputs and outputs ---- */

static const char *input_name(node_t *n, int i) {
    return i < (int)n->n_input && n->input[i] && n->input[i][0] ? n->input[i] : NULL;
}

static sj_status in_val(sj_onnx_loader *L, int i, sj_onnx_val **out) {
    const char *name = input_name(L->node, i);
    if (!name) return sj__onnx_node_fail(L, SJ_E_PARSE, "input %d is missing", i);
    *out = sj__onnx_lookup(L, name);
    if (!*out)
        return sj__onnx_node_fail(L, SJ_E_PARSE,
                                 "input '%s' is not defined (no graph input, initialiser or "
                                 "earlier node produces it)",
                                 name);
    return SJ_OK;
}

static sj_status in_float(sj_onnx_loader *L, int i, sj_value *out) {
    sj_onnx_val *v;
    SJ_TRY(in_val(L, i, &v));
    return sj__onnx_node_prefix(L, sj__onnx_as_value(L, v, out));
}

/* Optional float input: SJ_NO_VALUE when absent. */
static sj_status in_float_opt(sj_onnx_loader *L, int i, sj_value *out) {
    *out = SJ_NO_VALUE;
    return input_name(L->node, i) ? in_float(L, i, out) : SJ_OK;
}

/* A constant int64 input (shape, axes). */
static sj_status in_ints(sj_onnx_loader *L, int i, const char *what, const sj_onnx_tensor **out) {
    sj_onnx_val *v;
    SJ_TRY(in_val(L, i, &v));
    if (!v->has_const)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                 "%s input '%s' is not a constant (it is computed at run time); "
                                 "shapejit needs it known when the model loads",
                                 what, v->name);
    if (v->c.dtype != ONNX__TENSOR_PROTO__DATA_TYPE__INT64)
        return sj__onnx_node_fail(L, SJ_E_PARSE, "%s input '%s' has dtype %s, not INT64", what,
                                 v->name, sj__onnx_dtype_name(v->c.dtype));
    if (v->c.rank > 1)
        return sj__onnx_node_fail(L, SJ_E_PARSE, "%s input '%s' has rank %d, not 1", what, v->name,
                                 v->c.rank);
    *out = &v->c;
    return SJ_OK;
}

static sj_status shape_of(sj_onnx_loader *L, sj_value v, sj_shape *out) {
    sj_value_desc d;
    SJ_TRY(sj_graph_value_desc(L->g, v, &d));
    *out = d.shape;
    return SJ_OK;
}

/* Output i is the same thing as src (Identity, reductions with nothing to do). */
static sj_status alias_out(sj_onnx_loader *L, int i, const sj_onnx_val *src) {
    const char *name = i < (int)L->node->n_output ? L->node->output[i] : NULL;
    if (!name || !name[0]) return SJ_OK;
    sj_onnx_val *o;
    SJ_TRY(sj__onnx_define(L, name, &o));
    o->v = src->v;
    o->runtime_dtype = src->runtime_dtype;
    if (src->has_const) {
        size_t esize = src->c.f ? sizeof(float) : sizeof(int64_t);
        void *data = sj_alloc(L->ctx, (size_t)src->c.numel * esize);
        if (!data) return sj_fail(L->ctx, SJ_E_NOMEM, "out of memory");
        if (src->c.numel)
            memcpy(data, src->c.f ? (const void *)src->c.f : (const void *)src->c.i,
                   (size_t)src->c.numel * esize);
        o->c = src->c;
        o->c.map = NULL; /* the copy is o's own */
        o->c.f = src->c.f ? data : NULL;
        o->c.i = src->c.f ? NULL : data;
        o->has_const = true;
    }
    return SJ_OK;
}

/* Output 0 is y, or the node's input 0 itself when the mapping left x as
 * it was (a Clip without bounds, a Tile by ones): aliased, so a constant
 * input stays a constant. */
static sj_status def_or_alias(sj_onnx_loader *L, sj_value x, sj_value y, sj_value first) {
    if (y != x) return sj__onnx_def_out(L, 0, y, first);
    sj_onnx_val *xv;
    SJ_TRY(in_val(L, 0, &xv));
    return alias_out(L, 0, xv);
}

/* A scalar float constant the importer needs (an epsilon), under a name no
 * ONNX value uses. */
static sj_status scalar_const(sj_onnx_loader *L, float x, sj_value *out) {
    char name[64];
    do snprintf(name, sizeof name, "onnx_const_%d", L->n_synth++);
    while (sj__onnx_lookup(L, name) || sj_graph_find_input(L->g, name) >= 0);
    return sj__onnx_node_prefix(L, sj_graph_param(L->g, name, 0, NULL, &x, out));
}

static sj_status check_inputs(sj_onnx_loader *L, int min, int max) {
    int n = (int)L->node->n_input;
    while (n > 0 && !input_name(L->node, n - 1)) n--; /* trailing optional inputs left empty */
    if (n < min || n > max) {
        if (min == max)
            return sj__onnx_node_fail(L, SJ_E_PARSE, "has %d inputs, expected %d", n, min);
        return sj__onnx_node_fail(L, SJ_E_PARSE, "has %d inputs, expected %d to %d", n, min, max);
    }
    return SJ_OK;
}

/* Only the first `n` outputs are produced; more named outputs are unsupported. */
static sj_status check_outputs(sj_onnx_loader *L, int n) {
    node_t *node = L->node;
    if (node->n_output < 1 || !node->output[0] || !node->output[0][0])
        return sj__onnx_node_fail(L, SJ_E_PARSE, "has no output");
    for (size_t i = (size_t)n; i < node->n_output; i++)
        if (node->output[i] && node->output[i][0])
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "output %zu ('%s') is not supported", i,
                                     node->output[i]);
    return SJ_OK;
}

static sj_status int_axes(sj_onnx_loader *L, const int64_t *v, size_t n, int *out) {
    if (n > SJ_MAX_RANK)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "%zu axes given; tensors have rank at most %d", n,
                                 SJ_MAX_RANK);
    for (size_t i = 0; i < n; i++) {
        if (v[i] < -SJ_MAX_RANK || v[i] >= SJ_MAX_RANK)
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis %lld is out of range", (long long)v[i]);
        out[i] = (int)v[i];
    }
    return SJ_OK;
}

/* ---- elementwise ---- */

typedef struct op_entry op_entry;
typedef sj_status (*map_fn)(sj_onnx_loader *L, const op_entry *e);
struct op_entry {
    const char *name;
    map_fn fn;
    sj_op op;
};

static sj_status map_unary(sj_onnx_loader *L, const op_entry *e) {
    SJ_TRY(check_inputs(L, 1, 1));
    SJ_TRY(check_outputs(L, 1));
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &x));
    if (e->op == SJ_OP_LEAKY_RELU) {
        float alpha;
        SJ_TRY(attr_float(L, "alpha", 0.01f, &alpha));
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_leaky_relu(L->g, x, alpha, &y)));
    } else {
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_unary(L->g, e->op, x, &y)));
    }
    return sj__onnx_def_out(L, 0, y, first);
}

static sj_status map_binary(sj_onnx_loader *L, const op_entry *e) {
    SJ_TRY(check_inputs(L, 2, 2));
    SJ_TRY(check_outputs(L, 1));
    /* Before opset 7, broadcast=1 with `axis` aligned B at that axis of A
     * instead of at the end. */
    if (L->opset < 7 && sj__onnx_node_attr(L, "axis"))
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                 "legacy broadcasting with an 'axis' attribute (opset %lld) is not "
                                 "supported",
                                 (long long)L->opset);
    sj_value a, b, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &a));
    SJ_TRY(in_float(L, 1, &b));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_binary(L->g, e->op, a, b, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* Max and Min take any number of inputs: fold left. */
static sj_status map_variadic(sj_onnx_loader *L, const op_entry *e) {
    SJ_TRY(check_outputs(L, 1));
    int n = (int)L->node->n_input;
    if (n < 1) return sj__onnx_node_fail(L, SJ_E_PARSE, "has no inputs");
    sj_value acc, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &acc));
    for (int i = 1; i < n; i++) {
        sj_value b;
        SJ_TRY(in_float(L, i, &b));
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_binary(L->g, e->op, acc, b, &acc)));
    }
    return sj__onnx_def_out(L, 0, acc, first);
}

/* ---- contractions ---- */

static sj_status map_matmul(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_inputs(L, 2, 2));
    SJ_TRY(check_outputs(L, 1));
    sj_value a, b, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &a));
    SJ_TRY(in_float(L, 1, &b));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_matmul(L->g, a, b, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

static sj_status map_gemm(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_inputs(L, 2, 3));
    SJ_TRY(check_outputs(L, 1));
    float alpha, beta;
    int64_t ta, tb;
    SJ_TRY(attr_float(L, "alpha", 1.0f, &alpha));
    SJ_TRY(attr_float(L, "beta", 1.0f, &beta));
    SJ_TRY(attr_int(L, "transA", 0, &ta));
    SJ_TRY(attr_int(L, "transB", 0, &tb));
    /* The opset < 7 'broadcast' attribute is not read: without it C had to be
     * exactly [M, N], which broadcasting computes the same way. */
    sj_value a, b, c, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &a));
    SJ_TRY(in_float(L, 1, &b));
    SJ_TRY(in_float_opt(L, 2, &c));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_gemm(L->g, a, b, c, alpha, beta, ta != 0, tb != 0, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* ---- row ops ---- */

/* softmax / log-softmax over axes [axis, rank) spelled with reductions:
 * exact for any set of trailing axes, symbolic or not. */
static sj_status softmax_decomposed(sj_onnx_loader *L, sj_op op, sj_value x, int axis, int rank,
                                    sj_value *out) {
    int axes[SJ_MAX_RANK], n = 0;
    for (int i = axis; i < rank; i++) axes[n++] = i;
    sj_graph *g = L->g;
    sj_value m, d, ex, s, y;
    SJ_TRY(sj_graph_reduce(g, SJ_OP_REDUCE_MAX, x, n, axes, true, &m));
    SJ_TRY(sj_graph_binary(g, SJ_OP_SUB, x, m, &d));
    SJ_TRY(sj_graph_unary(g, SJ_OP_EXP, d, &ex));
    SJ_TRY(sj_graph_reduce(g, SJ_OP_REDUCE_SUM, ex, n, axes, true, &s));
    if (op == SJ_OP_SOFTMAX) {
        SJ_TRY(sj_graph_binary(g, SJ_OP_DIV, ex, s, &y));
    } else {
        sj_value ls;
        SJ_TRY(sj_graph_unary(g, SJ_OP_LOG, s, &ls));
        SJ_TRY(sj_graph_binary(g, SJ_OP_SUB, d, ls, &y));
    }
    *out = y;
    return SJ_OK;
}

/* Before opset 13, (Log)Softmax flattened x to 2-D at `axis` and normalised
 * each row: over all of axes [axis, rank) together. */
static sj_status softmax_coerced(sj_onnx_loader *L, sj_op op, sj_value x, const sj_shape *s,
                                 int axis, sj_value *out) {
    int rank = s->rank, n_big = 0, last_big = rank - 1;
    bool sym_inside = false;
    int64_t rows = 1;
    for (int i = axis; i < rank; i++) {
        if (s->dims[i] != 1) {
            n_big++;
            last_big = i;
        }
        if (s->dims[i] == SJ_DIM_SYM)
            sym_inside = true;
        else
            rows *= s->dims[i];
    }
    /* at most one axis of the row is longer than 1: normalising over it
     * alone is the same */
    if (n_big <= 1) return sj_graph_softmax(L->g, op, x, last_big, out);
    if (sym_inside) return softmax_decomposed(L, op, x, axis, rank, out);
    /* keep the leading axes as they are (the symbolic dim may be among them)
     * and flatten the row into one axis */
    int64_t flat[SJ_MAX_RANK];
    for (int i = 0; i < axis; i++) flat[i] = s->dims[i];
    flat[axis] = rows;
    sj_value r, y;
    SJ_TRY(sj_graph_reshape(L->g, x, axis + 1, flat, &r));
    SJ_TRY(sj_graph_softmax(L->g, op, r, axis, &y));
    return sj_graph_reshape(L->g, y, rank, s->dims, out);
}

static sj_status map_softmax(sj_onnx_loader *L, const op_entry *e) {
    SJ_TRY(check_inputs(L, 1, 1));
    SJ_TRY(check_outputs(L, 1));
    bool legacy = L->opset < 13;
    int64_t axis;
    SJ_TRY(attr_int(L, "axis", legacy ? 1 : -1, &axis));
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &x));
    sj_shape s;
    SJ_TRY(shape_of(L, x, &s));
    if (axis < -s.rank || axis >= (s.rank ? s.rank : 1))
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis %lld is out of range for rank %d",
                                 (long long)axis, s.rank);
    int ax = (int)(axis < 0 ? axis + s.rank : axis);
    if (legacy && s.rank > 0)
        SJ_TRY(sj__onnx_node_prefix(L, softmax_coerced(L, e->op, x, &s, ax, &y)));
    else
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_softmax(L->g, e->op, x, ax, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

static sj_status map_layernorm(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_inputs(L, 2, 3));
    SJ_TRY(check_outputs(L, 3));
    int64_t axis;
    float eps;
    SJ_TRY(attr_int(L, "axis", -1, &axis));
    SJ_TRY(attr_float(L, "epsilon", 1e-5f, &eps));
    sj_value x, scale, bias, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &x));
    SJ_TRY(in_float(L, 1, &scale));
    SJ_TRY(in_float_opt(L, 2, &bias));
    sj_shape s;
    SJ_TRY(shape_of(L, x, &s));
    if (axis < -s.rank || axis >= s.rank)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis %lld is out of range for rank %d",
                                 (long long)axis, s.rank);
    int ax = (int)(axis < 0 ? axis + s.rank : axis);
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_layernorm(L->g, x, scale, bias, ax, eps, &y)));
    SJ_TRY(sj__onnx_def_out(L, 0, y, first));

    /* optional outputs: Mean and InvStdDev over the normalised axes, kept */
    node_t *n = L->node;
    bool want_mean = n->n_output > 1 && n->output[1][0];
    bool want_inv = n->n_output > 2 && n->output[2][0];
    if (!want_mean && !want_inv) return SJ_OK;
    int axes[SJ_MAX_RANK], na = 0;
    for (int i = ax; i < s.rank; i++) axes[na++] = i;
    sj_graph *g = L->g;
    sj_value mean, d, sq, var, ep, ve, inv;
    first = sj_graph_num_values(g);
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(g, SJ_OP_REDUCE_MEAN, x, na, axes, true, &mean)));
    SJ_TRY(sj__onnx_def_out(L, 1, mean, first));
    if (!want_inv) return SJ_OK;
    SJ_TRY(scalar_const(L, eps, &ep));
    first = sj_graph_num_values(g);
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_binary(g, SJ_OP_SUB, x, mean, &d)));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_binary(g, SJ_OP_MUL, d, d, &sq)));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(g, SJ_OP_REDUCE_MEAN, sq, na, axes, true, &var)));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_binary(g, SJ_OP_ADD, var, ep, &ve)));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_unary(g, SJ_OP_RSQRT, ve, &inv)));
    return sj__onnx_def_out(L, 2, inv, first);
}

/* ---- reductions ---- */

/* The reduction axes of a Reduce* node (attribute or input); *all_noop is
 * true when there are none and noop_with_empty_axes asks for the identity. */
static sj_status reduce_axes(sj_onnx_loader *L, int *axes, int *n_axes, bool *keepdims,
                             bool *all_noop) {
    int64_t kd, noop;
    SJ_TRY(attr_int(L, "keepdims", 1, &kd));
    SJ_TRY(attr_int(L, "noop_with_empty_axes", 0, &noop));
    const int64_t *av = NULL;
    size_t an = 0;
    bool present;
    SJ_TRY(attr_ints(L, "axes", &av, &an, &present));
    if (input_name(L->node, 1)) {
        if (present)
            return sj__onnx_node_fail(L, SJ_E_PARSE, "axes given both as attribute and as input");
        const sj_onnx_tensor *t;
        SJ_TRY(in_ints(L, 1, "axes", &t));
        av = t->i;
        an = (size_t)t->numel;
    }
    *all_noop = an == 0 && noop;
    *keepdims = kd != 0;
    *n_axes = (int)an;
    return int_axes(L, av, an, axes);
}

static sj_status map_reduce(sj_onnx_loader *L, const op_entry *e) {
    SJ_TRY(check_inputs(L, 1, 2));
    SJ_TRY(check_outputs(L, 1));
    int axes[SJ_MAX_RANK], na = 0;
    bool keep = true, noop = false;
    SJ_TRY(reduce_axes(L, axes, &na, &keep, &noop));
    sj_onnx_val *xv;
    SJ_TRY(in_val(L, 0, &xv));
    if (noop) return alias_out(L, 0, xv);
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &x));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(L->g, e->op, x, na, axes, keep, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* ---- layout ---- */

static sj_status map_transpose(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_inputs(L, 1, 1));
    SJ_TRY(check_outputs(L, 1));
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &x));
    sj_shape s;
    SJ_TRY(shape_of(L, x, &s));
    const int64_t *pv;
    size_t pn;
    bool present;
    SJ_TRY(attr_ints(L, "perm", &pv, &pn, &present));
    int perm[SJ_MAX_RANK];
    if (present) {
        if ((int)pn != s.rank)
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "perm has %zu entries for rank %d", pn, s.rank);
        SJ_TRY(int_axes(L, pv, pn, perm));
    } else {
        for (int i = 0; i < s.rank; i++) perm[i] = s.rank - 1 - i;
    }
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_transpose(L->g, x, perm, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* Resolves ONNX Reshape's 0 (copy the input dim) and -1 (inferred). The
 * symbolic dim counts as an unknown factor: -1 stands for it when the input
 * has one more symbolic dim than the rest of the target. */
/* A target entry that is the symbolic dim itself (folded from a Shape chain). */
#define TARGET_SYM INT64_MIN

static sj_status reshape_dims(sj_onnx_loader *L, const sj_shape *in, const int64_t *t, int n,
                              bool allowzero, int64_t *out) {
    int infer = -1;
    for (int i = 0; i < n; i++) {
        if (t[i] == 0 && !allowzero) {
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
        } else if (t[i] == TARGET_SYM) {
            out[i] = SJ_DIM_SYM;
        } else if (t[i] < -1) {
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "shape entry %d is %lld", i, (long long)t[i]);
        } else {
            out[i] = t[i];
        }
    }
    if (infer < 0) return SJ_OK;
    int64_t in_const = 1, out_const = 1;
    int in_sym = 0, out_sym = 0;
    for (int i = 0; i < in->rank; i++) {
        if (in->dims[i] == SJ_DIM_SYM)
            in_sym++;
        else
            in_const *= in->dims[i];
    }
    for (int i = 0; i < n; i++) {
        if (out[i] == SJ_DIM_SYM)
            out_sym++;
        else if (i != infer && sj_mul_overflow_i64(out_const, out[i], &out_const))
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "shape is too large");
    }
    if (in_sym == out_sym + 1) {
        if (in_const != out_const)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                     "-1 would merge the symbolic dim with other dims (%lld "
                                     "elements per symbolic index in, %lld out)",
                                     (long long)in_const, (long long)out_const);
        out[infer] = SJ_DIM_SYM;
        return SJ_OK;
    }
    if (in_sym != out_sym || in_const % out_const != 0)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "cannot infer the -1 of the shape");
    out[infer] = in_const / out_const;
    return SJ_OK;
}

static sj_status map_reshape(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_outputs(L, 1));
    int64_t allowzero;
    SJ_TRY(attr_int(L, "allowzero", 0, &allowzero));
    const int64_t *tv;
    int64_t sym_target[SJ_MAX_RANK];
    size_t tn;
    bool present;
    SJ_TRY(attr_ints(L, "shape", &tv, &tn, &present)); /* opset 1-4 */
    if (present) {
        SJ_TRY(check_inputs(L, 1, 1));
    } else {
        SJ_TRY(check_inputs(L, 2, 2));
        sj_onnx_val *tvv;
        SJ_TRY(in_val(L, 1, &tvv));
        if (tvv->has_sym) { /* dims computed from the symbolic dim: each must be N or constant */
            if (tvv->c.numel > SJ_MAX_RANK)
                return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "target rank %lld exceeds %d",
                                         (long long)tvv->c.numel, SJ_MAX_RANK);
            for (int64_t k = 0; k < tvv->c.numel; k++) {
                sj_onnx_sym x = sj__onnx_sym_at(tvv, k);
                if (x.n == 1 && x.c == 0) sym_target[k] = TARGET_SYM;
                else if (x.n == 0) sym_target[k] = x.c;
                else
                    return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                             "shape entry %lld is %lld*%s%+lld: a dim must be "
                                             "constant or the symbolic dim itself",
                                             (long long)k, (long long)x.n, sj_graph_symbol(L->g),
                                             (long long)x.c);
            }
            tv = sym_target;
            tn = (size_t)tvv->c.numel;
        } else {
            const sj_onnx_tensor *t;
            SJ_TRY(in_ints(L, 1, "shape", &t));
            tv = t->i;
            tn = (size_t)t->numel;
        }
    }
    if (tn > SJ_MAX_RANK)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "target rank %zu exceeds %d", tn, SJ_MAX_RANK);
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &x));
    sj_shape s;
    SJ_TRY(shape_of(L, x, &s));
    int64_t dims[SJ_MAX_RANK];
    SJ_TRY(reshape_dims(L, &s, tv, (int)tn, allowzero != 0, dims));
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

/* [prod(dims[:axis]), prod(dims[axis:])]. The symbolic dim can only be one
 * of the two when every dim it would be merged with is 1: the graph's
 * reshape never merges it with others (padded buffers stay valid views). */
static sj_status map_flatten(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_inputs(L, 1, 1));
    SJ_TRY(check_outputs(L, 1));
    int64_t axis;
    SJ_TRY(attr_int(L, "axis", 1, &axis));
    sj_value x, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &x));
    sj_shape s;
    SJ_TRY(shape_of(L, x, &s));
    if (axis < -s.rank || axis > s.rank)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis %lld is out of range for rank %d",
                                 (long long)axis, s.rank);
    int ax = (int)(axis < 0 ? axis + s.rank : axis);
    int64_t out[2] = {1, 1};
    bool sym[2] = {false, false};
    for (int i = 0; i < s.rank; i++) {
        int side = i >= ax;
        if (s.dims[i] == SJ_DIM_SYM)
            sym[side] = true;
        else if (sj_mul_overflow_i64(out[side], s.dims[i], &out[side]))
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "the flattened size is too large");
    }
    for (int side = 0; side < 2; side++) {
        if (!sym[side]) continue;
        if (out[side] != 1) {
            char shape[96];
            sj_shape_format(&s, sj_graph_symbol(L->g), shape, sizeof shape);
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                     "flattening %s at axis %d would merge the symbolic dim with "
                                     "other dims into one; shapejit keeps the symbolic dim an axis "
                                     "of its own (padded buffers must stay valid views)",
                                     shape, ax);
        }
        out[side] = SJ_DIM_SYM;
    }
    return reshape_out(L, x, 2, out, first);
}

/* The axes of (Un)Squeeze: an attribute before opset 13, an input from
 * then on; accept whichever the node carries. *present is false when
 * neither is given. */
static sj_status squeeze_axes(sj_onnx_loader *L, const int64_t **av, size_t *an, bool *present) {
    SJ_TRY(attr_ints(L, "axes", av, an, present));
    if (!input_name(L->node, 1)) return SJ_OK;
    if (*present) return sj__onnx_node_fail(L, SJ_E_PARSE, "axes given both as attribute and as input");
    const sj_onnx_tensor *t;
    SJ_TRY(in_ints(L, 1, "axes", &t));
    *av = t->i;
    *an = (size_t)t->numel;
    *present = true;
    return SJ_OK;
}

/* Normalises axes against `rank`; each at most once. */
static sj_status norm_axes(sj_onnx_loader *L, const int64_t *av, size_t an, int rank, bool *is_axis) {
    for (int i = 0; i < rank; i++) is_axis[i] = false;
    for (size_t i = 0; i < an; i++) {
        if (av[i] < -rank || av[i] >= rank)
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis %lld is out of range for rank %d",
                                     (long long)av[i], rank);
        int a = (int)(av[i] < 0 ? av[i] + rank : av[i]);
        if (is_axis[a]) return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis %d is given twice", a);
        is_axis[a] = true;
    }
    return SJ_OK;
}

static sj_status map_squeeze(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_inputs(L, 1, 2));
    SJ_TRY(check_outputs(L, 1));
    const int64_t *av;
    size_t an;
    bool present;
    SJ_TRY(squeeze_axes(L, &av, &an, &present));
    sj_value x, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &x));
    sj_shape s;
    SJ_TRY(shape_of(L, x, &s));
    bool drop[SJ_MAX_RANK];
    if (present && an) {
        SJ_TRY(norm_axes(L, av, an, s.rank, drop));
        for (int i = 0; i < s.rank; i++) {
            if (!drop[i] || s.dims[i] == 1) continue;
            if (s.dims[i] == SJ_DIM_SYM)
                return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                         "axis %d is the symbolic dim, which is not always 1", i);
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

static sj_status map_unsqueeze(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_inputs(L, 1, 2));
    SJ_TRY(check_outputs(L, 1));
    const int64_t *av;
    size_t an;
    bool present;
    SJ_TRY(squeeze_axes(L, &av, &an, &present));
    if (!present || !an) return sj__onnx_node_fail(L, SJ_E_PARSE, "has no axes");
    sj_value x, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &x));
    sj_shape s;
    SJ_TRY(shape_of(L, x, &s));
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

/* Inference: the identity. Training (dropping at random) and the mask
 * output (a bool tensor) are outside what shapejit computes. */
static sj_status map_dropout(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_inputs(L, 1, 3));
    node_t *n = L->node;
    if (n->n_output > 1 && n->output[1] && n->output[1][0])
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                 "the mask output ('%s') is not supported: it is a bool tensor, "
                                 "and shapejit computes float32 only (use Dropout without it)",
                                 n->output[1]);
    SJ_TRY(check_outputs(L, 1));
    int64_t is_test;
    SJ_TRY(attr_int(L, "is_test", 1, &is_test)); /* opset < 7 */
    if (L->opset < 7 && !is_test)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                 "is_test=0 asks for training-mode dropout; only inference "
                                 "(identity) is supported");
    const char *mode = input_name(n, 2);
    if (mode) {
        sj_onnx_val *m;
        SJ_TRY(in_val(L, 2, &m));
        bool is_false = m->has_const && m->c.numel == 1 &&
                        (m->c.f ? m->c.f[0] == 0.0f : m->c.i[0] == 0);
        if (!is_false)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                     "training_mode input '%s' is not a constant false; only "
                                     "inference (identity) is supported",
                                     mode);
    }
    /* ratio (attribute or input 1) only matters in training */
    sj_onnx_val *x;
    SJ_TRY(in_val(L, 0, &x));
    return alias_out(L, 0, x);
}

static sj_status map_identity(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_inputs(L, 1, 1));
    SJ_TRY(check_outputs(L, 1));
    sj_onnx_val *x;
    SJ_TRY(in_val(L, 0, &x));
    return alias_out(L, 0, x);
}

static sj_status map_constant(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_inputs(L, 0, 0));
    SJ_TRY(check_outputs(L, 1));
    node_t *n = L->node;
    if (n->n_attribute != 1)
        return sj__onnx_node_fail(L, SJ_E_PARSE, "needs exactly one attribute, has %zu",
                                 n->n_attribute);
    const Onnx__AttributeProto *a = n->attribute[0];
    const char *an = a->name ? a->name : "";
    sj_onnx_val *o;
    SJ_TRY(sj__onnx_define(L, n->output[0], &o));
    sj_onnx_tensor *c = &o->c;
    memset(c, 0, sizeof *c);
    if (!strcmp(an, "value") && attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)) {
        if (!a->t) return sj__onnx_node_fail(L, SJ_E_PARSE, "attribute 'value' holds no tensor");
        char what[320];
        snprintf(what, sizeof what, "%s: node #%d: Constant value", L->file, L->node_index);
        SJ_TRY(sj__onnx_tensor_decode(L->ctx, a->t, what, &L->ext, c));
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

/* ---- realops: float ops spelled with the graph's ops ---- */

static sj_status bin(sj_onnx_loader *L, sj_op op, sj_value a, sj_value b, sj_value *out) {
    return sj__onnx_node_prefix(L, sj_graph_binary(L->g, op, a, b, out));
}
static sj_status un(sj_onnx_loader *L, sj_op op, sj_value a, sj_value *out) {
    return sj__onnx_node_prefix(L, sj_graph_unary(L->g, op, a, out));
}
/* x op c for a scalar constant c. */
static sj_status bin_c(sj_onnx_loader *L, sj_op op, sj_value a, float c, sj_value *out) {
    sj_value k;
    SJ_TRY(scalar_const(L, c, &k));
    return bin(L, op, a, k, out);
}

/* Sum and Mean of n inputs (broadcasting), folded left like the reference. */
static sj_status map_sum_mean(sj_onnx_loader *L, const op_entry *e) {
    SJ_TRY(check_outputs(L, 1));
    int n = (int)L->node->n_input;
    if (n < 1) return sj__onnx_node_fail(L, SJ_E_PARSE, "has no inputs");
    sj_value acc, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &acc));
    for (int i = 1; i < n; i++) {
        sj_value b;
        SJ_TRY(in_float(L, i, &b));
        SJ_TRY(bin(L, SJ_OP_ADD, acc, b, &acc));
    }
    if (e->op == SJ_OP_DIV && n > 1) SJ_TRY(bin_c(L, SJ_OP_DIV, acc, (float)n, &acc));
    if (acc < first) { /* one input: Sum and Mean are the identity */
        sj_onnx_val *x;
        SJ_TRY(in_val(L, 0, &x));
        return alias_out(L, 0, x);
    }
    return sj__onnx_def_out(L, 0, acc, first);
}

/* min(max(x, lo), hi): bounds are attributes before opset 11, optional
 * inputs (scalars, constant or computed) from then on. */
static sj_status map_clip(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_outputs(L, 1));
    sj_value x, lo = SJ_NO_VALUE, hi = SJ_NO_VALUE, y, first = sj_graph_num_values(L->g);
    if (L->opset < 11) {
        SJ_TRY(check_inputs(L, 1, 1));
        SJ_TRY(in_float(L, 0, &x));
        float fl, fh;
        SJ_TRY(attr_float(L, "min", -INFINITY, &fl));
        SJ_TRY(attr_float(L, "max", INFINITY, &fh));
        if (sj__onnx_node_attr(L, "min")) SJ_TRY(scalar_const(L, fl, &lo));
        if (sj__onnx_node_attr(L, "max")) SJ_TRY(scalar_const(L, fh, &hi));
    } else {
        SJ_TRY(check_inputs(L, 1, 3));
        SJ_TRY(in_float(L, 0, &x));
        SJ_TRY(in_float_opt(L, 1, &lo));
        SJ_TRY(in_float_opt(L, 2, &hi));
        for (int i = 1; i <= 2; i++) {
            sj_value b = i == 1 ? lo : hi;
            sj_shape s;
            if (b == SJ_NO_VALUE) continue;
            SJ_TRY(shape_of(L, b, &s));
            if (sj_shape_numel(&s, 1) != 1 || sj_shape_sym_count(&s))
                return sj__onnx_node_fail(L, SJ_E_SHAPE, "%s must be a scalar", i == 1 ? "min" : "max");
        }
    }
    y = x;
    if (lo != SJ_NO_VALUE) SJ_TRY(bin(L, SJ_OP_MAX, y, lo, &y));
    if (hi != SJ_NO_VALUE) SJ_TRY(bin(L, SJ_OP_MIN, y, hi, &y));
    return def_or_alias(L, x, y, first);
}

/* Gelu-20: approximate="none" is the erf form, "tanh" is
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
static sj_status map_gelu(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_inputs(L, 1, 1));
    SJ_TRY(check_outputs(L, 1));
    const Onnx__AttributeProto *a = sj__onnx_node_attr(L, "approximate");
    bool tanh_form = false;
    if (a) {
        if (!attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING))
            return sj__onnx_node_fail(L, SJ_E_PARSE, "attribute 'approximate' is not a string");
        size_t len = a->s.len;
        const char *v = (const char *)a->s.data;
        if (len == 4 && !memcmp(v, "tanh", 4))
            tanh_form = true;
        else if (!(len == 4 && !memcmp(v, "none", 4)))
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                     "approximate='%.*s' is not one of 'none', 'tanh'",
                                     (int)(len > 32 ? 32 : len), v);
    }
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &x));
    if (!tanh_form) {
        SJ_TRY(un(L, SJ_OP_GELU, x, &y));
        return sj__onnx_def_out(L, 0, y, first);
    }
    sj_value x3, inner, t, h;
    SJ_TRY(bin(L, SJ_OP_MUL, x, x, &x3));
    SJ_TRY(bin(L, SJ_OP_MUL, x3, x, &x3));
    SJ_TRY(bin_c(L, SJ_OP_MUL, x3, 0.044715f, &x3));
    SJ_TRY(bin(L, SJ_OP_ADD, x, x3, &inner));
    SJ_TRY(bin_c(L, SJ_OP_MUL, inner, (float)sqrt(2.0 / M_PI), &inner));
    SJ_TRY(un(L, SJ_OP_TANH, inner, &t));
    SJ_TRY(bin_c(L, SJ_OP_ADD, t, 1.0f, &t));
    SJ_TRY(bin_c(L, SJ_OP_MUL, x, 0.5f, &h));
    SJ_TRY(bin(L, SJ_OP_MUL, h, t, &y));
    return sj__onnx_def_out(L, 0, y, first);
}

/* Activations with attributes, as max/min/exp chains that keep NaN. */
static sj_status map_activation(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_inputs(L, 1, 1));
    SJ_TRY(check_outputs(L, 1));
    const char *op = L->node->op_type;
    sj_value x, y, pos, neg, t, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &x));
    float alpha, beta, gamma;
    if (!strcmp(op, "Elu") || !strcmp(op, "Selu")) {
        bool selu = op[0] == 'S';
        SJ_TRY(attr_float(L, "alpha", selu ? 1.67326319217681884765625f : 1.0f, &alpha));
        SJ_TRY(attr_float(L, "gamma", 1.05070102214813232421875f, &gamma));
        /* max(x, 0) + alpha (exp(min(x, 0)) - 1) */
        SJ_TRY(bin_c(L, SJ_OP_MAX, x, 0.0f, &pos));
        SJ_TRY(bin_c(L, SJ_OP_MIN, x, 0.0f, &neg));
        SJ_TRY(un(L, SJ_OP_EXP, neg, &t));
        SJ_TRY(bin_c(L, SJ_OP_SUB, t, 1.0f, &t));
        SJ_TRY(bin_c(L, SJ_OP_MUL, t, alpha, &t));
        SJ_TRY(bin(L, SJ_OP_ADD, pos, t, &y));
        if (selu) SJ_TRY(bin_c(L, SJ_OP_MUL, y, gamma, &y));
    } else if (!strcmp(op, "Celu")) {
        SJ_TRY(attr_float(L, "alpha", 1.0f, &alpha));
        /* max(0, x) + min(0, alpha (exp(x / alpha) - 1)) */
        SJ_TRY(bin_c(L, SJ_OP_MAX, x, 0.0f, &pos));
        SJ_TRY(bin_c(L, SJ_OP_DIV, x, alpha, &t));
        SJ_TRY(un(L, SJ_OP_EXP, t, &t));
        SJ_TRY(bin_c(L, SJ_OP_SUB, t, 1.0f, &t));
        SJ_TRY(bin_c(L, SJ_OP_MUL, t, alpha, &t));
        SJ_TRY(bin_c(L, SJ_OP_MIN, t, 0.0f, &neg));
        SJ_TRY(bin(L, SJ_OP_ADD, pos, neg, &y));
    } else if (!strcmp(op, "HardSigmoid") || !strcmp(op, "HardSwish")) {
        bool swish = !strcmp(op, "HardSwish");
        SJ_TRY(attr_float(L, "alpha", swish ? 1.0f / 6.0f : 0.2f, &alpha));
        SJ_TRY(attr_float(L, "beta", 0.5f, &beta));
        /* max(0, min(1, alpha x + beta)), times x for HardSwish */
        SJ_TRY(bin_c(L, SJ_OP_MUL, x, alpha, &t));
        SJ_TRY(bin_c(L, SJ_OP_ADD, t, beta, &t));
        SJ_TRY(bin_c(L, SJ_OP_MIN, t, 1.0f, &t));
        SJ_TRY(bin_c(L, SJ_OP_MAX, t, 0.0f, &y));
        if (swish) SJ_TRY(bin(L, SJ_OP_MUL, x, y, &y));
    } else if (!strcmp(op, "Softplus")) {
        SJ_TRY(un(L, SJ_OP_EXP, x, &t));
        SJ_TRY(bin_c(L, SJ_OP_ADD, t, 1.0f, &t));
        SJ_TRY(un(L, SJ_OP_LOG, t, &y));
    } else if (!strcmp(op, "Softsign")) {
        SJ_TRY(un(L, SJ_OP_ABS, x, &t));
        SJ_TRY(bin_c(L, SJ_OP_ADD, t, 1.0f, &t));
        SJ_TRY(bin(L, SJ_OP_DIV, x, t, &y));
    } else {
        return sj__onnx_node_fail(L, SJ_E_INTERNAL, "no activation mapper for '%s'", op);
    }
    return sj__onnx_def_out(L, 0, y, first);
}

/* PRelu: max(x, 0) + slope * min(x, 0), slope broadcast to x. */
static sj_status map_prelu(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_inputs(L, 2, 2));
    SJ_TRY(check_outputs(L, 1));
    sj_value x, slope, pos, neg, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &x));
    SJ_TRY(in_float(L, 1, &slope));
    SJ_TRY(bin_c(L, SJ_OP_MAX, x, 0.0f, &pos));
    SJ_TRY(bin_c(L, SJ_OP_MIN, x, 0.0f, &neg));
    SJ_TRY(bin(L, SJ_OP_MUL, slope, neg, &neg));
    SJ_TRY(bin(L, SJ_OP_ADD, pos, neg, &y));
    sj_shape xs, ys;
    SJ_TRY(shape_of(L, x, &xs));
    SJ_TRY(shape_of(L, y, &ys));
    if (xs.rank != ys.rank || memcmp(xs.dims, ys.dims, sizeof(int64_t) * (size_t)xs.rank))
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "slope does not broadcast to the shape of x");
    return sj__onnx_def_out(L, 0, y, first);
}

/* ReduceL1, L2, SumSquare, LogSum, LogSumExp and Min over sum and max:
 * min is -max(-x); the others as the reference writes them. */
static sj_status map_reduce_composed(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_inputs(L, 1, 2));
    SJ_TRY(check_outputs(L, 1));
    int axes[SJ_MAX_RANK], na = 0;
    bool keep = true, noop = false;
    SJ_TRY(reduce_axes(L, axes, &na, &keep, &noop));
    if (noop) {
        sj_onnx_val *xv;
        SJ_TRY(in_val(L, 0, &xv));
        return alias_out(L, 0, xv);
    }
    const char *op = L->node->op_type + strlen("Reduce");
    sj_value x, p, r, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &x));
    sj_op pre = SJ_OP_COUNT_, post = SJ_OP_COUNT_, red = SJ_OP_REDUCE_SUM;
    if (!strcmp(op, "L1")) {
        pre = SJ_OP_ABS;
    } else if (!strcmp(op, "L2")) {
        pre = SJ_OP_MUL;
        post = SJ_OP_SQRT;
    } else if (!strcmp(op, "SumSquare")) {
        pre = SJ_OP_MUL;
    } else if (!strcmp(op, "LogSum")) {
        post = SJ_OP_LOG;
    } else if (!strcmp(op, "LogSumExp")) {
        pre = SJ_OP_EXP;
        post = SJ_OP_LOG;
    } else if (!strcmp(op, "Min")) {
        pre = post = SJ_OP_NEG;
        red = SJ_OP_REDUCE_MAX;
    } else {
        return sj__onnx_node_fail(L, SJ_E_INTERNAL, "no reduction mapper for '%s'", op);
    }
    p = x;
    if (pre == SJ_OP_MUL) SJ_TRY(bin(L, SJ_OP_MUL, x, x, &p));
    else if (pre != SJ_OP_COUNT_) SJ_TRY(un(L, pre, x, &p));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(L->g, red, p, na, axes, keep, &r)));
    y = r;
    if (post != SJ_OP_COUNT_) SJ_TRY(un(L, post, r, &y));
    return sj__onnx_def_out(L, 0, y, first);
}

/* GlobalAveragePool / GlobalMaxPool: a kept reduction over the spatial axes. */
static sj_status map_global_pool(sj_onnx_loader *L, const op_entry *e) {
    SJ_TRY(check_inputs(L, 1, 1));
    SJ_TRY(check_outputs(L, 1));
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &x));
    sj_shape s;
    SJ_TRY(shape_of(L, x, &s));
    if (s.rank < 3)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "input has rank %d; [N, C, spatial...] is needed",
                                 s.rank);
    int axes[SJ_MAX_RANK], na = 0;
    for (int i = 2; i < s.rank; i++) axes[na++] = i;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(L->g, e->op, x, na, axes, true, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* A per-channel vector [C] as [C, 1, ...] against x of rank `rank` (channel axis 1). */
static sj_status channel_view(sj_onnx_loader *L, sj_value v, int rank, const char *what,
                              int64_t channels, sj_value *out) {
    sj_shape s;
    SJ_TRY(shape_of(L, v, &s));
    if (s.rank != 1 || s.dims[0] != channels)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "%s must have shape [%lld]", what,
                                 (long long)channels);
    int64_t dims[SJ_MAX_RANK];
    dims[0] = channels;
    for (int i = 1; i < rank - 1; i++) dims[i] = 1;
    return sj__onnx_node_prefix(L, sj_graph_reshape(L->g, v, rank - 1, dims, out));
}

/* BatchNormalization (inference): (x - mean) / sqrt(var + eps) * scale + B. */
static sj_status map_batchnorm(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_inputs(L, 5, 5));
    SJ_TRY(check_outputs(L, 1));
    int64_t training;
    SJ_TRY(attr_int(L, "training_mode", 0, &training));
    if (training)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                 "training_mode=1 (batch statistics) is not supported; only "
                                 "inference");
    float eps;
    SJ_TRY(attr_float(L, "epsilon", 1e-5f, &eps));
    sj_value x, p[4], y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &x));
    sj_shape s;
    SJ_TRY(shape_of(L, x, &s));
    if (s.rank < 2 || s.dims[1] == SJ_DIM_SYM)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "input must be [N, C, ...] with a fixed C");
    static const char *const names[] = {"scale", "B", "input_mean", "input_var"};
    for (int i = 0; i < 4; i++) {
        sj_value v;
        SJ_TRY(in_float(L, i + 1, &v));
        SJ_TRY(channel_view(L, v, s.rank, names[i], s.dims[1], &p[i]));
    }
    sj_value d, ve;
    SJ_TRY(bin(L, SJ_OP_SUB, x, p[2], &d));
    SJ_TRY(bin_c(L, SJ_OP_ADD, p[3], eps, &ve));
    SJ_TRY(un(L, SJ_OP_SQRT, ve, &ve));
    SJ_TRY(bin(L, SJ_OP_DIV, d, ve, &y));
    SJ_TRY(bin(L, SJ_OP_MUL, y, p[0], &y));
    SJ_TRY(bin(L, SJ_OP_ADD, y, p[1], &y));
    return sj__onnx_def_out(L, 0, y, first);
}

/* InstanceNormalization: per (n, c), normalise over the spatial axes. */
static sj_status map_instancenorm(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_inputs(L, 3, 3));
    SJ_TRY(check_outputs(L, 1));
    float eps;
    SJ_TRY(attr_float(L, "epsilon", 1e-5f, &eps));
    sj_value x, sc, b, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &x));
    sj_shape s;
    SJ_TRY(shape_of(L, x, &s));
    if (s.rank < 3 || s.dims[1] == SJ_DIM_SYM)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "input must be [N, C, spatial...] with a fixed C");
    SJ_TRY(in_float(L, 1, &sc));
    SJ_TRY(in_float(L, 2, &b));
    SJ_TRY(channel_view(L, sc, s.rank, "scale", s.dims[1], &sc));
    SJ_TRY(channel_view(L, b, s.rank, "B", s.dims[1], &b));
    int axes[SJ_MAX_RANK], na = 0;
    for (int i = 2; i < s.rank; i++) axes[na++] = i;
    sj_value mean, d, sq, var;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(L->g, SJ_OP_REDUCE_MEAN, x, na, axes, true, &mean)));
    SJ_TRY(bin(L, SJ_OP_SUB, x, mean, &d));
    SJ_TRY(bin(L, SJ_OP_MUL, d, d, &sq));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(L->g, SJ_OP_REDUCE_MEAN, sq, na, axes, true, &var)));
    SJ_TRY(bin_c(L, SJ_OP_ADD, var, eps, &var));
    SJ_TRY(un(L, SJ_OP_SQRT, var, &var));
    SJ_TRY(bin(L, SJ_OP_DIV, d, var, &y));
    SJ_TRY(bin(L, SJ_OP_MUL, y, sc, &y));
    SJ_TRY(bin(L, SJ_OP_ADD, y, b, &y));
    return sj__onnx_def_out(L, 0, y, first);
}

/* MeanVarianceNormalization: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9). */
static sj_status map_mvn(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_inputs(L, 1, 1));
    SJ_TRY(check_outputs(L, 1));
    const int64_t *av;
    size_t an;
    bool present;
    SJ_TRY(attr_ints(L, "axes", &av, &an, &present));
    static const int64_t def_axes[] = {0, 2, 3};
    if (!present) {
        av = def_axes;
        an = 3;
    }
    int axes[SJ_MAX_RANK];
    SJ_TRY(int_axes(L, av, an, axes));
    sj_value x, mean, m2, sq, msq, sd, d, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &x));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(L->g, SJ_OP_REDUCE_MEAN, x, (int)an, axes, true, &mean)));
    SJ_TRY(bin(L, SJ_OP_MUL, mean, mean, &m2));
    SJ_TRY(bin(L, SJ_OP_MUL, x, x, &sq));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(L->g, SJ_OP_REDUCE_MEAN, sq, (int)an, axes, true, &msq)));
    SJ_TRY(bin(L, SJ_OP_SUB, msq, m2, &sd));
    SJ_TRY(un(L, SJ_OP_SQRT, sd, &sd));
    SJ_TRY(bin_c(L, SJ_OP_ADD, sd, 1e-9f, &sd));
    SJ_TRY(bin(L, SJ_OP_SUB, x, mean, &d));
    SJ_TRY(bin(L, SJ_OP_DIV, d, sd, &y));
    return sj__onnx_def_out(L, 0, y, first);
}

/* ---- end of realops float ops ---- */

/* ---- realops: layout ops ---- */

/* An integer bound of a shape computation: c + n * N, N the symbolic dim.
 * Constant inputs give n = 0; values folded from Shape chains (an
 * expression in N) come through in_sym_ints too. */
typedef struct sym_int {
    int64_t c, n;
} sym_int;

/* Input i as up to SJ_MAX_RANK integers (a rank-0 or rank-1 constant). */
static sj_status in_sym_ints(sj_onnx_loader *L, int i, const char *what, sym_int *out, int *count) {
    *count = 0;
    sj_onnx_val *v;
    SJ_TRY(in_val(L, i, &v));
    if (!v->has_sym) {
        const sj_onnx_tensor *t = NULL;
        SJ_TRY(in_ints(L, i, what, &t));
    }
    if (v->c.numel > SJ_MAX_RANK || v->c.rank > 1)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "%s has %lld entries (at most %d)", what,
                                 (long long)v->c.numel, SJ_MAX_RANK);
    for (int k = 0; k < v->c.numel; k++) {
        sj_onnx_sym x = sj__onnx_sym_at(v, k);
        out[k] = (sym_int){x.c, x.n};
    }
    *count = (int)v->c.numel;
    return SJ_OK;
}

/* "Up to the end" and "from before the start" in ONNX are huge numbers;
 * past this any bound is clamped. */
#define BOUND_HUGE ((int64_t)1 << 40)

/* One axis of an ONNX Slice on a dim that is `dim` (constant or the
 * symbolic dim) into an sj_slice_axis, with ONNX's clamping. Exact for
 * every extent or an error naming the axis. */
static sj_status slice_axis(sj_onnx_loader *L, int axis, int64_t dim, sym_int s, sym_int e,
                            int64_t step, sj_slice_axis *out) {
    if (step == 0) return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis %d has step 0", axis);
    const char *sym = sj_graph_symbol(L->g);
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
        if (s.c <= -BOUND_HUGE) s = (sym_int){step > 0 ? 0 : -1, 0};
        else if (s.c >= BOUND_HUGE) s = (sym_int){step > 0 ? 0 : -1, 1};
        else if (s.c < 0) s = (sym_int){s.c, 1};
    }
    if (!e.n) {
        if (e.c >= BOUND_HUGE) e = step > 0 ? (sym_int){0, 1} : (sym_int){-1, 1};
        else if (e.c <= -BOUND_HUGE) e = step > 0 ? (sym_int){0, 0} : (sym_int){-1, 0};
        else if (e.c < 0) e = (sym_int){e.c, 1};
    }
    if (step > 0 && s.n == 1 && s.c >= 0) s = (sym_int){0, 1}; /* clamped to N */
    if (step > 0 && e.n == 1 && e.c > 0) e = (sym_int){0, 1};
    sym_int span = step > 0 ? (sym_int){e.c - s.c, e.n - s.n} : (sym_int){s.c - e.c, s.n - e.n};
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
static sj_status map_slice(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_outputs(L, 1));
    sym_int starts[SJ_MAX_RANK], ends[SJ_MAX_RANK];
    int64_t axes_v[SJ_MAX_RANK], steps[SJ_MAX_RANK];
    int n = 0, n_axes = -1, n_steps = -1, ne = 0;
    if (L->opset < 10) {
        SJ_TRY(check_inputs(L, 1, 1));
        const int64_t *sv, *ev, *av;
        size_t sn, en, an;
        bool sp, ep, ap;
        SJ_TRY(attr_ints(L, "starts", &sv, &sn, &sp));
        SJ_TRY(attr_ints(L, "ends", &ev, &en, &ep));
        SJ_TRY(attr_ints(L, "axes", &av, &an, &ap));
        if (!sp || !ep) return sj__onnx_node_fail(L, SJ_E_PARSE, "needs starts and ends");
        if (sn > SJ_MAX_RANK || en != sn || (ap && an != sn))
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "starts, ends and axes differ in length");
        n = ne = (int)sn;
        for (int i = 0; i < n; i++) {
            starts[i] = (sym_int){sv[i], 0};
            ends[i] = (sym_int){ev[i], 0};
            if (ap) axes_v[i] = av[i];
        }
        if (ap) n_axes = n;
    } else {
        SJ_TRY(check_inputs(L, 3, 5));
        SJ_TRY(in_sym_ints(L, 1, "starts", starts, &n));
        SJ_TRY(in_sym_ints(L, 2, "ends", ends, &ne));
        if (input_name(L->node, 3)) {
            sym_int a[SJ_MAX_RANK];
            SJ_TRY(in_sym_ints(L, 3, "axes", a, &n_axes));
            for (int i = 0; i < n_axes; i++) {
                if (a[i].n) return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "axes depend on the symbolic dim");
                axes_v[i] = a[i].c;
            }
        }
        if (input_name(L->node, 4)) {
            sym_int st[SJ_MAX_RANK];
            SJ_TRY(in_sym_ints(L, 4, "steps", st, &n_steps));
            for (int i = 0; i < n_steps; i++) {
                if (st[i].n) return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "steps depend on the symbolic dim");
                steps[i] = st[i].c;
            }
        }
        if (ne != n || (n_axes >= 0 && n_axes != n) || (n_steps >= 0 && n_steps != n))
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "starts, ends, axes and steps differ in length");
    }
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &x));
    sj_shape s;
    SJ_TRY(shape_of(L, x, &s));
    sj_slice_axis axes[SJ_MAX_RANK];
    slice_all(&s, axes);
    bool seen[SJ_MAX_RANK] = {false};
    for (int i = 0; i < n; i++) {
        int64_t a = n_axes >= 0 ? axes_v[i] : i;
        if (a < -s.rank || a >= s.rank)
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis %lld is out of range for rank %d",
                                     (long long)a, s.rank);
        int ax = (int)(a < 0 ? a + s.rank : a);
        if (seen[ax]) return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis %d is given twice", ax);
        seen[ax] = true;
        SJ_TRY(slice_axis(L, ax, s.dims[ax], starts[i], ends[i], n_steps >= 0 ? steps[i] : 1,
                          &axes[ax]));
    }
    bool identity = true;
    for (int i = 0; i < s.rank; i++)
        identity &= axes[i].start == 0 && axes[i].start_n == 0 && axes[i].step == 1 &&
                    axes[i].len == s.dims[i];
    if (identity) {
        sj_onnx_val *xv;
        SJ_TRY(in_val(L, 0, &xv));
        return alias_out(L, 0, xv);
    }
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_slice(L->g, x, axes, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* Split: consecutive slices of one axis, sized by the `split` input
 * (opset 13+) or attribute, by num_outputs (opset 18+, the last part
 * smaller), or equally. */
static sj_status map_split(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_inputs(L, 1, 2));
    node_t *node = L->node;
    int n_out = (int)node->n_output;
    if (n_out < 1) return sj__onnx_node_fail(L, SJ_E_PARSE, "has no outputs");
    int64_t axis, num;
    SJ_TRY(attr_int(L, "axis", 0, &axis));
    SJ_TRY(attr_int(L, "num_outputs", 0, &num));
    sj_value x, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &x));
    sj_shape s;
    SJ_TRY(shape_of(L, x, &s));
    if (axis < -s.rank || axis >= s.rank)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis %lld is out of range for rank %d",
                                 (long long)axis, s.rank);
    int ax = (int)(axis < 0 ? axis + s.rank : axis);
    int64_t dim = s.dims[ax];
    if (dim == SJ_DIM_SYM)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                 "splitting the symbolic dim %s (axis %d) gives parts whose "
                                 "lengths depend on it",
                                 sj_graph_symbol(L->g), ax);
    const int64_t *sv = NULL;
    size_t sn = 0;
    bool sp;
    SJ_TRY(attr_ints(L, "split", &sv, &sn, &sp));
    if (input_name(node, 1)) {
        const sj_onnx_tensor *t;
        SJ_TRY(in_ints(L, 1, "split", &t));
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
        if (n_out == 1) {
            sj_onnx_val *xv;
            SJ_TRY(in_val(L, 0, &xv));
            return alias_out(L, 0, xv);
        }
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_slice(L->g, x, axes, &y)));
        SJ_TRY(sj__onnx_def_out(L, i, y, first));
    }
    return SJ_OK;
}

/* Concat of n operands, joined pairwise from the left. */
static sj_status map_concat(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_outputs(L, 1));
    int n = (int)L->node->n_input;
    if (n < 1) return sj__onnx_node_fail(L, SJ_E_PARSE, "has no inputs");
    int64_t axis;
    if (!sj__onnx_node_attr(L, "axis") && L->opset >= 4)
        return sj__onnx_node_fail(L, SJ_E_PARSE, "needs the attribute 'axis'");
    SJ_TRY(attr_int(L, "axis", 1, &axis));
    sj_value acc, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &acc));
    if (n == 1) {
        sj_onnx_val *xv;
        SJ_TRY(in_val(L, 0, &xv));
        return alias_out(L, 0, xv);
    }
    for (int i = 1; i < n; i++) {
        sj_value b;
        SJ_TRY(in_float(L, i, &b));
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_concat(L->g, acc, b, (int)axis, &acc)));
    }
    return sj__onnx_def_out(L, 0, acc, first);
}

/* A shape input (Expand's, Tile's repeats) as dims; an entry that is the
 * symbolic dim becomes SJ_DIM_SYM. */
static sj_status in_dims(sj_onnx_loader *L, int i, const char *what, int64_t *dims, int *rank) {
    sym_int v[SJ_MAX_RANK];
    SJ_TRY(in_sym_ints(L, i, what, v, rank));
    for (int k = 0; k < *rank; k++) {
        if (v[k].n == 1 && v[k].c == 0) dims[k] = SJ_DIM_SYM;
        else if (v[k].n == 0 && v[k].c >= 1) dims[k] = v[k].c;
        else
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                     "%s entry %d (%lld%+lld*N) is no dim (zero-size and "
                                     "computed lengths are not supported)",
                                     what, k, (long long)v[k].c, (long long)v[k].n);
    }
    return SJ_OK;
}

static sj_status map_expand(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_inputs(L, 2, 2));
    SJ_TRY(check_outputs(L, 1));
    int64_t dims[SJ_MAX_RANK];
    int rank = 0;
    SJ_TRY(in_dims(L, 1, "shape", dims, &rank));
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &x));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_expand(L->g, x, rank, dims, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* Tile: per repeated axis a, [.., d, ..] -> [.., 1, d, ..] -> expand to
 * [.., r, d, ..] -> [.., r * d, ..], which is numpy's tile. */
static sj_status map_tile(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_inputs(L, 2, 2));
    SJ_TRY(check_outputs(L, 1));
    sj_value x, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &x));
    sj_shape s;
    SJ_TRY(shape_of(L, x, &s));
    const sj_onnx_tensor *t;
    SJ_TRY(in_ints(L, 1, "repeats", &t));
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
        if (s.dims[a] == SJ_DIM_SYM)
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
    return def_or_alias(L, x, y, first);
}

/* Trilu: k is an optional constant scalar input. */
static sj_status map_trilu(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_inputs(L, 1, 2));
    SJ_TRY(check_outputs(L, 1));
    int64_t upper, k = 0;
    SJ_TRY(attr_int(L, "upper", 1, &upper));
    if (input_name(L->node, 1)) {
        sym_int v[SJ_MAX_RANK];
        int n;
        SJ_TRY(in_sym_ints(L, 1, "k", v, &n));
        if (n != 1 || v[0].n)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "k must be one constant integer");
        k = v[0].c;
    }
    sj_value x, y, first = sj_graph_num_values(L->g);
    SJ_TRY(in_float(L, 0, &x));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_trilu(L->g, x, upper != 0, k, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* GatherElements: data and indices as graph values of their own dtypes. */
static sj_status map_gather_elements(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_inputs(L, 2, 2));
    SJ_TRY(check_outputs(L, 1));
    int64_t axis;
    SJ_TRY(attr_int(L, "axis", 0, &axis));
    sj_onnx_val *dv, *iv;
    SJ_TRY(in_val(L, 0, &dv));
    SJ_TRY(in_val(L, 1, &iv));
    sj_value d, ix, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_node_prefix(L, sj__onnx_as_value(L, dv, &d)));
    SJ_TRY(sj__onnx_node_prefix(L, sj__onnx_as_value(L, iv, &ix)));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_gather_elements(L->g, d, ix, (int)axis, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* ---- end of realops layout ops ---- */

/* ---- realops: Einsum ---- */

/* An operand of Einsum: its value and one label per axis. */
typedef struct ein_op {
    sj_value v;
    int rank;
    char lab[SJ_MAX_RANK + 1]; /* NUL-terminated */
    int64_t dim[SJ_MAX_RANK];
} ein_op;

/* Appends label c to a NUL-terminated label string of capacity SJ_MAX_RANK. */
static void add_label(char *labels, char c) {
    size_t n = strlen(labels);
    if (n < SJ_MAX_RANK) {
        labels[n] = c;
        labels[n + 1] = '\0';
    }
}

static sj_status ein_transpose(sj_onnx_loader *L, ein_op *o, const char *order) {
    int perm[SJ_MAX_RANK];
    bool identity = true;
    for (int i = 0; i < o->rank; i++) {
        perm[i] = (int)(strchr(o->lab, order[i]) - o->lab);
        identity &= perm[i] == i;
    }
    if (identity) return SJ_OK;
    ein_op t = *o;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_transpose(L->g, o->v, perm, &t.v)));
    for (int i = 0; i < o->rank; i++) {
        t.lab[i] = order[i];
        t.dim[i] = o->dim[perm[i]];
    }
    *o = t;
    return SJ_OK;
}

/* Sums out the axes of o whose labels are not in `keep`. */
static sj_status ein_sum_out(sj_onnx_loader *L, ein_op *o, const char *keep) {
    int axes[SJ_MAX_RANK], na = 0;
    ein_op r = {.v = o->v};
    for (int i = 0; i < o->rank; i++) {
        if (strchr(keep, o->lab[i])) {
            r.lab[r.rank] = o->lab[i];
            r.lab[r.rank + 1] = '\0';
            r.dim[r.rank++] = o->dim[i];
        } else {
            axes[na++] = i;
        }
    }
    if (!na) return SJ_OK;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reduce(L->g, SJ_OP_REDUCE_SUM, o->v, na, axes, false, &r.v)));
    *o = r;
    return SJ_OK;
}

/* The product of a group of dims as one dim; a group holding the symbolic
 * dim must be that dim alone (it is never merged with others). */
static sj_status ein_group(sj_onnx_loader *L, const int64_t *dims, int n, int64_t *out) {
    *out = 1;
    for (int i = 0; i < n; i++) {
        if (dims[i] == SJ_DIM_SYM) {
            if (n > 1)
                return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                         "the equation merges the symbolic dim with other axes");
            *out = SJ_DIM_SYM;
            return SJ_OK;
        }
        *out *= dims[i];
    }
    return SJ_OK;
}

static sj_status ein_reshape(sj_onnx_loader *L, sj_value *v, int rank, const int64_t *dims) {
    sj_shape s;
    SJ_TRY(shape_of(L, *v, &s));
    if (s.rank == rank && !memcmp(s.dims, dims, sizeof(int64_t) * (size_t)rank)) return SJ_OK;
    return sj__onnx_node_prefix(L, sj_graph_reshape(L->g, *v, rank, dims, v));
}

/* Einsum of one or two operands without ellipsis or repeated labels in an
 * operand: sums, transposes, and contractions as one batched matmul
 * (batch labels, then the free labels of each side, then the contracted). */
static sj_status map_einsum(sj_onnx_loader *L, const op_entry *e) {
    (void)e;
    SJ_TRY(check_inputs(L, 1, 2));
    SJ_TRY(check_outputs(L, 1));
    const Onnx__AttributeProto *a = sj__onnx_node_attr(L, "equation");
    if (!a || !attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING))
        return sj__onnx_node_fail(L, SJ_E_PARSE, "needs the string attribute 'equation'");
    char eq[64];
    size_t len = 0;
    for (size_t i = 0; i < a->s.len; i++) {
        char c = (char)a->s.data[i];
        if (c == ' ') continue;
        if (len + 1 >= sizeof eq) return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "equation too long");
        eq[len++] = c;
    }
    eq[len] = '\0';
    if (strstr(eq, "..."))
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "equation '%s': ellipsis is not supported", eq);
    int n_in = (int)L->node->n_input;
    ein_op ops_[2];
    char out[SJ_MAX_RANK + 1] = "";
    const char *p = eq;
    for (int k = 0; k < n_in; k++) {
        ein_op *o = &ops_[k];
        memset(o, 0, sizeof *o);
        SJ_TRY(in_float(L, k, &o->v));
        sj_shape s;
        SJ_TRY(shape_of(L, o->v, &s));
        while (*p && *p != ',' && *p != '-') {
            if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
                return sj__onnx_node_fail(L, SJ_E_PARSE, "equation '%s': bad label '%c'", eq, *p);
            if (o->rank == SJ_MAX_RANK || memchr(o->lab, *p, (size_t)o->rank))
                return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                         "equation '%s': operand %d repeats a label or has more "
                                         "than %d",
                                         eq, k, SJ_MAX_RANK);
            o->lab[o->rank++] = *p++;
            o->lab[o->rank] = '\0';
        }
        if (o->rank != s.rank)
            return sj__onnx_node_fail(L, SJ_E_SHAPE, "equation '%s': operand %d has rank %d, not %d",
                                     eq, k, s.rank, o->rank);
        memcpy(o->dim, s.dims, sizeof(int64_t) * (size_t)s.rank);
        if (k + 1 < n_in) {
            if (*p != ',')
                return sj__onnx_node_fail(L, SJ_E_PARSE, "equation '%s' names %d operands, not %d",
                                         eq, k + 1, n_in);
            p++;
        }
    }
    if (*p == ',') return sj__onnx_node_fail(L, SJ_E_PARSE, "equation '%s' has too many operands", eq);
    if (*p == '-') {
        if (p[1] != '>') return sj__onnx_node_fail(L, SJ_E_PARSE, "equation '%s': expected '->'", eq);
        p += 2;
        if (strlen(p) > SJ_MAX_RANK)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "equation '%s': output rank too large", eq);
        strcpy(out, p);
    } else {
        /* implicit output: the labels seen once, in alphabetical order */
        for (char c = 'A'; c <= 'z'; c++) {
            int seen = 0;
            for (int k = 0; k < n_in; k++) seen += memchr(ops_[k].lab, c, (size_t)ops_[k].rank) != NULL;
            if (seen == 1) add_label(out, c);
        }
    }
    int ro = (int)strlen(out);
    int64_t odim[SJ_MAX_RANK];
    for (int i = 0; i < ro; i++) {
        odim[i] = 0;
        for (int k = 0; k < n_in; k++) {
            const char *f = memchr(ops_[k].lab, out[i], (size_t)ops_[k].rank);
            if (f) odim[i] = ops_[k].dim[f - ops_[k].lab];
        }
        if (!odim[i] || strchr(out + i + 1, out[i]))
            return sj__onnx_node_fail(L, SJ_E_PARSE, "equation '%s': output label '%c' is unknown or repeated",
                                     eq, out[i]);
    }
    if (n_in == 2)
        for (int i = 0; i < ops_[0].rank; i++) {
            const char *f = memchr(ops_[1].lab, ops_[0].lab[i], (size_t)ops_[1].rank);
            if (f && ops_[1].dim[f - ops_[1].lab] != ops_[0].dim[i])
                return sj__onnx_node_fail(L, SJ_E_SHAPE, "equation '%s': label '%c' has two sizes", eq,
                                         ops_[0].lab[i]);
        }
    sj_value first = sj_graph_num_values(L->g);
    /* sum out what only one operand has and the output lacks */
    for (int k = 0; k < n_in; k++) {
        char keep[2 * SJ_MAX_RANK + 2];
        snprintf(keep, sizeof keep, "%s%s", out, n_in == 2 ? ops_[1 - k].lab : "");
        SJ_TRY(ein_sum_out(L, &ops_[k], keep));
    }
    ein_op *A = &ops_[0];
    if (n_in == 1) {
        SJ_TRY(ein_transpose(L, A, out));
        if (A->v < first) {
            sj_onnx_val *xv;
            SJ_TRY(in_val(L, 0, &xv));
            return alias_out(L, 0, xv);
        }
        return sj__onnx_def_out(L, 0, A->v, first);
    }
    ein_op *B = &ops_[1];
    /* Labels: bat in both and the output; A's free labels (all but the last
     * become batch dims of A alone, B broadcasting there), B's likewise;
     * kk contracted. */
    char bat[SJ_MAX_RANK + 1] = "", ma[SJ_MAX_RANK + 1] = "", nb_[SJ_MAX_RANK + 1] = "",
         kk[SJ_MAX_RANK + 1] = "", m = 0, nl = 0;
    for (int i = 0; i < ro; i++) {
        bool in_a = memchr(A->lab, out[i], (size_t)A->rank), in_b = memchr(B->lab, out[i], (size_t)B->rank);
        if (in_a && in_b) {
            add_label(bat, out[i]);
        } else if (in_a) {
            if (m) add_label(ma, m);
            m = out[i];
        } else {
            if (nl) add_label(nb_, nl);
            nl = out[i];
        }
    }
    for (int i = 0; i < A->rank; i++)
        if (!strchr(out, A->lab[i])) add_label(kk, A->lab[i]);
    int nbat = (int)strlen(bat), nma = (int)strlen(ma), nnb = (int)strlen(nb_), nk = (int)strlen(kk);
    int lead = nbat + nma + nnb;
    if (lead + 2 > SJ_MAX_RANK)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                 "equation '%s' needs a matmul of rank %d (at most %d)", eq, lead + 2,
                                 SJ_MAX_RANK);
    char order[SJ_MAX_RANK + 1] = "";
    for (const char *q = bat; *q; q++) add_label(order, *q);
    for (const char *q = ma; *q; q++) add_label(order, *q);
    if (m) add_label(order, m);
    for (const char *q = kk; *q; q++) add_label(order, *q);
    SJ_TRY(ein_transpose(L, A, order));
    order[0] = '\0';
    for (const char *q = bat; *q; q++) add_label(order, *q);
    for (const char *q = nb_; *q; q++) add_label(order, *q);
    for (const char *q = kk; *q; q++) add_label(order, *q);
    if (nl) add_label(order, nl);
    SJ_TRY(ein_transpose(L, B, order));
    /* A: [bat, ma, 1.., M, K]; B: [bat, 1.., nb, K, N] */
    int64_t ad[SJ_MAX_RANK], bd[SJ_MAX_RANK], K;
    SJ_TRY(ein_group(L, A->dim + nbat + nma + (m != 0), nk, &K));
    for (int i = 0; i < nbat; i++) ad[i] = bd[i] = A->dim[i];
    for (int i = 0; i < nma; i++) {
        ad[nbat + i] = A->dim[nbat + i];
        bd[nbat + i] = 1;
    }
    for (int i = 0; i < nnb; i++) {
        ad[nbat + nma + i] = 1;
        bd[nbat + nma + i] = B->dim[nbat + i];
    }
    ad[lead] = m ? A->dim[nbat + nma] : 1;
    ad[lead + 1] = K;
    bd[lead] = K;
    bd[lead + 1] = nl ? B->dim[B->rank - 1] : 1;
    SJ_TRY(ein_reshape(L, &A->v, lead + 2, ad));
    SJ_TRY(ein_reshape(L, &B->v, lead + 2, bd));
    sj_value c;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_matmul(L->g, A->v, B->v, &c)));
    /* [bat, ma, nb, M, N] without the M or N that no label names, then the
     * output's order */
    ein_op C = {.v = c};
    for (const char *q = bat; *q; q++) add_label(C.lab, *q);
    for (const char *q = ma; *q; q++) add_label(C.lab, *q);
    for (const char *q = nb_; *q; q++) add_label(C.lab, *q);
    if (m) add_label(C.lab, m);
    if (nl) add_label(C.lab, nl);
    C.rank = (int)strlen(C.lab);
    for (int i = 0; i < C.rank; i++) C.dim[i] = odim[strchr(out, C.lab[i]) - out];
    SJ_TRY(ein_reshape(L, &C.v, C.rank, C.dim));
    SJ_TRY(ein_transpose(L, &C, out));
    return sj__onnx_def_out(L, 0, C.v, first);
}

/* ---- end of realops Einsum ---- */

static const op_entry ops[] = {
    {"Add", map_binary, SJ_OP_ADD},
    {"Sub", map_binary, SJ_OP_SUB},
    {"Mul", map_binary, SJ_OP_MUL},
    {"Div", map_binary, SJ_OP_DIV},
    {"Pow", map_binary, SJ_OP_POW},
    {"Max", map_variadic, SJ_OP_MAX},
    {"Min", map_variadic, SJ_OP_MIN},
    {"Neg", map_unary, SJ_OP_NEG},
    {"Abs", map_unary, SJ_OP_ABS},
    {"Exp", map_unary, SJ_OP_EXP},
    {"Log", map_unary, SJ_OP_LOG},
    {"Sqrt", map_unary, SJ_OP_SQRT},
    {"Reciprocal", map_unary, SJ_OP_RECIPROCAL},
    {"Tanh", map_unary, SJ_OP_TANH},
    {"Sigmoid", map_unary, SJ_OP_SIGMOID},
    {"Relu", map_unary, SJ_OP_RELU},
    {"LeakyRelu", map_unary, SJ_OP_LEAKY_RELU},
    {"Erf", map_unary, SJ_OP_ERF},
    {"MatMul", map_matmul, SJ_OP_MATMUL},
    {"Gemm", map_gemm, SJ_OP_GEMM},
    {"Softmax", map_softmax, SJ_OP_SOFTMAX},
    {"LogSoftmax", map_softmax, SJ_OP_LOG_SOFTMAX},
    {"LayerNormalization", map_layernorm, SJ_OP_LAYERNORM},
    {"ReduceSum", map_reduce, SJ_OP_REDUCE_SUM},
    {"ReduceMean", map_reduce, SJ_OP_REDUCE_MEAN},
    {"ReduceMax", map_reduce, SJ_OP_REDUCE_MAX},
    {"Transpose", map_transpose, SJ_OP_TRANSPOSE},
    {"Reshape", map_reshape, SJ_OP_RESHAPE},
    {"Flatten", map_flatten, SJ_OP_RESHAPE},
    {"Squeeze", map_squeeze, SJ_OP_RESHAPE},
    {"Unsqueeze", map_unsqueeze, SJ_OP_RESHAPE},
    {"Dropout", map_dropout, SJ_OP_COUNT_},
    {"Identity", map_identity, SJ_OP_COUNT_},
    {"Constant", map_constant, SJ_OP_COUNT_},
    /* realops */
    {"Sin", map_unary, SJ_OP_SIN},
    {"Cos", map_unary, SJ_OP_COS},
    {"Tan", map_unary, SJ_OP_TAN},
    {"Asin", map_unary, SJ_OP_ASIN},
    {"Acos", map_unary, SJ_OP_ACOS},
    {"Atan", map_unary, SJ_OP_ATAN},
    {"Sinh", map_unary, SJ_OP_SINH},
    {"Cosh", map_unary, SJ_OP_COSH},
    {"Asinh", map_unary, SJ_OP_ASINH},
    {"Acosh", map_unary, SJ_OP_ACOSH},
    {"Atanh", map_unary, SJ_OP_ATANH},
    {"Floor", map_unary, SJ_OP_FLOOR},
    {"Ceil", map_unary, SJ_OP_CEIL},
    {"Round", map_unary, SJ_OP_ROUND},
    {"Sign", map_unary, SJ_OP_SIGN},
    {"Sum", map_sum_mean, SJ_OP_ADD},
    {"Mean", map_sum_mean, SJ_OP_DIV},
    {"Clip", map_clip, SJ_OP_COUNT_},
    {"Gelu", map_gelu, SJ_OP_GELU},
    {"Elu", map_activation, SJ_OP_COUNT_},
    {"Selu", map_activation, SJ_OP_COUNT_},
    {"Celu", map_activation, SJ_OP_COUNT_},
    {"HardSigmoid", map_activation, SJ_OP_COUNT_},
    {"HardSwish", map_activation, SJ_OP_COUNT_},
    {"Softplus", map_activation, SJ_OP_COUNT_},
    {"Softsign", map_activation, SJ_OP_COUNT_},
    {"PRelu", map_prelu, SJ_OP_COUNT_},
    {"ReduceL1", map_reduce_composed, SJ_OP_COUNT_},
    {"ReduceL2", map_reduce_composed, SJ_OP_COUNT_},
    {"ReduceSumSquare", map_reduce_composed, SJ_OP_COUNT_},
    {"ReduceLogSum", map_reduce_composed, SJ_OP_COUNT_},
    {"ReduceLogSumExp", map_reduce_composed, SJ_OP_COUNT_},
    {"ReduceMin", map_reduce_composed, SJ_OP_COUNT_},
    {"GlobalAveragePool", map_global_pool, SJ_OP_REDUCE_MEAN},
    {"GlobalMaxPool", map_global_pool, SJ_OP_REDUCE_MAX},
    {"BatchNormalization", map_batchnorm, SJ_OP_COUNT_},
    {"InstanceNormalization", map_instancenorm, SJ_OP_COUNT_},
    {"MeanVarianceNormalization", map_mvn, SJ_OP_COUNT_},
    {"Slice", map_slice, SJ_OP_SLICE},
    {"Split", map_split, SJ_OP_SLICE},
    {"Concat", map_concat, SJ_OP_CONCAT},
    {"Expand", map_expand, SJ_OP_EXPAND},
    {"Tile", map_tile, SJ_OP_EXPAND},
    {"Trilu", map_trilu, SJ_OP_TRILU},
    {"GatherElements", map_gather_elements, SJ_OP_GATHER_ELEMENTS},
    {"Einsum", map_einsum, SJ_OP_MATMUL},
};

sj_status sj__onnx_map_node(sj_onnx_loader *L) {
    node_t *n = L->node;
    if (!n->op_type || !n->op_type[0]) return sj__onnx_node_fail(L, SJ_E_PARSE, "has no op_type");
    if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx"))
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "op '%s' of domain '%s' is not supported",
                                 n->op_type, n->domain);
    if (L->opset < 0)
        return sj__onnx_node_fail(L, SJ_E_PARSE, "the model imports no version of the default opset");
    bool done;
    SJ_TRY(sj__onnx_try_fold(L, &done)); /* shape computation known at load time */
    if (!done) SJ_TRY(sj__onnx_map_typed(L, &done));
    if (done) return SJ_OK;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (!strcmp(ops[i].name, n->op_type)) return ops[i].fn(L, &ops[i]);
    return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "op '%s' is not supported", n->op_type);
}
