/* Contractions onto the graph: MatMul, Gemm, and Einsum of one or two
 * operands as sums, transposes and one batched matmul. */
#include "formats/onnx/onnx_node.h"
#include "formats/onnx/onnx_op.h"

#include <stdio.h>
#include <string.h>

static sj_status map_matmul(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    sj_value a, b, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &a));
    SJ_TRY(sj__onnx_in_value(L, 1, &b));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_matmul(L->g, a, b, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

static sj_status map_gemm(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    float alpha, beta;
    int64_t ta, tb;
    SJ_TRY(sj__onnx_attr_float(L, "alpha", 1.0f, &alpha));
    SJ_TRY(sj__onnx_attr_float(L, "beta", 1.0f, &beta));
    SJ_TRY(sj__onnx_attr_int(L, "transA", 0, &ta));
    SJ_TRY(sj__onnx_attr_int(L, "transB", 0, &tb));
    /* The opset < 7 'broadcast' attribute is not read: without it C had to be
     * exactly [M, N], which broadcasting computes the same way. */
    sj_value a, b, c, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_in_value(L, 0, &a));
    SJ_TRY(sj__onnx_in_value(L, 1, &b));
    SJ_TRY(sj__onnx_in_value_opt(L, 2, &c));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_gemm(L->g, a, b, c, alpha, beta, ta != 0, tb != 0, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

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

/* The product of a group of dims as one dim; a group holding a symbolic
 * dim must be that dim alone (merging it is the reshape's to check, and
 * einsum's groups are not known to keep it outermost). */
static sj_status ein_group(sj_onnx_loader *L, const int64_t *dims, int n, int64_t *out) {
    *out = 1;
    for (int i = 0; i < n; i++) {
        if (sj_dim_is_sym(dims[i])) {
            if (n > 1)
                return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                         "the equation merges the symbolic dim with other axes");
            *out = dims[i];
            return SJ_OK;
        }
        *out *= dims[i];
    }
    return SJ_OK;
}

static sj_status ein_reshape(sj_onnx_loader *L, sj_value *v, int rank, const int64_t *dims) {
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, *v, &s));
    if (s.rank == rank && !memcmp(s.dims, dims, sizeof(int64_t) * (size_t)rank)) return SJ_OK;
    return sj__onnx_node_prefix(L, sj_graph_reshape(L->g, *v, rank, dims, v));
}

/* Einsum of one or two operands without ellipsis or repeated labels in an
 * operand: sums, transposes, and contractions as one batched matmul
 * (batch labels, then the free labels of each side, then the contracted). */
static sj_status map_einsum(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    const Onnx__AttributeProto *a = sj__onnx_node_attr(L, "equation");
    if (!a || !sj__onnx_attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING))
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
    /* Trailing empty inputs are not operands (the registry's arity does
     * not count them); ops_ holds the at most two the row allows. */
    int n_in = sj__onnx_n_inputs(L);
    ein_op ops_[2];
    if (n_in < 1 || n_in > 2)
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "%d operands; 1 or 2 are supported", n_in);
    char out[SJ_MAX_RANK + 1] = "";
    const char *p = eq;
    for (int k = 0; k < n_in; k++) {
        ein_op *o = &ops_[k];
        memset(o, 0, sizeof *o);
        SJ_TRY(sj__onnx_in_value(L, k, &o->v));
        sj_shape s;
        SJ_TRY(sj__onnx_shape_of(L, o->v, &s));
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
        if (A->v < first) return sj__onnx_alias_input(L);
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


const sj_onnx_op sj__onnx_ops_matmul[] = {
    {"MatMul", 2, 2, 1, 1, NULL, map_matmul, SJ_OP_MATMUL, 0},
    {"Gemm", 2, 3, 1, 1, NULL, map_gemm, SJ_OP_GEMM, 0},
    {"Einsum", 1, 2, 1, 1, NULL, map_einsum, SJ_OP_MATMUL, 0},
};
const size_t sj__onnx_ops_matmul_n = sizeof sj__onnx_ops_matmul / sizeof sj__onnx_ops_matmul[0];
