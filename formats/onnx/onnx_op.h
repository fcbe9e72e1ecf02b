/* The ONNX op registry: one row per op type of the default domain, saying
 * how many inputs and outputs a node of it may have, how it folds at load
 * time and how it maps onto the graph builder. Each onnx_op_*.c file holds
 * one family of ops and exports its rows; onnx_registry.c merges them and
 * dispatches a node to its row. Private to formats/onnx. */
#ifndef SJ_ONNX_OP_H
#define SJ_ONNX_OP_H

#include "formats/onnx/onnx_loader.h"

typedef struct sj_onnx_op sj_onnx_op;
typedef struct sj_onnx_fold sj_onnx_fold; /* onnx_fold.h */

/* Defines the node's outputs on the graph (or as values known at load
 * time); anything it cannot express exactly is an error naming the node. */
typedef sj_status (*sj_onnx_map_fn)(sj_onnx_loader *L, const sj_onnx_op *op);
/* Computes the node at load time from its n known inputs in[] into *out
 * (onnx_fold.h): SJ_OK, SJ_ONNX_NOT_FOLDED to leave the node to the map
 * (not an error), or an error naming the node. */
typedef sj_status (*sj_onnx_fold_fn)(sj_onnx_loader *L, const sj_onnx_op *op, sj_onnx_fold *in,
                                     int n, sj_onnx_fold *out);

/* max_in / max_out: no bound (Concat, Sum, Split). */
#define SJ_ONNX_ANY 127

/* fold_how: what the fold needs known, beyond the default (every input
 * known at load time; float constants fold only beside a value in N, so
 * float arithmetic stays the graph's). */
#define SJ_ONNX_FOLD_FLOATS 1u    /* float constants alone fold too (Cast: exact) */
#define SJ_ONNX_FOLD_DATA_ONLY 2u /* only input 0 must be known; the fold reads the rest (axes) */

struct sj_onnx_op {
    const char *name; /* ONNX op_type */
    /* Inputs, trailing empty (optional, not given) ones not counted. */
    int8_t min_in, max_in;
    /* min_out: the leading outputs that must be named (0 or 1); max_out:
     * how many may be named. The map checks what depends on the opset or
     * the attributes (Reshape-1's one input, Dropout's mask). */
    int8_t min_out, max_out;
    sj_onnx_fold_fn fold; /* constant folding at load, or NULL */
    sj_onnx_map_fn map;   /* lowering to the graph builder, or NULL */
    sj_op op;             /* the IR op the fold and map compute; SJ_OP_COUNT_ when none */
    uint8_t fold_how;     /* SJ_ONNX_FOLD_* */
};

/* The families, one file each. Rows may be in any order; a name in two
 * rows fails every load (onnx_registry.c). */
extern const sj_onnx_op sj__onnx_ops_math[];       /* onnx_op_math.c */
extern const size_t sj__onnx_ops_math_n;
extern const sj_onnx_op sj__onnx_ops_logic[];      /* onnx_op_logic.c */
extern const size_t sj__onnx_ops_logic_n;
extern const sj_onnx_op sj__onnx_ops_activation[]; /* onnx_op_activation.c */
extern const size_t sj__onnx_ops_activation_n;
extern const sj_onnx_op sj__onnx_ops_reduce[];     /* onnx_op_reduce.c */
extern const size_t sj__onnx_ops_reduce_n;
extern const sj_onnx_op sj__onnx_ops_norm[];       /* onnx_op_norm.c */
extern const size_t sj__onnx_ops_norm_n;
extern const sj_onnx_op sj__onnx_ops_matmul[];     /* onnx_op_matmul.c */
extern const size_t sj__onnx_ops_matmul_n;
extern const sj_onnx_op sj__onnx_ops_reshape[];    /* onnx_op_reshape.c */
extern const size_t sj__onnx_ops_reshape_n;
extern const sj_onnx_op sj__onnx_ops_layout[];     /* onnx_op_layout.c */
extern const size_t sj__onnx_ops_layout_n;
extern const sj_onnx_op sj__onnx_ops_index[];      /* onnx_op_index.c */
extern const size_t sj__onnx_ops_index_n;
extern const sj_onnx_op sj__onnx_ops_shape[];      /* onnx_op_shape.c */
extern const size_t sj__onnx_ops_shape_n;
extern const sj_onnx_op sj__onnx_ops_conv[];       /* onnx_op_conv.c */
extern const size_t sj__onnx_ops_conv_n;
extern const sj_onnx_op sj__onnx_ops_pool[];       /* onnx_op_pool.c */
extern const size_t sj__onnx_ops_pool_n;
extern const sj_onnx_op sj__onnx_ops_pad[];        /* onnx_op_pad.c */
extern const size_t sj__onnx_ops_pad_n;
extern const sj_onnx_op sj__onnx_ops_resize[];     /* onnx_op_resize.c */
extern const size_t sj__onnx_ops_resize_n;
extern const sj_onnx_op sj__onnx_ops_select[];     /* onnx_op_select.c */
extern const size_t sj__onnx_ops_select_n;
extern const sj_onnx_op sj__onnx_ops_loss[];       /* onnx_op_loss.c */
extern const size_t sj__onnx_ops_loss_n;
extern const sj_onnx_op sj__onnx_ops_scan[];       /* onnx_op_scan.c */
extern const size_t sj__onnx_ops_scan_n;
extern const sj_onnx_op sj__onnx_ops_generate[];   /* onnx_op_generate.c */
extern const size_t sj__onnx_ops_generate_n;
extern const sj_onnx_op sj__onnx_ops_blocks[];     /* onnx_op_blocks.c */
extern const size_t sj__onnx_ops_blocks_n;

/* The loader's index of every row, sorted by name (L->ops); SJ_E_INTERNAL
 * naming the op when two rows register one name. */
sj_status sj__onnx_registry_index(sj_onnx_loader *L);
/* The row of op type name, or NULL. */
const sj_onnx_op *sj__onnx_op_find(const sj_onnx_loader *L, const char *name);

/* The map of a binary elementwise row: op->op of inputs 0 and 1, of any
 * dtypes the graph accepts for it (onnx_op_logic.c). */
sj_status sj__onnx_map_binary(sj_onnx_loader *L, const sj_onnx_op *op);

/* Before opset 13, Softmax, LogSoftmax and Hardmax flattened x to 2-D at
 * `axis` and worked on each row: on axes [axis, rank) together. *single is
 * the one axis to work on instead when at most one of those is longer than
 * 1 (the same thing), else -1; *sym_inside says whether the symbolic dim is
 * among them, *rows is the product of their constant dims (onnx_op_norm.c). */
void sj__onnx_legacy_rows(const sj_shape *s, int axis, int *single, bool *sym_inside,
                          int64_t *rows);

/* Folds L->node by its row when its inputs are known at load time; *done
 * says whether it did (onnx_fold.c). */
sj_status sj__onnx_try_fold(sj_onnx_loader *L, const sj_onnx_op *op, bool *done);

#endif
