#!/usr/bin/env python3
"""Builds the small ONNX models under tests/data/models/ and their test data.

Dev aid only (the tests read the committed files, never run this):

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install onnx onnxruntime numpy
    /tmp/venv/bin/python tools/gen_models.py [OUT_DIR]   # default tests/data/models

For every model NAME it writes NAME.onnx and, for each size S in SIZES,
NAME/S/in/<input>.npy (seeded random float32) and NAME/S/out/<output>.npy
(what onnxruntime computes). S is the extent of the model's dynamic dim.
Everything is deterministic: the same script gives the same bytes.

The models are what exporters produce for small networks, spelled with the
ops shapejit maps: MLPs (MatMul+Add+Relu, Gemm with transB), a transformer
FFN with a decomposed layer norm (ReduceMean, Sub, Pow, Sqrt, Div) and
erf-GELU, the same FFN with LayerNormalization (opset 17), classifier heads
(Softmax / LogSoftmax, ReduceMean / ReduceMax pooling over the dynamic
axis), and attention scores over a dynamic sequence (Reshape with 0 / -1,
Transpose, q @ k^T, scale, Softmax over the dynamic last axis, @ v), at
opset 13 (ReduceMean axes attribute) and 18 (axes input). Weights are
initialisers in raw_data or float_data, or Constant nodes.
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

SIZES = [1, 3, 8, 17, 64]
F = TensorProto.FLOAT


class Builder:
    """Collects nodes and initialisers with deterministic weights."""

    def __init__(self, seed, float_data=False):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []
        self.float_data = float_data
        self.n = 0

    def name(self, base):
        self.n += 1
        return f"{base}_{self.n}"

    def weight(self, base, shape, scale=None):
        if scale is None:
            scale = 1.0 / np.sqrt(shape[0])
        w = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        return self.init(base, w)

    def init(self, base, arr):
        name = self.name(base)
        arr = np.asarray(arr)
        if self.float_data and arr.dtype == np.float32:
            t = helper.make_tensor(name, F, arr.shape, arr.flatten().tolist(), raw=False)
        else:
            t = numpy_helper.from_array(arr, name)
        self.inits.append(t)
        return name

    def const(self, base, arr):
        """A Constant node (not an initialiser)."""
        name = self.name(base)
        self.nodes.append(helper.make_node(
            "Constant", [], [name], value=numpy_helper.from_array(np.asarray(arr), name + "_v")))
        return name

    def op(self, op_type, inputs, out=None, **attrs):
        out = out or self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out


def reduce_mean(b, x, axes, opset, keepdims=1):
    if opset >= 18:
        return b.op("ReduceMean", [x, b.init("axes", np.array(axes, np.int64))], keepdims=keepdims)
    return b.op("ReduceMean", [x], axes=axes, keepdims=keepdims)


def reduce_max(b, x, axes, opset, keepdims=1):
    if opset >= 18:
        return b.op("ReduceMax", [x, b.init("axes", np.array(axes, np.int64))], keepdims=keepdims)
    return b.op("ReduceMax", [x], axes=axes, keepdims=keepdims)


def layer_norm_decomposed(b, x, hidden, opset):
    """What torch.onnx emits for nn.LayerNorm before opset 17."""
    mean = reduce_mean(b, x, [-1], opset)
    d = b.op("Sub", [x, mean])
    sq = b.op("Pow", [d, b.const("two", np.float32(2.0))])
    var = reduce_mean(b, sq, [-1], opset)
    std = b.op("Sqrt", [b.op("Add", [var, b.const("eps", np.float32(1e-5))])])
    n = b.op("Div", [d, std])
    gamma = b.weight("ln_gamma", [hidden], scale=0.2)
    beta = b.weight("ln_beta", [hidden], scale=0.1)
    return b.op("Add", [b.op("Mul", [n, gamma]), beta])


def gelu_erf(b, x):
    """x * 0.5 * (1 + erf(x / sqrt 2)), as torch exports nn.GELU()."""
    e = b.op("Erf", [b.op("Div", [x, b.const("sqrt2", np.float32(np.sqrt(2.0)))])])
    one = b.op("Add", [e, b.const("one", np.float32(1.0))])
    return b.op("Mul", [b.op("Mul", [x, one]), b.const("half", np.float32(0.5))])


def linear(b, x, din, dout):
    return b.op("Add", [b.op("MatMul", [x, b.weight("w", [din, dout])]),
                        b.weight("b", [dout], scale=0.1)])


def make_model(b, name, inputs, outputs, opset):
    g = helper.make_graph(b.nodes, name, inputs, outputs, b.inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="shapejit-gen-models")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def vi(name, dims):
    return helper.make_tensor_value_info(name, F, dims)


# ---- the models: each returns (model, {input name: shape with None = dynamic}) ----

def mlp_matmul():
    b = Builder(1)
    h = b.op("Relu", [linear(b, "x", 16, 32)])
    h = b.op("Identity", [h])
    b.op("Add", [b.op("MatMul", [h, b.weight("w", [32, 8])]), b.weight("b", [8])], out="y")
    return make_model(b, "mlp_matmul", [vi("x", ["batch", 16])], [vi("y", ["batch", 8])], 13), \
        {"x": [None, 16]}


def mlp_gemm():
    # float_data initialisers; Gemm with transB (torch nn.Linear export) and
    # one with alpha/beta and a row-vector C.
    b = Builder(2, float_data=True)
    h = b.op("Gemm", ["x", b.weight("w1t", [32, 16], scale=0.25), b.weight("b1", [32])],
             transB=1)
    h = b.op("Relu", [h])
    h = b.op("Gemm", [h, b.weight("w2", [32, 24]), b.weight("b2", [1, 24])],
             alpha=0.7, beta=1.3)
    h = b.op("Relu", [h])
    b.op("Gemm", [h, b.weight("w3t", [4, 24]), b.weight("b3", [4])], out="logits", transB=1)
    return make_model(b, "mlp_gemm", [vi("x", ["batch", 16])], [vi("logits", ["batch", 4])], 13), \
        {"x": [None, 16]}


def ffn_decomposed_ln(opset, batch_axis):
    b = Builder(3 + opset)
    x = "x"
    ln = layer_norm_decomposed(b, x, 16, opset)
    h = gelu_erf(b, linear(b, ln, 16, 64))
    b.op("Add", [x, linear(b, h, 64, 16)], out="y")
    dims = [1, "seq", 16] if batch_axis else ["seq", 16]
    shape = [1, None, 16] if batch_axis else [None, 16]
    return make_model(b, f"ffn_decomposed_ln_op{opset}", [vi("x", dims)], [vi("y", dims)],
                      opset), {"x": shape}


def ffn_layernorm():
    b = Builder(4, float_data=True)
    ln = b.op("LayerNormalization", ["x", b.weight("gamma", [16], scale=0.2),
                                     b.weight("beta", [16], scale=0.1)], axis=-1, epsilon=1e-5)
    h = gelu_erf(b, linear(b, ln, 16, 48))
    b.op("Add", ["x", linear(b, h, 48, 16)], out="y")
    return make_model(b, "ffn_layernorm_op17", [vi("x", ["batch", 16])],
                      [vi("y", ["batch", 16])], 17), {"x": [None, 16]}


def classifier(opset):
    # Per-token log-probabilities, and one sequence-level class distribution
    # from mean + max pooling over the dynamic axis.
    b = Builder(5 + opset)
    h = b.op("Tanh", [linear(b, "x", 16, 16)])
    b.op("LogSoftmax", [linear(b, h, 16, 5)], out="token_logp", axis=-1)
    mean = reduce_mean(b, h, [0], opset)
    mx = reduce_max(b, h, [0], opset)
    pooled = b.op("Add", [mean, mx])
    b.op("Softmax", [linear(b, pooled, 16, 5)], out="probs", axis=1)
    return make_model(b, f"classifier_op{opset}", [vi("x", ["seq", 16])],
                      [vi("token_logp", ["seq", 5]), vi("probs", [1, 5])], opset), \
        {"x": [None, 16]}


def attention_2d():
    # [seq, 16] -> 2 heads of 8; Reshape [0, 2, -1]; scores scaled by Div.
    b = Builder(7)
    q, k, v = (b.op("MatMul", ["x", b.weight(n, [16, 16])]) for n in ("wq", "wk", "wv"))
    shape = b.init("heads", np.array([0, 2, -1], np.int64))
    qh, kh, vh = (b.op("Transpose", [b.op("Reshape", [t, shape])], perm=[1, 0, 2])
                  for t in (q, k, v))
    kt = b.op("Transpose", [kh], perm=[0, 2, 1])
    s = b.op("Div", [b.op("MatMul", [qh, kt]), b.const("sqrt_d", np.float32(np.sqrt(8.0)))])
    p = b.op("Softmax", [s], out="probs", axis=-1)
    ctx = b.op("Transpose", [b.op("MatMul", [p, vh])], perm=[1, 0, 2])
    flat = b.op("Reshape", [ctx, b.init("flat", np.array([-1, 16], np.int64))])
    b.op("MatMul", [flat, b.weight("wo", [16, 16])], out="y")
    return make_model(b, "attention_2d", [vi("x", ["seq", 16])],
                      [vi("y", ["seq", 16]), vi("probs", [2, "seq", "seq"])], 13), \
        {"x": [None, 16]}


def attention_batch1():
    # [1, seq, 24] -> 3 heads of 8 via Reshape [0, 0, 3, 8], k^T by a single
    # Transpose perm [0, 2, 3, 1], scale by Mul, float_data weights, opset 17.
    b = Builder(8, float_data=True)
    q, k, v = (linear(b, "x", 24, 24) for _ in range(3))
    shape = b.init("heads", np.array([0, 0, 3, 8], np.int64))
    qh = b.op("Transpose", [b.op("Reshape", [q, shape])], perm=[0, 2, 1, 3])
    kt = b.op("Transpose", [b.op("Reshape", [k, shape])], perm=[0, 2, 3, 1])
    vh = b.op("Transpose", [b.op("Reshape", [v, shape])], perm=[0, 2, 1, 3])
    s = b.op("Mul", [b.op("MatMul", [qh, kt]), b.const("scale", np.float32(1 / np.sqrt(8.0)))])
    p = b.op("Softmax", [s], axis=3)
    ctx = b.op("Transpose", [b.op("MatMul", [p, vh])], perm=[0, 2, 1, 3])
    flat = b.op("Reshape", [ctx, b.init("merge", np.array([1, -1, 24], np.int64))])
    b.op("Add", ["x", linear(b, flat, 24, 24)], out="y")
    return make_model(b, "attention_batch1_op17", [vi("x", [1, "seq", 24])],
                      [vi("y", [1, "seq", 24])], 17), {"x": [1, None, 24]}


def mlp_static():
    # No dim_param anywhere: shapejit needs --dynamic-axis x:0.
    b = Builder(9)
    h = b.op("Sigmoid", [linear(b, "x", 12, 20)])
    b.op("Gemm", [h, b.weight("w", [20, 6]), b.weight("c", [6])], out="y")
    return make_model(b, "mlp_static", [vi("x", [4, 12])], [vi("y", [4, 6])], 13), \
        {"x": [None, 12]}


def two_inputs_two_params():
    # Two dim_params: x [batch, 16] and a per-feature input; the outputs use
    # an exporter-style "unk__0" name for the batch dim.
    b = Builder(10)
    h = b.op("Mul", ["x", "gain"])
    b.op("Relu", [linear(b, h, 16, 8)], out="y")
    return make_model(b, "two_inputs", [vi("x", ["batch", 16]), vi("gain", [1, 16])],
                      [vi("y", ["unk__0", 8])], 13), {"x": [None, 16], "gain": [1, 16]}


def batch_seq():
    # Two dim_params on one input: [batch, seq, 16]; shapejit handles one
    # symbolic dim, so this model is only used for load-error tests.
    b = Builder(11)
    b.op("Relu", [linear(b, "x", 16, 8)], out="y")
    return make_model(b, "batch_seq", [vi("x", ["batch", "seq", 16])],
                      [vi("y", ["batch", "seq", 8])], 13), None


def seq_pooling():
    # Scores between positions by broadcasting [seq, 1] against [1, seq],
    # Softmax over the dynamic axis 0, then a contraction over it.
    b = Builder(13)
    h = linear(b, "x", 8, 8)
    r = b.op("ReduceSum", [h, b.init("axis1", np.array([1], np.int64))], keepdims=1)
    m = b.op("Sub", [r, b.op("Transpose", [r], perm=[1, 0])])
    p = b.op("Softmax", [m], axis=0)
    b.op("MatMul", [p, h], out="y")
    return make_model(b, "seq_pooling", [vi("x", ["seq", 8])], [vi("y", ["seq", 8])], 13), \
        {"x": [None, 8]}


def gram_gemm():
    # x^T x over the dynamic rows (Gemm transA, alpha, no C): the padding
    # rows must add nothing.
    b = Builder(14)
    b.op("Gemm", ["x", "x"], out="y", transA=1, alpha=0.25)
    return make_model(b, "gram_gemm", [vi("x", ["batch", 8])], [vi("y", [8, 8])], 13), \
        {"x": [None, 8]}


def mlp_ir3():
    # Old exporters: IR version 3, opset 9, every initialiser also listed as
    # a graph input; Softmax with the opset < 13 default axis 1.
    b = Builder(15)
    h = b.op("Relu", [linear(b, "x", 8, 12)])
    b.op("Softmax", [linear(b, h, 12, 5)], out="y")
    inputs = [vi("x", ["batch", 8])] + [vi(t.name, list(t.dims)) for t in b.inits]
    g = helper.make_graph(b.nodes, "mlp_ir3", inputs, [vi("y", ["batch", 5])], b.inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 9)])
    m.ir_version = 3
    onnx.checker.check_model(m)
    return m, {"x": [None, 8]}


def constant_attrs():
    # Constant nodes with value_float / value_floats / value_ints (opset 12+),
    # Reshape with -1 in front, Transpose without perm (reverses the axes).
    b = Builder(16)
    names = {}
    for key, attr, val in (("half", "value_float", 0.5), ("shape", "value_ints", [-1, 2, 4]),
                           ("bias", "value_floats", [1.0, 2.0, 3.0, 4.0])):
        names[key] = b.name(key)
        b.nodes.append(helper.make_node("Constant", [], [names[key]], **{attr: val}))
    h = b.op("Reshape", [b.op("Mul", ["x", names["half"]]), names["shape"]])
    b.op("Transpose", [b.op("Add", [h, names["bias"]])], out="y")
    return make_model(b, "constant_attrs", [vi("x", ["seq", 8])], [vi("y", [4, 2, "seq"])], 13), \
        {"x": [None, 8]}


def layernorm_over_seq():
    # LayerNormalization from axis 1 of [1, seq, 8]: the normalised axes
    # include the dynamic one; no bias input, default epsilon.
    b = Builder(17)
    b.op("LayerNormalization", ["x", b.weight("gamma", [8])], out="y", axis=1)
    return make_model(b, "layernorm_over_seq_op17", [vi("x", [1, "seq", 8])],
                      [vi("y", [1, "seq", 8])], 17), {"x": [1, None, 8]}


MODELS = {
    "mlp_matmul": mlp_matmul,
    "mlp_gemm": mlp_gemm,
    "ffn_decomposed_ln_op13": lambda: ffn_decomposed_ln(13, False),
    "ffn_decomposed_ln_op18": lambda: ffn_decomposed_ln(18, True),
    "ffn_layernorm_op17": ffn_layernorm,
    "classifier_op13": lambda: classifier(13),
    "classifier_op18": lambda: classifier(18),
    "attention_2d": attention_2d,
    "attention_batch1_op17": attention_batch1,
    "mlp_static": mlp_static,
    "seq_pooling": seq_pooling,
    "gram_gemm": gram_gemm,
    "mlp_ir3": mlp_ir3,
    "constant_attrs": constant_attrs,
    "layernorm_over_seq_op17": layernorm_over_seq,
    "two_inputs": two_inputs_two_params,
    "batch_seq": batch_seq,
}


def make_dynamic(m, shapes):
    """A copy whose inputs and outputs have free dims, for onnxruntime to run
    models that declare fixed sizes (mlp_static)."""
    m2 = onnx.ModelProto()
    m2.CopyFrom(m)
    for vinfo in list(m2.graph.input) + list(m2.graph.output):
        for d in vinfo.type.tensor_type.shape.dim:
            d.Clear()
    return m2


def write_bad_files(out):
    """Damaged copies and wrong inputs for the CLI error tests (bad/)."""
    d = os.path.join(out, "bad")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(out, "mlp_matmul.onnx"), "rb") as f:
        model = f.read()
    with open(os.path.join(d, "truncated.onnx"), "wb") as f:
        f.write(model[:len(model) // 2])
    with open(os.path.join(d, "garbage.onnx"), "wb") as f:
        f.write(bytes(range(256)) * 4)
    with open(os.path.join(d, "empty.onnx"), "wb") as f:
        pass
    # declares y [batch, 8] but reduces the batch away: computes [1, 8]
    b = Builder(12)
    b.op("ReduceMean", ["x"], out="y", axes=[0], keepdims=1)
    g = helper.make_graph(b.nodes, "declared", [vi("x", ["batch", 8])], [vi("y", ["batch", 8])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    with open(os.path.join(d, "out_declared_batch.onnx"), "wb") as f:
        f.write(m.SerializeToString())
    rng = np.random.default_rng(7)
    np.save(os.path.join(d, "x_f64.npy"), rng.standard_normal([3, 16]))
    np.save(os.path.join(d, "x_i32.npy"), np.arange(48, dtype=np.int32).reshape(3, 16))
    np.save(os.path.join(d, "x_fortran.npy"),
            np.asfortranarray(rng.standard_normal([3, 16]).astype(np.float32)))
    np.save(os.path.join(d, "x_rows0.npy"), np.zeros([0, 16], np.float32))
    np.save(os.path.join(d, "x_cols15.npy"), rng.standard_normal([3, 15]).astype(np.float32))
    np.save(os.path.join(d, "x_rank3.npy"), rng.standard_normal([1, 3, 16]).astype(np.float32))
    np.save(os.path.join(d, "x_rank1.npy"), rng.standard_normal([16]).astype(np.float32))
    np.save(os.path.join(d, "x_big_endian.npy"), rng.standard_normal([3, 16]).astype(">f4"))
    good = os.path.join(d, "x_ok.npy")
    np.save(good, rng.standard_normal([3, 16]).astype(np.float32))
    with open(good, "rb") as f:
        npy = f.read()
    with open(os.path.join(d, "x_short.npy"), "wb") as f:
        f.write(npy[:-10])
    with open(os.path.join(d, "x_not_npy.npy"), "wb") as f:
        f.write(b"x,y\n1,2\n")
    # a header that claims 2^40 rows
    hdr = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 16), }"
    hdr += b" " * (118 - len(hdr)) + b"\n"
    with open(os.path.join(d, "x_huge.npy"), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(hdr).to_bytes(2, "little") + hdr + npy[128:])


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "models")
    os.makedirs(out, exist_ok=True)
    for name, fn in MODELS.items():
        m, shapes = fn()
        with open(os.path.join(out, name + ".onnx"), "wb") as f:
            f.write(m.SerializeToString())
        if shapes is None:
            continue
        sess = ort.InferenceSession(make_dynamic(m, shapes).SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(1000 + len(name))
        for s in SIZES:
            feeds = {k: rng.standard_normal([s if d is None else d for d in dims])
                     .astype(np.float32) for k, dims in shapes.items()}
            res = sess.run(None, feeds)
            for sub, arrs in (("in", feeds), ("out", dict(zip(
                    [o.name for o in sess.get_outputs()], res)))):
                d = os.path.join(out, name, str(s), sub)
                os.makedirs(d, exist_ok=True)
                for k, a in arrs.items():
                    np.save(os.path.join(d, k + ".npy"), np.ascontiguousarray(a, np.float32))
    write_bad_files(out)


if __name__ == "__main__":
    main()
