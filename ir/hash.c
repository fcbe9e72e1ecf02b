/* The graph's content hash: BLAKE3 over a canonical serialisation.
 *
 * Canonical form (all integers little-endian, int64 unless noted):
 *   tag "sjg-hash-3", has-symbol (u8), input count, each input's shape and dtype,
 *   the nodes reachable from the outputs in DFS post-order (outputs in
 *   order, operands left to right), then the output references in order.
 * A reference is the operand's canonical number: inputs are 0..n_inputs-1
 * by declaration position (callers pass inputs positionally, so unused ones
 * count too), reached nodes follow in post-order; absent operands are -1.
 * A param's data enters as its 32-byte content digest (ir/param_hash.c).
 * Names and unreachable nodes never enter the stream, and nothing depends
 * on the order in which independent nodes were appended. */
#include "ir/graph_impl.h"
#include "core/hash.h"

#include <llvm-c/blake3.h>
#include <string.h>

static void put_bytes(llvm_blake3_hasher *h, const void *p, size_t n) {
    llvm_blake3_hasher_update(h, p, n);
}

static void put_u8(llvm_blake3_hasher *h, uint8_t v) { put_bytes(h, &v, 1); }

static void put_i64(llvm_blake3_hasher *h, int64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)v >> (8 * i));
    put_bytes(h, b, sizeof b);
}

static void put_u32(llvm_blake3_hasher *h, uint32_t v) {
    uint8_t b[4];
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
    put_bytes(h, b, sizeof b);
}

/* Bit patterns, so -0.0 vs 0.0 or a different NaN changes the hash. */
static void put_f32(llvm_blake3_hasher *h, float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    put_u32(h, bits);
}

/* A weight enters as its own content digest (sj__graph_param_digest, the
 * one the weight pool shares device copies by), so its bytes are hashed
 * once per process, not once for the graph and again for the pool. */
static void put_param_data(llvm_blake3_hasher *h, const sj_graph *g, sj_value v) {
    uint8_t digest[32];
    sj__graph_param_digest_locked(g, v, digest);
    put_bytes(h, digest, sizeof digest);
}

static void put_f64(llvm_blake3_hasher *h, double d) {
    int64_t bits;
    memcpy(&bits, &d, sizeof bits);
    put_i64(h, bits);
}

static void put_shape(llvm_blake3_hasher *h, const sj_shape *s) {
    put_i64(h, s->rank);
    for (int i = 0; i < s->rank; i++) put_i64(h, s->dims[i]);
}

/* Only the attributes the op reads, so leftovers in unused fields (e.g.
 * from a parser) cannot split equal graphs. */
static void put_attrs(llvm_blake3_hasher *h, const sj_node *n) {
    const sj_node_attrs *a = &n->attrs;
    switch (n->op) {
    case SJ_OP_LEAKY_RELU: put_f32(h, a->alpha); break;
    case SJ_OP_REDUCE_SUM:
    case SJ_OP_REDUCE_MEAN:
    case SJ_OP_REDUCE_MAX:
        put_u32(h, a->axes);
        put_u8(h, a->keepdims);
        break;
    case SJ_OP_GEMM:
        put_f32(h, a->alpha);
        put_f32(h, a->beta);
        put_u8(h, a->trans_a);
        put_u8(h, a->trans_b);
        break;
    case SJ_OP_SOFTMAX:
    case SJ_OP_LOG_SOFTMAX: put_i64(h, a->axis); break;
    case SJ_OP_LAYERNORM:
        put_i64(h, a->axis);
        put_f32(h, a->epsilon);
        break;
    case SJ_OP_TRANSPOSE:
        for (int i = 0; i < n->shape.rank; i++) put_i64(h, a->perm[i]);
        break;
    case SJ_OP_GATHER: put_i64(h, a->axis); break;
    case SJ_OP_RANGE:
        put_f64(h, a->first);
        put_f64(h, a->delta);
        put_i64(h, a->start_n[0]);
        break;
    case SJ_OP_FILL: put_f64(h, a->delta); break;
    case SJ_OP_SLICE:
        for (int i = 0; i < n->shape.rank; i++) {
            put_i64(h, a->start[i]);
            put_i64(h, a->start_n[i]);
            put_i64(h, a->step[i]);
        }
        break;
    case SJ_OP_CONCAT:
    case SJ_OP_GATHER_ELEMENTS: put_i64(h, a->axis); break;
    case SJ_OP_GATHER_ND: put_i64(h, a->axis); break;
    case SJ_OP_TRILU:
        put_u8(h, a->upper);
        put_i64(h, a->k);
        break;
    default: break;
    }
}

/* canon maps value -> canonical number; NULL means value ids as they are
 * (the fallback form below). */
static int64_t ref(const int *canon, sj_value v) {
    if (v == SJ_NO_VALUE) return -1;
    return canon ? canon[v] : v;
}

static void put_node(llvm_blake3_hasher *h, const sj_graph *g, sj_value v, const int *canon) {
    const sj_node *n = &g->nodes[v];
    put_i64(h, n->op);
    put_shape(h, &n->shape);
    put_i64(h, n->dtype);
    put_i64(h, n->n_inputs);
    for (int i = 0; i < n->n_inputs; i++) put_i64(h, ref(canon, n->inputs[i]));
    put_attrs(h, n);
    if (n->op == SJ_OP_PARAM) put_param_data(h, g, v);
}

static void put_header(llvm_blake3_hasher *h, const sj_graph *g, const char *tag) {
    put_bytes(h, tag, strlen(tag) + 1);
    put_u8(h, g->sym_name != NULL);
    put_i64(h, g->n_inputs);
    for (int i = 0; i < g->n_inputs; i++) {
        put_shape(h, &g->nodes[g->inputs[i]].shape);
        put_i64(h, g->nodes[g->inputs[i]].dtype);
    }
}

static void put_outputs(llvm_blake3_hasher *h, const sj_graph *g, const int *canon) {
    put_i64(h, g->n_outputs);
    for (int i = 0; i < g->n_outputs; i++) put_i64(h, ref(canon, g->outputs[i].value));
}

/* Numbers and emits every not yet numbered node under root, operands
 * before users. Iterative: a long chain must not exhaust the C stack. The
 * graph is acyclic, so a node is on the stack at most once and `stack`
 * (2 * n_nodes ints) never overflows. */
static void emit_reachable(llvm_blake3_hasher *h, const sj_graph *g, sj_value root, int *canon,
                           int *next_id, int *stack) {
    if (canon[root] >= 0) return;
    stack[0] = root;
    stack[1] = 0; /* next operand slot to visit */
    int depth = 1;
    while (depth > 0) {
        int *top = &stack[2 * (depth - 1)];
        const sj_node *n = &g->nodes[top[0]];
        if (top[1] < n->n_inputs) {
            sj_value operand = n->inputs[top[1]++];
            if (operand != SJ_NO_VALUE && canon[operand] < 0) {
                stack[2 * depth] = operand;
                stack[2 * depth + 1] = 0;
                depth++;
            }
            continue;
        }
        canon[top[0]] = (*next_id)++;
        put_node(h, g, top[0], canon);
        depth--;
    }
}

static void hash_canonical(llvm_blake3_hasher *h, const sj_graph *g, int *scratch) {
    int *canon = scratch, *stack = scratch + g->n_nodes;
    for (int v = 0; v < g->n_nodes; v++) canon[v] = -1;
    for (int i = 0; i < g->n_inputs; i++) canon[g->inputs[i]] = i;
    int next_id = g->n_inputs;
    put_header(h, g, "sjg-hash-3");
    for (int i = 0; i < g->n_outputs; i++)
        emit_reachable(h, g, g->outputs[i].value, canon, &next_id, stack);
    put_outputs(h, g, canon);
}

/* Used only when the scratch allocation fails (sj_graph_hash cannot report
 * an error): every node in index order. It still identifies the content
 * exactly, under a different tag, so the worst outcome is a cache miss for
 * a graph that was built in another order, never a false hit. */
static void hash_in_index_order(llvm_blake3_hasher *h, const sj_graph *g) {
    put_header(h, g, "sjg-hash-3-index-order");
    put_i64(h, g->n_nodes);
    for (int v = 0; v < g->n_nodes; v++) put_node(h, g, v, NULL);
    put_outputs(h, g, NULL);
}

void sj_graph_hash(const sj_graph *g, uint8_t out[32]) {
    if (!g) {
        memset(out, 0, 32);
        return;
    }
    sj_graph *memo = (sj_graph *)g; /* the memo is not part of the graph's value */
    pthread_mutex_lock(&memo->hash_lock);
    if (memo->hash_valid) {
        memcpy(out, memo->hash, 32);
        pthread_mutex_unlock(&memo->hash_lock);
        return;
    }
    llvm_blake3_hasher h;
    llvm_blake3_hasher_init(&h);
    int *scratch = sj_calloc(g->ctx, (size_t)g->n_nodes, 3 * sizeof(int));
    if (scratch)
        hash_canonical(&h, g, scratch);
    else
        hash_in_index_order(&h, g);
    sj_free(g->ctx, scratch);
    llvm_blake3_hasher_finalize(&h, out, LLVM_BLAKE3_OUT_LEN);
    /* Only the canonical hash is kept: the fallback is retried next time. */
    if (scratch) {
        memcpy(memo->hash, out, 32);
        memo->hash_valid = true;
    }
    pthread_mutex_unlock(&memo->hash_lock);
}

void sj_hash_hex(const uint8_t hash[32], char out[65]) { sj__hex_encode(hash, 32, out); }
