/* The target-neutral kernel description lowering hands to every emitter
 * (LLVM host, NVPTX, CUDA C). Not installed.
 *
 * A kernel iterates one index space of up to SJ_KSPACE_MAX dims. Each dim's
 * bound is either a constant or, for a symbolic dim k*N + c, k times the
 * active extent n the kernel receives at run time plus c; the layout (every
 * stride) is fixed at the bucket extent E. Every buffer access is a `load`: a buffer of the launch
 * and one stride per space dim (0 = broadcast along that dim), so transposes,
 * broadcasts and views cost nothing. Values are computed by small expression
 * trees over loads, constants and `acc` (the result of the kernel's core:
 * a reduction, a normalised row entry, a dot product).
 *
 * Kinds and the roles of the space's dims:
 *   MAP        all dims are output dims; out = expr.
 *   REDUCE     `reduced` dims are folded with red_op over `prologue`;
 *              out = epilogue(acc) at the remaining dims.
 *   SOFTMAX,
 *   LOG_SOFTMAX,
 *   LAYERNORM  `reduced` dims form the row; out = epilogue(acc) where acc is
 *              the normalised prologue value (layernorm: * scale + bias).
 *   MATMUL     dims [b0, b1, m, n, k]; reduced = {k}; a and b are loads;
 *              acc = alpha * sum_k a*b; out = epilogue(acc).
 *   ATTENTION  dims [b0, b1, m, l, c]: m queries, l keys, c the output's
 *              head dim; out = softmax(q kT * alpha + mask) v, loads q
 *              [b0, b1, m, -, c<dk], kt [b0, b1, -, l, c<dk], v
 *              [b0, b1, -, l, c], mask [b0, b1, m, l, -] (the load index
 *              of each in att[0..3], mask -1 = none); reduced = {l}. Host
 *              only (lowering's `attention` option); no epilogue.
 * A load's address is offset + offset_n * n + sum_d strides[d] * i_d (n the
 * active extent: a slice may start relative to it); the output's is
 * out_offset + out_offset_n * n + sum_d out_strides[d] * i_d (concat writes
 * each operand into its part of one buffer, a part after a symbolic one at
 * the active extent).
 * Buffer 0 of a launch is always the output, written only at active points. */
#ifndef SJ_LOWER_KERNEL_H
#define SJ_LOWER_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plan/plan.h"
#include "shapejit/graph.h"
#include "shapejit/precision.h"

#define SJ_KSPACE_MAX 6

typedef enum sj_kernel_kind {
    SJ_KK_MAP,
    SJ_KK_REDUCE,
    SJ_KK_SOFTMAX,
    SJ_KK_LOG_SOFTMAX,
    SJ_KK_LAYERNORM,
    SJ_KK_MATMUL,
    SJ_KK_ATTENTION
} sj_kernel_kind;

typedef enum sj_kexpr_kind {
    SJ_KX_LOAD,  /* loads[load] at the current point */
    SJ_KX_CONST, /* value */
    SJ_KX_ACC,   /* the kernel core's result at the current point */
    SJ_KX_UNARY, /* op(a); value = leaky_relu alpha */
    SJ_KX_BINARY, /* op(a, b) */
    SJ_KX_SELECT, /* (bias + sum_d coef[d] * i_d >= 0) ? a : b; both sides are safe to evaluate */
    /* typed values (realtypes) */
    SJ_KX_WHERE,  /* a (bool) ? b : c */
    SJ_KX_GATHER, /* loads[load] plus gstride * clamp(a) on the gathered axis (see below) */
    SJ_KX_RANGE   /* first + first_n * n + step * i_dim */
} sj_kexpr_kind;

typedef struct sj_kexpr {
    sj_kexpr_kind kind;
    sj_op op;
    int32_t a, b; /* operand expression indices */
    int32_t load;
    float value;
    int64_t coef[SJ_KSPACE_MAX]; /* SELECT */
    int64_t bias;                /* SELECT */
    sj_dtype dtype;              /* of the result; CONST of ints and bools: ivalue */
    int64_t ivalue;
    int32_t c;                   /* WHERE: the value where a is false */
    /* GATHER: the index a (int64/int32) counts from the end when negative,
     * then is clamped to [0, glen) (a symbolic glen, SJ_DIM_AFFINE(k, c): k
     * times the active extent n plus c), so no
     * index reads outside the gathered axis or into padding. gfill: an
     * index equal to glen reads `value` instead (a padded window's fill,
     * compile/lower/window_fuse.h). gnext: the expression (of kind GATHER,
     * the same load, evaluated only through this link) that moves the
     * address along one more axis by its own clamped index (GatherND's
     * further coordinates); 0 = none, since a linked gather always comes
     * after its own index expression. */
    int64_t gstride, glen;
    bool gfill;
    /* GATHER: the index is a constant table's (a window's) whose every
     * entry lies in [0, glen), or is glen with gfill: no emitter need count
     * it from the end or clamp it (the host skips both, a window's taps
     * being most of a depthwise conv's work). */
    bool gsafe;
    int32_t gnext;
    int32_t dim;                 /* RANGE */
    double first, step;          /* RANGE */
    int64_t first_n;             /* RANGE (integer): the start's multiple of the active extent */
} sj_kexpr;

typedef struct sj_kload {
    int32_t buffer; /* index into the launch's buffers */
    sj_dtype dtype; /* of the buffer's elements */
    /* SJ_PRECISION_FP32: elements are `dtype`; BF16 / FP16: a narrowed
     * float32 param, 16-bit elements the load widens to float32 (strides
     * and offsets count elements either way). */
    sj_precision storage;
    /* The buffer is a graph param (a weight): its bytes are known when a
     * bucket loads, so a host GEMM may read it packed once (SJ_SLOT_PACKED). */
    bool weight;
    int64_t strides[SJ_KSPACE_MAX]; /* elements, at the bucket extent */
    int64_t offset, offset_n;       /* elements: offset + offset_n * active extent */
} sj_kload;

typedef struct sj_kernel {
    sj_kernel_kind kind;
    sj_dtype out_dtype; /* of buffer 0's elements (MAP kernels may be typed; the rest are float32) */
    char name[SJ_KERNEL_NAME_MAX];
    int rank;                        /* of the space */
    int64_t dims[SJ_KSPACE_MAX];     /* at the bucket extent */
    int64_t sym[SJ_KSPACE_MAX];      /* k > 0: bound is k * n + sym_add, n the active extent; 0: dims[d] */
    int64_t sym_add[SJ_KSPACE_MAX];
    uint32_t reduced;                /* bit d: dim d is reduced / the row / k */
    int64_t out_strides[SJ_KSPACE_MAX]; /* into buffer 0; 0 on reduced dims */
    int64_t out_offset, out_offset_n;   /* elements into buffer 0 */
    sj_op red_op;     /* REDUCE: SJ_OP_REDUCE_SUM/MEAN/MAX */
    int32_t prologue; /* REDUCE, row kinds: the value reduced / normalised */
    int32_t epilogue; /* the value stored; MAP: the whole computation */
    int32_t scale, bias; /* LAYERNORM: expressions, -1 = none */
    float epsilon;    /* LAYERNORM */
    float alpha;      /* MATMUL */
    int32_t a, b;     /* MATMUL: load indices */
    int32_t att[4];   /* ATTENTION: q, kt, v, mask load indices */
    int64_t att_dk;   /* ATTENTION: q's and kt's head dim */
    int n_buffers;
    int n_exprs;
    size_t cap_exprs;
    sj_kexpr *exprs;
    int n_loads;
    size_t cap_loads;
    sj_kload *loads;
} sj_kernel;

#endif
