/* A param's own content digest. The weight pool shares a param's device
 * copy by it between every executable (bucket) and engine that uses the
 * same bytes (two graphs, or one graph specialised per bucket, that hold
 * the same weight), and the graph hash takes it in place of the bytes, so
 * a weight is hashed once per process. The graph hash is stored, so the
 * digest is of the little-endian bytes on any host. */
#include "ir/graph_impl.h"
#include "core/hash.h"

#include <llvm-c/blake3.h>
#include <string.h>

static void put_data_le(llvm_blake3_hasher *h, const uint8_t *p, size_t bytes, size_t elem) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    (void)elem;
    llvm_blake3_hasher_update(h, p, bytes); /* one update: BLAKE3 hashes its chunks in parallel lanes */
#else
    uint8_t buf[1024];
    size_t used = 0;
    for (size_t i = 0; i < bytes; i += elem) {
        for (size_t k = 0; k < elem; k++) buf[used++] = p[i + elem - 1 - k];
        if (used + elem > sizeof buf) {
            llvm_blake3_hasher_update(h, buf, used);
            used = 0;
        }
    }
    llvm_blake3_hasher_update(h, buf, used);
#endif
}

void sj__graph_param_digest_locked(const sj_graph *g, sj_value v, uint8_t out[32]) {
    sj_node *n = &((sj_graph *)g)->nodes[v]; /* the memo is not part of the logical state */
    if (!n->param_hashed) {
        size_t elem = sj_dtype_size(n->dtype);
        uint64_t len = (uint64_t)sj_shape_numel(&n->shape, 1) * elem;
        uint8_t len_le[8];
        sj__put_le(len_le, len, 8);
        llvm_blake3_hasher h;
        llvm_blake3_hasher_init(&h);
        llvm_blake3_hasher_update(&h, "sj-weight-2", 11);
        llvm_blake3_hasher_update(&h, len_le, sizeof len_le);
        put_data_le(&h, n->bytes, (size_t)len, elem);
        llvm_blake3_hasher_finalize(&h, n->param_hash, sizeof n->param_hash);
        n->param_hashed = true;
    }
    memcpy(out, n->param_hash, 32);
}

void sj__graph_param_hash_stored(const sj_graph *g, sj_value v, sj_precision storage, uint8_t out[32]) {
    sj_graph *m = (sj_graph *)g;
    pthread_mutex_lock(&m->hash_lock);
    sj__graph_param_digest_locked(g, v, out);
    pthread_mutex_unlock(&m->hash_lock);
    if (storage == SJ_PRECISION_FP32) return;
    /* The narrowed copy is a function of the float32 bytes and the type. */
    llvm_blake3_hasher h;
    llvm_blake3_hasher_init(&h);
    llvm_blake3_hasher_update(&h, "sj-weight-narrow-1", 18);
    const char *name = sj_precision_name(storage);
    llvm_blake3_hasher_update(&h, name, strlen(name));
    llvm_blake3_hasher_update(&h, out, 32);
    llvm_blake3_hasher_finalize(&h, out, 32);
}

/* export's bytes: "sjdg1", the param count (u32), then per param its node
 * index (u32), dtype (u8), byte size (u64) and digest, little-endian. */
#define DIGEST_HEAD (5 + 4)
#define DIGEST_RECORD (4 + 1 + 8 + 32)

static uint32_t count_params(const sj_graph *g) {
    uint32_t n = 0;
    for (int v = 0; v < g->n_nodes; v++) n += g->nodes[v].op == SJ_OP_PARAM;
    return n;
}

static uint64_t param_bytes(const sj_node *n) {
    return (uint64_t)sj_shape_numel(&n->shape, 1) * sj_dtype_size(n->dtype);
}

sj_status sj__graph_digests_export(const sj_graph *g, uint8_t **out, size_t *len) {
    *out = NULL;
    *len = 0;
    uint32_t n = count_params(g);
    size_t size = DIGEST_HEAD + (size_t)n * DIGEST_RECORD;
    uint8_t *b = sj_alloc(g->ctx, size);
    if (!b) return sj_fail(g->ctx, SJ_E_NOMEM, "out of memory for the weights' digests");
    memcpy(b, "sjdg1", 5);
    sj__put_le(b + 5, n, 4);
    uint8_t *p = b + DIGEST_HEAD;
    sj_graph *m = (sj_graph *)g;
    pthread_mutex_lock(&m->hash_lock);
    for (int v = 0; v < g->n_nodes; v++) {
        const sj_node *nd = &g->nodes[v];
        if (nd->op != SJ_OP_PARAM) continue;
        sj__put_le(p, (uint64_t)v, 4);
        p[4] = (uint8_t)nd->dtype;
        sj__put_le(p + 5, param_bytes(nd), 8);
        sj__graph_param_digest_locked(g, v, p + 13);
        p += DIGEST_RECORD;
    }
    pthread_mutex_unlock(&m->hash_lock);
    *out = b;
    *len = size;
    return SJ_OK;
}

bool sj__graph_digests_seed(const sj_graph *g, const uint8_t *blob, size_t len) {
    uint32_t n = count_params(g);
    if (!blob || len != DIGEST_HEAD + (size_t)n * DIGEST_RECORD || memcmp(blob, "sjdg1", 5) != 0 ||
        sj__get_le(blob + 5, 4) != n)
        return false;
    /* All checked before any is taken: a record that does not fit leaves
     * every param to be hashed. */
    const uint8_t *p = blob + DIGEST_HEAD;
    int v = -1;
    for (uint32_t i = 0; i < n; i++, p += DIGEST_RECORD) {
        for (v++; v < g->n_nodes && g->nodes[v].op != SJ_OP_PARAM; v++) {}
        if (sj__get_le(p, 4) != (uint64_t)v || p[4] != (uint8_t)g->nodes[v].dtype ||
            sj__get_le(p + 5, 8) != param_bytes(&g->nodes[v]))
            return false;
    }
    sj_graph *m = (sj_graph *)g; /* the memo is not part of the graph's value */
    pthread_mutex_lock(&m->hash_lock);
    p = blob + DIGEST_HEAD;
    for (uint32_t i = 0; i < n; i++, p += DIGEST_RECORD) {
        sj_node *nd = &m->nodes[sj__get_le(p, 4)];
        memcpy(nd->param_hash, p + 13, 32);
        nd->param_hashed = true;
    }
    pthread_mutex_unlock(&m->hash_lock);
    return true;
}
