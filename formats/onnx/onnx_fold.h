/* What the op files' fold functions share (onnx_fold.c): tensors known at
 * load time up to the symbolic dim N, element by element c + n * N, their
 * broadcasting, and the folds of the elementwise ops. Private to
 * formats/onnx. */
#ifndef SJ_ONNX_FOLD_H
#define SJ_ONNX_FOLD_H

#include "formats/onnx/onnx_op.h"

/* Folded tensors stay small: shapes, index vectors, small masks. */
#define SJ_ONNX_FOLD_MAX_ELEMENTS ((int64_t)1 << 16)
/* A fold function's "not folded after all" (too large, a symbolic shape,
 * float arithmetic): the node goes to its map. Not an error. */
#define SJ_ONNX_NOT_FOLDED ((sj_status)1)

struct sj_onnx_fold {
    int32_t dtype; /* ONNX dtype */
    int rank;
    int64_t dims[SJ_ONNX_MAX_RANK];
    int64_t numel;
    sj_onnx_sym *e; /* numel elements, owned */
};

/* Allocates f's elements for dims (zeroed); SJ_ONNX_NOT_FOLDED when they
 * would be more than SJ_ONNX_FOLD_MAX_ELEMENTS. */
sj_status sj__onnx_fold_alloc(sj_onnx_loader *L, sj_onnx_fold *f, int32_t dtype, int rank,
                              const int64_t *dims);
/* Defines output 0 as f (handing over its elements): a constant when no
 * element depends on N, else a symbolic value. For maps whose output is
 * always known at load time (Shape, Size). */
sj_status sj__onnx_fold_put(sj_onnx_loader *L, sj_onnx_fold *f);
/* A copy of in's elements under new dims (Reshape, Squeeze). */
sj_status sj__onnx_fold_copy(sj_onnx_loader *L, const sj_onnx_fold *in, int rank,
                             const int64_t *dims, sj_onnx_fold *out);

/* Whether a float is a whole number a fold can carry exactly. */
bool sj__onnx_fold_whole(float x);
/* The symbolic dim's name, and "3*N+2" of x into buf, for messages. */
const char *sj__onnx_sym_name(const sj_onnx_loader *L);
const char *sj__onnx_sym_str(const sj_onnx_loader *L, sj_onnx_sym x, char *buf, size_t n);
/* +1 / -1 / 0 when x is positive / negative / zero for every N >= 1; 2 when
 * its sign depends on N. */
int sj__onnx_sign_over_n(sj_onnx_sym x);

/* The broadcast shape of a and b; false when they do not broadcast. */
bool sj__onnx_fold_bcast_shape(const sj_onnx_fold *a, const sj_onnx_fold *b, int *rank,
                               int64_t *dims);
/* Flat index into f of output position `flat` of an output with dims. */
int64_t sj__onnx_fold_bcast_index(const sj_onnx_fold *f, int rank, const int64_t *dims,
                                  int64_t flat);

/* Folds of the elementwise rows (row->op says which): binary arithmetic,
 * comparisons and logic with broadcasting; Neg, Not and (SJ_OP_COUNT_)
 * Identity. */
sj_status sj__onnx_fold_binary(sj_onnx_loader *L, const sj_onnx_op *op, sj_onnx_fold *in, int n,
                               sj_onnx_fold *out);
sj_status sj__onnx_fold_unary(sj_onnx_loader *L, const sj_onnx_op *op, sj_onnx_fold *in, int n,
                              sj_onnx_fold *out);

#endif
