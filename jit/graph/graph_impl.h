/* The graph's representation, shared by the modules that read graphs
 * (interpreter, text printer, lowering, ONNX import). Not installed.
 *
 * A value is the single output of the node with the same index; leaves
 * (inputs, params) are nodes too. Nodes only refer to earlier nodes, so
 * iterating 0..n_nodes is a topological order. */
#ifndef SJ_GRAPH_IMPL_H
#define SJ_GRAPH_IMPL_H

#include <pthread.h>

#include "shapejit/graph.h"
#include "core/core_impl.h"
#include "core/name_index.h"

typedef struct sj_node_attrs {
    float alpha;      /* leaky_relu slope; gemm alpha */
    float beta;       /* gemm beta */
    float epsilon;    /* layernorm */
    int axis;         /* softmax, log_softmax, layernorm: normalised (>= 0) */
    uint32_t axes;    /* reductions: bit i set = axis i reduced (of the input) */
    bool keepdims;    /* reductions */
    bool trans_a;     /* gemm */
    bool trans_b;     /* gemm */
    int perm[SJ_MAX_RANK]; /* transpose */
} sj_node_attrs;

typedef struct sj_node {
    sj_op op;
    int n_inputs;
    sj_value inputs[3]; /* gemm: a, b, c; layernorm: x, scale, bias; absent = SJ_NO_VALUE */
    sj_node_attrs attrs;
    sj_shape shape; /* of the node's output value */
    char *name;     /* owned; NULL for unnamed intermediates */
    float *data;    /* SJ_OP_PARAM only: owned, numel(shape) floats */
} sj_node;

typedef struct sj_graph_output_entry {
    sj_value value;
    char *name; /* owned */
} sj_graph_output_entry;

struct sj_graph {
    sj_ctx *ctx;
    char *sym_name; /* owned; NULL = no symbolic dim */
    sj_node *nodes;
    int n_nodes, cap_nodes;
    sj_value *inputs; /* node indices of SJ_OP_INPUT nodes, in declaration order */
    int n_inputs, cap_inputs;
    sj_graph_output_entry *outputs;
    int n_outputs, cap_outputs;
    sj_name_index names; /* the named nodes, by name (builder.c keeps it in step) */
    /* sj_graph_hash's last result, valid until the next append or output:
     * hashing reads every weight byte, and every artifact load checks the
     * hash, so a warm start would otherwise pay it per bucket. The lock lets
     * threads that share a finished graph hash it at once. */
    pthread_mutex_t hash_lock;
    bool hash_valid;
    uint8_t hash[32];
};

static inline bool sj_op_is_unary(sj_op op) { return op >= SJ_OP_NEG && op <= SJ_OP_ERF; }
static inline bool sj_op_is_binary(sj_op op) { return op >= SJ_OP_ADD && op <= SJ_OP_MIN; }
static inline bool sj_op_is_elementwise(sj_op op) { return sj_op_is_unary(op) || sj_op_is_binary(op); }
static inline bool sj_op_is_reduce(sj_op op) {
    return op >= SJ_OP_REDUCE_SUM && op <= SJ_OP_REDUCE_MAX;
}

/* How many dims of s are symbolic (scores [N, N] have two). */
static inline int sj_shape_sym_count(const sj_shape *s) {
    int n = 0;
    for (int i = 0; i < s->rank; i++) n += s->dims[i] == SJ_DIM_SYM;
    return n;
}

#endif
