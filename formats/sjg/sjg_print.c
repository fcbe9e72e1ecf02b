/* .sjg printer: one statement per node in graph order, every weight inline
 * with %.9g (nine significant digits round-trip any float32 exactly), every
 * attribute spelled out. Unnamed values get generated names. */
#include "formats/sjg/sjg_impl.h"
#include "core/array.h"
#include "shapejit/model.h"

#include <stdio.h>
#include <string.h>

typedef struct out_buf {
    sj_ctx *ctx;
    char *s;
    size_t len, cap;
    bool failed;
} out_buf;

static void put_n(out_buf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (!sj__array_reserve(b->ctx, (void **)&b->s, &b->cap, b->len + n + 1, 1)) {
        b->failed = true;
        return;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void put(out_buf *b, const char *s) { put_n(b, s, strlen(s)); }

static void putf(out_buf *b, const char *fmt, ...) SJ_PRINTF(2, 3);
static void putf(out_buf *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    put_n(b, tmp, n < (int)sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A name bare when it can be, else quoted with escapes. */
static void put_name(out_buf *b, const char *name) {
    if (sjg_is_plain_name(name)) {
        put(b, name);
        return;
    }
    put(b, "\"");
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        if (*p == '"') put(b, "\\\"");
        else if (*p == '\\') put(b, "\\\\");
        else if (*p < 0x20 || *p == 0x7f) putf(b, "\\x%02x", *p);
        else put_n(b, (const char *)p, 1);
    }
    put(b, "\"");
}

static void put_float(out_buf *b, float v) { putf(b, "%.9g", (double)v); }

static void put_shape(out_buf *b, const sj_graph *g, const sj_shape *s) {
    put(b, "[");
    for (int i = 0; i < s->rank; i++) {
        if (i) put(b, ", ");
        int64_t d = s->dims[i];
        if (!sj_dim_is_sym(d)) {
            putf(b, "%lld", (long long)d);
            continue;
        }
        if (sj_dim_factor(d) != 1) putf(b, "%lld*", (long long)sj_dim_factor(d));
        put_name(b, g->sym_name);
        if (sj_dim_offset(d)) putf(b, "+%lld", (long long)sj_dim_offset(d));
    }
    put(b, "]");
}

/* Rows of the last dim on lines of their own (at most 8 values a line), so
 * a matrix reads like one. */
/* Element i of a param, in its own type's spelling. */
static void put_elem(out_buf *b, const sj_node *n, int64_t i) {
    switch (n->dtype) {
    case SJ_I64: putf(b, "%lld", (long long)((const int64_t *)n->bytes)[i]); return;
    case SJ_I32: putf(b, "%d", (int)((const int32_t *)n->bytes)[i]); return;
    case SJ_BOOL: putf(b, "%u", (unsigned)((const uint8_t *)n->bytes)[i]); return;
    default: put_float(b, n->data[i]); return;
    }
}

static void put_weights(out_buf *b, const sj_node *n) {
    int64_t count = sj_shape_numel(&n->shape, 1);
    if (count <= 8) {
        put(b, "[");
        for (int64_t i = 0; i < count; i++) {
            if (i) put(b, ", ");
            put_elem(b, n, i);
        }
        put(b, "]");
        return;
    }
    int64_t row = n->shape.rank ? n->shape.dims[n->shape.rank - 1] : 1;
    put(b, "[");
    for (int64_t i = 0; i < count; i++) {
        int64_t in_row = i % row;
        if (in_row % 8 == 0) put(b, i ? ",\n    " : "\n    ");
        else put(b, ", ");
        put_elem(b, n, i);
    }
    put(b, "\n  ]");
}

static void put_bool(out_buf *b, const char *key, bool v) { putf(b, ", %s=%s", key, v ? "true" : "false"); }

static void put_call(out_buf *b, const sj_graph *g, char **names, const bool *literal,
                     const sj_node *n) {
    const sj_node_attrs *a = &n->attrs;
    put(b, sj_op_name(n->op));
    put(b, "(");
    /* Trailing absent operands are left out; an absent one in the middle
     * (layernorm without scale but with bias) is written none. */
    int last = -1;
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] != SJ_NO_VALUE) last = i;
    for (int i = 0; i <= last; i++) {
        if (i) put(b, ", ");
        if (n->inputs[i] == SJ_NO_VALUE) put(b, "none");
        else if (literal[n->inputs[i]]) put_float(b, g->nodes[n->inputs[i]].data[0]);
        else put_name(b, names[n->inputs[i]]);
    }
    switch (n->op) {
    case SJ_OP_LEAKY_RELU:
        put(b, ", alpha=");
        put_float(b, a->alpha);
        break;
    case SJ_OP_REDUCE_SUM:
    case SJ_OP_REDUCE_MEAN:
    case SJ_OP_REDUCE_MAX: {
        put(b, ", axes=[");
        bool first = true;
        for (int i = 0; i < SJ_MAX_RANK; i++)
            if (a->axes & (1u << i)) {
                putf(b, first ? "%d" : ", %d", i);
                first = false;
            }
        put(b, "]");
        put_bool(b, "keepdims", a->keepdims);
        break;
    }
    case SJ_OP_GEMM:
        put(b, ", alpha=");
        put_float(b, a->alpha);
        put(b, ", beta=");
        put_float(b, a->beta);
        put_bool(b, "trans_a", a->trans_a);
        put_bool(b, "trans_b", a->trans_b);
        break;
    case SJ_OP_SOFTMAX:
    case SJ_OP_LOG_SOFTMAX: putf(b, ", axis=%d", a->axis); break;
    case SJ_OP_LAYERNORM:
        putf(b, ", axis=%d, epsilon=", a->axis);
        put_float(b, a->epsilon);
        break;
    case SJ_OP_TRANSPOSE: {
        const sj_shape *in = &g->nodes[n->inputs[0]].shape;
        put(b, ", perm=[");
        for (int i = 0; i < in->rank; i++) putf(b, i ? ", %d" : "%d", a->perm[i]);
        put(b, "]");
        break;
    }
    case SJ_OP_RESHAPE:
    case SJ_OP_EXPAND:
        put(b, ", shape=");
        put_shape(b, g, &n->shape);
        break;
    case SJ_OP_CAST: putf(b, ", to=%s", sj_dtype_name(n->dtype)); break;
    case SJ_OP_GATHER: putf(b, ", axis=%d", a->axis); break;
    case SJ_OP_RANGE:
    case SJ_OP_FILL:
        /* no operands, so the attributes open the list */
        putf(b, "dtype=%s, ", sj_dtype_name(n->dtype));
        if (n->op == SJ_OP_FILL) putf(b, "value=%.17g", a->delta);
        else putf(b, "start=%.17g, delta=%.17g", a->first, a->delta);
        if (n->op == SJ_OP_RANGE && a->start_n[0]) putf(b, ", start_n=%lld", (long long)a->start_n[0]);
        put(b, ", shape=");
        put_shape(b, g, &n->shape);
        break;
    case SJ_OP_SLICE: {
        const int64_t *lists[3] = {a->start, a->start_n, a->step};
        static const char *const keys[3] = {"start", "start_n", "step"};
        for (int l = 0; l < 3; l++) {
            putf(b, ", %s=[", keys[l]);
            for (int i = 0; i < n->shape.rank; i++)
                putf(b, i ? ", %lld" : "%lld", (long long)lists[l][i]);
            put(b, "]");
        }
        put(b, ", shape=");
        put_shape(b, g, &n->shape);
        break;
    }
    case SJ_OP_CONCAT:
    case SJ_OP_GATHER_ELEMENTS: putf(b, ", axis=%d", a->axis); break;
    case SJ_OP_GATHER_ND: putf(b, ", batch_dims=%d", a->axis); break;
    case SJ_OP_TRILU:
        putf(b, ", k=%lld", (long long)a->k);
        put_bool(b, "upper", a->upper);
        break;
    default: break;
    }
    put(b, ")");
}

/* names[v]: the value's own name, or "tV" (with '_' appended until unused)
 * for an unnamed one; generated names are sj_alloc'ed (free_names). */
static sj_status assign_names(const sj_graph *g, sjg_names *taken, char **names) {
    for (int v = 0; v < g->n_nodes; v++)
        if (g->nodes[v].name) {
            SJ_TRY(sjg_names_put(taken, g->nodes[v].name, v));
            names[v] = g->nodes[v].name;
        }
    for (int v = 0; v < g->n_nodes; v++) {
        if (names[v]) continue;
        char gen[64];
        int n = snprintf(gen, sizeof gen, "t%d", v);
        while (sjg_names_get(taken, gen) >= 0 && n < (int)sizeof gen - 1) gen[n++] = '_', gen[n] = '\0';
        SJ_TRY(sjg_names_put(taken, gen, v));
        if (!(names[v] = sj_strdup(g->ctx, gen))) return sj_fail(g->ctx, SJ_E_NOMEM, "sjg print: out of memory");
    }
    return SJ_OK;
}

static void free_names(const sj_graph *g, char **names) {
    for (int v = 0; v < g->n_nodes; v++)
        if (!g->nodes[v].name) sj_free(g->ctx, names[v]);
    sj_free(g->ctx, names);
}

/* A number written as an operand (`mul(x, 0.5)`) parses to a rank-0 param
 * named "lit@LINE:COL"; printing it back in place keeps such texts
 * readable. Only a literal with a single use qualifies: one param used
 * twice is a different graph from two params. */
static bool *find_literals(const sj_graph *g) {
    bool *literal = sj_calloc(g->ctx, (size_t)g->n_nodes, sizeof *literal);
    int *uses = sj_calloc(g->ctx, (size_t)g->n_nodes, sizeof *uses);
    if (!literal || !uses) {
        sj_free(g->ctx, literal);
        sj_free(g->ctx, uses);
        return NULL;
    }
    for (int v = 0; v < g->n_nodes; v++)
        for (int i = 0; i < g->nodes[v].n_inputs; i++)
            if (g->nodes[v].inputs[i] != SJ_NO_VALUE) uses[g->nodes[v].inputs[i]]++;
    for (int i = 0; i < g->n_outputs; i++) uses[g->outputs[i].value] += 2;
    for (int v = 0; v < g->n_nodes; v++) {
        const sj_node *n = &g->nodes[v];
        literal[v] = n->op == SJ_OP_PARAM && n->shape.rank == 0 && uses[v] == 1 && n->name &&
                     !strncmp(n->name, "lit@", 4);
    }
    sj_free(g->ctx, uses);
    return literal;
}

static void print_graph(out_buf *b, const sj_graph *g, char **names, const bool *literal) {
    put(b, "graph model");
    if (g->sym_name) {
        put(b, "(");
        put_name(b, g->sym_name);
        put(b, ")");
    }
    put(b, " {\n");
    for (int v = 0; v < g->n_nodes; v++) {
        const sj_node *n = &g->nodes[v];
        if (literal[v]) continue;
        put(b, "  ");
        if (n->op == SJ_OP_INPUT || n->op == SJ_OP_PARAM) {
            put(b, n->op == SJ_OP_INPUT ? "input " : "param ");
            put_name(b, names[v]);
            put(b, ": ");
            if (n->dtype != SJ_F32) put(b, sj_dtype_name(n->dtype));
            put_shape(b, g, &n->shape);
            if (n->op == SJ_OP_PARAM) {
                put(b, " = ");
                put_weights(b, n);
            }
        } else {
            put_name(b, names[v]);
            put(b, " = ");
            put_call(b, g, names, literal, n);
        }
        put(b, "\n");
    }
    for (int i = 0; i < g->n_outputs; i++) {
        put(b, "  output ");
        put_name(b, g->outputs[i].name);
        if (strcmp(g->outputs[i].name, names[g->outputs[i].value]) != 0) {
            put(b, " = ");
            put_name(b, names[g->outputs[i].value]);
        }
        put(b, "\n");
    }
    put(b, "}\n");
}

sj_status sj_sjg_print(const sj_graph *g, char **out, size_t *out_len) {
    if (!g || !out) return sj_fail(g ? g->ctx : NULL, SJ_E_INVALID_ARG, "sj_sjg_print: NULL argument");
    *out = NULL;
    if (out_len) *out_len = 0;
    sj_ctx *ctx = g->ctx;
    char **names = sj_calloc(ctx, (size_t)g->n_nodes, sizeof *names);
    if (!names) return sj_fail(ctx, SJ_E_NOMEM, "sjg print: out of memory");
    sjg_names taken;
    sjg_names_init(&taken, ctx);
    sj_status st = assign_names(g, &taken, names);
    bool *literal = NULL;
    if (st == SJ_OK && !(literal = find_literals(g)))
        st = sj_fail(ctx, SJ_E_NOMEM, "sjg print: out of memory");
    out_buf b = {ctx, NULL, 0, 0, false};
    if (st == SJ_OK) {
        print_graph(&b, g, names, literal);
        if (b.failed) st = sj_fail(ctx, SJ_E_NOMEM, "sjg print: out of memory");
    }
    sjg_names_free(&taken);
    free_names(g, names);
    sj_free(ctx, literal);
    if (st != SJ_OK) {
        sj_free(ctx, b.s);
        return st;
    }
    *out = b.s;
    if (out_len) *out_len = b.len;
    return SJ_OK;
}
