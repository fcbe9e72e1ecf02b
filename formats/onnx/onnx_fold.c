/* Shape computation folded at import: the machinery every op's fold uses.
 * Exporters compute reshape targets, slice bounds, masks and position
 * ranges from Shape of dynamic tensors; every such integer value is known
 * when the model loads, up to the symbolic dim N. Each element is carried
 * as c + n * N (sj_onnx_sym) through the ops real exports use; consumers
 * (Reshape, Slice, Expand, Range, ConstantOfShape) then get symbolic
 * shapes. What cannot be written that way (N * N, a division that is not
 * exact for every N, a comparison whose answer depends on N) is an error
 * naming the node and the reason: never a specialisation to one size.
 *
 * A node folds when its registry row has a fold and every input is known
 * at load time (an integer or bool constant, a float constant of whole
 * numbers, or a value in N); sj__onnx_try_fold decides that, the row's
 * fold computes. Otherwise the node is left to the row's map. */
#include "formats/onnx/onnx_fold.h"
#include "formats/onnx/onnx_node.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The most inputs a fold reads (Concat's operands); more: the map's. */
#define FOLD_MAX_INPUTS 64

static void fold_free(sj_ctx *ctx, sj_onnx_fold *f) {
    sj_free(ctx, f->e);
    f->e = NULL;
}

sj_status sj__onnx_fold_alloc(sj_onnx_loader *L, sj_onnx_fold *f, int32_t dtype, int rank,
                              const int64_t *dims) {
    f->dtype = dtype;
    f->rank = rank;
    f->numel = 1;
    for (int i = 0; i < rank; i++) {
        f->dims[i] = dims[i];
        f->numel *= dims[i];
    }
    if (f->numel > SJ_ONNX_FOLD_MAX_ELEMENTS) return SJ_ONNX_NOT_FOLDED;
    f->e = sj_calloc(L->ctx, (size_t)(f->numel ? f->numel : 1), sizeof *f->e);
    if (!f->e) return sj_fail(L->ctx, SJ_E_NOMEM, "%s: out of memory", L->file);
    return SJ_OK;
}

sj_status sj__onnx_fold_copy(sj_onnx_loader *L, const sj_onnx_fold *in, int rank,
                             const int64_t *dims, sj_onnx_fold *out) {
    SJ_TRY(sj__onnx_fold_alloc(L, out, in->dtype, rank, dims));
    if (out->numel != in->numel)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "%lld elements do not fit the new shape (%lld)",
                                  (long long)in->numel, (long long)out->numel);
    memcpy(out->e, in->e, (size_t)in->numel * sizeof *in->e);
    return SJ_OK;
}

/* ---- values known at load time ---- */

bool sj__onnx_fold_whole(float x) { return isfinite(x) && x == floorf(x) && fabsf(x) < 9.0e15f; }

bool sj__onnx_foldable(const sj_onnx_val *v) {
    if (v->has_sym) return true;
    if (!v->has_const || v->c.numel > SJ_ONNX_FOLD_MAX_ELEMENTS) return false;
    if (!v->c.f) return true;
    for (int64_t k = 0; k < v->c.numel; k++)
        if (!sj__onnx_fold_whole(v->c.f[k])) return false;
    return true;
}

sj_onnx_sym sj__onnx_sym_at(const sj_onnx_val *v, int64_t k) {
    if (v->has_sym) return (sj_onnx_sym){v->c.i[k], v->symn[k]};
    return (sj_onnx_sym){v->c.f ? (int64_t)v->c.f[k] : v->c.i[k], 0};
}

static sj_status get_fold(sj_onnx_loader *L, const sj_onnx_val *v, sj_onnx_fold *f) {
    sj_status st = sj__onnx_fold_alloc(L, f, v->c.dtype, v->c.rank, v->c.dims);
    if (st != SJ_OK) return st;
    for (int64_t k = 0; k < f->numel; k++) f->e[k] = sj__onnx_sym_at(v, k);
    return SJ_OK;
}

sj_status sj__onnx_fold_put(sj_onnx_loader *L, sj_onnx_fold *f) {
    const Onnx__NodeProto *n = L->node;
    if (n->n_output < 1 || !n->output[0] || !n->output[0][0]) {
        fold_free(L->ctx, f);
        return sj__onnx_node_fail(L, SJ_E_PARSE, "has no output");
    }
    sj_onnx_val *o;
    sj_status st = sj__onnx_define(L, n->output[0], &o);
    bool sym = false;
    for (int64_t k = 0; k < f->numel; k++) sym |= f->e[k].n != 0;
    bool is_f = sj__onnx_dtype_is_float(f->dtype);
    void *c = st == SJ_OK ? sj_alloc(L->ctx, (size_t)(f->numel ? f->numel : 1) *
                                                 (is_f && !sym ? sizeof(float) : sizeof(int64_t)))
                          : NULL;
    int64_t *nn = st == SJ_OK && sym ? sj_alloc(L->ctx, (size_t)f->numel * sizeof(int64_t)) : NULL;
    if (st == SJ_OK && (!c || (sym && !nn))) st = sj_fail(L->ctx, SJ_E_NOMEM, "%s: out of memory", L->file);
    if (st != SJ_OK) {
        sj_free(L->ctx, c);
        sj_free(L->ctx, nn);
        fold_free(L->ctx, f);
        return st;
    }
    memset(&o->c, 0, sizeof o->c);
    o->c.dtype = f->dtype;
    o->c.rank = f->rank;
    memcpy(o->c.dims, f->dims, sizeof f->dims);
    o->c.numel = f->numel;
    for (int64_t k = 0; k < f->numel; k++) {
        if (is_f && !sym) ((float *)c)[k] = (float)f->e[k].c;
        else ((int64_t *)c)[k] = f->e[k].c;
        if (sym) nn[k] = f->e[k].n;
    }
    if (is_f && !sym) o->c.f = c;
    else o->c.i = c;
    o->symn = nn;
    o->has_sym = sym;
    o->has_const = !sym;
    fold_free(L->ctx, f);
    return SJ_OK;
}

/* ---- element arithmetic ---- */

const char *sj__onnx_sym_name(const sj_onnx_loader *L) {
    const char *s = sj_graph_symbol(L->g);
    return s ? s : "N";
}

const char *sj__onnx_sym_str(const sj_onnx_loader *L, sj_onnx_sym x, char *buf, size_t n) {
    if (!x.n) snprintf(buf, n, "%lld", (long long)x.c);
    else if (!x.c) snprintf(buf, n, "%lld*%s", (long long)x.n, sj__onnx_sym_name(L));
    else snprintf(buf, n, "%lld*%s%+lld", (long long)x.n, sj__onnx_sym_name(L), (long long)x.c);
    return buf;
}

int sj__onnx_sign_over_n(sj_onnx_sym x) {
    if (!x.n) return x.c > 0 ? 1 : x.c < 0 ? -1 : 0;
    int64_t at1 = x.n + x.c;
    if (x.n > 0) return at1 > 0 ? 1 : 2;
    return at1 < 0 ? -1 : 2;
}

/* a op b for one element; fmod is Mod's attribute. */
static sj_status bin_elem(sj_onnx_loader *L, sj_op k, bool is_float, int64_t fmod_attr,
                          sj_onnx_sym a, sj_onnx_sym b, sj_onnx_sym *r) {
    char sa[64], sb[64];
    const char *sym = sj__onnx_sym_name(L);
    sj_onnx_sym d = {a.c - b.c, a.n - b.n};
    int s = sj__onnx_sign_over_n(d);
    switch (k) {
    case SJ_OP_ADD: *r = (sj_onnx_sym){a.c + b.c, a.n + b.n}; return SJ_OK;
    case SJ_OP_SUB: *r = d; return SJ_OK;
    case SJ_OP_MUL:
        if (a.n && b.n)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                      "cannot fold %s * %s: a product of two values that grow "
                                      "with %s is not of the form a*%s+b",
                                      sj__onnx_sym_str(L, a, sa, 64), sj__onnx_sym_str(L, b, sb, 64),
                                      sym, sym);
        *r = (sj_onnx_sym){a.c * b.c, a.c * b.n + a.n * b.c};
        return SJ_OK;
    case SJ_OP_DIV:
    case SJ_OP_MOD:
        if (b.n || b.c == 0)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "cannot fold %s %s %s: %s",
                                      sj__onnx_sym_str(L, a, sa, 64), k == SJ_OP_DIV ? "/" : "%",
                                      sj__onnx_sym_str(L, b, sb, 64),
                                      b.n ? "the divisor depends on the symbolic dim"
                                          : "division by zero");
        if (k == SJ_OP_MOD) {
            if (a.n && a.n % b.c)
                return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                          "cannot fold %s mod %lld: the remainder depends on %s",
                                          sj__onnx_sym_str(L, a, sa, 64), (long long)b.c, sym);
            /* fmod=1 (and floats): the sign of the dividend, as C; else the divisor's */
            bool c_style = is_float || fmod_attr;
            int64_t m = is_float ? (int64_t)fmod((double)a.c, (double)b.c) : a.c % b.c;
            if (!c_style && m && ((m < 0) != (b.c < 0))) m += b.c;
            *r = (sj_onnx_sym){m, 0};
            return SJ_OK;
        }
        if (a.n % b.c || (a.n && a.c % b.c) || (is_float && a.c % b.c))
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                      "cannot fold %s / %lld: the division is not exact for every "
                                      "%s",
                                      sj__onnx_sym_str(L, a, sa, 64), (long long)b.c, sym);
        *r = (sj_onnx_sym){a.c / b.c, a.n / b.c}; /* integer division truncates, as ONNX */
        return SJ_OK;
    case SJ_OP_MAX:
    case SJ_OP_MIN:
        if (s == 2)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                      "cannot fold %s(%s, %s): which is larger depends on %s",
                                      k == SJ_OP_MAX ? "max" : "min", sj__onnx_sym_str(L, a, sa, 64),
                                      sj__onnx_sym_str(L, b, sb, 64), sym);
        *r = (s >= 0) == (k == SJ_OP_MAX) ? a : b;
        return SJ_OK;
    case SJ_OP_EQUAL:
    case SJ_OP_LESS:
    case SJ_OP_LESS_EQUAL:
    case SJ_OP_GREATER:
    case SJ_OP_GREATER_EQUAL: {
        if (s == 2)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                      "cannot fold the comparison of %s and %s: its answer "
                                      "depends on %s",
                                      sj__onnx_sym_str(L, a, sa, 64), sj__onnx_sym_str(L, b, sb, 64),
                                      sym);
        bool v = k == SJ_OP_EQUAL ? s == 0
                 : k == SJ_OP_LESS ? s < 0
                 : k == SJ_OP_LESS_EQUAL ? s <= 0
                 : k == SJ_OP_GREATER ? s > 0
                                     : s >= 0;
        *r = (sj_onnx_sym){v, 0};
        return SJ_OK;
    }
    case SJ_OP_AND: *r = (sj_onnx_sym){a.c && b.c, 0}; return SJ_OK;
    case SJ_OP_OR: *r = (sj_onnx_sym){a.c || b.c, 0}; return SJ_OK;
    case SJ_OP_XOR: *r = (sj_onnx_sym){(a.c != 0) != (b.c != 0), 0}; return SJ_OK;
    default: return sj__onnx_node_fail(L, SJ_E_INTERNAL, "no binary fold for '%s'", L->node->op_type);
    }
}

/* ---- broadcasting over folded tensors ---- */

bool sj__onnx_fold_bcast_shape(const sj_onnx_fold *a, const sj_onnx_fold *b, int *rank,
                               int64_t *dims) {
    int r = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < r; i++) {
        int ia = a->rank - r + i, ib = b->rank - r + i;
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) return false;
        dims[i] = da == 1 ? db : da;
    }
    *rank = r;
    return true;
}

int64_t sj__onnx_fold_bcast_index(const sj_onnx_fold *f, int rank, const int64_t *dims,
                                  int64_t flat) {
    int64_t idx = 0, stride = 1;
    for (int i = rank - 1; i >= 0; i--) {
        int64_t pos = flat % dims[i];
        flat /= dims[i];
        int j = f->rank - rank + i;
        if (j < 0) continue;
        if (f->dims[j] != 1) idx += pos * stride;
        stride *= f->dims[j];
    }
    return idx;
}

/* ---- the elementwise folds ---- */

sj_status sj__onnx_fold_binary(sj_onnx_loader *L, const sj_onnx_op *op, sj_onnx_fold *in, int n,
                               sj_onnx_fold *out) {
    if (n != 2) return SJ_ONNX_NOT_FOLDED; /* Max and Min of other than two: the map's */
    int rank;
    int64_t dims[SJ_ONNX_MAX_RANK], fmod_attr = 0;
    if (!sj__onnx_fold_bcast_shape(&in[0], &in[1], &rank, dims))
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "operand shapes do not broadcast");
    if (op->op == SJ_OP_MOD) SJ_TRY(sj__onnx_attr_int(L, "fmod", 0, &fmod_attr));
    int32_t dt = sj_op_is_compare(op->op) ? ONNX__TENSOR_PROTO__DATA_TYPE__BOOL : in[0].dtype;
    SJ_TRY(sj__onnx_fold_alloc(L, out, dt, rank, dims));
    bool is_f = sj__onnx_dtype_is_float(in[0].dtype);
    for (int64_t i = 0; i < out->numel; i++)
        SJ_TRY(bin_elem(L, op->op, is_f, fmod_attr,
                        in[0].e[sj__onnx_fold_bcast_index(&in[0], rank, dims, i)],
                        in[1].e[sj__onnx_fold_bcast_index(&in[1], rank, dims, i)], &out->e[i]));
    return SJ_OK;
}

sj_status sj__onnx_fold_unary(sj_onnx_loader *L, const sj_onnx_op *op, sj_onnx_fold *in, int n,
                              sj_onnx_fold *out) {
    SJ_TRY(sj__onnx_fold_alloc(L, out, in[0].dtype, in[0].rank, in[0].dims));
    for (int64_t i = 0; i < out->numel; i++) {
        sj_onnx_sym x = in[0].e[i];
        out->e[i] = op->op == SJ_OP_NEG   ? (sj_onnx_sym){-x.c, -x.n}
                    : op->op == SJ_OP_NOT ? (sj_onnx_sym){!x.c, 0}
                                          : x;
    }
    return SJ_OK;
}

/* ---- when a node folds ---- */

sj_status sj__onnx_try_fold(sj_onnx_loader *L, const sj_onnx_op *op, bool *done) {
    *done = false;
    const Onnx__NodeProto *node = L->node;
    int n = sj__onnx_n_inputs(L);
    /* a fold defines one output; a node naming more is the map's */
    if (!op->fold || n > FOLD_MAX_INPUTS || node->n_output != 1) return SJ_OK;
    /* Unsqueeze/Squeeze read their axes themselves; the data must fold. */
    int n_read = op->fold_how & SJ_ONNX_FOLD_DATA_ONLY ? 1 : n;
    bool any_sym = false; /* float constants fold only beside a value in N */
    for (int i = 0; i < n_read; i++) {
        const char *nm = sj__onnx_in_name(L, i);
        const sj_onnx_val *v = nm ? sj__onnx_lookup(L, nm) : NULL;
        /* a gap (Slice's axes not given before its steps), a graph value */
        if (!v || !sj__onnx_foldable(v)) return SJ_OK;
        any_sym |= v->has_sym;
    }
    /* Constants only: leave float arithmetic to the graph unless a
     * symbolic value is involved (exact integer folding otherwise). */
    sj_onnx_fold in[FOLD_MAX_INPUTS], out = {0};
    memset(in, 0, sizeof in);
    sj_status st = SJ_OK;
    int got = 0;
    for (; got < n_read && st == SJ_OK; got++)
        st = get_fold(L, sj__onnx_lookup(L, sj__onnx_in_name(L, got)), &in[got]);
    if (st == SJ_OK) {
        bool floats = false;
        for (int i = 0; i < n_read; i++) floats |= sj__onnx_dtype_is_float(in[i].dtype);
        if (floats && !any_sym && !(op->fold_how & SJ_ONNX_FOLD_FLOATS)) st = SJ_ONNX_NOT_FOLDED;
    }
    if (st == SJ_OK) st = op->fold(L, op, in, n_read, &out);
    for (int i = 0; i < got; i++) fold_free(L->ctx, &in[i]);
    if (st != SJ_OK) {
        fold_free(L->ctx, &out);
        return st == SJ_ONNX_NOT_FOLDED ? SJ_OK : st; /* not folded: the map takes it */
    }
    *done = true;
    return sj__onnx_fold_put(L, &out);
}
