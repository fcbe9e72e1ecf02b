/* The state of one ONNX import, shared by the model walker (onnx_load.c),
 * the op registry (onnx_registry.c) and the op files (onnx_op_*.c).
 * Private to formats/onnx. */
#ifndef SJ_ONNX_LOADER_H
#define SJ_ONNX_LOADER_H

#include "formats/onnx/onnx_impl.h"
#include "ir/graph_impl.h"

/* What an ONNX value name stands for. A value can be a graph value, a
 * constant known at load time (initialiser, Constant node, bound input), or
 * both once a float constant has been materialised as a param. */
typedef struct sj_onnx_val {
    const char *name; /* borrowed from the model proto */
    sj_value v;       /* SJ_NO_VALUE until there is a graph value */
    bool has_const;
    /* A value known at load time up to the symbolic dim N (onnx_fold.c):
     * element k is c.i[k] + symn[k] * N; c holds dtype and dims. */
    bool has_sym;
    int64_t *symn;    /* owned when has_sym */
    sj_onnx_tensor c; /* owned when has_const or has_sym */
    int32_t runtime_dtype; /* a graph input of a dtype the IR lacks; 0 = none */
    /* An activation a conv or pool left channels last (onnx_layout.h): cl
     * is [N, P, C], P its spatial positions in order, and cl_shape the
     * [N, C, D...] shape ONNX gives it; v stays SJ_NO_VALUE until a reader
     * that wants it channels first asks (sj__onnx_as_value). */
    sj_value cl;
    sj_shape cl_shape;
} sj_onnx_val;

typedef struct sj_onnx_loader {
    sj_ctx *ctx;
    sj_graph *g;
    const char *file;     /* for messages */
    sj_onnx_external ext; /* the model's folder (external data lives there), its mapped files */
    int64_t opset;    /* of the default domain */
    sj_onnx_val *vals;
    int n_vals, cap_vals;
    sj_name_index by_name; /* index into vals */
    /* the node being mapped, for messages */
    const Onnx__NodeProto *node;
    int node_index;
    int n_synth; /* counter for names of constants the importer makes up */
    /* the op registry's rows sorted by name, built per load so there is
     * no global state (onnx_registry.c) */
    const struct sj_onnx_op **ops;
    int n_ops;
    /* An elementwise node mapped channels last (onnx_layout.c): its inputs'
     * values as the mapper reads them (n_subst entries, SJ_NO_VALUE = as
     * usual), and the shape ONNX gives output 0, which sj__onnx_def_out
     * then defines channels last. n_subst 0 otherwise. */
    sj_value subst[8];
    int n_subst;
    sj_shape cl_out_shape;
} sj_onnx_loader;

/* Value table, sized for every name in the model up front so entries never
 * move. define fails with SJ_E_PARSE on a name defined twice. */
sj_onnx_val *sj__onnx_lookup(sj_onnx_loader *L, const char *name);
sj_status sj__onnx_define(sj_onnx_loader *L, const char *name, sj_onnx_val **out);

/* The graph value of v, materialising a float constant as a param. Int64
 * constants and runtime inputs of other dtypes are SJ_E_UNSUPPORTED. The
 * message names the value but not the file: callers add where. */
sj_status sj__onnx_as_value(sj_onnx_loader *L, sj_onnx_val *v, sj_value *out);

/* Maps the node L->node onto the graph by its registry row, defining its
 * outputs (onnx_registry.c). */
sj_status sj__onnx_map_node(sj_onnx_loader *L);

/* ---- values known at load time (onnx_fold.c) ---- */

/* c + n * N, N the symbolic dim. */
typedef struct sj_onnx_sym {
    int64_t c, n;
} sj_onnx_sym;

/* x as a dim (graph.h): a constant >= 1, or SJ_DIM_AFFINE(n, c) within the
 * graph's bounds; false for anything else (zero-size, N - 1, 2^40 + N). */
static inline bool sj__onnx_sym_dim(sj_onnx_sym x, int64_t *dim) {
    if (!x.n) {
        *dim = x.c;
        return x.c >= 1;
    }
    if (x.n < 1 || x.n > SJ_MAX_SYM_FACTOR || x.c < 0 || x.c > SJ_MAX_SYM_OFFSET) return false;
    *dim = SJ_DIM_AFFINE(x.n, x.c);
    return true;
}

/* Whether v is known at load time: an integer/bool constant, a float
 * constant of whole numbers, or a value in N. */
bool sj__onnx_foldable(const sj_onnx_val *v);
/* Element k of a foldable v. */
sj_onnx_sym sj__onnx_sym_at(const sj_onnx_val *v, int64_t k);

#endif
