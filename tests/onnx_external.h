/* Writes an ONNX model whose weights are external data, for the tests and
 * bench_memory (built with the generated onnx.pb-c.h on the include path):
 *
 *   sj_test_mlp m = {.dir = dir, .in = 16, .hid = 32, .out = 8, .w1 = w1, .w2 = w2,
 *                    .off1 = 0, .off2 = 4096};
 *   sj_test_write_external_mlp(&m);   // dir/model.onnx + dir/weights.bin
 *
 * The model is y = relu(x @ w1) @ w2, x [N, in], w1 [in, hid], w2 [hid,
 * out], both weights FLOAT in weights.bin at off1 and off2 (zeros between
 * and around them), or (embedded) as raw_data inside model.onnx, with no
 * weights.bin. Returns false (errno set) when a file cannot be written. */
#ifndef SJ_TESTS_ONNX_EXTERNAL_H
#define SJ_TESTS_ONNX_EXTERNAL_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"

typedef struct sj_test_mlp {
    const char *dir;
    int64_t in, hid, out;
    const float *w1, *w2;
    uint64_t off1, off2; /* byte offsets in weights.bin; off2 >= off1 + sizeof w1 */
    bool embedded;       /* raw_data in the model instead (off1, off2 unused) */
} sj_test_mlp;

typedef struct sj_test_ext_tensor {
    Onnx__TensorProto t;
    int64_t dims[2];
    Onnx__StringStringEntryProto kv[3];
    Onnx__StringStringEntryProto *kvp[3];
    char offset[24], length[24];
} sj_test_ext_tensor;

/* data: the tensor's floats as raw_data; NULL: external at offset. */
static void sj_test_ext_tensor_init(sj_test_ext_tensor *x, const char *name, int64_t rows,
                                    int64_t cols, uint64_t offset, const float *data) {
    onnx__tensor_proto__init(&x->t);
    x->t.name = (char *)name;
    x->t.has_data_type = 1;
    x->t.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    x->dims[0] = rows;
    x->dims[1] = cols;
    x->t.n_dims = 2;
    x->t.dims = x->dims;
    if (data) {
        x->t.has_raw_data = 1;
        x->t.raw_data.len = (size_t)(rows * cols) * 4u;
        x->t.raw_data.data = (uint8_t *)data; /* little-endian hosts, as the loader */
        return;
    }
    x->t.has_data_location = 1;
    x->t.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    snprintf(x->offset, sizeof x->offset, "%" PRIu64, offset);
    snprintf(x->length, sizeof x->length, "%" PRIu64, (uint64_t)(rows * cols) * 4u);
    const char *keys[3] = {"location", "offset", "length"};
    char *vals[3] = {(char *)"weights.bin", x->offset, x->length};
    for (int i = 0; i < 3; i++) {
        onnx__string_string_entry_proto__init(&x->kv[i]);
        x->kv[i].key = (char *)keys[i];
        x->kv[i].value = vals[i];
        x->kvp[i] = &x->kv[i];
    }
    x->t.n_external_data = 3;
    x->t.external_data = x->kvp;
}

static bool sj_test_write_bytes(const char *path, const void *bytes, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(bytes, 1, len, f) == len;
    return fclose(f) == 0 && ok;
}

static bool sj_test_write_external_mlp(const sj_test_mlp *m) {
    char path[512];
    bool ok = true;
    /* weights.bin */
    size_t b1 = (size_t)(m->in * m->hid) * 4, b2 = (size_t)(m->hid * m->out) * 4;
    size_t size = (size_t)m->off2 + b2 + 64;
    if (!m->embedded) {
        uint8_t *file = calloc(1, size);
        if (!file) return false;
        memcpy(file + m->off1, m->w1, b1);
        memcpy(file + m->off2, m->w2, b2);
        snprintf(path, sizeof path, "%s/weights.bin", m->dir);
        ok = sj_test_write_bytes(path, file, size);
        free(file);
        if (!ok) return false;
    }

    /* model.onnx */
    sj_test_ext_tensor w1, w2;
    sj_test_ext_tensor_init(&w1, "w1", m->in, m->hid, m->off1, m->embedded ? m->w1 : NULL);
    sj_test_ext_tensor_init(&w2, "w2", m->hid, m->out, m->off2, m->embedded ? m->w2 : NULL);
    Onnx__TensorProto *inits[2] = {&w1.t, &w2.t};

    Onnx__TensorShapeProto__Dimension d0, d1;
    onnx__tensor_shape_proto__dimension__init(&d0);
    onnx__tensor_shape_proto__dimension__init(&d1);
    d0.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
    d0.dim_param = (char *)"N";
    d1.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    d1.dim_value = m->in;
    Onnx__TensorShapeProto__Dimension *dims[2] = {&d0, &d1};
    Onnx__TensorShapeProto shape;
    onnx__tensor_shape_proto__init(&shape);
    shape.n_dim = 2;
    shape.dim = dims;
    Onnx__TypeProto__Tensor tt;
    onnx__type_proto__tensor__init(&tt);
    tt.has_elem_type = 1;
    tt.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt.shape = &shape;
    Onnx__TypeProto type;
    onnx__type_proto__init(&type);
    type.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    type.tensor_type = &tt;
    Onnx__ValueInfoProto x, y;
    onnx__value_info_proto__init(&x);
    onnx__value_info_proto__init(&y);
    x.name = (char *)"x";
    x.type = &type;
    y.name = (char *)"y";
    Onnx__ValueInfoProto *inputs[1] = {&x}, *outputs[1] = {&y};

    Onnx__NodeProto nodes[3];
    char *io[3][3] = {{"x", "w1", "h"}, {"h", NULL, "r"}, {"r", "w2", "y"}};
    const char *ops[3] = {"MatMul", "Relu", "MatMul"};
    Onnx__NodeProto *np[3];
    for (int i = 0; i < 3; i++) {
        onnx__node_proto__init(&nodes[i]);
        nodes[i].op_type = (char *)ops[i];
        nodes[i].n_input = io[i][1] ? 2 : 1;
        nodes[i].input = io[i];
        nodes[i].n_output = 1;
        nodes[i].output = &io[i][2];
        np[i] = &nodes[i];
    }
    Onnx__GraphProto g;
    onnx__graph_proto__init(&g);
    g.name = (char *)"mlp";
    g.n_node = 3;
    g.node = np;
    g.n_initializer = 2;
    g.initializer = inits;
    g.n_input = 1;
    g.input = inputs;
    g.n_output = 1;
    g.output = outputs;
    Onnx__OperatorSetIdProto opset;
    onnx__operator_set_id_proto__init(&opset);
    opset.has_version = 1;
    opset.version = 13;
    Onnx__OperatorSetIdProto *opsets[1] = {&opset};
    Onnx__ModelProto model;
    onnx__model_proto__init(&model);
    model.has_ir_version = 1;
    model.ir_version = 8;
    model.n_opset_import = 1;
    model.opset_import = opsets;
    model.graph = &g;
    size_t len = onnx__model_proto__get_packed_size(&model);
    uint8_t *bytes = malloc(len);
    if (!bytes) return false;
    onnx__model_proto__pack(&model, bytes);
    snprintf(path, sizeof path, "%s/model.onnx", m->dir);
    ok = sj_test_write_bytes(path, bytes, len);
    free(bytes);
    return ok;
}

#endif
