/* A warm start that hashes no weight byte: the store keeps the digests a
 * model's weights hashed to under the source key of the files they came
 * from (ir/graph_impl.h; store/store_digests.c), so a graph read from
 * unchanged files takes them instead of reading hundreds of MB again. The
 * structure is still hashed every time; only the weights' content is
 * known from the files' identities, as a compiler cache's direct mode
 * knows its headers. A graph without a source key (built, a clone, a
 * precision copy), no store, a missing or damaged row, or digests that do
 * not fit the graph's params: everything is hashed, as always. */
#include "cache/bucketed_cache_impl.h"
#include "core/clock.h"
#include "ir/graph_impl.h"
#include "store/store_impl.h"

void sj__cache_hash_graph(sj_bucketed_cache *c) {
    const sj_graph *g = c->g;
    uint64_t t0 = sj__now_ns();
    bool keyed = c->store && g->source_path;
    if (keyed) {
        void *blob;
        size_t len;
        if (sj__store_digests_get(c->store, g->source_key, &blob, &len) == SJ_OK) {
            c->digests_from_store = sj__graph_digests_seed(g, blob, len);
            sj_free(c->ctx, blob);
        }
        sj_ctx_clear_error(c->ctx); /* a miss or a damaged row only means hashing */
    }
    uint8_t h[32];
    sj_graph_hash(g, h);
    if (keyed && !c->digests_from_store) {
        uint8_t *blob;
        size_t len;
        /* Best effort: a read-only or busy store only means the next start
         * hashes again. */
        if (sj__graph_digests_export(g, &blob, &len) == SJ_OK) {
            (void)sj__store_digests_put(c->store, g->source_key, g->source_path, blob, len);
            sj_free(c->ctx, blob);
        }
        sj_ctx_clear_error(c->ctx);
    }
    c->hash_ms = (double)(sj__now_ns() - t0) / 1e6;
}
