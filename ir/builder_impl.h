/* Helpers shared by the graph builder's files (builder.c, shape_infer.c,
 * hash.c). Private to ir. */
#ifndef SJ_GRAPH_BUILDER_IMPL_H
#define SJ_GRAPH_BUILDER_IMPL_H

#include "ir/graph_impl.h"

/* Long enough for four 19-digit dims, separators and a long symbol name. */
#define SJ_SHAPE_STR_MAX 160

/* Returned by value so a call can sit inside an sj_fail argument list: the
 * temporary lives until the end of the full expression. */
typedef struct sj_shape_str {
    char s[SJ_SHAPE_STR_MAX];
} sj_shape_str;

/* s formatted with the graph's symbol name, e.g. "[N, 64]". */
sj_shape_str sj__graph_shape_str(const sj_graph *g, const sj_shape *s);

/* A node with every operand absent and every attribute zero, so attributes
 * an op does not use compare (and hash) equal. */
sj_node sj__node_blank(sj_op op);

/* Fails with SJ_E_INVALID_ARG naming `what` when v is not a value of g. */
sj_status sj__graph_check_value(sj_graph *g, const char *what, sj_value v);

/* Which symbolic dims a caller-given shape may hold. */
typedef enum sj__dims_allowed {
    SJ__DIMS_CONST,  /* none (weights) */
    SJ__DIMS_AFFINE  /* any k * N + c */
} sj__dims_allowed;

/* Builds a shape from caller-given dims: rank in 0..SJ_MAX_RANK, dims >= 1
 * or, when the graph has a symbol, symbolic ones as allowed. */
sj_status sj__graph_make_shape(sj_graph *g, const char *what, int rank, const int64_t *dims,
                              sj__dims_allowed allowed, sj_shape *out);

/* Appends a node whose shape is already inferred, after checking its
 * element count. On success the graph owns node->name and node->data; on
 * failure the graph is unchanged and the caller still owns them. */
sj_status sj__graph_append(sj_graph *g, const char *what, const sj_node *node, sj_value *out);

#endif
