/* Where a graph's params live (owned, in file mappings, or in blocks an
 * importer handed over), and the checks that a mapped file still holds
 * what was loaded. */
#include "ir/graph_impl.h"

#include <string.h>

void sj_graph_weights_get(const sj_graph *g, sj_graph_weights *out) {
    memset(out, 0, sizeof *out);
    if (!g) return;
    for (int i = 0; i < g->n_nodes; i++) {
        const sj_node *n = &g->nodes[i];
        if (n->op != SJ_OP_PARAM) continue;
        uint64_t bytes = (uint64_t)sj_shape_numel(&n->shape, 1) * sj_dtype_size(n->dtype);
        out->params++;
        out->bytes += bytes;
        if (n->map && sj__weight_map_is_file(n->map)) {
            out->mapped_params++;
            out->mapped_bytes += bytes;
        }
    }
    for (int i = 0; i < g->n_maps; i++) out->mapped_files += sj__weight_map_is_file(g->maps[i]);
    out->external_copied = g->external_copied;
    out->external_copied_bytes = g->external_copied_bytes;
}

sj_status sj__graph_check_mapped(const sj_graph *g, sj_ctx *ctx) {
    for (int i = 0; i < g->n_maps; i++) SJ_TRY(sj__weight_map_check(g->maps[i], ctx));
    return SJ_OK;
}

sj_status sj_graph_weights_verify(const sj_graph *g) {
    if (!g) return SJ_E_INVALID_ARG;
    for (int i = 0; i < g->n_maps; i++) SJ_TRY(sj__weight_map_verify(g->maps[i], g->ctx));
    return SJ_OK;
}
