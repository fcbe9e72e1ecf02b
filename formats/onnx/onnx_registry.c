/* The op registry's one dispatcher: a node's row is looked up once, its
 * arity checked against the row, then the row's fold runs when the inputs
 * are known at load time, and its map otherwise.
 *
 * The rows live in the family files (onnx_op_*.c), next to their
 * functions, so C cannot merge them into one sorted const table at compile
 * time. Each load sorts pointers to them (about a hundred, once per model,
 * which is nothing beside unpacking the protobuf) and then finds every
 * node's row by binary search; the sort also finds a name registered
 * twice. The index belongs to the loader: no state outlives a load. */
#include "formats/onnx/onnx_node.h"
#include "formats/onnx/onnx_layout.h"
#include "formats/onnx/onnx_op.h"

#include <stdlib.h>
#include <string.h>

typedef struct family {
    const sj_onnx_op *rows;
    const size_t *n;
} family;

static const family families[] = {
    {sj__onnx_ops_math, &sj__onnx_ops_math_n},
    {sj__onnx_ops_logic, &sj__onnx_ops_logic_n},
    {sj__onnx_ops_activation, &sj__onnx_ops_activation_n},
    {sj__onnx_ops_reduce, &sj__onnx_ops_reduce_n},
    {sj__onnx_ops_norm, &sj__onnx_ops_norm_n},
    {sj__onnx_ops_matmul, &sj__onnx_ops_matmul_n},
    {sj__onnx_ops_reshape, &sj__onnx_ops_reshape_n},
    {sj__onnx_ops_layout, &sj__onnx_ops_layout_n},
    {sj__onnx_ops_index, &sj__onnx_ops_index_n},
    {sj__onnx_ops_shape, &sj__onnx_ops_shape_n},
    {sj__onnx_ops_conv, &sj__onnx_ops_conv_n},
    {sj__onnx_ops_pool, &sj__onnx_ops_pool_n},
    {sj__onnx_ops_pad, &sj__onnx_ops_pad_n},
    {sj__onnx_ops_resize, &sj__onnx_ops_resize_n},
    {sj__onnx_ops_select, &sj__onnx_ops_select_n},
    {sj__onnx_ops_loss, &sj__onnx_ops_loss_n},
    {sj__onnx_ops_scan, &sj__onnx_ops_scan_n},
    {sj__onnx_ops_generate, &sj__onnx_ops_generate_n},
    {sj__onnx_ops_blocks, &sj__onnx_ops_blocks_n},
};

static int by_name(const void *a, const void *b) {
    return strcmp((*(const sj_onnx_op *const *)a)->name, (*(const sj_onnx_op *const *)b)->name);
}

sj_status sj__onnx_registry_index(sj_onnx_loader *L) {
    size_t n = 0;
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) n += *families[f].n;
    L->ops = sj_calloc(L->ctx, n, sizeof *L->ops);
    if (!L->ops) return sj_fail(L->ctx, SJ_E_NOMEM, "%s: out of memory", L->file);
    L->n_ops = 0;
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        for (size_t i = 0; i < *families[f].n; i++) L->ops[L->n_ops++] = &families[f].rows[i];
    qsort(L->ops, (size_t)L->n_ops, sizeof *L->ops, by_name);
    for (int i = 1; i < L->n_ops; i++)
        if (!strcmp(L->ops[i - 1]->name, L->ops[i]->name))
            return sj_fail(L->ctx, SJ_E_INTERNAL, "ONNX op '%s' has two rows in the op registry",
                           L->ops[i]->name);
    return SJ_OK;
}

const sj_onnx_op *sj__onnx_op_find(const sj_onnx_loader *L, const char *name) {
    int lo = 0, hi = L->n_ops;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(L->ops[mid]->name, name);
        if (!c) return L->ops[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* The row's bounds, in one message format for every op. */
static sj_status check_arity(sj_onnx_loader *L, const sj_onnx_op *op) {
    int n = sj__onnx_n_inputs(L);
    if (op->max_in == SJ_ONNX_ANY && n < op->min_in) {
        if (n == 0) return sj__onnx_node_fail(L, SJ_E_PARSE, "has no inputs");
        return sj__onnx_node_fail(L, SJ_E_PARSE, "has %d inputs, expected at least %d", n,
                                  op->min_in);
    }
    if (op->max_in != SJ_ONNX_ANY) SJ_TRY(sj__onnx_check_inputs(L, op->min_in, op->max_in));
    if (op->min_out > 0) return sj__onnx_check_outputs(L, op->max_out);
    const Onnx__NodeProto *node = L->node; /* outputs all optional (Split's) */
    for (size_t i = (size_t)op->max_out; i < node->n_output; i++)
        if (node->output[i] && node->output[i][0])
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "output %zu ('%s') is not supported", i,
                                      node->output[i]);
    return SJ_OK;
}

sj_status sj__onnx_map_node(sj_onnx_loader *L) {
    const Onnx__NodeProto *n = L->node;
    if (!n->op_type || !n->op_type[0]) return sj__onnx_node_fail(L, SJ_E_PARSE, "has no op_type");
    if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx"))
        return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "op '%s' of domain '%s' is not supported",
                                  n->op_type, n->domain);
    if (L->opset < 0)
        return sj__onnx_node_fail(L, SJ_E_PARSE, "the model imports no version of the default opset");
    const sj_onnx_op *op = sj__onnx_op_find(L, n->op_type);
    if (!op) return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "op '%s' is not supported", n->op_type);
    SJ_TRY(check_arity(L, op));
    bool done = false;
    SJ_TRY(sj__onnx_try_fold(L, op, &done)); /* shape computation known at load time */
    if (done) return SJ_OK;
    if (op->map) SJ_TRY(sj__onnx_layout_try(L, op, &done)); /* channels last between convs */
    if (done) return SJ_OK;
    /* A fold-only row whose fold declined: nothing maps it onto the graph. */
    if (!op->map) return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED, "op '%s' is not supported", n->op_type);
    return op->map(L, op);
}
