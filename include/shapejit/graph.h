/* shapejit/graph.h — the graph IR: build, inspect and hash a compute graph.
 *
 *   sj_graph *g;
 *   sj_graph_create(ctx, "N", &g);                 // one symbolic dim named N
 *   int64_t xd[] = {SJ_DIM_SYM, 64}, wd[] = {64, 256};
 *   sj_value x, w, y, z;
 *   sj_graph_input(g, "x", 2, xd, &x);              // x: [N, 64]
 *   sj_graph_param(g, "w", 2, wd, weights, &w);     // copied into the graph
 *   sj_graph_matmul(g, x, w, &y);                   // y: [N, 256]
 *   sj_graph_unary(g, SJ_OP_GELU, y, &z);
 *   sj_graph_output(g, z, "out");
 *   uint8_t h[32]; sj_graph_hash(g, h);
 *   sj_graph_destroy(g);
 *
 * Tensors are float32, int64, int32 or bool (sj_dtype), row-major, rank
 * 0..SJ_MAX_RANK. Every value has one element type, inferred like its shape:
 * float ops (exp, matmul, softmax, ...) take float32 only, comparisons give
 * bool, cast converts; a mismatch is SJ_E_SHAPE naming the op and types. A dim is a constant
 * (>= 1), SJ_DIM_SYM, the graph's one symbolic dim, whose value (the
 * extent) is only known per request, or an affine form of it,
 * SJ_DIM_AFFINE(k, c) = k * N + c: a multiple (what exporters write when they
 * merge a dynamic batch with the constant dims inside it, [batch, 4, seq, d]
 * to [4 * batch, seq, d]) or the symbol plus a constant (a cache of N past
 * tokens grown by one, [N + 1, d]). Every builder call infers the result's
 * shape and fails with SJ_E_SHAPE, naming the op and both shapes, when the
 * operands do not fit; the graph is left unchanged by a failed call.
 * Values are appended in order, so a graph is always acyclic and topologically
 * sorted. The graph owns everything it holds (names, weight data).
 *
 * Weights an ONNX model keeps in an external-data file are mapped from the
 * file read-only instead of copied, where the bytes are already float32 in
 * this machine's order at an aligned offset (sj_model_options has the
 * switch); the graph then holds the mapping:
 *
 *   sj_graph_weights w;
 *   sj_graph_weights_get(g, &w);      // w.mapped_bytes of w.bytes lie in files
 *   sj_graph_weights_verify(g);       // re-hash those files now (runs check size/mtime)
 */
#ifndef SHAPEJIT_GRAPH_H
#define SHAPEJIT_GRAPH_H

#include "shapejit/common.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SJ_MAX_RANK 6
#define SJ_DIM_SYM ((int64_t)-1) /* the symbolic dim, in any dims array */
/* k * N + c, 1 <= k <= SJ_MAX_SYM_FACTOR, 0 <= c <= SJ_MAX_SYM_OFFSET;
 * SJ_DIM_AFFINE(1, 0) is SJ_DIM_SYM. Its active part at extent n is the
 * first k * n + c entries of its k * E + c: a padded buffer holds the merged
 * dims inside each symbolic index, and constant rows joined to the symbol's
 * (concat) sit right after its active ones, placed at the active extent. */
#define SJ_DIM_AFFINE(k, c) (-((int64_t)(k) + ((int64_t)(c) << 21)))
#define SJ_DIM_SYM_TIMES(k) SJ_DIM_AFFINE(k, 0)
#define SJ_MAX_SYM_FACTOR ((int64_t)1 << 20)
#define SJ_MAX_SYM_OFFSET ((int64_t)1 << 20)
#define SJ_NO_VALUE ((sj_value)-1)
/* Largest element count of any tensor, padded at any extent. Keeps every
 * byte offset well inside int64 and size_t. */
#define SJ_MAX_ELEMENTS ((int64_t)1 << 40)
/* Largest extent a symbolic dim may take. */
#define SJ_MAX_EXTENT ((int64_t)1 << 30)

typedef int32_t sj_value; /* index of a value in its graph */

/* Whether dim d depends on the symbolic dim; its factor k and offset c
 * (both 0 for a constant); its value at extent n. */
SJ_API bool sj_dim_is_sym(int64_t d);
SJ_API int64_t sj_dim_factor(int64_t d);
SJ_API int64_t sj_dim_offset(int64_t d);
SJ_API int64_t sj_dim_at(int64_t d, int64_t n);
/* Parses a dim as sj_shape_format writes it, sym the symbolic dim's name:
 * "64", or [K*]sym[+C] ("past+1", "4*batch") as SJ_DIM_AFFINE(K, C).
 * SJ_E_PARSE for anything else (no size below 1, no other name). */
SJ_API sj_status sj_dim_parse(const char *text, const char *sym, int64_t *out);
/* Writes one dim as sj_shape_format does ("64", "past", "4*past",
 * "past+1"; "?" for the name when sym is NULL), truncated to len. */
SJ_API void sj_dim_format(int64_t d, const char *sym, char *buf, size_t len);

/* Element types. SJ_F32 is 0, so a zero-initialised tensor or description
 * is float32. Integer and boolean values carry token ids, masks, positions
 * and shape arithmetic; SJ_BOOL elements are one byte, 0 or 1. */
typedef enum sj_dtype {
    SJ_F32 = 0,
    SJ_I64 = 1,
    SJ_I32 = 2,
    SJ_BOOL = 3,
    SJ_DTYPE_COUNT_
} sj_dtype;

/* Bytes per element (4, 8, 4, 1); 0 for a value outside the enum. */
SJ_API size_t sj_dtype_size(sj_dtype t);
/* "float32", "int64", "int32", "bool". */
SJ_API const char *sj_dtype_name(sj_dtype t);
/* Inverse of sj_dtype_name; SJ_E_NOT_FOUND for another name. */
SJ_API sj_status sj_dtype_from_name(const char *name, sj_dtype *out);

typedef enum sj_op {
    /* leaves */
    SJ_OP_INPUT,
    SJ_OP_PARAM, /* weights and constants: data held by the graph */
    /* unary elementwise */
    SJ_OP_NEG,
    SJ_OP_ABS,
    SJ_OP_EXP,
    SJ_OP_LOG,
    SJ_OP_SQRT,
    SJ_OP_RSQRT,
    SJ_OP_RECIPROCAL,
    SJ_OP_TANH,
    SJ_OP_SIGMOID,
    SJ_OP_RELU,
    SJ_OP_LEAKY_RELU, /* attr alpha */
    SJ_OP_GELU,       /* erf form: x * 0.5 * (1 + erf(x / sqrt 2)) */
    SJ_OP_SILU,
    SJ_OP_ERF,
    /* binary elementwise, numpy broadcasting */
    SJ_OP_ADD,
    SJ_OP_SUB,
    SJ_OP_MUL,
    SJ_OP_DIV,
    SJ_OP_POW,
    SJ_OP_MAX,
    SJ_OP_MIN,
    /* reductions over a set of axes */
    SJ_OP_REDUCE_SUM,
    SJ_OP_REDUCE_MEAN,
    SJ_OP_REDUCE_MAX,
    /* contractions */
    SJ_OP_MATMUL, /* rank >= 1 numpy matmul, batch dims broadcast */
    SJ_OP_GEMM,   /* rank 2: alpha * op(A) op(B) + beta * C */
    /* row ops */
    SJ_OP_SOFTMAX,     /* attr axis */
    SJ_OP_LOG_SOFTMAX, /* attr axis */
    SJ_OP_LAYERNORM,   /* attrs axis (first normalised axis), epsilon */
    /* layout */
    SJ_OP_TRANSPOSE, /* attr perm */
    SJ_OP_RESHAPE,   /* target shape is the node's shape */
    /* typed ops (element types beyond float32) */
    SJ_OP_CAST,          /* to the node's dtype; float->int truncates toward 0 */
    SJ_OP_EQUAL,         /* binary, same dtype both sides, -> bool */
    SJ_OP_LESS,
    SJ_OP_LESS_EQUAL,
    SJ_OP_GREATER,
    SJ_OP_GREATER_EQUAL,
    SJ_OP_AND,           /* binary, bool */
    SJ_OP_OR,
    SJ_OP_XOR,
    SJ_OP_MOD,           /* binary; ints: sign of the divisor (ONNX fmod=0), float: fmod */
    SJ_OP_NOT,           /* unary, bool */
    SJ_OP_ISNAN,         /* unary, float32 -> bool */
    SJ_OP_ISINF,         /* unary, float32 -> bool */
    SJ_OP_WHERE,         /* cond ? a : b, three-way broadcasting */
    SJ_OP_GATHER,        /* attr axis; rows of data picked by an int tensor */
    SJ_OP_RANGE,         /* start + i * delta, i over the node's one dim */
    SJ_OP_FILL,          /* every element the same constant */
    /* realops block: more unary elementwise ops (libm semantics; round is
     * half to even, sign of NaN is NaN) */
    SJ_OP_SIN,
    SJ_OP_COS,
    SJ_OP_TAN,
    SJ_OP_ASIN,
    SJ_OP_ACOS,
    SJ_OP_ATAN,
    SJ_OP_SINH,
    SJ_OP_COSH,
    SJ_OP_ASINH,
    SJ_OP_ACOSH,
    SJ_OP_ATANH,
    SJ_OP_FLOOR,
    SJ_OP_CEIL,
    SJ_OP_ROUND,
    SJ_OP_SIGN,
    /* realops block: layout */
    SJ_OP_SLICE,  /* attrs start, start_n, step per axis; lengths are the node's shape */
    SJ_OP_CONCAT, /* two operands joined along attr axis */
    SJ_OP_EXPAND, /* broadcast to the node's shape */
    SJ_OP_TRILU,  /* attrs upper, k: keep the upper/lower triangle of the last two axes */
    SJ_OP_GATHER_ELEMENTS, /* attr axis: data picked elementwise by an int tensor */
    SJ_OP_GATHER_ND, /* attr axis = batch_dims: slices of data picked by index tuples */
    /* end of the realops block */
    SJ_OP_COUNT_
} sj_op;

/* "add", "reduce_sum", "layernorm", ... (the .sjg spelling). */
SJ_API const char *sj_op_name(sj_op op);
/* Inverse of sj_op_name; SJ_E_NOT_FOUND for an unknown name. */
SJ_API sj_status sj_op_from_name(const char *name, sj_op *out);

typedef struct sj_shape {
    int rank;
    int64_t dims[SJ_MAX_RANK]; /* constant >= 1, or SJ_DIM_AFFINE(k, c) (SJ_DIM_SYM) */
} sj_shape;

/* Describes a graph input, output or value. `name` is borrowed from the
 * graph (NULL for an unnamed intermediate). */
typedef struct sj_value_desc {
    const char *name;
    sj_value value;
    sj_shape shape;
    sj_dtype dtype;
} sj_value_desc;

typedef struct sj_graph sj_graph;

/* sym_name: the symbolic dim's name, or NULL for a graph without one (which
 * then has a single bucket). */
SJ_API sj_status sj_graph_create(sj_ctx *ctx, const char *sym_name, sj_graph **out);
SJ_API void sj_graph_destroy(sj_graph *g);
SJ_API sj_ctx *sj_graph_ctx(const sj_graph *g);

/* Leaves. Names must be unique among all named values of the graph.
 * Params may not use SJ_DIM_SYM; their data (element count floats) is copied. */
SJ_API sj_status sj_graph_input(sj_graph *g, const char *name, int rank, const int64_t *dims,
                                sj_value *out);
SJ_API sj_status sj_graph_param(sj_graph *g, const char *name, int rank, const int64_t *dims,
                                const float *data, sj_value *out);

/* Typed leaves: as above with an element type; data holds numel elements
 * of that type (SJ_BOOL: one byte each, 0 or 1). The untyped calls are
 * these with SJ_F32. */
SJ_API sj_status sj_graph_input_typed(sj_graph *g, const char *name, sj_dtype dtype, int rank,
                               const int64_t *dims, sj_value *out);
SJ_API sj_status sj_graph_param_typed(sj_graph *g, const char *name, sj_dtype dtype, int rank,
                               const int64_t *dims, const void *data, sj_value *out);

/* Elementwise. `op` must be a unary op other than SJ_OP_LEAKY_RELU, or a
 * binary op, respectively. Unary: neg and abs take float32, int64 and
 * int32; not takes bool; isnan and isinf give bool; the rest are float32.
 * Binary: both operands have the same dtype; add, sub, mul, div, max, min
 * and mod take float32, int64 or int32 (integer div truncates toward 0);
 * pow is float32; comparisons give bool; and, or, xor take bool. */
SJ_API sj_status sj_graph_unary(sj_graph *g, sj_op op, sj_value x, sj_value *out);
SJ_API sj_status sj_graph_leaky_relu(sj_graph *g, sj_value x, float alpha, sj_value *out);
SJ_API sj_status sj_graph_binary(sj_graph *g, sj_op op, sj_value a, sj_value b, sj_value *out);

/* x converted to `to`: float->int truncates toward zero (NaN and values
 * outside the range give the target's minimum, as on x86), anything->bool
 * is x != 0, bool->number is 0 or 1. */
SJ_API sj_status sj_graph_cast(sj_graph *g, sj_value x, sj_dtype to, sj_value *out);
/* cond (bool) ? a : b, elementwise with numpy broadcasting of all three; a
 * and b have the same dtype, which the result takes. */
SJ_API sj_status sj_graph_where(sj_graph *g, sj_value cond, sj_value a, sj_value b, sj_value *out);
/* ONNX Gather: out = data.shape[:axis] + indices.shape + data.shape[axis+1:],
 * indices int64 or int32. An index i < 0 counts from the end; after that an
 * index outside [0, len) is clamped to it (the row 0 or len-1 is read), so
 * a bad token id can never read outside the table. On the symbolic axis
 * len is the active extent: padding is never read. */
SJ_API sj_status sj_graph_gather(sj_graph *g, sj_value data, sj_value indices, int axis, sj_value *out);
/* [count] values start + i * delta (float32, int64 or int32); count is a
 * constant >= 1 or SJ_DIM_SYM (a position range over the symbolic dim). */
SJ_API sj_status sj_graph_range(sj_graph *g, sj_dtype dtype, double start, double delta, int64_t count,
                         sj_value *out);
/* As sj_graph_range, starting at start + start_n * n, n the active extent:
 * a decode step's positions after n cached tokens (start_n 1). Integer
 * dtypes only; |start_n| <= SJ_MAX_SYM_FACTOR. */
SJ_API sj_status sj_graph_range_from_n(sj_graph *g, sj_dtype dtype, double start, int64_t start_n,
                                       double delta, int64_t count, sj_value *out);
/* A tensor of the given shape (may hold SJ_DIM_SYM) whose every element is
 * value, converted to dtype. */
SJ_API sj_status sj_graph_fill(sj_graph *g, sj_dtype dtype, double value, int rank, const int64_t *dims,
                        sj_value *out);

/* Reduction over n_axes distinct axes (negative counts from the end; n_axes
 * 0 reduces every axis). */
SJ_API sj_status sj_graph_reduce(sj_graph *g, sj_op op, sj_value x, int n_axes, const int *axes,
                                 bool keepdims, sj_value *out);

SJ_API sj_status sj_graph_matmul(sj_graph *g, sj_value a, sj_value b, sj_value *out);
/* c may be SJ_NO_VALUE; otherwise it broadcasts to [M, N]. */
SJ_API sj_status sj_graph_gemm(sj_graph *g, sj_value a, sj_value b, sj_value c, float alpha, float beta,
                               bool trans_a, bool trans_b, sj_value *out);

/* op is SJ_OP_SOFTMAX or SJ_OP_LOG_SOFTMAX; axis may be negative. */
SJ_API sj_status sj_graph_softmax(sj_graph *g, sj_op op, sj_value x, int axis, sj_value *out);
/* Normalises over axes [axis, rank). scale and bias (SJ_NO_VALUE = none)
 * have the normalised axes' shape (or broadcast to it). */
SJ_API sj_status sj_graph_layernorm(sj_graph *g, sj_value x, sj_value scale, sj_value bias, int axis,
                                    float epsilon, sj_value *out);

/* perm lists rank distinct axes. */
SJ_API sj_status sj_graph_transpose(sj_graph *g, sj_value x, const int *perm, sj_value *out);
/* dims: the result shape, constants or multiples of the symbolic dim. x
 * and the result have symbolic dims equally often ([heads, seq, seq] to
 * [1, heads, seq, seq] is fine); the constant dims in front of the first
 * keep their product, and so does each symbolic dim's group: its factor
 * times the constant dims behind it up to the next symbolic dim. So a
 * symbolic dim merges only with the dims inside it ([batch, 4, 8] to
 * [4 * batch, 8] and back), never with one outside it, and a padded buffer
 * stays a valid view at every extent. */
SJ_API sj_status sj_graph_reshape(sj_graph *g, sj_value x, int rank, const int64_t *dims, sj_value *out);

/* One axis of a slice. Entry j of the result's axis reads the operand at
 * index start + start_n * n + step * j, where n is the symbolic dim's active
 * extent (so a start may be an expression in it: start_n 1, start -1 is the
 * last row; |start_n| <= SJ_MAX_SYM_FACTOR). len is the result's length on
 * the axis: a constant >= 1, SJ_DIM_SYM (n entries), or a form k*N + c
 * taken whole from an axis that long, or as block f of an axis of F such
 * blocks (start f*c, start_n f*k). step is nonzero, negative walks
 * backwards. */
typedef struct sj_slice_axis {
    int64_t start, start_n, step, len;
} sj_slice_axis;

/* axes: one entry per axis of x. Every index read must lie inside x at
 * extent 1; where that stops holding above some extent (a constant table
 * sliced to n rows), that extent is the graph's ceiling: lowering and the
 * interpreter refuse larger ones, naming the slice. */
SJ_API sj_status sj_graph_slice(sj_graph *g, sj_value x, const sj_slice_axis *axes, sj_value *out);
/* a and b joined along `axis` (may be negative); their other dims are equal.
 * The joined axis may be symbolic on one side: a cache of N rows and one
 * new row make N + 1 (SJ_DIM_AFFINE(1, 1)), the constant side's rows
 * placed right after (or before) the active ones. */
SJ_API sj_status sj_graph_concat(sj_graph *g, sj_value a, sj_value b, int axis, sj_value *out);
/* x broadcast (numpy, both ways) with a shape of `rank` dims. */
SJ_API sj_status sj_graph_expand(sj_graph *g, sj_value x, int rank, const int64_t *dims, sj_value *out);
/* Zeroes what lies outside the upper (j - i >= k) or lower (j - i <= k)
 * triangle of each matrix in the last two axes (rank >= 2). */
SJ_API sj_status sj_graph_trilu(sj_graph *g, sj_value x, bool upper, int64_t k, sj_value *out);

/* ONNX GatherElements: out has the shape of `indices` (int64 or int32, the
 * rank of data); out[.., i_axis, ..] = data[.., indices[..], ..]. An index
 * below 0 counts from the end, then anything outside the axis is clamped
 * to it (never a read outside data). Off the axis, indices' dims are at
 * most data's (the symbolic dim only where data has it). */
SJ_API sj_status sj_graph_gather_elements(sj_graph *g, sj_value data, sj_value indices, int axis,
                                          sj_value *out);

/* ONNX GatherND: indices (int64 or int32) end in tuples of K coordinates
 * (K constant, 1..rank(data) - batch_dims); the first batch_dims dims of
 * data and indices are matched batch dims. out has indices' dims but the
 * last, then data's dims past batch_dims + K:
 *   out[b.., i.., r..] = data[b.., indices[b.., i.., 0..K-1], r..]
 * Each coordinate below 0 counts from the end, then anything outside its
 * axis is clamped to it (never a read outside data, nor past the active
 * rows of a symbolic axis). A matched batch dim is the same size in both,
 * or 1 in indices (broadcast). */
SJ_API sj_status sj_graph_gather_nd(sj_graph *g, sj_value data, sj_value indices, int batch_dims,
                                    sj_value *out);

/* Names an intermediate value (for printing and debugging). */
SJ_API sj_status sj_graph_set_name(sj_graph *g, sj_value v, const char *name);
/* Marks v as an output called `name` (output names are unique). */
SJ_API sj_status sj_graph_output(sj_graph *g, sj_value v, const char *name);

/* Inspection. */
SJ_API const char *sj_graph_symbol(const sj_graph *g); /* NULL when none */
SJ_API int sj_graph_num_values(const sj_graph *g);
SJ_API int sj_graph_num_inputs(const sj_graph *g);
SJ_API int sj_graph_num_outputs(const sj_graph *g);
SJ_API sj_status sj_graph_input_desc(const sj_graph *g, int i, sj_value_desc *out);
SJ_API sj_status sj_graph_output_desc(const sj_graph *g, int i, sj_value_desc *out);
SJ_API sj_status sj_graph_value_desc(const sj_graph *g, sj_value v, sj_value_desc *out);
/* Finds an input by name; -1 when absent. */
SJ_API int sj_graph_find_input(const sj_graph *g, const char *name);

/* A shape with the symbolic dim replaced by `extent`. */
SJ_API sj_shape sj_shape_at(const sj_shape *s, int64_t extent);
/* Element count of s at `extent`; -1 on overflow past SJ_MAX_ELEMENTS. */
SJ_API int64_t sj_shape_numel(const sj_shape *s, int64_t extent);
/* Writes e.g. "[N, 64]" (sym printed as `sym`, or "?" when NULL). */
SJ_API void sj_shape_format(const sj_shape *s, const char *sym, char *buf, size_t len);

/* 256-bit content hash of the canonical form: covers ops, attributes,
 * shapes, element types, weights, which inputs and outputs exist and in which order, and
 * whether the graph has a symbolic dim; ignores every name and any value no
 * output depends on. */
SJ_API void sj_graph_hash(const sj_graph *g, uint8_t out[32]);
/* Hex form of a hash, 65 bytes with the NUL. */
SJ_API void sj_hash_hex(const uint8_t hash[32], char out[65]);

/* Whether row r of every output along the symbolic dim depends only on row
 * r of the inputs (every input and output has the symbolic dim first, and
 * no op reduces, contracts, normalises or reshapes across it), so requests
 * can be stacked into one run and the outputs split back. Proved from the
 * ops, never guessed: *out false with the first op that is not shown safe
 * in why (may be NULL). */
SJ_API sj_status sj_graph_rows_independent(const sj_graph *g, bool *out, char *why, size_t why_cap);

/* Deep copy (same ctx). Weights held read-only (mapped from external
 * data, or decoded from the model file) are shared, not copied: neither
 * graph can change them, and either may be destroyed first. */
SJ_API sj_status sj_graph_clone(const sj_graph *g, sj_graph **out);

/* Where the params' bytes live. */
typedef struct sj_graph_weights {
    int64_t params;
    uint64_t bytes;
    /* Of those, lying in read-only file mappings (ONNX external data):
     * file-backed pages the kernel shares and can drop, not allocations. */
    int64_t mapped_params;
    uint64_t mapped_bytes;
    int mapped_files;
    /* External-data tensors read into memory instead of mapped: an offset
     * not aligned to the element, a dtype stored otherwise than the runtime
     * keeps it (double, int32, ...), mapping turned off, or a file that
     * could not be mapped. */
    int64_t external_copied;
    uint64_t external_copied_bytes;
} sj_graph_weights;
SJ_API void sj_graph_weights_get(const sj_graph *g, sj_graph_weights *out);
/* Re-hashes every file g's params are mapped from: SJ_E_CORRUPT naming the
 * file when one no longer holds the bytes it held when loaded (runs check
 * each file's size and timestamps, and re-hash only when those moved; this
 * also catches a rewrite that kept them). SJ_OK for a graph with none. */
SJ_API sj_status sj_graph_weights_verify(const sj_graph *g);

#ifdef __cplusplus
}
#endif
#endif
