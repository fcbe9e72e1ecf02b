/* Block rearrangements onto the graph: DepthToSpace (DCR and CRD modes)
 * and SpaceToDepth, each a reshape to rank 6, a transpose and a reshape
 * back, as the ONNX reference writes them. Pure data movement: exact. */
#include "formats/onnx/onnx_node.h"
#include "formats/onnx/onnx_op.h"

#include <string.h>

/* x [N, C, H, W] reshaped to split6, permuted by perm, reshaped to out4. */
static sj_status rearrange(sj_onnx_loader *L, sj_value x, const int64_t *split6, const int *perm,
                           const int64_t *out4) {
    sj_value a, b, y, first = sj_graph_num_values(L->g);
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(L->g, x, 6, split6, &a)));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_transpose(L->g, a, perm, &b)));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(L->g, b, 4, out4, &y)));
    return sj__onnx_def_out(L, 0, y, first);
}

/* Input 0 as [N, C, H, W] with C, H and W constant (the blocks mix them),
 * and blocksize >= 1. */
static sj_status read_input(sj_onnx_loader *L, sj_value *x, int64_t *d, int64_t *b) {
    SJ_TRY(sj__onnx_attr_int(L, "blocksize", 0, b));
    if (!sj__onnx_node_attr(L, "blocksize") || *b < 1)
        return sj__onnx_node_fail(L, SJ_E_PARSE, "blocksize is %lld; it must be given and at least 1",
                                  (long long)*b);
    SJ_TRY(sj__onnx_in_value(L, 0, x));
    sj_shape s;
    SJ_TRY(sj__onnx_shape_of(L, *x, &s));
    if (s.rank != 4)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "input has rank %d, not 4 ([N, C, H, W])", s.rank);
    for (int i = 1; i < 4; i++)
        if (sj_dim_is_sym(s.dims[i]))
            return sj__onnx_node_fail(L, SJ_E_UNSUPPORTED,
                                      "axis %d is the symbolic dim %s; blocks would merge it with "
                                      "another",
                                      i, sj_graph_symbol(L->g));
    memcpy(d, s.dims, 4 * sizeof *d);
    return SJ_OK;
}

static sj_status map_depth_to_space(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    sj_value x;
    int64_t d[4] = {0}, b = 0;
    SJ_TRY(read_input(L, &x, d, &b));
    static const char *const modes[] = {"DCR", "CRD"};
    int mode;
    SJ_TRY(sj__onnx_attr_choice(L, "mode", modes, 2, 0, &mode));
    bool crd = mode == 1;
    if (d[1] % (b * b))
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "%lld channels do not split into blocks of %lld x %lld",
                                  (long long)d[1], (long long)b, (long long)b);
    int64_t c = d[1] / (b * b), out4[4] = {d[0], c, d[2] * b, d[3] * b};
    if (crd) {
        int64_t split[6] = {d[0], c, b, b, d[2], d[3]};
        static const int perm[6] = {0, 1, 4, 2, 5, 3};
        return rearrange(L, x, split, perm, out4);
    }
    int64_t split[6] = {d[0], b, b, c, d[2], d[3]};
    static const int perm[6] = {0, 3, 4, 1, 5, 2};
    return rearrange(L, x, split, perm, out4);
}

static sj_status map_space_to_depth(sj_onnx_loader *L, const sj_onnx_op *op) {
    (void)op;
    sj_value x;
    int64_t d[4] = {0}, b = 0;
    SJ_TRY(read_input(L, &x, d, &b));
    if (d[2] % b || d[3] % b)
        return sj__onnx_node_fail(L, SJ_E_SHAPE, "%lld x %lld does not split into blocks of %lld x %lld",
                                  (long long)d[2], (long long)d[3], (long long)b, (long long)b);
    int64_t split[6] = {d[0], d[1], d[2] / b, b, d[3] / b, b};
    int64_t out4[4] = {d[0], d[1] * b * b, d[2] / b, d[3] / b};
    static const int perm[6] = {0, 3, 5, 1, 2, 4};
    return rearrange(L, x, split, perm, out4);
}

const sj_onnx_op sj__onnx_ops_blocks[] = {
    {"DepthToSpace", 1, 1, 1, 1, NULL, map_depth_to_space, SJ_OP_COUNT_, 0},
    {"SpaceToDepth", 1, 1, 1, 1, NULL, map_space_to_depth, SJ_OP_COUNT_, 0},
};
const size_t sj__onnx_ops_blocks_n = sizeof sj__onnx_ops_blocks / sizeof sj__onnx_ops_blocks[0];
