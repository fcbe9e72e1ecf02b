/* The state of one ONNX import, shared by the model walker (onnx_load.c)
 * and the op mappers (onnx_ops.c). Private to formats/onnx. */
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
} sj_onnx_loader;

/* Value table, sized for every name in the model up front so entries never
 * move. define fails with SJ_E_PARSE on a name defined twice. */
sj_onnx_val *sj__onnx_lookup(sj_onnx_loader *L, const char *name);
sj_status sj__onnx_define(sj_onnx_loader *L, const char *name, sj_onnx_val **out);

/* Writes "node #3 'name' (Op)" for the node being mapped. */
void sj__onnx_node_where(const sj_onnx_loader *L, char *buf, size_t len);
/* sj_fail with "<file>: <node where>: " in front. */
sj_status sj__onnx_node_fail(sj_onnx_loader *L, sj_status st, const char *fmt, ...) SJ_PRINTF(3, 4);
/* st unchanged; a failure's message gets "FILE: node ..." in front, so a
 * graph builder's error names the ONNX node that asked for it. */
sj_status sj__onnx_node_prefix(sj_onnx_loader *L, sj_status st);
/* The current node's attribute called name, or NULL. */
const Onnx__AttributeProto *sj__onnx_node_attr(const sj_onnx_loader *L, const char *name);
/* Defines the node's output i (when it has a name) as graph value v, and
 * names v after it when the node made v (v >= first_new). */
sj_status sj__onnx_def_out(sj_onnx_loader *L, int i, sj_value v, sj_value first_new);

/* The graph value of v, materialising a float constant as a param. Int64
 * constants and runtime inputs of other dtypes are SJ_E_UNSUPPORTED. The
 * message names the value but not the file: callers add where. */
sj_status sj__onnx_as_value(sj_onnx_loader *L, sj_onnx_val *v, sj_value *out);

/* Maps the node L->node onto the graph, defining its outputs. */
sj_status sj__onnx_map_node(sj_onnx_loader *L);

/* ---- folding (onnx_fold.c) ---- */

/* c + n * N, N the symbolic dim. */
typedef struct sj_onnx_sym {
    int64_t c, n;
} sj_onnx_sym;

/* Whether v is known at load time: an integer/bool constant, a float
 * constant of whole numbers, or a value in N. */
bool sj__onnx_foldable(const sj_onnx_val *v);
/* Element k of a foldable v. */
sj_onnx_sym sj__onnx_sym_at(const sj_onnx_val *v, int64_t k);
/* Folds L->node when its op folds and its inputs are known; *done says
 * whether it did. Errors name the node and why a value in N cannot be
 * folded. */
sj_status sj__onnx_try_fold(sj_onnx_loader *L, bool *done);

/* ---- typed ops on graph values (onnx_typed.c) ---- */

/* Maps L->node when it is one of the typed ops (Cast, CastLike,
 * comparisons, logic, IsNaN, IsInf, Mod, Where, Gather, Range,
 * ConstantOfShape); *done says whether it was. */
sj_status sj__onnx_map_typed(sj_onnx_loader *L, bool *done);

#endif
