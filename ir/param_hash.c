/* A param's own content digest. The weight pool shares a param's device
 * copy by it between every executable (bucket) and engine that uses the
 * same bytes (two graphs, or one graph specialised per bucket, that hold
 * the same weight), and the graph hash takes it in place of the bytes, so
 * a weight is hashed once per process. The graph hash is stored, so the
 * digest is of the little-endian bytes on any host. */
#include "ir/graph_impl.h"

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
        for (int i = 0; i < 8; i++) len_le[i] = (uint8_t)(len >> (8 * i));
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
