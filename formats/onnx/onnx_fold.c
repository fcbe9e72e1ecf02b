/* Shape computation folded at import. Exporters compute reshape targets,
 * slice bounds, masks and position ranges from Shape of dynamic tensors;
 * every such integer value is known when the model loads, up to the
 * symbolic dim N. Each element is carried as c + n * N (sj_onnx_sym) through
 * the ops real exports use; consumers (Reshape, Slice, Expand, Range,
 * ConstantOfShape) then get symbolic shapes. What cannot be written that way
 * (N * N, a division that is not exact for every N, a comparison whose
 * answer depends on N) is an error naming the node and the reason: never a
 * specialisation to one size.
 *
 * A node folds when it is one of the ops below and every input is known at
 * load time (an integer or bool constant, a float constant of whole numbers,
 * or a value in N). Otherwise it is left to the graph mappers. */
#include "formats/onnx/onnx_loader.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Folded tensors stay small: shapes, index vectors, small masks. */
#define FOLD_MAX_ELEMENTS ((int64_t)1 << 16)
/* A fold function's "not folded after all" (too large, a symbolic shape,
 * float arithmetic): the node goes to the graph mappers. Not an error. */
#define NOT_FOLDED ((sj_status)1)

typedef const Onnx__NodeProto node_t;

typedef struct fold {
    int32_t dtype; /* ONNX dtype */
    int rank;
    int64_t dims[SJ_ONNX_MAX_RANK];
    int64_t numel;
    sj_onnx_sym *e; /* numel elements, owned */
} fold;

static void fold_free(sj_ctx *ctx, fold *f) {
    sj_free(ctx, f->e);
    f->e = NULL;
}

static sj_status fold_alloc(sj_onnx_loader *L, fold *f, int32_t dtype, int rank, const int64_t *dims) {
    f->dtype = dtype;
    f->rank = rank;
    f->numel = 1;
    for (int i = 0; i < rank; i++) {
        f->dims[i] = dims[i];
        f->numel *= dims[i];
    }
    if (f->numel > FOLD_MAX_ELEMENTS) return NOT_FOLDED;
    f->e = sj_calloc(L->ctx, (size_t)(f->numel ? f->numel : 1), sizeof *f->e);
    if (!f->e) return sj_fail(L->ctx, SJ_E_NOMEM, "%s: out of memory", L->file);
    return SJ_OK;
}

/* ---- values known at load time ---- */

static bool whole(float x) { return isfinite(x) && x == floorf(x) && fabsf(x) < 9.0e15f; }

bool sj__onnx_foldable(const sj_onnx_val *v) {
    if (v->has_sym) return true;
    if (!v->has_const || v->c.numel > FOLD_MAX_ELEMENTS) return false;
    if (!v->c.f) return true;
    for (int64_t k = 0; k < v->c.numel; k++)
        if (!whole(v->c.f[k])) return false;
    return true;
}

sj_onnx_sym sj__onnx_sym_at(const sj_onnx_val *v, int64_t k) {
    if (v->has_sym) return (sj_onnx_sym){v->c.i[k], v->symn[k]};
    return (sj_onnx_sym){v->c.f ? (int64_t)v->c.f[k] : v->c.i[k], 0};
}

static sj_status get_fold(sj_onnx_loader *L, const sj_onnx_val *v, fold *f) {
    sj_status st = fold_alloc(L, f, v->c.dtype, v->c.rank, v->c.dims);
    if (st != SJ_OK) return st;
    for (int64_t k = 0; k < f->numel; k++) f->e[k] = sj__onnx_sym_at(v, k);
    return SJ_OK;
}

static const char *in_name(const sj_onnx_loader *L, int i) {
    node_t *n = L->node;
    return i < (int)n->n_input && n->input[i] && n->input[i][0] ? n->input[i] : NULL;
}

/* Defines output 0 as f (handing over its elements): a constant when no
 * element depends on N, else a symbolic value. */
static sj_status put_fold(sj_onnx_loader *L, fold *f) {
    node_t *n = L->node;
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

/* ---- attributes ---- */

static int64_t attr_i(const sj_onnx_loader *L, const char *name, int64_t def) {
    const Onnx__AttributeProto *a = sj__onnx_node_attr(L, name);
    return a && (a->has_i || (a->has_type && a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT))
               ? a->i
               : def;
}

/* ---- element arithmetic ---- */

static const char *sym_name(const sj_onnx_loader *L) {
    const char *s = sj_graph_symbol(L->g);
    return s ? s : "N";
}

/* Writes "3*N+2" for messages. */
static const char *sym_str(const sj_onnx_loader *L, sj_onnx_sym x, char *buf, size_t n) {
    if (!x.n) snprintf(buf, n, "%lld", (long long)x.c);
    else if (!x.c) snprintf(buf, n, "%lld*%s", (long long)x.n, sym_name(L));
    else snprintf(buf, n, "%lld*%s%+lld", (long long)x.n, sym_name(L), (long long)x.c);
    return buf;
}

/* +1 / -1 / 0 when x is positive / negative / zero for every N >= 1; 2 when
 * its sign depends on N. */
static int sign_over_n(sj_onnx_sym x) {
    if (!x.n) return x.c > 0 ? 1 : x.c < 0 ? -1 : 0;
    int64_t at1 = x.n + x.c;
    if (x.n > 0) return at1 > 0 ? 1 : 2;
    return at1 < 0 ? -1 : 2;
}

typedef enum { K_ADD, K_SUB, K_MUL, K_DIV, K_MOD, K_MAX, K_MIN, K_EQ, K_LT, K_LE, K_GT, K_GE,
               K_AND, K_OR, K_XOR } bin_kind;

static sj_status bin_elem(sj_onnx_loader *L, bin_kind k, bool is_float, sj_onnx_sym a,
                          sj_onnx_sym b, sj_onnx_sym *r) {
    char sa[64], sb[64];
    sj_onnx_sym d = {a.c - b.c, a.n - b.n};
    int s = sign_over_n(d);
    switch (k) {
    case K_ADD: *r = (sj_onnx_sym){a.c + b.c, a.n + b.n}; return SJ_OK;
    case K_SUB: *r = d; return SJ_OK;
    case K_MUL:
        if (a.n && b.n)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                     "cannot fold %s * %s: a product of two values that grow "
                                     "with %s is not of the form a*%s+b",
                                     sym_str(L, a, sa, 64), sym_str(L, b, sb, 64), sym_name(L),
                                     sym_name(L));
        *r = (sj_onnx_sym){a.c * b.c, a.c * b.n + a.n * b.c};
        return SJ_OK;
    case K_DIV:
    case K_MOD:
        if (b.n || b.c == 0)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "cannot fold %s %s %s: %s",
                                     sym_str(L, a, sa, 64), k == K_DIV ? "/" : "%",
                                     sym_str(L, b, sb, 64),
                                     b.n ? "the divisor depends on the symbolic dim"
                                         : "division by zero");
        if (k == K_MOD) {
            if (a.n && a.n % b.c)
                return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                         "cannot fold %s mod %lld: the remainder depends on %s",
                                         sym_str(L, a, sa, 64), (long long)b.c, sym_name(L));
            /* fmod=1 (and floats): the sign of the dividend, as C; else the divisor's */
            bool c_style = is_float || attr_i(L, "fmod", 0);
            int64_t m = is_float ? (int64_t)fmod((double)a.c, (double)b.c) : a.c % b.c;
            if (!c_style && m && ((m < 0) != (b.c < 0))) m += b.c;
            *r = (sj_onnx_sym){m, 0};
            return SJ_OK;
        }
        if (a.n % b.c || (a.n && a.c % b.c) || (is_float && a.c % b.c))
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                     "cannot fold %s / %lld: the division is not exact for every "
                                     "%s",
                                     sym_str(L, a, sa, 64), (long long)b.c, sym_name(L));
        *r = (sj_onnx_sym){a.c / b.c, a.n / b.c}; /* integer division truncates, as ONNX */
        return SJ_OK;
    case K_MAX:
    case K_MIN:
        if (s == 2)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                     "cannot fold %s(%s, %s): which is larger depends on %s",
                                     k == K_MAX ? "max" : "min", sym_str(L, a, sa, 64),
                                     sym_str(L, b, sb, 64), sym_name(L));
        *r = (s >= 0) == (k == K_MAX) ? a : b;
        return SJ_OK;
    case K_EQ:
    case K_LT:
    case K_LE:
    case K_GT:
    case K_GE: {
        if (s == 2)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                     "cannot fold the comparison of %s and %s: its answer "
                                     "depends on %s",
                                     sym_str(L, a, sa, 64), sym_str(L, b, sb, 64), sym_name(L));
        bool v = k == K_EQ ? s == 0 : k == K_LT ? s < 0 : k == K_LE ? s <= 0 : k == K_GT ? s > 0 : s >= 0;
        *r = (sj_onnx_sym){v, 0};
        return SJ_OK;
    }
    case K_AND: *r = (sj_onnx_sym){a.c && b.c, 0}; return SJ_OK;
    case K_OR: *r = (sj_onnx_sym){a.c || b.c, 0}; return SJ_OK;
    case K_XOR: *r = (sj_onnx_sym){(a.c != 0) != (b.c != 0), 0}; return SJ_OK;
    }
    return SJ_E_INTERNAL;
}

/* ---- broadcasting over folded tensors ---- */

static bool bcast_shape(const fold *a, const fold *b, int *rank, int64_t *dims) {
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

/* Flat index into f of output position `flat` of an output with dims. */
static int64_t bcast_index(const fold *f, int rank, const int64_t *dims, int64_t flat) {
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

/* ---- the folding ops ---- */

static sj_status fold_binary(sj_onnx_loader *L, bin_kind k, fold *in, fold *out) {
    int rank;
    int64_t dims[SJ_ONNX_MAX_RANK];
    if (!bcast_shape(&in[0], &in[1], &rank, dims))
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "operand shapes do not broadcast");
    bool cmp = k >= K_EQ && k <= K_GE;
    int32_t dt = cmp ? ONNX__TENSOR_PROTO__DATA_TYPE__BOOL : in[0].dtype;
    SJ_TRY(fold_alloc(L, out, dt, rank, dims));
    bool is_f = sj__onnx_dtype_is_float(in[0].dtype);
    for (int64_t i = 0; i < out->numel; i++)
        SJ_TRY(bin_elem(L, k, is_f, in[0].e[bcast_index(&in[0], rank, dims, i)],
                        in[1].e[bcast_index(&in[1], rank, dims, i)], &out->e[i]));
    return SJ_OK;
}

static sj_status fold_where(sj_onnx_loader *L, fold *in, fold *out) {
    int r1, rank;
    int64_t d1[SJ_ONNX_MAX_RANK], dims[SJ_ONNX_MAX_RANK];
    if (!bcast_shape(&in[1], &in[2], &r1, d1))
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "operand shapes do not broadcast");
    fold ab = {.rank = r1};
    memcpy(ab.dims, d1, sizeof d1);
    if (!bcast_shape(&in[0], &ab, &rank, dims))
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "operand shapes do not broadcast");
    SJ_TRY(fold_alloc(L, out, in[1].dtype, rank, dims));
    for (int64_t i = 0; i < out->numel; i++) {
        sj_onnx_sym c = in[0].e[bcast_index(&in[0], rank, dims, i)];
        out->e[i] = c.c ? in[1].e[bcast_index(&in[1], rank, dims, i)]
                        : in[2].e[bcast_index(&in[2], rank, dims, i)];
    }
    return SJ_OK;
}

static sj_status fold_cast(sj_onnx_loader *L, int32_t to, fold *in, fold *out) {
    SJ_TRY(fold_alloc(L, out, to, in->rank, in->dims));
    for (int64_t i = 0; i < out->numel; i++) {
        sj_onnx_sym x = in->e[i];
        if (to == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL) {
            int s = sign_over_n(x);
            if (s == 2) {
                char b[64];
                return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                         "cannot fold the cast of %s to bool: it depends on %s",
                                         sym_str(L, x, b, 64), sym_name(L));
            }
            out->e[i] = (sj_onnx_sym){s != 0, 0};
        } else if (to == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 && !x.n) {
            out->e[i] = (sj_onnx_sym){(int32_t)(uint32_t)x.c, 0};
        } else {
            out->e[i] = x;
        }
    }
    return SJ_OK;
}

/* Axes of Squeeze/Unsqueeze: attribute (opset < 13) or constant input 1. */
static sj_status fold_axes(sj_onnx_loader *L, int64_t *axes, int *n) {
    const Onnx__AttributeProto *a = sj__onnx_node_attr(L, "axes");
    *n = 0;
    if (a) {
        for (size_t i = 0; i < a->n_ints && i < SJ_ONNX_MAX_RANK; i++) axes[(*n)++] = a->ints[i];
        return SJ_OK;
    }
    const char *nm = in_name(L, 1);
    if (!nm) return SJ_OK;
    const sj_onnx_val *v = sj__onnx_lookup(L, nm);
    if (!v || !v->has_const || v->c.f || v->c.numel > SJ_ONNX_MAX_RANK)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "axes input '%s' is not a constant", nm);
    for (int64_t i = 0; i < v->c.numel; i++) axes[(*n)++] = v->c.i[i];
    return SJ_OK;
}

static sj_status fold_copy(sj_onnx_loader *L, fold *in, int rank, const int64_t *dims, fold *out) {
    SJ_TRY(fold_alloc(L, out, in->dtype, rank, dims));
    if (out->numel != in->numel)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "%lld elements do not fit the new shape (%lld)",
                                 (long long)in->numel, (long long)out->numel);
    memcpy(out->e, in->e, (size_t)in->numel * sizeof *in->e);
    return SJ_OK;
}

static sj_status fold_squeeze(sj_onnx_loader *L, bool un, fold *in, fold *out) {
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
    return fold_copy(L, in, rank, dims, out);
}

static sj_status fold_reshape(sj_onnx_loader *L, fold *in, fold *out) {
    const fold *t = &in[1];
    int64_t dims[SJ_ONNX_MAX_RANK], known = 1;
    int infer = -1;
    if (t->numel > SJ_ONNX_MAX_RANK) return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "target rank too large");
    for (int64_t i = 0; i < t->numel; i++) {
        if (t->e[i].n) return NOT_FOLDED; /* a symbolic target: a graph reshape */
        int64_t d = t->e[i].c;
        if (d == 0 && !attr_i(L, "allowzero", 0)) d = i < in[0].rank ? in[0].dims[i] : 0;
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
    return fold_copy(L, &in[0], (int)t->numel, dims, out);
}

static sj_status fold_concat(sj_onnx_loader *L, fold *in, int n, fold *out) {
    int64_t axis = attr_i(L, "axis", 0);
    int rank = in[0].rank;
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis out of range");
    int64_t dims[SJ_ONNX_MAX_RANK];
    memcpy(dims, in[0].dims, sizeof dims);
    dims[axis] = 0;
    for (int i = 0; i < n; i++) {
        if (in[i].rank != rank) return sj__onnx_node_fail(L, SJ_E_SHAPE, "operand ranks differ");
        dims[axis] += in[i].dims[axis];
    }
    SJ_TRY(fold_alloc(L, out, in[0].dtype, rank, dims));
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= dims[i];
    for (int i = (int)axis + 1; i < rank; i++) inner *= dims[i];
    int64_t at = 0;
    for (int64_t o = 0; o < outer; o++)
        for (int i = 0; i < n; i++) {
            int64_t run = in[i].dims[axis] * inner;
            memcpy(out->e + at, in[i].e + o * run, (size_t)run * sizeof *out->e);
            at += run;
        }
    return SJ_OK;
}

static sj_status fold_gather(sj_onnx_loader *L, fold *in, fold *out) {
    const fold *d = &in[0], *ix = &in[1];
    int64_t axis = attr_i(L, "axis", 0);
    if (axis < 0) axis += d->rank;
    if (axis < 0 || axis >= d->rank || d->rank - 1 + ix->rank > SJ_ONNX_MAX_RANK)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "axis out of range");
    int64_t dims[SJ_ONNX_MAX_RANK];
    int rank = 0;
    for (int i = 0; i < axis; i++) dims[rank++] = d->dims[i];
    for (int i = 0; i < ix->rank; i++) dims[rank++] = ix->dims[i];
    for (int i = (int)axis + 1; i < d->rank; i++) dims[rank++] = d->dims[i];
    SJ_TRY(fold_alloc(L, out, d->dtype, rank, dims));
    int64_t pre = 1, len = d->dims[axis], post = 1;
    for (int i = 0; i < axis; i++) pre *= d->dims[i];
    for (int i = (int)axis + 1; i < d->rank; i++) post *= d->dims[i];
    for (int64_t p = 0; p < pre; p++)
        for (int64_t j = 0; j < ix->numel; j++) {
            if (ix->e[j].n) return NOT_FOLDED; /* an index that grows with N */
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
static sj_status fold_slice(sj_onnx_loader *L, fold *in, int n_in, fold *out) {
    const fold *x = &in[0];
    int64_t st[SJ_ONNX_MAX_RANK], step[SJ_ONNX_MAX_RANK], dims[SJ_ONNX_MAX_RANK];
    for (int i = 0; i < x->rank; i++) st[i] = 0, step[i] = 1, dims[i] = x->dims[i];
    int64_t n = n_in > 1 ? in[1].numel : 0;
    if (n_in < 3 || in[2].numel != n || (n_in > 3 && in[3].numel != n) || (n_in > 4 && in[4].numel != n))
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "starts, ends, axes and steps differ in length");
    for (int64_t i = 0; i < n; i++) {
        for (int k = 1; k < n_in; k++)
            if (in[k].e[i].n) return NOT_FOLDED; /* bounds in N: a graph slice */
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
    SJ_TRY(fold_alloc(L, out, x->dtype, x->rank, dims));
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

static sj_status fold_expand(sj_onnx_loader *L, fold *in, fold *out) {
    fold t = {.rank = (int)in[1].numel};
    if (t.rank > SJ_ONNX_MAX_RANK) return sj__onnx_node_fail(L, SJ_E_SHAPE, "rank too large");
    for (int i = 0; i < t.rank; i++) {
        if (in[1].e[i].n) return NOT_FOLDED; /* to a symbolic shape: a graph expand */
        t.dims[i] = in[1].e[i].c;
    }
    int rank;
    int64_t dims[SJ_ONNX_MAX_RANK];
    if (!bcast_shape(&in[0], &t, &rank, dims))
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "shape does not broadcast");
    SJ_TRY(fold_alloc(L, out, in[0].dtype, rank, dims));
    for (int64_t i = 0; i < out->numel; i++) out->e[i] = in[0].e[bcast_index(&in[0], rank, dims, i)];
    return SJ_OK;
}

/* ConstantOfShape's value attribute: (dtype, value), default float 0. */
static sj_status fill_value(sj_onnx_loader *L, int32_t *dtype, double *value) {
    *dtype = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    *value = 0;
    const Onnx__AttributeProto *a = sj__onnx_node_attr(L, "value");
    if (!a) return SJ_OK;
    if (!a->t) return sj__onnx_node_fail(L, SJ_E_PARSE, "attribute 'value' holds no tensor");
    sj_onnx_tensor t;
    char what[64];
    snprintf(what, sizeof what, "%s: node #%d: value", L->file, L->node_index);
    SJ_TRY(sj__onnx_tensor_decode(L->ctx, a->t, what, &L->ext, &t));
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

static sj_status fold_const_of_shape(sj_onnx_loader *L, fold *in, fold *out) {
    int64_t dims[SJ_ONNX_MAX_RANK];
    if (in->numel > SJ_ONNX_MAX_RANK) return sj__onnx_node_fail(L, SJ_E_SHAPE, "rank too large");
    for (int64_t i = 0; i < in->numel; i++) {
        if (in->e[i].n) return NOT_FOLDED; /* a symbolic shape: a graph fill */
        dims[i] = in->e[i].c;
    }
    int32_t dt;
    double v;
    SJ_TRY(fill_value(L, &dt, &v));
    if (sj__onnx_dtype_is_float(dt) && !whole((float)v)) return NOT_FOLDED;
    SJ_TRY(fold_alloc(L, out, dt, (int)in->numel, dims));
    for (int64_t i = 0; i < out->numel; i++) out->e[i] = (sj_onnx_sym){(int64_t)v, 0};
    return SJ_OK;
}

static sj_status fold_range(sj_onnx_loader *L, fold *in, fold *out) {
    for (int k = 0; k < 3; k++)
        if (in[k].numel != 1 || in[k].e[0].n) return NOT_FOLDED; /* symbolic: a graph range */
    int64_t s = in[0].e[0].c, l = in[1].e[0].c, d = in[2].e[0].c;
    if (d == 0) return sj__onnx_node_fail(L, SJ_E_SHAPE, "delta is 0");
    int64_t n = d > 0 ? (l - s + d - 1) / d : (s - l - d - 1) / -d;
    if (n < 0) n = 0;
    int64_t dims[1] = {n};
    SJ_TRY(fold_alloc(L, out, in[0].dtype, 1, dims));
    for (int64_t i = 0; i < n; i++) out->e[i] = (sj_onnx_sym){s + i * d, 0};
    return SJ_OK;
}

/* Shape and Size read only the input's (static or symbolic) shape. */
static sj_status input_shape(sj_onnx_loader *L, int *rank, int64_t *dims, bool *sym) {
    const char *nm = in_name(L, 0);
    const sj_onnx_val *v = nm ? sj__onnx_lookup(L, nm) : NULL;
    if (!v) return sj__onnx_node_fail(L, SJ_E_PARSE, "input 0 is missing or undefined");
    if (v->v != SJ_NO_VALUE) {
        sj_value_desc d;
        SJ_TRY(sj_graph_value_desc(L->g, v->v, &d));
        *rank = d.shape.rank;
        for (int i = 0; i < d.shape.rank; i++) {
            sym[i] = d.shape.dims[i] == SJ_DIM_SYM;
            dims[i] = sym[i] ? 0 : d.shape.dims[i];
        }
        return SJ_OK;
    }
    if (!v->has_const && !v->has_sym)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "input '%s' has no shape shapejit knows", nm);
    *rank = v->c.rank;
    for (int i = 0; i < v->c.rank; i++) sym[i] = false, dims[i] = v->c.dims[i];
    return SJ_OK;
}

static sj_status fold_shape(sj_onnx_loader *L, bool size, fold *out) {
    int rank = 0;
    int64_t dims[SJ_ONNX_MAX_RANK];
    bool sym[SJ_ONNX_MAX_RANK];
    SJ_TRY(input_shape(L, &rank, dims, sym));
    if (size) {
        sj_onnx_sym p = {1, 0};
        int n_sym = 0;
        for (int i = 0; i < rank; i++) {
            if (sym[i]) n_sym++;
            else p.c *= dims[i];
        }
        if (n_sym > 1)
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                     "cannot fold Size: the element count grows with %s^%d", sym_name(L),
                                     n_sym);
        if (n_sym) p = (sj_onnx_sym){0, p.c};
        SJ_TRY(fold_alloc(L, out, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0, NULL));
        out->e[0] = p;
        return SJ_OK;
    }
    int64_t start = attr_i(L, "start", 0), end = attr_i(L, "end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = start < 0 ? 0 : start > rank ? rank : start;
    end = end < start ? start : end > rank ? rank : end;
    int64_t n = end - start;
    SJ_TRY(fold_alloc(L, out, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, &n));
    for (int64_t i = 0; i < n; i++)
        out->e[i] = sym[start + i] ? (sj_onnx_sym){0, 1} : (sj_onnx_sym){dims[start + i], 0};
    return SJ_OK;
}

/* ---- dispatch ---- */

typedef struct fold_op {
    const char *name;
    int min_in, max_in; /* foldable inputs read (further ones are attributes-only) */
    int kind;           /* bin_kind for binaries, else -1 */
} fold_op;

static const fold_op fold_ops[] = {
    {"Add", 2, 2, K_ADD},  {"Sub", 2, 2, K_SUB},   {"Mul", 2, 2, K_MUL},
    {"Div", 2, 2, K_DIV},  {"Mod", 2, 2, K_MOD},   {"Max", 2, 2, K_MAX},
    {"Min", 2, 2, K_MIN},  {"Equal", 2, 2, K_EQ},  {"Less", 2, 2, K_LT},
    {"LessOrEqual", 2, 2, K_LE}, {"Greater", 2, 2, K_GT}, {"GreaterOrEqual", 2, 2, K_GE},
    {"And", 2, 2, K_AND},  {"Or", 2, 2, K_OR},     {"Xor", 2, 2, K_XOR},
    {"Neg", 1, 1, -1},     {"Not", 1, 1, -1},      {"Identity", 1, 1, -1},
    {"Cast", 1, 1, -1},    {"CastLike", 2, 2, -1}, {"Where", 3, 3, -1},
    {"Unsqueeze", 1, 2, -1}, {"Squeeze", 1, 2, -1}, {"Reshape", 2, 2, -1},
    {"Concat", 1, 64, -1}, {"Gather", 2, 2, -1},   {"Slice", 3, 5, -1},
    {"Expand", 2, 2, -1},  {"ConstantOfShape", 1, 1, -1}, {"Range", 3, 3, -1},
};

static sj_status fold_node(sj_onnx_loader *L, const char *op, int kind, fold *in, int n, fold *out) {
    if (kind >= 0) return fold_binary(L, (bin_kind)kind, in, out);
    if (!strcmp(op, "Neg") || !strcmp(op, "Not") || !strcmp(op, "Identity")) {
        SJ_TRY(fold_alloc(L, out, in[0].dtype, in[0].rank, in[0].dims));
        for (int64_t i = 0; i < out->numel; i++) {
            sj_onnx_sym x = in[0].e[i];
            out->e[i] = op[0] == 'N' && op[1] == 'e' ? (sj_onnx_sym){-x.c, -x.n}
                        : op[0] == 'N'               ? (sj_onnx_sym){!x.c, 0}
                                                     : x;
        }
        return SJ_OK;
    }
    if (!strcmp(op, "Cast")) {
        int64_t to = attr_i(L, "to", 0);
        if (to != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 && to != ONNX__TENSOR_PROTO__DATA_TYPE__INT32 &&
            to != ONNX__TENSOR_PROTO__DATA_TYPE__BOOL && to != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
            return NOT_FOLDED;
        return fold_cast(L, (int32_t)to, &in[0], out);
    }
    if (!strcmp(op, "CastLike")) return fold_cast(L, in[1].dtype, &in[0], out);
    if (!strcmp(op, "Where")) return fold_where(L, in, out);
    if (!strcmp(op, "Unsqueeze")) return fold_squeeze(L, true, in, out);
    if (!strcmp(op, "Squeeze")) return fold_squeeze(L, false, in, out);
    if (!strcmp(op, "Reshape")) return fold_reshape(L, in, out);
    if (!strcmp(op, "Concat")) return fold_concat(L, in, n, out);
    if (!strcmp(op, "Gather")) return fold_gather(L, in, out);
    if (!strcmp(op, "Slice")) return fold_slice(L, in, n, out);
    if (!strcmp(op, "Expand")) return fold_expand(L, in, out);
    if (!strcmp(op, "ConstantOfShape")) return fold_const_of_shape(L, in, out);
    if (!strcmp(op, "Range")) return fold_range(L, in, out);
    return NOT_FOLDED;
}

sj_status sj__onnx_try_fold(sj_onnx_loader *L, bool *done) {
    *done = false;
    node_t *node = L->node;
    const char *op = node->op_type;
    fold out = {0};
    if (!strcmp(op, "Shape") || !strcmp(op, "Size")) {
        SJ_TRY(fold_shape(L, op[1] == 'i', &out));
        *done = true;
        return put_fold(L, &out);
    }
    const fold_op *fo = NULL;
    for (size_t i = 0; i < sizeof fold_ops / sizeof fold_ops[0] && !fo; i++)
        if (!strcmp(fold_ops[i].name, op)) fo = &fold_ops[i];
    int n = (int)node->n_input;
    while (n > 0 && !in_name(L, n - 1)) n--;
    if (!fo || n < fo->min_in || n > fo->max_in || node->n_output != 1) return SJ_OK;
    /* Unsqueeze/Squeeze read their axes themselves; the data must fold. */
    int n_read = !strcmp(op, "Unsqueeze") || !strcmp(op, "Squeeze") ? 1 : n;
    bool any_sym = false; /* float constants fold only beside a value in N */
    for (int i = 0; i < n_read; i++) {
        const char *nm = in_name(L, i);
        const sj_onnx_val *v = nm ? sj__onnx_lookup(L, nm) : NULL;
        if (!nm && !strcmp(op, "Slice")) return SJ_OK; /* an axes/steps gap: the graph mapper */
        if (!v || !sj__onnx_foldable(v)) return SJ_OK;
        any_sym |= v->has_sym;
    }
    /* Constants only: leave float arithmetic to the graph unless a
     * symbolic value is involved (exact integer folding otherwise). */
    fold in[64];
    memset(in, 0, sizeof in);
    sj_status st = SJ_OK;
    int got = 0;
    for (; got < n_read && st == SJ_OK; got++)
        st = get_fold(L, sj__onnx_lookup(L, in_name(L, got)), &in[got]);
    if (st == SJ_OK) {
        bool floats = false;
        for (int i = 0; i < n_read; i++) floats |= sj__onnx_dtype_is_float(in[i].dtype);
        if (floats && !any_sym && strcmp(op, "Cast")) st = NOT_FOLDED;
    }
    if (st == SJ_OK) st = fold_node(L, op, fo->kind, in, n_read, &out);
    for (int i = 0; i < got; i++) fold_free(L->ctx, &in[i]);
    if (st != SJ_OK) {
        fold_free(L->ctx, &out);
        return st == NOT_FOLDED ? SJ_OK : st; /* not folded: the graph mappers take it */
    }
    *done = true;
    return put_fold(L, &out);
}
