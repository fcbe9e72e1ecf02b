/* ONNX model import: unpack the ModelProto, pick the symbolic dim, declare
 * inputs and initialisers, map every node (onnx_registry.c), then mark the
 * outputs. */
#include "formats/onnx/onnx_loader.h"
#include "formats/onnx/onnx_layout.h"
#include "formats/onnx/onnx_op.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- value table ---- */

static const char *val_name(const void *L, int32_t i) {
    return ((const sj_onnx_loader *)L)->vals[i].name;
}

sj_onnx_val *sj__onnx_lookup(sj_onnx_loader *L, const char *name) {
    int32_t i = sj__name_index_find(&L->by_name, name);
    return i >= 0 ? &L->vals[i] : NULL;
}

sj_status sj__onnx_define(sj_onnx_loader *L, const char *name, sj_onnx_val **out) {
    if (sj__onnx_lookup(L, name))
        return sj_fail(L->ctx, SJ_E_PARSE, "%s: value '%s' is defined more than once", L->file, name);
    /* cap_vals is the model's total count of names, sized up front with the
     * index, so neither fills */
    if (L->n_vals >= L->cap_vals)
        return sj_fail(L->ctx, SJ_E_INTERNAL, "%s: value table overflow", L->file);
    sj_onnx_val *v = &L->vals[L->n_vals];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->v = SJ_NO_VALUE;
    v->cl = SJ_NO_VALUE;
    sj__name_index_add(&L->by_name, L->n_vals++);
    *out = v;
    return SJ_OK;
}

/* n times the k_i plus the c_i, int64 [count] (every k_i within
 * SJ_MAX_SYM_FACTOR: the caller checked). */
static sj_status affine_of_n(sj_onnx_loader *L, sj_onnx_val *v, int64_t count, sj_value *out) {
    int64_t *kc = sj_alloc(L->ctx, 2 * (size_t)count * sizeof *kc);
    if (!kc)
        return sj_fail(L->ctx, SJ_E_NOMEM, "'%s': no memory for its %lld elements", v->name,
                       (long long)count);
    for (int64_t i = 0; i < count; i++) {
        sj_onnx_sym x = sj__onnx_sym_at(v, i);
        kc[i] = x.n, kc[count + i] = x.c;
    }
    char name[300];
    sj_value n, k, c;
    sj_status st = sj_graph_range_from_n(L->g, SJ_I64, 0, 1, 0, 1, &n);
    snprintf(name, sizeof name, "%s.factors", v->name);
    if (st == SJ_OK) st = sj_graph_param_typed(L->g, name, SJ_I64, 1, &count, kc, &k);
    snprintf(name, sizeof name, "%s.offsets", v->name);
    if (st == SJ_OK) st = sj_graph_param_typed(L->g, name, SJ_I64, 1, &count, kc + count, &c);
    sj_free(L->ctx, kc);
    if (st == SJ_OK) st = sj_graph_binary(L->g, SJ_OP_MUL, n, k, out);
    if (st == SJ_OK) st = sj_graph_binary(L->g, SJ_OP_ADD, *out, c, out);
    return st;
}

/* A value computed from the symbolic dim used as data (a decode step's
 * position, past_length; as floats, a rotary embedding's position; b * S
 * for each batch index b, indexing a flattened [batch, seq] mask): each
 * element is k_i * N + c_i. Where the k_i are one k and the c_i an
 * arithmetic run, an integer range starting at c_0 + k * n; else n times
 * the k_i plus the c_i. Made in int64, cast to v's type, reshaped to v's
 * shape. False when v cannot be data so (*st untouched). */
static bool sym_as_data(sj_onnx_loader *L, sj_onnx_val *v, sj_status *st) {
    sj_dtype dt;
    int64_t count = v->c.numel;
    if (count < 1 || count > ((int64_t)1 << 20) || v->c.rank > SJ_MAX_RANK ||
        !sj__onnx_dtype_to_sj(v->c.dtype, &dt) || dt == SJ_BOOL)
        return false;
    sj_onnx_sym x0 = sj__onnx_sym_at(v, 0), x1 = count > 1 ? sj__onnx_sym_at(v, 1) : x0;
    int64_t step = x1.c - x0.c;
    bool run = true;
    for (int64_t i = 0; i < count; i++) {
        sj_onnx_sym x = sj__onnx_sym_at(v, i);
        if (x.n < -SJ_MAX_SYM_FACTOR || x.n > SJ_MAX_SYM_FACTOR) return false;
        run &= x.n == x0.n && x.c == x0.c + i * step;
    }
    sj_value r;
    *st = run ? sj_graph_range_from_n(L->g, SJ_I64, (double)x0.c, x0.n, (double)step, count, &r)
              : affine_of_n(L, v, count, &r);
    if (*st == SJ_OK && dt != SJ_I64) *st = sj_graph_cast(L->g, r, dt, &r);
    if (*st == SJ_OK && v->c.rank != 1) *st = sj_graph_reshape(L->g, r, v->c.rank, v->c.dims, &r);
    if (*st == SJ_OK) v->v = r;
    return true;
}

sj_status sj__onnx_as_value(sj_onnx_loader *L, sj_onnx_val *v, sj_value *out) {
    if (v->v != SJ_NO_VALUE) {
        *out = v->v;
        return SJ_OK;
    }
    if (v->cl != SJ_NO_VALUE) return sj__onnx_channels_first(L, v, out);
    if (v->runtime_dtype)
        return sj_fail(L->ctx, SJ_E_UNSUPPORTED,
                       "input '%s' has dtype %s; float32, int64, int32 and bool tensors are "
                       "supported",
                       v->name,
                       v->runtime_dtype > 0 ? sj__onnx_dtype_name(v->runtime_dtype) : "(none)");
    sj_status st;
    if (v->has_sym && sym_as_data(L, v, &st)) {
        if (st != SJ_OK) return st;
        *out = v->v;
        return SJ_OK;
    }
    if (v->has_sym) {
        char e[64];
        sj_onnx_sym x = sj__onnx_sym_at(v, 0);
        snprintf(e, sizeof e, "%lld*%s%+lld", (long long)x.n, sj_graph_symbol(L->g), (long long)x.c);
        return sj_fail(L->ctx, SJ_E_UNSUPPORTED,
                       "'%s' is computed from the symbolic dim (element 0 is %s) and used as "
                       "tensor data; shapejit folds such values only into shapes, slice bounds "
                       "and ranges",
                       v->name, e);
    }
    if (!v->has_const) return sj_fail(L->ctx, SJ_E_INTERNAL, "value '%s' has no data", v->name);
    sj_dtype dt;
    if (!sj__onnx_dtype_to_sj(v->c.dtype, &dt))
        return sj_fail(L->ctx, SJ_E_UNSUPPORTED,
                       "'%s' has dtype %s but is used as data; float32, int64, int32 and bool "
                       "tensors are supported",
                       v->name, sj__onnx_dtype_name(v->c.dtype));
    if (v->c.rank > SJ_MAX_RANK)
        return sj_fail(L->ctx, SJ_E_UNSUPPORTED, "constant '%s' has rank %d (at most %d)", v->name,
                       v->c.rank, SJ_MAX_RANK);
    if (v->c.numel == 0)
        return sj_fail(L->ctx, SJ_E_UNSUPPORTED,
                       "constant '%s' is empty; zero-size tensors are not supported", v->name);
    if (v->c.map) { /* float32 in place in its file or raw_data block: the graph reads it there */
        st = sj__graph_param_mapped(L->g, v->name, dt, v->c.rank, v->c.dims, v->c.f, v->c.map, &v->v);
    } else {
        sj_tensor host;
        st = sj__onnx_tensor_to_host(L->ctx, &v->c, v->name, &host);
        if (st == SJ_OK) {
            st = sj_graph_param_typed(L->g, v->name, dt, v->c.rank, v->c.dims, host.bytes, &v->v);
            sj_tensor_free(L->ctx, &host);
        }
    }
    if (st != SJ_OK) {
        sj__error_prefix(L->ctx, "constant '%s'", v->name);
        return st;
    }
    *out = v->v;
    return SJ_OK;
}

/* ---- model level ---- */

static bool is_default_domain(const char *d) { return !d || !d[0] || !strcmp(d, "ai.onnx"); }

static sj_status find_opset(sj_onnx_loader *L, const Onnx__ModelProto *m) {
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *op = m->opset_import[i];
        if (is_default_domain(op->domain) && op->has_version) {
            /* Op semantics change between opsets: one from the future would
             * be read with today's meaning. */
            if (op->version < 1 || op->version > SJ_ONNX_MAX_OPSET)
                return sj_fail(L->ctx, SJ_E_UNSUPPORTED,
                               "%s: opset %lld of the default domain is not one shapejit knows "
                               "(1..%d)",
                               L->file, (long long)op->version, SJ_ONNX_MAX_OPSET);
            L->opset = op->version;
            return SJ_OK;
        }
    }
    L->opset = -1; /* only an error if a node of the default domain shows up */
    return SJ_OK;
}

static const Onnx__TensorShapeProto *tensor_shape(const Onnx__ValueInfoProto *vi) {
    if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
        !vi->type->tensor_type)
        return NULL;
    return vi->type->tensor_type->shape;
}

static const char *dim_param(const Onnx__TensorShapeProto__Dimension *d) {
    return d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param &&
                   d->dim_param[0]
               ? d->dim_param
               : NULL;
}

static bool is_initializer_or_bound(const Onnx__GraphProto *gp, int n_bound,
                                    const sj_onnx_binding *bound, const char *name) {
    for (size_t i = 0; i < gp->n_initializer; i++)
        if (gp->initializer[i]->name && !strcmp(gp->initializer[i]->name, name)) return true;
    for (int i = 0; i < n_bound; i++)
        if (!strcmp(bound[i].name, name)) return true;
    return false;
}

typedef struct sym_choice {
    const char *name;  /* the symbolic dim's name, NULL = none */
    bool from_param;   /* it is a dim_param of the model */
    int input;         /* dynamic_input: index into graph inputs, else -1 */
    int axis;
    const sj_model_options *o; /* for the fixed dims; may be NULL */
} sym_choice;

/* The constant the options fix dim_param p to; 0 when p is not fixed. */
static int64_t fixed_value(const sj_model_options *o, const char *p) {
    for (int i = 0; o && p && i < o->n_fixed_dims; i++)
        if (!strcmp(o->fixed_dims[i].name, p)) return o->fixed_dims[i].value;
    return 0;
}

/* A dim_param written as an expression, as Optimum writes a decode step's
 * mask ("past_sequence_length + 1", "past_sequence_length +
 * sequence_length"): terms joined by '+', each a size or a name (the
 * symbolic dim's, or a fixed dim's), "K*" in front of a term multiplying
 * it. *out: its value, a size or SJ_DIM_AFFINE(k, c). False when p is not
 * an expression (a plain name is the caller's) or names a dim it cannot
 * resolve, or leaves the forms a dim takes. */
static bool param_expression(const sym_choice *sc, const char *p, int64_t *out) {
    if (!p || !strpbrk(p, "+*")) return false;
    char buf[256];
    size_t n = 0;
    for (const char *c = p; *c; c++)
        if (*c != ' ') {
            if (n + 1 == sizeof buf) return false;
            buf[n++] = *c;
        }
    buf[n] = 0;
    int64_t k_sum = 0, c_sum = 0;
    for (char *term = buf, *next; term; term = next) {
        next = strchr(term, '+');
        if (next) *next++ = 0;
        /* a term reads as sj_dim_parse reads a dim, a fixed dim's name in
         * the symbolic dim's place: a size, or K times the name's value */
        const char *star = strchr(term, '*'), *name = star ? star + 1 : term;
        int64_t fixed = fixed_value(sc->o, name), v;
        if (sj_dim_parse(term, fixed ? name : sc->name, &v) != SJ_OK) return false;
        int64_t times = sj_dim_is_sym(v) ? sj_dim_factor(v) : 1;
        int64_t base = !sj_dim_is_sym(v) ? v : fixed ? fixed : SJ_DIM_SYM;
        int64_t k = sj_dim_is_sym(base) ? sj_dim_factor(base) : 0;
        int64_t c = sj_dim_is_sym(base) ? sj_dim_offset(base) : base;
        if (__builtin_mul_overflow(k, times, &k) || __builtin_mul_overflow(c, times, &c))
            return false;
        k_sum += k;
        c_sum += c;
        if (k_sum > SJ_MAX_SYM_FACTOR || c_sum > SJ_MAX_SYM_OFFSET) return false;
    }
    if (k_sum == 0 && c_sum < 1) return false;
    *out = k_sum ? SJ_DIM_AFFINE(k_sum, c_sum) : c_sum;
    return true;
}

/* The runtime graph inputs: not initialisers, not bound. */
static bool is_runtime_input(const Onnx__GraphProto *gp, int n_bound, const sj_onnx_binding *bound,
                             size_t i) {
    const char *name = gp->input[i]->name;
    return name && !is_initializer_or_bound(gp, n_bound, bound, name);
}

static bool inputs_have_param(const Onnx__GraphProto *gp, int n_bound, const sj_onnx_binding *bound,
                              const char *name) {
    for (size_t i = 0; i < gp->n_input; i++) {
        if (!is_runtime_input(gp, n_bound, bound, i)) continue;
        const Onnx__TensorShapeProto *sh = tensor_shape(gp->input[i]);
        for (size_t d = 0; sh && d < sh->n_dim; d++) {
            const char *p = dim_param(sh->dim[d]);
            if (p && !strcmp(p, name)) return true;
        }
    }
    return false;
}

/* Every fixed dim names a dim_param of the inputs once, with a size, and is
 * not also the one chosen symbolic. */
static sj_status check_fixed_dims(sj_onnx_loader *L, const Onnx__GraphProto *gp, int n_bound,
                                  const sj_onnx_binding *bound, const sj_model_options *o) {
    if (!o || o->n_fixed_dims == 0) return SJ_OK;
    if (o->n_fixed_dims < 0 || !o->fixed_dims)
        return sj_fail(L->ctx, SJ_E_INVALID_ARG, "%s: %d fixed dims given without an array",
                       L->file, o->n_fixed_dims);
    for (int i = 0; i < o->n_fixed_dims; i++) {
        const sj_dim_value *f = &o->fixed_dims[i];
        if (!f->name || !f->name[0])
            return sj_fail(L->ctx, SJ_E_INVALID_ARG, "%s: fixed dim %d has no name", L->file, i);
        int64_t k = sj_dim_factor(f->value), c = sj_dim_offset(f->value);
        if (f->value < 0 && (k < 1 || k > SJ_MAX_SYM_FACTOR || c > SJ_MAX_SYM_OFFSET))
            return sj_fail(L->ctx, SJ_E_INVALID_ARG,
                           "%s: dim '%s' given %lld, neither a size >= 1 nor SJ_DIM_AFFINE(k, c)",
                           L->file, f->name, (long long)f->value);
        if (f->value < 0 && !o->dynamic_name)
            return sj_fail(L->ctx, SJ_E_INVALID_ARG,
                           "%s: dim '%s' is tied to the symbolic dim, but none is named (--dynamic)",
                           L->file, f->name);
        if (f->value == 0)
            return sj_fail(L->ctx, SJ_E_INVALID_ARG, "%s: dim '%s' fixed to 0; sizes are >= 1",
                           L->file, f->name);
        for (int j = 0; j < i; j++)
            if (!strcmp(o->fixed_dims[j].name, f->name))
                return sj_fail(L->ctx, SJ_E_INVALID_ARG, "%s: dim '%s' is fixed more than once",
                               L->file, f->name);
        if (o->dynamic_name && !strcmp(o->dynamic_name, f->name))
            return sj_fail(L->ctx, SJ_E_INVALID_ARG,
                           "%s: dim '%s' is both the symbolic dim and fixed to %lld", L->file,
                           f->name, (long long)f->value);
        if (!inputs_have_param(gp, n_bound, bound, f->name))
            return sj_fail(L->ctx, SJ_E_NOT_FOUND,
                           "%s: no input dim is named '%s', so it cannot be fixed", L->file,
                           f->name);
    }
    return SJ_OK;
}

static sj_status choose_sym(sj_onnx_loader *L, const Onnx__GraphProto *gp, int n_bound,
                            const sj_onnx_binding *bound, const sj_model_options *o,
                            sym_choice *sc) {
    sc->name = NULL;
    sc->from_param = false;
    sc->input = -1;
    sc->axis = 0;
    sc->o = o;
    SJ_TRY(check_fixed_dims(L, gp, n_bound, bound, o));
    /* distinct dim_params, in order of first appearance */
    const char *params[16];
    int n_params = 0;
    bool more = false;
    for (size_t i = 0; i < gp->n_input; i++) {
        if (!is_runtime_input(gp, n_bound, bound, i)) continue;
        const Onnx__TensorShapeProto *sh = tensor_shape(gp->input[i]);
        for (size_t d = 0; sh && d < sh->n_dim; d++) {
            const char *p = dim_param(sh->dim[d]);
            /* an expression ("past + 1") is resolved from the names it uses */
            bool seen = fixed_value(o, p) != 0 || (p && strpbrk(p, "+*"));
            for (int j = 0; p && j < n_params && !seen; j++) seen = !strcmp(params[j], p);
            if (!p || seen) continue;
            if (n_params == (int)(sizeof params / sizeof params[0]))
                more = true;
            else
                params[n_params++] = p;
        }
    }
    char list[512] = "";
    size_t used = 0;
    for (int j = 0; j < n_params && used < sizeof list; j++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s'%s'", j ? ", " : "", params[j]);
    if (more && used < sizeof list) snprintf(list + used, sizeof list - used, ", ...");
    bool named_found = false;
    for (int j = 0; o && o->dynamic_name && j < n_params; j++)
        named_found |= !strcmp(params[j], o->dynamic_name);
    if (o && o->dynamic_input) {
        for (size_t i = 0; i < gp->n_input; i++) {
            if (!is_runtime_input(gp, n_bound, bound, i) || strcmp(gp->input[i]->name, o->dynamic_input))
                continue;
            const Onnx__TensorShapeProto *sh = tensor_shape(gp->input[i]);
            int rank = sh ? (int)sh->n_dim : 0;
            int axis = o->dynamic_axis < 0 ? o->dynamic_axis + rank : o->dynamic_axis;
            if (axis < 0 || axis >= rank)
                return sj_fail(L->ctx, SJ_E_INVALID_ARG,
                               "%s: dynamic axis %d is out of range for input '%s' of rank %d",
                               L->file, o->dynamic_axis, o->dynamic_input, rank);
            const char *p = dim_param(sh->dim[axis]);
            if (fixed_value(o, p))
                return sj_fail(L->ctx, SJ_E_INVALID_ARG,
                               "%s: input '%s' axis %d is '%s', which is fixed to %lld; it cannot "
                               "also be the dynamic axis",
                               L->file, o->dynamic_input, axis, p, (long long)fixed_value(o, p));
            sc->input = (int)i;
            sc->axis = axis;
            sc->from_param = p && (!o->dynamic_name || !strcmp(p, o->dynamic_name));
            sc->name = o->dynamic_name ? o->dynamic_name : p ? p : "N";
            return SJ_OK;
        }
        return sj_fail(L->ctx, SJ_E_NOT_FOUND, "%s: the model has no input named '%s'", L->file,
                       o->dynamic_input);
    }
    if (o && o->dynamic_name) {
        if (!named_found)
            return sj_fail(L->ctx, SJ_E_NOT_FOUND,
                           "%s: no input dim is named '%s' (the model's dim_params: %s)", L->file,
                           o->dynamic_name, n_params ? list : "none");
        sc->name = o->dynamic_name;
        sc->from_param = true;
        return SJ_OK;
    }
    if (n_params > 1 || more)
        return sj_fail(L->ctx, SJ_E_UNSUPPORTED,
                       "%s: the inputs have several dim_params (%s) but shapejit handles one "
                       "symbolic dim: choose one (--dynamic NAME) and fix the others to sizes "
                       "(--dim NAME=VALUE)",
                       L->file, list);
    sc->name = n_params ? params[0] : NULL;
    sc->from_param = n_params > 0;
    return SJ_OK;
}

static sj_status declare_input(sj_onnx_loader *L, const Onnx__ValueInfoProto *vi, int index,
                               const sym_choice *sc) {
    sj_onnx_val *v;
    SJ_TRY(sj__onnx_define(L, vi->name, &v));
    if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
        !vi->type->tensor_type)
        return sj_fail(L->ctx, SJ_E_UNSUPPORTED, "%s: input '%s' is not a tensor", L->file,
                       vi->name);
    const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
    int32_t dtype = tt->has_elem_type ? tt->elem_type : 0;
    sj_dtype sdt;
    if (!sj__onnx_dtype_to_sj(dtype, &sdt)) {
        /* Reported when something uses it (or at the end, if nothing does). */
        v->runtime_dtype = dtype ? dtype : -1;
        return SJ_OK;
    }
    const Onnx__TensorShapeProto *sh = tt->shape;
    if (!sh)
        return sj_fail(L->ctx, SJ_E_UNSUPPORTED, "%s: input '%s' has no shape", L->file, vi->name);
    if (sh->n_dim > SJ_MAX_RANK)
        return sj_fail(L->ctx, SJ_E_UNSUPPORTED, "%s: input '%s' has rank %zu (at most %d)",
                       L->file, vi->name, sh->n_dim, SJ_MAX_RANK);
    int64_t dims[SJ_MAX_RANK];
    for (size_t d = 0; d < sh->n_dim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = sh->dim[d];
        const char *p = dim_param(dim);
        if (sc->input == index && (int)d == sc->axis) {
            dims[d] = SJ_DIM_SYM;
        } else if (p && fixed_value(sc->o, p)) {
            dims[d] = fixed_value(sc->o, p);
        } else if (p && strpbrk(p, "+*")) {
            if (!param_expression(sc, p, &dims[d]))
                return sj_fail(L->ctx, SJ_E_UNSUPPORTED,
                               "%s: input '%s' dim %zu is '%s': an expression must add sizes, "
                               "the symbolic dim%s%s%s and fixed dims (--dim NAME=VALUE), each "
                               "term at most K*NAME, to k*%s + c",
                               L->file, vi->name, d, p, sc->name ? " '" : "",
                               sc->name ? sc->name : "", sc->name ? "'" : "",
                               sc->name ? sc->name : "N");
        } else if (p) {
            if (!sc->name || !sc->from_param || strcmp(p, sc->name))
                return sj_fail(L->ctx, SJ_E_UNSUPPORTED,
                               "%s: input '%s' dim %zu is '%s', but %s%s%s; shapejit handles "
                               "one symbolic dim (fix this one to a size: --dim %s=VALUE)",
                               L->file, vi->name, d, p, sc->name ? "the symbolic dim is '" : "",
                               sc->name ? sc->name : "no symbolic dim was chosen",
                               sc->name ? "'" : "", p);
            dims[d] = SJ_DIM_SYM;
        } else if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (dim->dim_value < 0)
                return sj_fail(L->ctx, SJ_E_PARSE, "%s: input '%s' dim %zu is negative (%lld)",
                               L->file, vi->name, d, (long long)dim->dim_value);
            if (dim->dim_value == 0)
                return sj_fail(L->ctx, SJ_E_UNSUPPORTED,
                               "%s: input '%s' dim %zu is 0; zero-size tensors are not supported",
                               L->file, vi->name, d);
            dims[d] = dim->dim_value;
        } else {
            return sj_fail(L->ctx, SJ_E_UNSUPPORTED,
                           "%s: input '%s' dim %zu has neither a size nor a name (if it is the "
                           "dynamic dim, declare it: --dynamic-axis %s:%zu)",
                           L->file, vi->name, d, vi->name, d);
        }
    }
    sj_status st = sj_graph_input_typed(L->g, vi->name, sdt, (int)sh->n_dim, dims, &v->v);
    if (st != SJ_OK) sj__error_prefix(L->ctx, "%s: input '%s'", L->file, vi->name);
    return st;
}

static sj_status define_const(sj_onnx_loader *L, const char *name, Onnx__TensorProto *t) {
    sj_onnx_val *v;
    SJ_TRY(sj__onnx_define(L, name, &v));
    char what[320];
    snprintf(what, sizeof what, "%s: initialiser '%s'", L->file, name);
    SJ_TRY(sj__onnx_tensor_take(L->ctx, t, what, &L->ext, &v->c));
    v->has_const = true;
    return SJ_OK;
}

static sj_status define_bound(sj_onnx_loader *L, const sj_onnx_binding *b) {
    sj_onnx_val *v;
    SJ_TRY(sj__onnx_define(L, b->name, &v));
    SJ_TRY(sj__onnx_tensor_clone(L->ctx, b->tensor, &v->c));
    v->has_const = true;
    return SJ_OK;
}

/* A declared shape (graph output or value_info) that disagrees with the
 * inferred one is an error: the model and shapejit disagree on what it
 * computes. Dims named other than the symbolic dim or a fixed dim, and
 * missing dims, are not checked. */
static sj_status check_declared(sj_onnx_loader *L, const Onnx__ValueInfoProto *vi, sj_value v,
                                const sym_choice *sc, const char *what) {
    if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
        !vi->type->tensor_type)
        return SJ_OK;
    const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
    sj_value_desc d;
    SJ_TRY(sj_graph_value_desc(L->g, v, &d));
    sj_dtype want;
    if (tt->has_elem_type && tt->elem_type &&
        (!sj__onnx_dtype_to_sj(tt->elem_type, &want) || want != d.dtype))
        return sj_fail(L->ctx, SJ_E_SHAPE, "%s: %s '%s' is declared %s but computes %s", L->file,
                       what, vi->name, sj__onnx_dtype_name(tt->elem_type), sj_dtype_name(d.dtype));
    const Onnx__TensorShapeProto *sh = tt->shape;
    if (!sh) return SJ_OK;
    char got[96];
    sj_shape_format(&d.shape, sc->name, got, sizeof got);
    if ((int)sh->n_dim != d.shape.rank)
        return sj_fail(L->ctx, SJ_E_SHAPE, "%s: %s '%s' is declared with rank %zu but computes %s",
                       L->file, what, vi->name, sh->n_dim, got);
    for (int i = 0; i < d.shape.rank; i++) {
        const Onnx__TensorShapeProto__Dimension *dim = sh->dim[i];
        const char *p = dim_param(dim);
        int64_t have = d.shape.dims[i], want_dim;
        bool bad = false;
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            bad = !sj_dim_is_sym(have) && dim->dim_value != have;
        else if (p && fixed_value(sc->o, p))
            bad = have != fixed_value(sc->o, p);
        else if (p && param_expression(sc, p, &want_dim))
            bad = have != want_dim;
        else if (p && sc->from_param && sc->name && !strcmp(p, sc->name))
            bad = have != SJ_DIM_SYM;
        if (bad) {
            char decl[64];
            if (p)
                snprintf(decl, sizeof decl, "%s", p);
            else
                snprintf(decl, sizeof decl, "%lld", (long long)dim->dim_value);
            return sj_fail(L->ctx, SJ_E_SHAPE, "%s: %s '%s' dim %d is declared as %s but computes %s",
                           L->file, what, vi->name, i, decl, got);
        }
    }
    return SJ_OK;
}

static size_t count_names(const Onnx__GraphProto *gp, int n_bound) {
    size_t n = gp->n_input + gp->n_initializer + (size_t)n_bound;
    for (size_t i = 0; i < gp->n_node; i++) n += gp->node[i]->n_output;
    return n + 1;
}

static sj_status load_graph(sj_onnx_loader *L, const Onnx__ModelProto *m, const sj_model_options *o,
                            int n_bound, const sj_onnx_binding *bound) {
    const Onnx__GraphProto *gp = m->graph;
    if (!gp) return sj_fail(L->ctx, SJ_E_PARSE, "%s: the model has no graph", L->file);
    SJ_TRY(find_opset(L, m));
    if (gp->n_sparse_initializer)
        return sj_fail(L->ctx, SJ_E_UNSUPPORTED, "%s: sparse initialisers are not supported", L->file);
    size_t n_names = count_names(gp, n_bound);
    if (n_names > (size_t)INT32_MAX / 4)
        return sj_fail(L->ctx, SJ_E_UNSUPPORTED, "%s: the graph is too large", L->file);
    L->cap_vals = (int)n_names;
    L->vals = sj_calloc(L->ctx, n_names, sizeof *L->vals);
    if (!L->vals || !sj__name_index_reserve(L->ctx, &L->by_name, n_names))
        return sj_fail(L->ctx, SJ_E_NOMEM, "%s: out of memory", L->file);

    for (size_t i = 0; i < gp->n_input; i++)
        if (!gp->input[i]->name || !gp->input[i]->name[0])
            return sj_fail(L->ctx, SJ_E_PARSE, "%s: graph input %zu has no name", L->file, i);
    sym_choice sc;
    SJ_TRY(choose_sym(L, gp, n_bound, bound, o, &sc));
    SJ_TRY(sj_graph_create(L->ctx, sc.name, &L->g));

    for (int i = 0; i < n_bound; i++) SJ_TRY(define_bound(L, &bound[i]));
    for (size_t i = 0; i < gp->n_initializer; i++) {
        Onnx__TensorProto *t = gp->initializer[i];
        if (!t->name || !t->name[0])
            return sj_fail(L->ctx, SJ_E_PARSE, "%s: initialiser %zu has no name", L->file, i);
        bool is_bound = false;
        for (int b = 0; b < n_bound; b++) is_bound |= !strcmp(bound[b].name, t->name);
        if (is_bound) continue; /* a bound input overrides it */
        if (sj__onnx_lookup(L, t->name))
            return sj_fail(L->ctx, SJ_E_PARSE, "%s: initialiser '%s' is defined more than once",
                           L->file, t->name);
        SJ_TRY(define_const(L, t->name, t));
    }
    for (size_t i = 0; i < gp->n_input; i++)
        if (is_runtime_input(gp, n_bound, bound, i))
            SJ_TRY(declare_input(L, gp->input[i], (int)i, &sc));

    SJ_TRY(sj__onnx_registry_index(L));
    for (size_t i = 0; i < gp->n_node; i++) {
        L->node = gp->node[i];
        L->node_index = (int)i;
        SJ_TRY(sj__onnx_map_node(L));
    }
    L->node = NULL;

    for (size_t i = 0; i < gp->n_value_info; i++) {
        const Onnx__ValueInfoProto *vi = gp->value_info[i];
        const sj_onnx_val *v = vi->name ? sj__onnx_lookup(L, vi->name) : NULL;
        if (v && v->v != SJ_NO_VALUE) SJ_TRY(check_declared(L, vi, v->v, &sc, "value"));
    }
    if (gp->n_output == 0) return sj_fail(L->ctx, SJ_E_PARSE, "%s: the graph has no outputs", L->file);
    for (size_t i = 0; i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        if (!vi->name || !vi->name[0])
            return sj_fail(L->ctx, SJ_E_PARSE, "%s: graph output %zu has no name", L->file, i);
        sj_onnx_val *v = sj__onnx_lookup(L, vi->name);
        if (!v)
            return sj_fail(L->ctx, SJ_E_PARSE, "%s: graph output '%s' is not defined by any node, "
                           "input or initialiser", L->file, vi->name);
        sj_value gv;
        sj_status st = sj__onnx_as_value(L, v, &gv);
        if (st != SJ_OK) {
            sj__error_prefix(L->ctx, "%s: output '%s'", L->file, vi->name);
            return st;
        }
        SJ_TRY(check_declared(L, vi, gv, &sc, "output"));
        st = sj_graph_output(L->g, gv, vi->name);
        if (st != SJ_OK) {
            sj__error_prefix(L->ctx, "%s: output '%s'", L->file, vi->name);
            return st;
        }
    }
    /* A runtime input the graph cannot represent that nothing used would
     * otherwise vanish from the graph's inputs. */
    for (int i = 0; i < L->n_vals; i++)
        if (L->vals[i].runtime_dtype) {
            sj_status st = sj__onnx_as_value(L, &L->vals[i], &(sj_value){0});
            sj__error_prefix(L->ctx, "%s", L->file);
            return st;
        }
    return SJ_OK;
}

sj_status sj__onnx_load_bound(sj_ctx *ctx, const void *bytes, size_t len, const char *filename,
                             const sj_model_options *o, int n_bound, const sj_onnx_binding *bound,
                             sj_graph **out) {
    *out = NULL;
    if (!filename) filename = "<onnx>";
    if (!bytes && len) return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: no bytes", filename);
    sj_onnx_pb_alloc pa;
    sj__onnx_pb_alloc_init(&pa, ctx);
    Onnx__ModelProto *m;
    SJ_TRY(sj__onnx_model_unpack(&pa, bytes, len, filename, &m));
    return sj__onnx_load_unpacked(ctx, &pa, m, filename, o, n_bound, bound, out);
}

sj_status sj__onnx_load_unpacked(sj_ctx *ctx, sj_onnx_pb_alloc *pa, Onnx__ModelProto *m,
                                const char *filename, const sj_model_options *o, int n_bound,
                                const sj_onnx_binding *bound, sj_graph **out) {
    *out = NULL;
    /* the folder of filename ("." for a bare name) */
    const char *slash = strrchr(filename, '/');
    /* "/m.onnx" lives in "/" */
    size_t dlen = !slash ? 1 : slash == filename ? 1 : (size_t)(slash - filename);
    char *dir = sj_alloc(ctx, dlen + 1);
    if (!dir) {
        onnx__model_proto__free_unpacked(m, &pa->base);
        return sj_fail(ctx, SJ_E_NOMEM, "%s: out of memory", filename);
    }
    memcpy(dir, !slash ? "." : filename, dlen);
    dir[dlen] = '\0';
    sj_onnx_loader L = {.ctx = ctx, .file = filename};
    L.ext.base_dir = dir;
    L.ext.copy = o && o->copy_external_data;
    sj__name_index_init(&L.by_name, val_name, &L);
    sj_status st = load_graph(&L, m, o, n_bound, bound);
    if (st == SJ_OK) {
        L.g->external_copied = L.ext.copied;
        L.g->external_copied_bytes = L.ext.copied_bytes;
    }
    sj__onnx_external_free(ctx, &L.ext);
    sj_free(ctx, dir);
    for (int i = 0; i < L.n_vals; i++) {
        if (L.vals[i].has_const || L.vals[i].has_sym) sj__onnx_tensor_release(ctx, &L.vals[i].c);
        sj_free(ctx, L.vals[i].symn);
    }
    sj_free(ctx, L.vals);
    sj_free(ctx, L.ops);
    sj__name_index_free(ctx, &L.by_name);
    onnx__model_proto__free_unpacked(m, &pa->base);
    if (st != SJ_OK) {
        sj_graph_destroy(L.g);
        return st;
    }
    *out = L.g;
    return SJ_OK;
}

sj_status sj_onnx_load_mem(sj_ctx *ctx, const void *bytes, size_t len, const char *filename,
                           const sj_model_options *o, sj_graph **out) {
    sj_model_options c; /* the caller's options as this library reads them */
    if (o) {
        memset(&c, 0, sizeof c); /* sj_model_options_init's defaults (formats/model_load.c) */
        c.dynamic_axis = -1;
        if (out) *out = NULL;
        SJ_TRY(sj__config_read(ctx, "sj_model_options", o, SJ_CONFIG_SIZE(sj_model_options, copy_external_data),
                               sizeof c, &c));
        o = &c;
    }
    return sj__onnx_load_bound(ctx, bytes, len, filename, o, 0, NULL, out);
}
