/* Builds ONNX models in C for the tests, one arena per model (freed by
 * mb_free):
 *
 *   mb b;
 *   mb_init(&b, 13);                          // opset 13
 *   mb_input(&b, "x", "batch,8");             // dims: numbers, dim_params, "?"
 *   mb_node(&b, "Relu", "r", "x", "y");       // inputs and outputs: "a,b"
 *   mb_output(&b, "y", NULL);
 *   bytes = mb_pack(&b, &len);               // then sj_onnx_load_mem
 *
 * Included by cmocka test_*.c files, after <cmocka.h> and tests/test_util.h; needs the generated onnx.pb-c.h on
 * the include path. */
#ifndef SJ_TESTS_ONNX_BUILDER_H
#define SJ_TESTS_ONNX_BUILDER_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"
#include "shapejit/model.h"

#define MB_MAX 64

typedef struct mb {
    void **blocks;
    int n_blocks, cap_blocks;
    Onnx__ModelProto m;
    Onnx__GraphProto g;
    Onnx__OperatorSetIdProto opset;
    Onnx__OperatorSetIdProto *opsets[1];
    Onnx__NodeProto *nodes[MB_MAX];
    Onnx__ValueInfoProto *ins[MB_MAX], *outs[MB_MAX];
    Onnx__TensorProto *inits[MB_MAX];
} mb;

static inline void *mb_alloc(mb *b, size_t size) {
    if (b->n_blocks == b->cap_blocks) {
        b->cap_blocks = b->cap_blocks ? 2 * b->cap_blocks : 64;
        b->blocks = realloc(b->blocks, (size_t)b->cap_blocks * sizeof *b->blocks);
        if (!b->blocks) abort();
    }
    void *p = calloc(1, size ? size : 1);
    if (!p) abort();
    b->blocks[b->n_blocks++] = p;
    return p;
}

static inline char *mb_str(mb *b, const char *s) {
    char *c = mb_alloc(b, strlen(s) + 1);
    strcpy(c, s);
    return c;
}

static inline void mb_free(mb *b) {
    for (int i = 0; i < b->n_blocks; i++) free(b->blocks[i]);
    free(b->blocks);
    memset(b, 0, sizeof *b);
}

static inline void mb_init(mb *b, int64_t opset) {
    memset(b, 0, sizeof *b);
    onnx__model_proto__init(&b->m);
    onnx__graph_proto__init(&b->g);
    onnx__operator_set_id_proto__init(&b->opset);
    b->opset.domain = mb_str(b, "");
    b->opset.has_version = 1;
    b->opset.version = opset;
    b->opsets[0] = &b->opset;
    b->m.has_ir_version = 1;
    b->m.ir_version = 8;
    b->m.n_opset_import = 1;
    b->m.opset_import = b->opsets;
    b->m.graph = &b->g;
    b->g.name = mb_str(b, "test");
    b->g.node = b->nodes;
    b->g.input = b->ins;
    b->g.output = b->outs;
    b->g.initializer = b->inits;
}

/* Splits "a,b,,c" into a NULL-free array of strings (empty entries kept). */
static inline char **mb_split(mb *b, const char *list, size_t *n) {
    *n = 0;
    if (!list || !list[0]) return NULL;
    size_t count = 1;
    for (const char *p = list; *p; p++) count += *p == ',';
    char **out = mb_alloc(b, count * sizeof *out);
    const char *start = list;
    for (size_t i = 0; i < count; i++) {
        const char *end = strchr(start, ',');
        size_t len = end ? (size_t)(end - start) : strlen(start);
        out[i] = mb_alloc(b, len + 1);
        memcpy(out[i], start, len);
        start = end ? end + 1 : start + len;
    }
    *n = count;
    return out;
}

/* dims: "batch,8" (numbers are dim_values, anything else dim_params, such
 * as "2*past + 3"; "?" unknown);
 * NULL = no shape at all. */
static inline Onnx__ValueInfoProto *mb_vi(mb *b, const char *name, int32_t elem, const char *dims) {
    Onnx__ValueInfoProto *vi = mb_alloc(b, sizeof *vi);
    onnx__value_info_proto__init(vi);
    vi->name = mb_str(b, name);
    Onnx__TypeProto *tp = mb_alloc(b, sizeof *tp);
    onnx__type_proto__init(tp);
    Onnx__TypeProto__Tensor *tt = mb_alloc(b, sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = elem;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->type = tp;
    if (!dims) return vi;
    Onnx__TensorShapeProto *sh = mb_alloc(b, sizeof *sh);
    onnx__tensor_shape_proto__init(sh);
    tt->shape = sh;
    size_t n;
    char **parts = mb_split(b, dims, &n);
    sh->n_dim = n;
    sh->dim = mb_alloc(b, (n ? n : 1) * sizeof *sh->dim);
    for (size_t i = 0; i < n; i++) {
        Onnx__TensorShapeProto__Dimension *d = mb_alloc(b, sizeof *d);
        onnx__tensor_shape_proto__dimension__init(d);
        if (parts[i][0] && strspn(parts[i], "0123456789") == strlen(parts[i])) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = strtoll(parts[i], NULL, 10);
        } else if (strcmp(parts[i], "?") != 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = parts[i];
        }
        sh->dim[i] = d;
    }
    return vi;
}

static inline void mb_input(mb *b, const char *name, const char *dims) {
    b->ins[b->g.n_input++] = mb_vi(b, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, dims);
}

static inline void mb_input_typed(mb *b, const char *name, int32_t elem, const char *dims) {
    b->ins[b->g.n_input++] = mb_vi(b, name, elem, dims);
}

static inline void mb_output(mb *b, const char *name, const char *dims) {
    b->outs[b->g.n_output++] = mb_vi(b, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, dims);
}

static inline Onnx__NodeProto *mb_node(mb *b, const char *op, const char *name, const char *ins,
                                const char *outs) {
    Onnx__NodeProto *n = mb_alloc(b, sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = mb_str(b, op);
    n->name = mb_str(b, name);
    n->input = mb_split(b, ins, &n->n_input);
    n->output = mb_split(b, outs, &n->n_output);
    n->attribute = mb_alloc(b, 8 * sizeof *n->attribute);
    b->nodes[b->g.n_node++] = n;
    return n;
}

static inline Onnx__AttributeProto *mb_attr(mb *b, Onnx__NodeProto *n, const char *name,
                                     Onnx__AttributeProto__AttributeType type) {
    Onnx__AttributeProto *a = mb_alloc(b, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = mb_str(b, name);
    a->has_type = 1;
    a->type = type;
    n->attribute[n->n_attribute++] = a;
    return a;
}

static inline void mb_attr_i(mb *b, Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = mb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

static inline void mb_attr_f(mb *b, Onnx__NodeProto *n, const char *name, float v) {
    Onnx__AttributeProto *a = mb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}

static inline void mb_attr_ints(mb *b, Onnx__NodeProto *n, const char *name, size_t count,
                         const int64_t *v) {
    Onnx__AttributeProto *a = mb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->n_ints = count;
    a->ints = mb_alloc(b, (count ? count : 1) * sizeof *v);
    memcpy(a->ints, v, count * sizeof *v);
}

static inline Onnx__TensorProto *mb_tensor_f(mb *b, const char *name, int rank, const int64_t *dims,
                                      const float *data) {
    Onnx__TensorProto *t = mb_alloc(b, sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = mb_str(b, name);
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->n_dims = (size_t)rank;
    t->dims = mb_alloc(b, (rank ? (size_t)rank : 1) * sizeof *dims);
    size_t numel = 1;
    for (int i = 0; i < rank; i++) {
        t->dims[i] = dims[i];
        numel *= (size_t)dims[i];
    }
    t->has_raw_data = 1;
    t->raw_data.len = numel * sizeof(float);
    t->raw_data.data = mb_alloc(b, t->raw_data.len);
    memcpy(t->raw_data.data, data, t->raw_data.len);
    return t;
}

static inline void mb_init_f(mb *b, const char *name, int rank, const int64_t *dims, const float *data) {
    b->inits[b->g.n_initializer++] = mb_tensor_f(b, name, rank, dims, data);
}

static inline void mb_init_i64(mb *b, const char *name, size_t n, const int64_t *v) {
    Onnx__TensorProto *t = mb_alloc(b, sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = mb_str(b, name);
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    t->n_dims = 1;
    t->dims = mb_alloc(b, sizeof *t->dims);
    t->dims[0] = (int64_t)n;
    t->n_int64_data = n;
    t->int64_data = mb_alloc(b, (n ? n : 1) * sizeof *v);
    memcpy(t->int64_data, v, n * sizeof *v);
    b->inits[b->g.n_initializer++] = t;
}

static inline uint8_t *mb_pack(mb *b, size_t *len) {
    *len = onnx__model_proto__get_packed_size(&b->m);
    uint8_t *buf = mb_alloc(b, *len);
    onnx__model_proto__pack(&b->m, buf);
    return buf;
}

/* String attributes (Einsum's equation, Gelu's approximate). */
static inline void mb_attr_s(mb *b, Onnx__NodeProto *n, const char *name, const char *v) {
    Onnx__AttributeProto *a = mb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.data = (uint8_t *)mb_str(b, v);
    a->s.len = strlen(v);
}

/* ---- loading (cmocka's asserts: include <cmocka.h> and tests/test_util.h first) ---- */

static inline sj_status load(sj_ctx *ctx, mb *b, const sj_model_options *o, sj_graph **g) {
    size_t len;
    uint8_t *bytes = mb_pack(b, &len);
    return sj_onnx_load_mem(ctx, bytes, len, "test.onnx", o, g);
}

/* Loading b (with options o, NULL = none) fails with `want`, leaves no
 * graph, and says every fragment of the NULL-terminated list; frees b. */
static inline void expect_load_error(sj_ctx *ctx, mb *b, const sj_model_options *o, sj_status want,
                              const char *const *fragments) {
    sj_graph *g = NULL;
    assert_int_equal(load(ctx, b, o, &g), want);
    assert_null(g);
    for (; *fragments; fragments++) assert_error_contains(ctx, *fragments);
    mb_free(b);
}
#define EXPECT_LOAD_ERROR(ctx, b, o, want, ...)                                                    \
    expect_load_error((ctx), (b), (o), (want), (const char *const[]){__VA_ARGS__, NULL})

#endif
