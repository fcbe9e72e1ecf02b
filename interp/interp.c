/* The reference interpreter's driver: checks the request, evaluates every
 * node in order at the requested extent, frees each intermediate after its
 * last reader, and copies the outputs into tensors the caller owns. */
#include "shapejit/ext/interp.h"
#include "ir/builder_impl.h"
#include "interp/interp_impl.h"

#include <string.h>

typedef struct run_state {
    const sj_graph *g;
    sj_ctx *ctx;
    int64_t extent;
    sj_tensor *vals; /* one per value; inputs and params borrow their data */
    bool *owned;     /* vals[v].data was allocated here */
    int *last_use;   /* index of v's last reader; n_nodes when an output needs it */
} run_state;

static sj_shape tensor_shape(const sj_tensor *t) {
    sj_shape s = {t->rank, {0}};
    memcpy(s.dims, t->dims, (size_t)t->rank * sizeof s.dims[0]);
    return s;
}

static sj_status check_extent(const sj_graph *g, int64_t extent) {
    if (!g->sym_name || (extent >= 1 && extent <= SJ_MAX_EXTENT)) return SJ_OK;
    return sj_fail(g->ctx, SJ_E_OUT_OF_RANGE, "interp: extent %s = %lld is outside 1..2^30",
                   g->sym_name, (long long)extent);
}

static sj_status check_input(const sj_graph *g, int i, const sj_tensor *t, int64_t extent) {
    const sj_node *n = &g->nodes[g->inputs[i]];
    sj_shape want = sj_shape_at(&n->shape, extent);
    if (t->rank < 0 || t->rank > SJ_MAX_RANK)
        return sj_fail(g->ctx, SJ_E_SHAPE, "interp: input %s: got a rank %d tensor, expected %s",
                       n->name, t->rank, sj__graph_shape_str(g, &want).s);
    sj_shape got = tensor_shape(t);
    if (got.rank != want.rank ||
        memcmp(got.dims, want.dims, (size_t)got.rank * sizeof got.dims[0]) != 0) {
        sj_shape_str expected = sj__graph_shape_str(g, &want);
        return sj_fail(g->ctx, SJ_E_SHAPE, "interp: input %s: got %s, expected %s (declared %s)",
                       n->name, sj__graph_shape_str(g, &got).s, expected.s,
                       sj__graph_shape_str(g, &n->shape).s);
    }
    if (!t->data)
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "interp: input %s: data is NULL", n->name);
    if (t->dtype != n->dtype)
        return sj_fail(g->ctx, SJ_E_SHAPE, "interp: input %s: got %s elements, expected %s",
                       n->name, sj_dtype_name(t->dtype), sj_dtype_name(n->dtype));
    return SJ_OK;
}

/* Every value must fit at this extent before anything is allocated. */
static sj_status check_sizes(const sj_graph *g, int64_t extent) {
    for (int v = 0; v < g->n_nodes; v++) {
        const sj_node *n = &g->nodes[v];
        if (n->op == SJ_OP_SLICE && g->sym_name && extent > sj__slice_extent_limit(g, n))
            return sj_fail(g->ctx, SJ_E_OUT_OF_RANGE,
                           "interp: value %d (slice%s%s) reads past its operand at %s = %lld (it "
                           "fits up to %lld)",
                           v, n->name ? " " : "", n->name ? n->name : "", g->sym_name,
                           (long long)extent, (long long)sj__slice_extent_limit(g, n));
        if (sj_shape_numel(&n->shape, extent) >= 0) continue;
        return sj_fail(g->ctx, SJ_E_OUT_OF_RANGE,
                       "interp: value %d (%s) %s has more than 2^40 elements at %s = %lld", v,
                       sj_op_name(n->op), sj__graph_shape_str(g, &n->shape).s, g->sym_name,
                       (long long)extent);
    }
    return SJ_OK;
}

static sj_status check_request(const sj_graph *g, int64_t extent, const sj_tensor *inputs,
                               const sj_tensor *outputs) {
    if ((g->n_inputs > 0 && !inputs) || (g->n_outputs > 0 && !outputs))
        return sj_fail(g->ctx, SJ_E_INVALID_ARG, "interp: inputs or outputs array is NULL");
    SJ_TRY(check_extent(g, extent));
    for (int i = 0; i < g->n_inputs; i++) SJ_TRY(check_input(g, i, &inputs[i], extent));
    return check_sizes(g, extent);
}

/* A value nobody reads is freed right after it is computed. */
static void compute_last_use(const sj_graph *g, int *last_use) {
    for (int v = 0; v < g->n_nodes; v++) {
        last_use[v] = v;
        const sj_node *n = &g->nodes[v];
        for (int i = 0; i < n->n_inputs; i++)
            if (n->inputs[i] != SJ_NO_VALUE) last_use[n->inputs[i]] = v;
    }
    for (int i = 0; i < g->n_outputs; i++) last_use[g->outputs[i].value] = g->n_nodes;
}

static void release(run_state *st, sj_value v) {
    if (!st->owned[v]) return;
    sj_tensor_free(st->ctx, &st->vals[v]);
    st->owned[v] = false;
}

static void bind_leaves(run_state *st, const sj_tensor *inputs) {
    const sj_graph *g = st->g;
    for (int i = 0; i < g->n_inputs; i++) st->vals[g->inputs[i]] = inputs[i];
    for (int v = 0; v < g->n_nodes; v++) {
        const sj_node *n = &g->nodes[v];
        if (n->op != SJ_OP_PARAM) continue;
        st->vals[v] = (sj_tensor){.rank = n->shape.rank, .bytes = n->bytes, .dtype = n->dtype};
        memcpy(st->vals[v].dims, n->shape.dims, sizeof n->shape.dims);
    }
}

static sj_status eval_node(run_state *st, sj_value v) {
    const sj_node *n = &st->g->nodes[v];
    if (n->op == SJ_OP_INPUT || n->op == SJ_OP_PARAM) return SJ_OK;
    sj_shape s = sj_shape_at(&n->shape, st->extent);
    SJ_TRY(sj_tensor_alloc_typed(st->ctx, n->dtype, s.rank, s.dims, &st->vals[v]));
    st->owned[v] = true;
    const sj_tensor *in[3] = {NULL, NULL, NULL};
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] != SJ_NO_VALUE) in[i] = &st->vals[n->inputs[i]];
    sj__interp_eval(n, in, &st->vals[v], st->extent);
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] != SJ_NO_VALUE && st->last_use[n->inputs[i]] == v)
            release(st, n->inputs[i]);
    if (st->last_use[v] == v) release(st, v);
    return SJ_OK;
}

static sj_status copy_outputs(run_state *st, sj_tensor *outputs) {
    const sj_graph *g = st->g;
    for (int i = 0; i < g->n_outputs; i++) {
        const sj_tensor *src = &st->vals[g->outputs[i].value];
        SJ_TRY(sj_tensor_alloc_typed(st->ctx, src->dtype, src->rank, src->dims, &outputs[i]));
        memcpy(outputs[i].bytes, src->bytes, (size_t)sj_tensor_bytes(src));
    }
    return SJ_OK;
}

static sj_status run(run_state *st, const sj_tensor *inputs, sj_tensor *outputs) {
    size_t n = (size_t)st->g->n_nodes;
    st->vals = sj_calloc(st->ctx, n, sizeof *st->vals);
    st->owned = sj_calloc(st->ctx, n, sizeof *st->owned);
    st->last_use = sj_calloc(st->ctx, n, sizeof *st->last_use);
    if (!st->vals || !st->owned || !st->last_use)
        return sj_fail(st->ctx, SJ_E_NOMEM, "interp: out of memory");
    compute_last_use(st->g, st->last_use);
    bind_leaves(st, inputs);
    for (int v = 0; v < st->g->n_nodes; v++) SJ_TRY(eval_node(st, v));
    return copy_outputs(st, outputs);
}

sj_status sj_interp_run(const sj_graph *g, int64_t extent, const sj_tensor *inputs,
                        sj_tensor *outputs) {
    if (!g) return SJ_E_INVALID_ARG;
    if (outputs) memset(outputs, 0, (size_t)g->n_outputs * sizeof *outputs);
    SJ_TRY(check_request(g, extent, inputs, outputs));
    /* Mapped weights are read in place: checked before, and after so a
     * file that changed during the run fails it rather than answering. */
    SJ_TRY(sj__graph_check_mapped(g, g->ctx));
    run_state st = {g, g->ctx, g->sym_name ? extent : 1, NULL, NULL, NULL};
    sj_status status = run(&st, inputs, outputs);
    if (status == SJ_OK) status = sj__graph_check_mapped(g, g->ctx);
    for (int v = 0; st.owned && v < g->n_nodes; v++) release(&st, v);
    if (status != SJ_OK)
        for (int i = 0; i < g->n_outputs; i++) sj_tensor_free(g->ctx, &outputs[i]);
    sj_free(g->ctx, st.vals);
    sj_free(g->ctx, st.owned);
    sj_free(g->ctx, st.last_use);
    return status;
}
