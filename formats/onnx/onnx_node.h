/* The node being imported, read one way by every op file: its inputs,
 * outputs and attributes, the graph calls the mappers share, and messages
 * that name it ("FILE: node #3 'name' (Op): ..."). Private to formats/onnx;
 * defined in onnx_node.c. */
#ifndef SJ_ONNX_NODE_H
#define SJ_ONNX_NODE_H

#include "formats/onnx/onnx_loader.h"

/* ---- messages ---- */

/* Writes "node #3 'name' (Op)" for the node being mapped. */
void sj__onnx_node_where(const sj_onnx_loader *L, char *buf, size_t len);
/* sj_fail with "<file>: <node where>: " in front. */
sj_status sj__onnx_node_fail(sj_onnx_loader *L, sj_status st, const char *fmt, ...) SJ_PRINTF(3, 4);
/* st unchanged; a failure's message gets "FILE: node ..." in front, so a
 * graph builder's error names the ONNX node that asked for it. */
sj_status sj__onnx_node_prefix(sj_onnx_loader *L, sj_status st);

/* ---- inputs ---- */

/* Input i's name; NULL when the node has no input i or leaves it empty
 * (an optional input not given). */
const char *sj__onnx_in_name(const sj_onnx_loader *L, int i);
/* The node's inputs, trailing empty (optional, not given) ones not counted. */
int sj__onnx_n_inputs(const sj_onnx_loader *L);
/* SJ_E_PARSE "has N inputs, expected MIN[ to MAX]" unless min <= n <= max;
 * for the checks that depend on the opset or an attribute (the registry
 * checks each op's bounds before its mapper runs). */
sj_status sj__onnx_check_inputs(sj_onnx_loader *L, int min, int max);
/* Input i's value table entry; SJ_E_PARSE when it is missing or defined by
 * nothing before the node. */
sj_status sj__onnx_in_val(sj_onnx_loader *L, int i, sj_onnx_val **out);
/* Input i as a graph value of any dtype (constants become params). */
sj_status sj__onnx_in_value(sj_onnx_loader *L, int i, sj_value *out);
/* The same for an optional input: SJ_NO_VALUE when it is absent. */
sj_status sj__onnx_in_value_opt(sj_onnx_loader *L, int i, sj_value *out);
/* Input i as a constant int64 tensor of rank <= 1 (a shape, axes). */
sj_status sj__onnx_in_ints(sj_onnx_loader *L, int i, const char *what, const sj_onnx_tensor **out);
/* Input i as up to SJ_MAX_RANK integers c + n * N: a constant as
 * sj__onnx_in_ints reads it, or a value folded from a Shape chain. */
sj_status sj__onnx_in_syms(sj_onnx_loader *L, int i, const char *what, sj_onnx_sym *out, int *count);

/* ---- outputs ---- */

/* Only the first n outputs may be named: SJ_E_PARSE "has no output" when
 * output 0 is not, SJ_E_UNSUPPORTED "output I ('name') is not supported"
 * for a named one past n. */
sj_status sj__onnx_check_outputs(sj_onnx_loader *L, int n);
/* Defines the node's output i (when it has a name) as graph value v, and
 * names v after it when the node made v (v >= first_new). */
sj_status sj__onnx_def_out(sj_onnx_loader *L, int i, sj_value v, sj_value first_new);
/* Output i is the same thing as src (a copy of its constant, if any). */
sj_status sj__onnx_alias_out(sj_onnx_loader *L, int i, const sj_onnx_val *src);
/* Output 0 is input 0 itself (Identity, a reduction or slice with nothing
 * to do): aliased, so a constant input stays a constant. */
sj_status sj__onnx_alias_input(sj_onnx_loader *L);
/* Output 0 is y, or input 0 aliased when the mapping left x as it was. */
sj_status sj__onnx_def_or_alias(sj_onnx_loader *L, sj_value x, sj_value y, sj_value first);

/* ---- attributes ----
 * One meaning for each kind: absent gives the default (or *present false);
 * present with another type is SJ_E_PARSE "attribute 'NAME' is not a(n) ..."
 * naming the node, never a silent default. */

/* The current node's attribute called name, or NULL. */
const Onnx__AttributeProto *sj__onnx_node_attr(const sj_onnx_loader *L, const char *name);
/* Whether a holds type t; IR version 1 models may leave `type` unset, then
 * which field is set decides. */
bool sj__onnx_attr_is(const Onnx__AttributeProto *a, Onnx__AttributeProto__AttributeType t);
sj_status sj__onnx_attr_int(sj_onnx_loader *L, const char *name, int64_t def, int64_t *out);
sj_status sj__onnx_attr_float(sj_onnx_loader *L, const char *name, float def, float *out);
sj_status sj__onnx_attr_ints(sj_onnx_loader *L, const char *name, const int64_t **vals, size_t *n,
                             bool *present);
/* The bytes of a string attribute (not NUL-terminated). */
sj_status sj__onnx_attr_string(sj_onnx_loader *L, const char *name, const char **s, size_t *len,
                               bool *present);
/* A string attribute that must be one of names[0..n): its index in *out,
 * def when absent; SJ_E_PARSE "NAME 'VALUE' is not A, B or C" otherwise. */
sj_status sj__onnx_attr_choice(sj_onnx_loader *L, const char *name, const char *const *names,
                               int n, int def, int *out);
/* A tensor attribute, decoded (release it with sj__onnx_tensor_release);
 * SJ_E_PARSE "attribute 'NAME' holds no tensor" when it holds none.
 * Decoding errors name "FILE: node #I: label". */
sj_status sj__onnx_attr_tensor(sj_onnx_loader *L, const char *name, const char *label,
                               sj_onnx_tensor *out, bool *present);

/* ---- what the mappers share ---- */

/* A param of `data` (numel elements of dtype, copied) made at load, under
 * a name no ONNX value or graph input uses ("onnx_const_K"): a transformed
 * weight, an index table. */
sj_status sj__onnx_made_param(sj_onnx_loader *L, sj_dtype dtype, int rank, const int64_t *dims,
                              const void *data, sj_value *out);
/* A scalar float32 param under such a name (an epsilon, a 1). */
sj_status sj__onnx_scalar_const(sj_onnx_loader *L, float x, sj_value *out);
sj_status sj__onnx_shape_of(sj_onnx_loader *L, sj_value v, sj_shape *out);
sj_dtype sj__onnx_dtype_of(sj_onnx_loader *L, sj_value v);
/* The IR dtype of an ONNX dtype number; SJ_E_UNSUPPORTED "WHAT DTYPE is not
 * supported (float32, int64, int32 and bool are)" for another. */
sj_status sj__onnx_to_dtype(sj_onnx_loader *L, int64_t onnx, const char *what, sj_dtype *out);
/* Axes as ints, each in [-SJ_MAX_RANK, SJ_MAX_RANK), at most SJ_MAX_RANK. */
sj_status sj__onnx_int_axes(sj_onnx_loader *L, const int64_t *v, size_t n, int *out);
/* Graph ops whose errors name the node. */
sj_status sj__onnx_unary(sj_onnx_loader *L, sj_op op, sj_value a, sj_value *out);
sj_status sj__onnx_binary(sj_onnx_loader *L, sj_op op, sj_value a, sj_value b, sj_value *out);
/* a op c for a scalar float32 constant c. */
sj_status sj__onnx_binary_c(sj_onnx_loader *L, sj_op op, sj_value a, float c, sj_value *out);
/* A scalar of dtype holding x (a graph fill: no param, any dtype). */
sj_status sj__onnx_fill_scalar(sj_onnx_loader *L, sj_dtype dtype, double x, sj_value *out);
/* start + i for i over an axis of length len (constant or SJ_DIM_SYM), as
 * dtype, shaped [len, 1, ...] with `tail` dims in all, so that it
 * broadcasts against a tensor whose last `tail` axes begin at that axis. */
sj_status sj__onnx_axis_positions(sj_onnx_loader *L, sj_dtype dtype, double start, int64_t len,
                                  int tail, sj_value *out);

/* An axis attribute or input, counted from the end when negative, into
 * *out: SJ_E_SHAPE "axis A is out of range for rank R" unless -rank <= axis
 * < limit (rank for most ops; rank + 1 where the axis may be one past the
 * last dim, as Flatten's). */
sj_status sj__onnx_axis(sj_onnx_loader *L, int64_t axis, int rank, int limit, int *out);

#endif
