/* A param's own content hash, for sharing its device copy between every
 * executable (bucket) and engine that uses the same bytes. It is not the
 * graph hash: two graphs (or one graph specialised per bucket) that hold the
 * same weight share it. Never stored, so the bytes are hashed as they lie. */
#include "ir/graph_impl.h"

#include <llvm-c/blake3.h>
#include <string.h>

void sj__graph_param_hash(const sj_graph *g, sj_value v, size_t bytes, uint8_t out[32]) {
    sj_graph *m = (sj_graph *)g; /* the memo is not part of the logical state */
    sj_node *n = &m->nodes[v];
    pthread_mutex_lock(&m->hash_lock);
    if (!n->param_hashed) {
        llvm_blake3_hasher h;
        llvm_blake3_hasher_init(&h);
        uint64_t len = bytes;
        llvm_blake3_hasher_update(&h, "sj-weight-1", 11);
        llvm_blake3_hasher_update(&h, &len, sizeof len);
        if (bytes) llvm_blake3_hasher_update(&h, n->data, bytes);
        llvm_blake3_hasher_finalize(&h, n->param_hash, sizeof n->param_hash);
        n->param_hashed = true;
    }
    memcpy(out, n->param_hash, 32);
    pthread_mutex_unlock(&m->hash_lock);
}

void sj__graph_param_hash_stored(const sj_graph *g, sj_value v, sj_precision storage, uint8_t out[32]) {
    const sj_node *n = &g->nodes[v];
    size_t bytes = (size_t)sj_shape_numel(&n->shape, 1) * sj_dtype_size(n->dtype);
    sj__graph_param_hash(g, v, bytes, out);
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
