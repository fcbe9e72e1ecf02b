/* Graph lifetime, leaves, names, outputs, inspection and deep copy. The op
 * builders with their shape inference live in shape_infer.c. */
#include "ir/builder_impl.h"
#include "core/array.h"

#include <stdio.h>
#include <string.h>

static const char *node_name(const void *g, int32_t v) {
    return ((const sj_graph *)g)->nodes[v].name;
}

sj_status sj_graph_create(sj_ctx *ctx, const char *sym_name, sj_graph **out) {
    if (!ctx || !out)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *out = NULL;
    if (sym_name && !sym_name[0])
        return sj_fail(ctx, SJ_E_INVALID_ARG, "graph: the symbolic dim's name is empty");
    sj_graph *g = sj_calloc(ctx, 1, sizeof *g);
    if (!g) return sj_fail(ctx, SJ_E_NOMEM, "graph: out of memory");
    g->ctx = ctx;
    pthread_mutex_init(&g->hash_lock, NULL);
    sj__name_index_init(&g->names, node_name, g);
    if (sym_name && !(g->sym_name = sj_strdup(ctx, sym_name))) {
        pthread_mutex_destroy(&g->hash_lock);
        sj_free(ctx, g);
        return sj_fail(ctx, SJ_E_NOMEM, "graph: out of memory");
    }
    *out = g;
    return SJ_OK;
}

void sj_graph_destroy(sj_graph *g) {
    if (!g) return;
    sj_ctx *ctx = g->ctx;
    for (int i = 0; i < g->n_nodes; i++) {
        sj_free(ctx, g->nodes[i].name);
        if (!g->nodes[i].map) sj_free(ctx, g->nodes[i].data);
    }
    for (int i = 0; i < g->n_maps; i++) sj__weight_map_release(g->maps[i]);
    sj_free(ctx, g->maps);
    for (int i = 0; i < g->n_outputs; i++) sj_free(ctx, g->outputs[i].name);
    sj_free(ctx, g->nodes);
    sj_free(ctx, g->inputs);
    sj_free(ctx, g->outputs);
    sj_free(ctx, g->sym_name);
    sj_free(ctx, g->source_path);
    sj__name_index_free(ctx, &g->names);
    pthread_mutex_destroy(&g->hash_lock);
    sj_free(ctx, g);
}

sj_ctx *sj_graph_ctx(const sj_graph *g) { return g ? g->ctx : NULL; }

/* ---- shared helpers (builder_impl.h) ---- */

sj_shape_str sj__graph_shape_str(const sj_graph *g, const sj_shape *s) {
    sj_shape_str r;
    sj_shape_format(s, g->sym_name, r.s, sizeof r.s);
    return r;
}

sj_node sj__node_blank(sj_op op) {
    sj_node n;
    memset(&n, 0, sizeof n);
    n.op = op;
    for (int i = 0; i < 3; i++) n.inputs[i] = SJ_NO_VALUE;
    return n;
}

sj_status sj__graph_check_value(sj_graph *g, const char *what, sj_value v) {
    if (v >= 0 && v < g->n_nodes) return SJ_OK;
    return sj_fail(g->ctx, SJ_E_INVALID_ARG, "%s: value %d does not exist (graph has %d values)",
                   what, (int)v, g->n_nodes);
}

sj_status sj__graph_make_shape(sj_graph *g, const char *what, int rank, const int64_t *dims,
                              sj__dims_allowed allowed, sj_shape *out) {
    if (rank < 0 || rank > SJ_MAX_RANK)
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "%s: rank %d is outside 0..%d", what, rank,
                       SJ_MAX_RANK);
    if (rank > 0 && !dims) return sj_fail(g->ctx, SJ_E_INVALID_ARG, "%s: dims is NULL", what);
    memset(out, 0, sizeof *out);
    out->rank = rank;
    for (int i = 0; i < rank; i++) {
        int64_t d = dims[i], k = sj_dim_factor(d), c = sj_dim_offset(d);
        if (d < 0 && (k < 1 || k > SJ_MAX_SYM_FACTOR || c > SJ_MAX_SYM_OFFSET))
            return sj_fail(g->ctx, SJ_E_SHAPE,
                           "%s: dim %d is %lld, neither >= 1 nor SJ_DIM_AFFINE(k, c) with k in "
                           "1..%lld and c in 0..%lld",
                           what, i, (long long)d, (long long)SJ_MAX_SYM_FACTOR,
                           (long long)SJ_MAX_SYM_OFFSET);
        if (k && !g->sym_name)
            return sj_fail(g->ctx, SJ_E_SHAPE,
                           "%s: dim %d is symbolic but the graph has no symbolic dim", what, i);
        if (k && allowed == SJ__DIMS_CONST)
            return sj_fail(g->ctx, SJ_E_SHAPE, "%s: dim %d may not be the symbolic dim %s", what,
                           i, g->sym_name);
        if (!k && d < 1)
            return sj_fail(g->ctx, SJ_E_SHAPE, "%s: dim %d is %lld; dims must be >= 1", what, i,
                           (long long)d);
        out->dims[i] = d;
    }
    return SJ_OK;
}

/* sj__array_reserve for the graph's int-counted arrays. */
static bool reserve(sj_ctx *ctx, void **arr, int *cap, int need, size_t elem) {
    size_t c = (size_t)*cap;
    if (!sj__array_reserve(ctx, arr, &c, (size_t)need, elem)) return false;
    *cap = c > INT32_MAX ? INT32_MAX : (int)c; /* counts stay below INT32_MAX */
    return true;
}

/* Every shape must fit in SJ_MAX_ELEMENTS at extent 1. Larger extents are
 * checked where they are used (sj_shape_numel returns -1): a single bound
 * at SJ_MAX_EXTENT would reject attention scores [N, N] and even [N, 2048]. */
static sj_status check_size(sj_graph *g, const char *what, const sj_shape *s) {
    if (sj_shape_numel(s, 1) >= 0) return SJ_OK;
    return sj_fail(g->ctx, SJ_E_SHAPE, "%s: %s has more than 2^40 elements", what,
                   sj__graph_shape_str(g, s).s);
}

sj_status sj__graph_append(sj_graph *g, const char *what, const sj_node *node, sj_value *out) {
    SJ_TRY(check_size(g, what, &node->shape));
    if (g->n_nodes == INT32_MAX ||
        !reserve(g->ctx, (void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes) ||
        (node->name && !sj__name_index_reserve(g->ctx, &g->names, 1)))
        return sj_fail(g->ctx, SJ_E_NOMEM, "%s: out of memory growing the graph", what);
    g->nodes[g->n_nodes] = *node;
    if (node->name) sj__name_index_add(&g->names, g->n_nodes);
    if (out) *out = g->n_nodes;
    g->n_nodes++;
    g->hash_valid = false;
    return SJ_OK;
}

/* ---- names ---- */

static sj_status check_name(sj_graph *g, const char *what, const char *name, sj_value self) {
    if (!name || !name[0]) return sj_fail(g->ctx, SJ_E_INVALID_ARG, "%s: empty name", what);
    int32_t holder = sj__name_index_find(&g->names, name);
    if (holder >= 0 && holder != self)
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "%s: name '%s' is already value %d", what, name,
                       (int)holder);
    return SJ_OK;
}

sj_status sj_graph_set_name(sj_graph *g, sj_value v, const char *name) {
    if (!g) return SJ_E_INVALID_ARG;
    SJ_TRY(sj__graph_check_value(g, "set_name", v));
    SJ_TRY(check_name(g, "set_name", name, v));
    char *copy = NULL;
    if (!sj__name_index_reserve(g->ctx, &g->names, 1) || !(copy = sj_strdup(g->ctx, name)))
        return sj_fail(g->ctx, SJ_E_NOMEM, "set_name: out of memory");
    if (g->nodes[v].name) sj__name_index_remove(&g->names, v); /* filed under the old name */
    sj_free(g->ctx, g->nodes[v].name);
    g->nodes[v].name = copy;
    sj__name_index_add(&g->names, v);
    return SJ_OK;
}

/* ---- leaves ---- */

/* Appends the leaf n (shape set; data, if any, handed over) under a copy of
 * name. On failure frees n's data and leaves the graph unchanged. */
static sj_status append_leaf(sj_graph *g, const char *what, const char *name, sj_node *n,
                             sj_value *out) {
    sj_status st = (n->name = sj_strdup(g->ctx, name))
                       ? sj__graph_append(g, what, n, out)
                       : sj_fail(g->ctx, SJ_E_NOMEM, "%s: out of memory", what);
    if (st != SJ_OK) {
        sj_free(g->ctx, n->name);
        if (!n->map) sj_free(g->ctx, n->data);
    }
    return st;
}

static sj_status check_dtype(sj_graph *g, const char *what, sj_dtype dtype) {
    if ((int)dtype >= 0 && dtype < SJ_DTYPE_COUNT_) return SJ_OK;
    return sj_fail(g->ctx, SJ_E_INVALID_ARG, "%s: element type %d does not exist", what,
                   (int)dtype);
}

sj_status sj_graph_input_typed(sj_graph *g, const char *name, sj_dtype dtype, int rank,
                               const int64_t *dims, sj_value *out) {
    if (!g) return SJ_E_INVALID_ARG;
    char what[96];
    snprintf(what, sizeof what, "input %s", name ? name : "(null)");
    sj_node n = sj__node_blank(SJ_OP_INPUT);
    n.dtype = dtype;
    SJ_TRY(check_dtype(g, what, dtype));
    SJ_TRY(check_name(g, what, name, SJ_NO_VALUE));
    SJ_TRY(sj__graph_make_shape(g, what, rank, dims, SJ__DIMS_AFFINE, &n.shape));
    /* Reserve the input list first so a failed append leaves no stray entry. */
    if (!reserve(g->ctx, (void **)&g->inputs, &g->cap_inputs, g->n_inputs + 1, sizeof *g->inputs))
        return sj_fail(g->ctx, SJ_E_NOMEM, "%s: out of memory", what);
    sj_value v;
    SJ_TRY(append_leaf(g, what, name, &n, &v));
    g->inputs[g->n_inputs++] = v;
    if (out) *out = v;
    return SJ_OK;
}

sj_status sj_graph_input(sj_graph *g, const char *name, int rank, const int64_t *dims,
                         sj_value *out) {
    return sj_graph_input_typed(g, name, SJ_F32, rank, dims, out);
}

/* n: a param leaf of dtype and dims, checked; *bytes its data size. */
static sj_status param_leaf(sj_graph *g, const char *what, const char *name, sj_dtype dtype,
                            int rank, const int64_t *dims, const void *data, sj_node *n,
                            size_t *bytes) {
    *n = sj__node_blank(SJ_OP_PARAM);
    n->dtype = dtype;
    SJ_TRY(check_dtype(g, what, dtype));
    SJ_TRY(check_name(g, what, name, SJ_NO_VALUE));
    SJ_TRY(sj__graph_make_shape(g, what, rank, dims, SJ__DIMS_CONST, &n->shape));
    SJ_TRY(check_size(g, what, &n->shape));
    if (!data) return sj_fail(g->ctx, SJ_E_INVALID_ARG, "%s: data is NULL", what);
    size_t count = (size_t)sj_shape_numel(&n->shape, 1);
    if (sj_mul_overflow_size(count, sj_dtype_size(dtype), bytes))
        return sj_fail(g->ctx, SJ_E_NOMEM, "%s: out of memory for %zu elements", what, count);
    return SJ_OK;
}

sj_status sj_graph_param_typed(sj_graph *g, const char *name, sj_dtype dtype, int rank,
                               const int64_t *dims, const void *data, sj_value *out) {
    if (!g) return SJ_E_INVALID_ARG;
    char what[96];
    snprintf(what, sizeof what, "param %s", name ? name : "(null)");
    sj_node n;
    size_t bytes;
    SJ_TRY(param_leaf(g, what, name, dtype, rank, dims, data, &n, &bytes));
    if (!(n.bytes = sj_alloc(g->ctx, bytes)))
        return sj_fail(g->ctx, SJ_E_NOMEM, "%s: out of memory for %zu bytes", what, bytes);
    memcpy(n.bytes, data, bytes);
    if (dtype == SJ_BOOL) /* one canonical byte per truth value, so equal graphs hash equal */
        for (size_t i = 0; i < bytes; i++) ((uint8_t *)n.bytes)[i] = ((uint8_t *)n.bytes)[i] != 0;
    return append_leaf(g, what, name, &n, out);
}

sj_status sj__graph_param_mapped(sj_graph *g, const char *name, sj_dtype dtype, int rank,
                                const int64_t *dims, const void *data, sj_weight_map *map,
                                sj_value *out) {
    char what[96];
    snprintf(what, sizeof what, "param %s", name ? name : "(null)");
    if (dtype == SJ_BOOL || !map)
        return sj_fail(g->ctx, SJ_E_INTERNAL, "%s: a mapped param must be a number with its map",
                       what);
    sj_node n;
    size_t bytes;
    SJ_TRY(param_leaf(g, what, name, dtype, rank, dims, data, &n, &bytes));
    const uint8_t *base = sj__weight_map_data(map), *p = data;
    if (p < base || (size_t)(p - base) > sj__weight_map_size(map) ||
        bytes > sj__weight_map_size(map) - (size_t)(p - base) ||
        (uintptr_t)p % sj_dtype_size(dtype) != 0)
        return sj_fail(g->ctx, SJ_E_INTERNAL, "%s: data does not lie aligned inside its mapping",
                       what);
    int known = 0;
    while (known < g->n_maps && g->maps[known] != map) known++;
    if (known == g->n_maps &&
        !reserve(g->ctx, (void **)&g->maps, &g->cap_maps, g->n_maps + 1, sizeof *g->maps))
        return sj_fail(g->ctx, SJ_E_NOMEM, "%s: out of memory", what);
    n.bytes = (void *)data;
    n.map = map;
    SJ_TRY(append_leaf(g, what, name, &n, out));
    if (known == g->n_maps) {
        sj__weight_map_retain(map);
        g->maps[g->n_maps++] = map;
    }
    return SJ_OK;
}

sj_status sj_graph_param(sj_graph *g, const char *name, int rank, const int64_t *dims,
                         const float *data, sj_value *out) {
    return sj_graph_param_typed(g, name, SJ_F32, rank, dims, data, out);
}

/* ---- outputs ---- */

sj_status sj_graph_output(sj_graph *g, sj_value v, const char *name) {
    if (!g) return SJ_E_INVALID_ARG;
    SJ_TRY(sj__graph_check_value(g, "output", v));
    if (!name || !name[0]) return sj_fail(g->ctx, SJ_E_INVALID_ARG, "output: empty name");
    for (int i = 0; i < g->n_outputs; i++)
        if (strcmp(g->outputs[i].name, name) == 0)
            return sj_fail(g->ctx, SJ_E_INVALID_ARG, "output %s: already output %d", name, i);
    if (!reserve(g->ctx, (void **)&g->outputs, &g->cap_outputs, g->n_outputs + 1,
                 sizeof *g->outputs))
        return sj_fail(g->ctx, SJ_E_NOMEM, "output %s: out of memory", name);
    char *copy = sj_strdup(g->ctx, name);
    if (!copy) return sj_fail(g->ctx, SJ_E_NOMEM, "output %s: out of memory", name);
    g->outputs[g->n_outputs++] = (sj_graph_output_entry){v, copy};
    g->hash_valid = false;
    return SJ_OK;
}

/* ---- inspection ---- */

const char *sj_graph_symbol(const sj_graph *g) { return g ? g->sym_name : NULL; }
int sj_graph_num_values(const sj_graph *g) { return g ? g->n_nodes : 0; }
int sj_graph_num_inputs(const sj_graph *g) { return g ? g->n_inputs : 0; }
int sj_graph_num_outputs(const sj_graph *g) { return g ? g->n_outputs : 0; }

static sj_status describe(const sj_graph *g, sj_value v, const char *name, sj_value_desc *out) {
    out->name = name;
    out->value = v;
    out->shape = g->nodes[v].shape;
    out->dtype = g->nodes[v].dtype;
    return SJ_OK;
}

sj_status sj_graph_input_desc(const sj_graph *g, int i, sj_value_desc *out) {
    if (!g || !out)
        return sj_fail(g ? g->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    if (i < 0 || i >= g->n_inputs)
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "input_desc: no input %d (graph has %d)", i,
                       g->n_inputs);
    sj_value v = g->inputs[i];
    return describe(g, v, g->nodes[v].name, out);
}

sj_status sj_graph_output_desc(const sj_graph *g, int i, sj_value_desc *out) {
    if (!g || !out)
        return sj_fail(g ? g->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    if (i < 0 || i >= g->n_outputs)
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "output_desc: no output %d (graph has %d)", i,
                       g->n_outputs);
    return describe(g, g->outputs[i].value, g->outputs[i].name, out);
}

sj_status sj_graph_value_desc(const sj_graph *g, sj_value v, sj_value_desc *out) {
    if (!g || !out)
        return sj_fail(g ? g->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    if (v < 0 || v >= g->n_nodes)
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "value_desc: no value %d (graph has %d)", (int)v,
                       g->n_nodes);
    return describe(g, v, g->nodes[v].name, out);
}

int sj_graph_find_input(const sj_graph *g, const char *name) {
    if (!g || !name) return -1;
    for (int i = 0; i < g->n_inputs; i++)
        if (strcmp(g->nodes[g->inputs[i]].name, name) == 0) return i;
    return -1;
}

/* ---- deep copy ---- */

static sj_status clone_node(sj_ctx *ctx, const sj_node *src, sj_node *dst) {
    *dst = *src;
    dst->name = NULL;
    /* Bytes in a map are read-only: shared, the clone holding the map
     * (clone_into); owned bytes are copied. */
    if (!src->map) dst->data = NULL;
    if (src->name && !(dst->name = sj_strdup(ctx, src->name))) return SJ_E_NOMEM;
    if (!src->map && src->data) {
        size_t bytes = (size_t)sj_shape_numel(&src->shape, 1) * sj_dtype_size(src->dtype);
        if (!(dst->bytes = sj_alloc(ctx, bytes))) return SJ_E_NOMEM;
        memcpy(dst->bytes, src->bytes, bytes);
    }
    return SJ_OK;
}

/* Fills the empty graph c with copies of g's contents; on failure c holds
 * whatever was copied so far and sj_graph_destroy frees it. */
static sj_status clone_into(const sj_graph *g, sj_graph *c) {
    sj_ctx *ctx = g->ctx;
    if (!reserve(ctx, (void **)&c->nodes, &c->cap_nodes, g->n_nodes, sizeof *c->nodes) ||
        !reserve(ctx, (void **)&c->inputs, &c->cap_inputs, g->n_inputs, sizeof *c->inputs) ||
        !reserve(ctx, (void **)&c->outputs, &c->cap_outputs, g->n_outputs, sizeof *c->outputs))
        return SJ_E_NOMEM;
    for (int i = 0; i < g->n_nodes; i++) {
        sj_status st = clone_node(ctx, &g->nodes[i], &c->nodes[i]);
        c->n_nodes = i + 1; /* counted even on failure so destroy frees the partial copy */
        if (st != SJ_OK) return st;
    }
    if (g->n_maps && !reserve(ctx, (void **)&c->maps, &c->cap_maps, g->n_maps, sizeof *c->maps))
        return SJ_E_NOMEM;
    for (int i = 0; i < g->n_maps; i++) {
        sj__weight_map_retain(g->maps[i]);
        c->maps[c->n_maps++] = g->maps[i];
    }
    /* Same node ids, so the copy's index holds the same slots. */
    if (!sj__name_index_copy(ctx, &c->names, &g->names)) return SJ_E_NOMEM;
    for (int i = 0; i < g->n_inputs; i++) c->inputs[c->n_inputs++] = g->inputs[i];
    for (int i = 0; i < g->n_outputs; i++) {
        char *name = sj_strdup(ctx, g->outputs[i].name);
        if (!name) return SJ_E_NOMEM;
        c->outputs[c->n_outputs++] = (sj_graph_output_entry){g->outputs[i].value, name};
    }
    return SJ_OK;
}

sj_status sj_graph_clone(const sj_graph *g, sj_graph **out) {
    if (!g || !out)
        return sj_fail(g ? g->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *out = NULL;
    sj_graph *c;
    SJ_TRY(sj_graph_create(g->ctx, g->sym_name, &c));
    sj_status st = clone_into(g, c);
    if (st != SJ_OK) {
        sj_graph_destroy(c);
        return sj_fail(g->ctx, st, "graph clone: out of memory");
    }
    *out = c;
    return SJ_OK;
}
