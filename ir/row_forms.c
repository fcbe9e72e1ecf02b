/* Affine forms of integer index values (row_forms.h). Every step checks
 * for int64 overflow and gives up (n = 0) instead of guessing. */
#include "ir/row_forms.h"

#include <math.h>
#include <string.h>

#define PARAM_FIT_MAX ((int64_t)1 << 16) /* elements of a param worth fitting */

static bool is_int(sj_dtype t) { return t == SJ_I64 || t == SJ_I32; }

static const sj_shape *shape_of(const sj_graph *g, sj_value v) { return &g->nodes[v].shape; }

/* A one-form value as a tuple of its last axis's `len` entries (the last
 * coefficient folded into each entry's constant). */
static bool as_tuple(const sj_row_form *f, int rank, int len, sj_row_form *out) {
    if (f->n > 1) {
        if (f->n != len) return false;
        *out = *f;
        return true;
    }
    if (len < 1 || len > SJ_MAX_RANK) return false;
    memset(out, 0, sizeof *out);
    out->n = len;
    for (int t = 0; t < len; t++) {
        memcpy(out->c[t], f->c[0], sizeof out->c[t]);
        out->c[t][rank - 1] = 0;
        if (__builtin_mul_overflow(f->c[0][rank - 1], (int64_t)t, &out->c0[t]) ||
            __builtin_add_overflow(out->c0[t], f->c0[0], &out->c0[t]))
            return false;
    }
    return true;
}

/* An integer param whose every element is c0 + sum_d c_d * i_d. */
static void fit_param(const sj_node *nd, sj_row_form *out) {
    const sj_shape *s = &nd->shape;
    int64_t count = sj_shape_numel(s, 1);
    if (!nd->bytes || count < 1 || count > PARAM_FIT_MAX) return;
    int64_t stride[SJ_MAX_RANK], acc = 1;
    for (int d = s->rank - 1; d >= 0; d--) stride[d] = acc, acc *= s->dims[d];
#define AT(i) (nd->dtype == SJ_I64 ? ((const int64_t *)nd->bytes)[i] : ((const int32_t *)nd->bytes)[i])
    sj_row_form f = {.n = 1, .c0 = {AT(0)}};
    for (int d = 0; d < s->rank; d++)
        if (s->dims[d] > 1 && __builtin_sub_overflow(AT(stride[d]), f.c0[0], &f.c[0][d])) return;
    for (int64_t i = 0; i < count; i++) {
        int64_t want = f.c0[0], rem = i;
        for (int d = s->rank - 1; d >= 0; d--) {
            int64_t term;
            if (__builtin_mul_overflow(f.c[0][d], rem % s->dims[d], &term) ||
                __builtin_add_overflow(want, term, &want))
                return;
            rem /= s->dims[d];
        }
        if (AT(i) != want) return;
    }
#undef AT
    *out = f;
}

/* A reshape that only adds or drops dims of 1: each other dim keeps its
 * coefficient (a tuple's axis stays last). */
static void reshaped(const sj_shape *in, const sj_shape *os, const sj_row_form *f, sj_row_form *out) {
    int map[SJ_MAX_RANK], k = 0;
    for (int i = 0; i < os->rank; i++) {
        map[i] = -1;
        if (os->dims[i] == 1) continue;
        while (k < in->rank && in->dims[k] == 1) k++;
        if (k == in->rank || in->dims[k] != os->dims[i]) return;
        map[i] = k++;
    }
    while (k < in->rank && in->dims[k] == 1) k++;
    if (k != in->rank) return;
    if (f->n > 1 && map[os->rank - 1] != in->rank - 1) return;
    sj_row_form r = {.n = f->n};
    for (int t = 0; t < f->n; t++) {
        r.c0[t] = f->c0[t];
        for (int i = 0; i < os->rank; i++) r.c[t][i] = map[i] >= 0 ? f->c[t][map[i]] : 0;
    }
    *out = r;
}

/* f broadcast from shape in to shape os (right-aligned): new and stretched
 * axes take coefficient 0. */
static bool broadcast(const sj_shape *in, const sj_shape *os, const sj_row_form *f, sj_row_form *out) {
    int off = os->rank - in->rank;
    if (off < 0) return false;
    if (f->n > 1 && (in->dims[in->rank - 1] != os->dims[os->rank - 1])) return false;
    sj_row_form r = {.n = f->n};
    for (int t = 0; t < f->n; t++) {
        r.c0[t] = f->c0[t];
        for (int i = 0; i < os->rank; i++) {
            int j = i - off;
            r.c[t][i] = j >= 0 && in->dims[j] == os->dims[i] ? f->c[t][j] : 0;
        }
    }
    *out = r;
    return true;
}

/* a + sign * b over the result's shape os. */
static void added(const sj_shape *os, int rank, const sj_row_form *a, const sj_row_form *b, int sign,
                  sj_row_form *out) {
    sj_row_form ta = *a, tb = *b;
    if ((a->n > 1 || b->n > 1) &&
        (!as_tuple(a, rank, (int)os->dims[rank - 1], &ta) || !as_tuple(b, rank, (int)os->dims[rank - 1], &tb)))
        return; /* a tuple has rank >= 1 */
    sj_row_form r = {.n = ta.n};
    for (int t = 0; t < ta.n; t++) {
        int64_t bc0;
        if (__builtin_mul_overflow(tb.c0[t], (int64_t)sign, &bc0) ||
            __builtin_add_overflow(ta.c0[t], bc0, &r.c0[t]))
            return;
        for (int d = 0; d < rank; d++) {
            int64_t bc;
            if (__builtin_mul_overflow(tb.c[t][d], (int64_t)sign, &bc) ||
                __builtin_add_overflow(ta.c[t][d], bc, &r.c[t][d]))
                return;
        }
    }
    *out = r;
}

/* A form that is one constant everywhere: *k. */
static bool constant_of(const sj_row_form *f, int rank, int64_t *k) {
    if (f->n != 1) return false;
    for (int d = 0; d < rank; d++)
        if (f->c[0][d]) return false;
    *k = f->c0[0];
    return true;
}

static void scaled(const sj_row_form *f, int rank, int64_t k, sj_row_form *out) {
    sj_row_form r = {.n = f->n};
    for (int t = 0; t < f->n; t++) {
        if (__builtin_mul_overflow(f->c0[t], k, &r.c0[t])) return;
        for (int d = 0; d < rank; d++)
            if (__builtin_mul_overflow(f->c[t][d], k, &r.c[t][d])) return;
    }
    *out = r;
}

/* Operand k of nd broadcast to nd's shape, or false when unknown. */
static bool operand(const sj_graph *g, const sj_row_form *forms, const sj_node *nd, int k,
                    sj_row_form *out) {
    sj_value x = nd->inputs[k];
    return forms[x].n && broadcast(shape_of(g, x), &nd->shape, &forms[x], out);
}

void sj__row_form_of(const sj_graph *g, const sj_row_form *forms, sj_value v, sj_row_form *out) {
    const sj_node *nd = &g->nodes[v];
    memset(out, 0, sizeof *out);
    int rank = nd->shape.rank;
    if (!is_int(nd->dtype)) return;
    sj_row_form a, b;
    int64_t k;
    switch (nd->op) {
    case SJ_OP_PARAM: fit_param(nd, out); return;
    case SJ_OP_RANGE: /* rank 1 */
        if (nd->attrs.first != floor(nd->attrs.first) || nd->attrs.delta != floor(nd->attrs.delta) ||
            fabs(nd->attrs.first) > 0x1p52 || fabs(nd->attrs.delta) > 0x1p52)
            return;
        *out = (sj_row_form){.n = 1, .c0 = {(int64_t)nd->attrs.first}};
        out->c[0][0] = (int64_t)nd->attrs.delta;
        return;
    case SJ_OP_RESHAPE:
        if (forms[nd->inputs[0]].n) reshaped(shape_of(g, nd->inputs[0]), &nd->shape, &forms[nd->inputs[0]], out);
        return;
    case SJ_OP_EXPAND:
        if (operand(g, forms, nd, 0, &a)) *out = a;
        return;
    case SJ_OP_CAST:
        if (is_int(g->nodes[nd->inputs[0]].dtype)) *out = forms[nd->inputs[0]];
        return;
    case SJ_OP_ADD:
    case SJ_OP_SUB:
        if (operand(g, forms, nd, 0, &a) && operand(g, forms, nd, 1, &b))
            added(&nd->shape, rank, &a, &b, nd->op == SJ_OP_ADD ? 1 : -1, out);
        return;
    case SJ_OP_MUL:
        if (!operand(g, forms, nd, 0, &a) || !operand(g, forms, nd, 1, &b)) return;
        if (constant_of(&b, rank, &k)) scaled(&a, rank, k, out);
        else if (constant_of(&a, rank, &k)) scaled(&b, rank, k, out);
        return;
    case SJ_OP_CONCAT: { /* rank >= 1 */
        if (nd->attrs.axis != rank - 1) return;
        sj_value x = nd->inputs[0], y = nd->inputs[1];
        int la = (int)shape_of(g, x)->dims[rank - 1], lb = (int)shape_of(g, y)->dims[rank - 1];
        if (!forms[x].n || !forms[y].n || la + lb > SJ_MAX_RANK || !as_tuple(&forms[x], rank, la, &a) ||
            !as_tuple(&forms[y], rank, lb, &b))
            return;
        sj_row_form r = {.n = la + lb};
        for (int t = 0; t < la + lb; t++) {
            const sj_row_form *src = t < la ? &a : &b;
            int u = t < la ? t : t - la;
            r.c0[t] = src->c0[u];
            memcpy(r.c[t], src->c[u], sizeof r.c[t]);
        }
        *out = r;
        return;
    }
    default: return;
    }
}
