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
#include "shapejit/precision.h"
#include "core/core_impl.h"
#include "core/name_index.h"
#include "core/weight_map.h"

typedef struct sj_node_attrs {
    float alpha;      /* leaky_relu slope; gemm alpha */
    float beta;       /* gemm beta */
    float epsilon;    /* layernorm */
    int axis;         /* softmax, log_softmax, layernorm: normalised (>= 0); gather */
    double first;     /* range: the first value */
    double delta;     /* range; fill: the value */
    uint32_t axes;    /* reductions: bit i set = axis i reduced (of the input) */
    bool keepdims;    /* reductions */
    bool trans_a;     /* gemm */
    bool trans_b;     /* gemm */
    int perm[SJ_MAX_RANK]; /* transpose */
    /* realops: slice (per axis; see sj_slice_axis), trilu (upper, k), concat (axis) */
    int64_t start[SJ_MAX_RANK], start_n[SJ_MAX_RANK], step[SJ_MAX_RANK];
    bool upper;
    int64_t k;
} sj_node_attrs;

typedef struct sj_node {
    sj_op op;
    int n_inputs;
    sj_value inputs[3]; /* gemm: a, b, c; layernorm: x, scale, bias; absent = SJ_NO_VALUE */
    sj_node_attrs attrs;
    sj_shape shape; /* of the node's output value */
    sj_dtype dtype; /* of the node's output value */
    char *name;     /* owned; NULL for unnamed intermediates */
    union {         /* SJ_OP_PARAM only: numel(shape) elements of dtype; owned, */
        float *data; /* or read-only in `map` */
        void *bytes;
    };
    sj_weight_map *map; /* SJ_OP_PARAM lying in a file mapping: one of the graph's maps */
    /* SJ_OP_PARAM: the content digest of its data (sj__graph_param_digest_locked), made on
     * first need under the graph's hash_lock; a clone copies it with data. */
    bool param_hashed;
    uint8_t param_hash[32];
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
    /* The file mappings params lie in, one reference each (weights.c). */
    sj_weight_map **maps;
    int n_maps, cap_maps;
    /* External-data tensors the loader read into memory instead: their
     * layout or dtype needed a copy, or mapping was off or refused. */
    int64_t external_copied;
    uint64_t external_copied_bytes;
    /* Who the graph was read from, when a loader could tell (formats/
     * model_load.c): a key over the files' identities (path, inode, size,
     * timestamps), the import options and this library's own file, and
     * the model's path. A store keeps the weights' digests under the key,
     * so a warm start with unchanged files hashes no weight byte
     * (cache/model_digests.c). Absent (NULL path) for built graphs. */
    uint8_t source_key[32];
    char *source_path;
};

/* A param whose data (numel(dims) elements of dtype, aligned to it, in the
 * runtime's byte order) lies in map: the graph keeps a reference on map
 * and reads data in place, never writes it. As sj_graph_param_typed
 * otherwise (bool is not accepted: it would need normalising). */
sj_status sj__graph_param_mapped(sj_graph *g, const char *name, sj_dtype dtype, int rank,
                                const int64_t *dims, const void *data, sj_weight_map *map,
                                sj_value *out);
/* Checks every mapping g's params lie in (sj__weight_map_check), naming the
 * file on ctx when one changed. SJ_OK at once for a graph with none. */
sj_status sj__graph_check_mapped(const sj_graph *g, sj_ctx *ctx);

/* The content digest of param v's data (BLAKE3 of its little-endian
 * bytes), what the weight pools share buffers by and the graph hash takes
 * in place of the bytes: computed once per graph and param. The caller
 * holds g's hash_lock. */
void sj__graph_param_digest_locked(const sj_graph *g, sj_value v, uint8_t out[32]);
/* The params' digests as bytes to keep (sj_graph_hash made them):
 * *out sj_alloc'ed, *len its size; SJ_E_NOMEM. */
sj_status sj__graph_digests_export(const sj_graph *g, uint8_t **out, size_t *len);
/* Takes digests export wrote for this graph's params as theirs instead of
 * hashing their bytes: false (nothing taken) unless every param is named,
 * in node order, with its dtype and size. The caller vouches that the
 * bytes are the ones exported from (the same files, unchanged). */
bool sj__graph_digests_seed(const sj_graph *g, const uint8_t *blob, size_t len);
/* The hash of param v as stored: its digest for fp32, else a hash of that
 * and the narrow type (a bf16 copy is another buffer). Takes hash_lock. */
void sj__graph_param_hash_stored(const sj_graph *g, sj_value v, sj_precision storage, uint8_t out[32]);

/* The precision rule (shapejit/precision.h) over g: narrow[n] (n_nodes
 * entries, or NULL) says whether param n is stored in p's type;
 * *first_user (or NULL) is the first contraction a narrowed param feeds
 * (SJ_NO_VALUE when none). Returns how many params are narrowed, -1 when
 * out of memory. */
int sj__precision_mark(const sj_graph *g, sj_precision p, bool *narrow, sj_value *first_user);
/* count float32s of src as p's 16-bit type (bf16 or fp16), rounded to
 * nearest even (core/half.h). */
void sj__precision_round(sj_precision p, const float *src, void *dst, int64_t count);

/* Cast counts as unary (its target is the node's dtype), where as the one
 * ternary elementwise op. */
static inline bool sj_op_is_unary(sj_op op) {
    return (op >= SJ_OP_NEG && op <= SJ_OP_ERF) || op == SJ_OP_CAST ||
           (op >= SJ_OP_NOT && op <= SJ_OP_ISINF) || (op >= SJ_OP_SIN && op <= SJ_OP_SIGN);
}
static inline bool sj_op_is_binary(sj_op op) {
    return (op >= SJ_OP_ADD && op <= SJ_OP_MIN) || (op >= SJ_OP_EQUAL && op <= SJ_OP_MOD);
}
static inline bool sj_op_is_compare(sj_op op) {
    return op >= SJ_OP_EQUAL && op <= SJ_OP_GREATER_EQUAL;
}
static inline bool sj_op_is_elementwise(sj_op op) {
    return sj_op_is_unary(op) || sj_op_is_binary(op) || op == SJ_OP_WHERE;
}
/* Ops that produce values from their shape alone or index another tensor:
 * computed by a map kernel of their own, never inlined. */
static inline bool sj_op_is_generator(sj_op op) {
    return op == SJ_OP_GATHER || op == SJ_OP_RANGE || op == SJ_OP_FILL ||
           op == SJ_OP_GATHER_ELEMENTS || op == SJ_OP_GATHER_ND;
}
static inline bool sj_op_is_reduce(sj_op op) {
    return op >= SJ_OP_REDUCE_SUM && op <= SJ_OP_REDUCE_MAX;
}

/* The largest extent at which every index slice node nd reads lies inside
 * its operand (SJ_MAX_EXTENT when none is out of reach). */
int64_t sj__slice_extent_limit(const sj_graph *g, const sj_node *nd);

/* How many dims of s are symbolic (scores [N, N] have two). */
static inline int sj_shape_sym_count(const sj_shape *s) {
    int n = 0;
    for (int i = 0; i < s->rank; i++) n += sj_dim_is_sym(s->dims[i]);
    return n;
}

#endif
