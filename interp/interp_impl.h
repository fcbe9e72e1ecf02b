/* The interpreter's per-op kernels, private to ir. */
#ifndef SJ_GRAPH_INTERP_IMPL_H
#define SJ_GRAPH_INTERP_IMPL_H

#include "ir/graph_impl.h"
#include "shapejit/tensor.h"

/* Computes node n into out, whose shape and storage the caller set up.
 * in[i] is the tensor of n->inputs[i] (NULL where absent). Never fails:
 * every shape was checked when the node was built and again at run time.
 * extent: the symbolic dim's value (slices may start relative to it). */
void sj__interp_eval(const sj_node *n, const sj_tensor *const in[3], sj_tensor *out,
                    int64_t extent);

#endif
