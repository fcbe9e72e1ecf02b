/* The node helpers of onnx_node.h: how every op file reads a node's inputs,
 * outputs and attributes, so that "read an int attribute" or "input 1 is
 * missing" means one thing and reads one way whatever the op. */
#include "formats/onnx/onnx_node.h"
#include "formats/onnx/onnx_layout.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- messages ---- */

void sj__onnx_node_where(const sj_onnx_loader *L, char *buf, size_t len) {
    const Onnx__NodeProto *n = L->node;
    const char *op = n->op_type ? n->op_type : "?";
    if (n->name && n->name[0])
        snprintf(buf, len, "node #%d '%s' (%s)", L->node_index, n->name, op);
    else
        snprintf(buf, len, "node #%d (%s)", L->node_index, op);
}

sj_status sj__onnx_node_fail(sj_onnx_loader *L, sj_status st, const char *fmt, ...) {
    char msg[512], where[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sj__onnx_node_where(L, where, sizeof where);
    return sj_fail(L->ctx, st, "%s: %s: %s", L->file, where, msg);
}

sj_status sj__onnx_node_prefix(sj_onnx_loader *L, sj_status st) {
    if (st != SJ_OK) {
        char where[256];
        sj__onnx_node_where(L, where, sizeof where);
        sj__error_prefix(L->ctx, "%s: %s", L->file, where);
    }
    return st;
}

/* ---- inputs ---- */

const char *sj__onnx_in_name(const sj_onnx_loader *L, int i) {
    const Onnx__NodeProto *n = L->node;
    return i >= 0 && i < (int)n->n_input && n->input[i] && n->input[i][0] ? n->input[i] : NULL;
}

int sj__onnx_n_inputs(const sj_onnx_loader *L) {
    int n = (int)L->node->n_input;
    while (n > 0 && !sj__onnx_in_name(L, n - 1)) n--;
    return n;
}

sj_status sj__onnx_check_inputs(sj_onnx_loader *L, int min, int max) {
    int n = sj__onnx_n_inputs(L);
    if (n >= min && n <= max) return SJ_OK;
    if (min == max) return sj__onnx_node_fail(L, SJ_E_PARSE, "has %d inputs, expected %d", n, min);
    return sj__onnx_node_fail(L, SJ_E_PARSE, "has %d inputs, expected %d to %d", n, min, max);
}

sj_status sj__onnx_in_val(sj_onnx_loader *L, int i, sj_onnx_val **out) {
    const char *name = sj__onnx_in_name(L, i);
    *out = NULL;
    if (!name) return sj__onnx_node_fail(L, SJ_E_PARSE, "input %d is missing", i);
    *out = sj__onnx_lookup(L, name);
    if (!*out)
        return sj__onnx_node_fail(L, SJ_E_PARSE,
                                  "input '%s' is not defined (no graph input, initialiser or "
                                  "earlier node produces it)",
                                  name);
    return SJ_OK;
}

sj_status sj__onnx_in_value(sj_onnx_loader *L, int i, sj_value *out) {
    if (i >= 0 && i < L->n_subst && L->subst[i] != SJ_NO_VALUE) { /* channels last (onnx_layout.c) */
        *out = L->subst[i];
        return SJ_OK;
    }
    sj_onnx_val *v;
    SJ_TRY(sj__onnx_in_val(L, i, &v));
    return sj__onnx_node_prefix(L, sj__onnx_as_value(L, v, out));
}

sj_status sj__onnx_in_value_opt(sj_onnx_loader *L, int i, sj_value *out) {
    *out = SJ_NO_VALUE;
    return sj__onnx_in_name(L, i) ? sj__onnx_in_value(L, i, out) : SJ_OK;
}

sj_status sj__onnx_in_ints(sj_onnx_loader *L, int i, const char *what, const sj_onnx_tensor **out) {
    sj_onnx_val *v;
    SJ_TRY(sj__onnx_in_val(L, i, &v));
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

sj_status sj__onnx_in_syms(sj_onnx_loader *L, int i, const char *what, sj_onnx_sym *out, int *count) {
    *count = 0;
    sj_onnx_val *v;
    SJ_TRY(sj__onnx_in_val(L, i, &v));
    if (!v->has_sym) {
        const sj_onnx_tensor *t = NULL;
        SJ_TRY(sj__onnx_in_ints(L, i, what, &t));
    }
    if (v->c.numel > SJ_MAX_RANK || v->c.rank > 1)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "%s has %lld entries (at most %d)", what,
                                  (long long)v->c.numel, SJ_MAX_RANK);
    for (int k = 0; k < v->c.numel; k++) out[k] = sj__onnx_sym_at(v, k);
    *count = (int)v->c.numel;
    return SJ_OK;
}

/* ---- outputs ---- */

sj_status sj__onnx_check_outputs(sj_onnx_loader *L, int n) {
    const Onnx__NodeProto *node = L->node;
    if (node->n_output < 1 || !node->output[0] || !node->output[0][0])
        return sj__onnx_node_fail(L, SJ_E_PARSE, "has no output");
    for (size_t i = (size_t)n; i < node->n_output; i++)
        if (node->output[i] && node->output[i][0])
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "output %zu ('%s') is not supported", i,
                                      node->output[i]);
    return SJ_OK;
}

sj_status sj__onnx_def_out(sj_onnx_loader *L, int i, sj_value v, sj_value first_new) {
    const char *name = i < (int)L->node->n_output ? L->node->output[i] : NULL;
    if (!name || !name[0]) return SJ_OK;
    sj_onnx_val *o;
    SJ_TRY(sj__onnx_define(L, name, &o));
    if (L->n_subst && i == 0) return sj__onnx_layout_define(L, o, v);
    o->v = v;
    if (v >= first_new) SJ_TRY(sj__onnx_node_prefix(L, sj_graph_set_name(L->g, v, name)));
    return SJ_OK;
}

sj_status sj__onnx_alias_out(sj_onnx_loader *L, int i, const sj_onnx_val *src) {
    const char *name = i < (int)L->node->n_output ? L->node->output[i] : NULL;
    if (!name || !name[0]) return SJ_OK;
    sj_onnx_val *o;
    SJ_TRY(sj__onnx_define(L, name, &o));
    o->v = src->v;
    o->cl = src->cl;
    o->cl_shape = src->cl_shape;
    o->runtime_dtype = src->runtime_dtype;
    if (src->has_const) {
        SJ_TRY(sj__onnx_tensor_clone(L->ctx, &src->c, &o->c));
        o->has_const = true;
    }
    return SJ_OK;
}

sj_status sj__onnx_alias_input(sj_onnx_loader *L) {
    sj_onnx_val *x;
    SJ_TRY(sj__onnx_in_val(L, 0, &x));
    return sj__onnx_alias_out(L, 0, x);
}

sj_status sj__onnx_def_or_alias(sj_onnx_loader *L, sj_value x, sj_value y, sj_value first) {
    return y != x ? sj__onnx_def_out(L, 0, y, first) : sj__onnx_alias_input(L);
}

/* ---- attributes ---- */

const Onnx__AttributeProto *sj__onnx_node_attr(const sj_onnx_loader *L, const char *name) {
    const Onnx__NodeProto *n = L->node;
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name)) return n->attribute[i];
    return NULL;
}

bool sj__onnx_attr_is(const Onnx__AttributeProto *a, Onnx__AttributeProto__AttributeType t) {
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

sj_status sj__onnx_attr_int(sj_onnx_loader *L, const char *name, int64_t def, int64_t *out) {
    const Onnx__AttributeProto *a = sj__onnx_node_attr(L, name);
    *out = def;
    if (!a) return SJ_OK;
    if (!sj__onnx_attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT))
        return sj__onnx_node_fail(L, SJ_E_PARSE, "attribute '%s' is not an int", name);
    *out = a->i;
    return SJ_OK;
}

sj_status sj__onnx_attr_float(sj_onnx_loader *L, const char *name, float def, float *out) {
    const Onnx__AttributeProto *a = sj__onnx_node_attr(L, name);
    *out = def;
    if (!a) return SJ_OK;
    if (!sj__onnx_attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT))
        return sj__onnx_node_fail(L, SJ_E_PARSE, "attribute '%s' is not a float", name);
    *out = a->f;
    return SJ_OK;
}

sj_status sj__onnx_attr_ints(sj_onnx_loader *L, const char *name, const int64_t **vals, size_t *n,
                             bool *present) {
    const Onnx__AttributeProto *a = sj__onnx_node_attr(L, name);
    *vals = NULL;
    *n = 0;
    *present = a != NULL;
    if (!a) return SJ_OK;
    if (!sj__onnx_attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS))
        return sj__onnx_node_fail(L, SJ_E_PARSE, "attribute '%s' is not a list of ints", name);
    *vals = a->ints;
    *n = a->n_ints;
    return SJ_OK;
}

sj_status sj__onnx_attr_string(sj_onnx_loader *L, const char *name, const char **s, size_t *len,
                               bool *present) {
    const Onnx__AttributeProto *a = sj__onnx_node_attr(L, name);
    *s = NULL;
    *len = 0;
    *present = a != NULL;
    if (!a) return SJ_OK;
    if (!sj__onnx_attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING))
        return sj__onnx_node_fail(L, SJ_E_PARSE, "attribute '%s' is not a string", name);
    *s = (const char *)a->s.data;
    *len = a->s.len;
    return SJ_OK;
}

sj_status sj__onnx_attr_tensor(sj_onnx_loader *L, const char *name, const char *label,
                               sj_onnx_tensor *out, bool *present) {
    const Onnx__AttributeProto *a = sj__onnx_node_attr(L, name);
    *present = a != NULL;
    if (!a) return SJ_OK;
    if (!a->t) return sj__onnx_node_fail(L, SJ_E_PARSE, "attribute '%s' holds no tensor", name);
    char what[320];
    snprintf(what, sizeof what, "%s: node #%d: %s", L->file, L->node_index, label);
    return sj__onnx_tensor_decode(L->ctx, a->t, what, &L->ext, out);
}

/* ---- what the mappers share ---- */

static void synth_name(sj_onnx_loader *L, char *buf, size_t len) {
    do snprintf(buf, len, "onnx_const_%d", L->n_synth++);
    while (sj__onnx_lookup(L, buf) || sj_graph_find_input(L->g, buf) >= 0);
}

sj_status sj__onnx_made_param(sj_onnx_loader *L, sj_dtype dtype, int rank, const int64_t *dims,
                              const void *data, sj_value *out) {
    char name[64];
    synth_name(L, name, sizeof name);
    return sj__onnx_node_prefix(L, sj_graph_param_typed(L->g, name, dtype, rank, dims, data, out));
}

sj_status sj__onnx_scalar_const(sj_onnx_loader *L, float x, sj_value *out) {
    return sj__onnx_made_param(L, SJ_F32, 0, NULL, &x, out);
}

sj_status sj__onnx_shape_of(sj_onnx_loader *L, sj_value v, sj_shape *out) {
    sj_value_desc d;
    SJ_TRY(sj_graph_value_desc(L->g, v, &d));
    *out = d.shape;
    return SJ_OK;
}

sj_dtype sj__onnx_dtype_of(sj_onnx_loader *L, sj_value v) {
    sj_value_desc d;
    sj_graph_value_desc(L->g, v, &d);
    return d.dtype;
}

sj_status sj__onnx_to_dtype(sj_onnx_loader *L, int64_t onnx, const char *what, sj_dtype *out) {
    if (onnx >= 0 && onnx <= INT32_MAX && sj__onnx_dtype_to_sj((int32_t)onnx, out)) return SJ_OK;
    return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                              "%s %s is not supported (float32, int64, int32 and bool are)", what,
                              sj__onnx_dtype_name((int32_t)onnx));
}

sj_status sj__onnx_int_axes(sj_onnx_loader *L, const int64_t *v, size_t n, int *out) {
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

sj_status sj__onnx_unary(sj_onnx_loader *L, sj_op op, sj_value a, sj_value *out) {
    return sj__onnx_node_prefix(L, sj_graph_unary(L->g, op, a, out));
}

sj_status sj__onnx_binary(sj_onnx_loader *L, sj_op op, sj_value a, sj_value b, sj_value *out) {
    return sj__onnx_node_prefix(L, sj_graph_binary(L->g, op, a, b, out));
}

sj_status sj__onnx_binary_c(sj_onnx_loader *L, sj_op op, sj_value a, float c, sj_value *out) {
    sj_value k;
    SJ_TRY(sj__onnx_scalar_const(L, c, &k));
    return sj__onnx_binary(L, op, a, k, out);
}

sj_status sj__onnx_fill_scalar(sj_onnx_loader *L, sj_dtype dtype, double x, sj_value *out) {
    return sj__onnx_node_prefix(L, sj_graph_fill(L->g, dtype, x, 0, NULL, out));
}

sj_status sj__onnx_axis_positions(sj_onnx_loader *L, sj_dtype dtype, double start, int64_t len,
                                  int tail, sj_value *out) {
    sj_value r;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_range(L->g, dtype, start, 1, len, &r)));
    if (tail <= 1) {
        *out = r;
        return SJ_OK;
    }
    int64_t dims[SJ_MAX_RANK];
    dims[0] = len;
    for (int i = 1; i < tail; i++) dims[i] = 1;
    return sj__onnx_node_prefix(L, sj_graph_reshape(L->g, r, tail, dims, out));
}

sj_status sj__onnx_axis(sj_onnx_loader *L, int64_t axis, int rank, int limit, int *out) {
    if (axis < -rank || axis >= limit)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis %lld is out of range for rank %d",
                                  (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return SJ_OK;
}

sj_status sj__onnx_attr_choice(sj_onnx_loader *L, const char *name, const char *const *names,
                               int n, int def, int *out) {
    const char *v;
    size_t len;
    bool present;
    SJ_TRY(sj__onnx_attr_string(L, name, &v, &len, &present));
    *out = def;
    if (!present) return SJ_OK;
    for (int i = 0; i < n; i++)
        if (len == strlen(names[i]) && !memcmp(v, names[i], len)) {
            *out = i;
            return SJ_OK;
        }
    char list[256] = "";
    for (int i = 0; i < n; i++) {
        size_t at = strlen(list);
        snprintf(list + at, sizeof list - at, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ",
                 names[i]);
    }
    return sj__onnx_node_fail(L, SJ_E_PARSE, "%s '%.*s' is not %s", name, (int)len, v, list);
}
