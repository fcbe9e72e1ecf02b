#!/usr/bin/env python3
"""Writes a BERT-shaped encoder as ONNX for compile-time measurements
(issue #33): LAYERS identical post-norm layers of multi-head self-attention
and an erf-GELU FFN over x [1, seq, HIDDEN] (--batch: [batch, seq, HIDDEN]),
seq dynamic, random weights
(each layer its own), LayerNormalization at opset 17. No embeddings and no
pooler: only the encoder stack, whose repetition is what compile sharing is
about. The default is BERT-base (12 x 768, 12 heads, FFN 3072; ~340 MB of
weights), so write it outside the repository:

    venv=$(bench/ort/venv.sh)
    $venv/bin/python bench/bert_encoder_gen.py /tmp/bert_base.onnx
    $venv/bin/python bench/bert_encoder_gen.py /tmp/bert_2x64.onnx --layers 2 --hidden 64 --heads 4 --ffn 256
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def build(layers, hidden, heads, ffn, seed, batch="1"):
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    count = [0]

    def name(base):
        count[0] += 1
        return f"{base}_{count[0]}"

    def init(base, arr):
        n = name(base)
        inits.append(numpy_helper.from_array(np.asarray(arr), n))
        return n

    def weight(base, shape, scale):
        return init(base, (rng.standard_normal(shape) * scale).astype(np.float32))

    def op(op_type, inputs, **attrs):
        out = name(op_type.lower())
        nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def linear(x, din, dout):
        return op("Add", [op("MatMul", [x, weight("w", [din, dout], 1 / np.sqrt(din))]),
                          weight("b", [dout], 0.02)])

    def layer_norm(x):
        return op("LayerNormalization", [x, weight("gamma", [hidden], 0.1), weight("beta", [hidden], 0.02)],
                  axis=-1, epsilon=1e-12)

    dh = hidden // heads
    split = init("heads", np.array([0, 0, heads, dh], np.int64))
    merge = init("merge", np.array([0, 0, hidden], np.int64))
    scale = init("scale", np.array(1 / np.sqrt(dh), np.float32))
    sqrt2 = init("sqrt2", np.array(np.sqrt(2.0), np.float32))
    one = init("one", np.array(1.0, np.float32))
    half = init("half", np.array(0.5, np.float32))
    x = "x"
    for _ in range(layers):
        q, k, v = (linear(x, hidden, hidden) for _ in range(3))
        qh = op("Transpose", [op("Reshape", [q, split])], perm=[0, 2, 1, 3])
        kt = op("Transpose", [op("Reshape", [k, split])], perm=[0, 2, 3, 1])
        vh = op("Transpose", [op("Reshape", [v, split])], perm=[0, 2, 1, 3])
        p = op("Softmax", [op("Mul", [op("MatMul", [qh, kt]), scale])], axis=-1)
        ctx = op("Reshape", [op("Transpose", [op("MatMul", [p, vh])], perm=[0, 2, 1, 3]), merge])
        x = layer_norm(op("Add", [x, linear(ctx, hidden, hidden)]))
        h = linear(x, hidden, ffn)
        g = op("Mul", [op("Mul", [h, op("Add", [op("Erf", [op("Div", [h, sqrt2])]), one])]), half])
        x = layer_norm(op("Add", [x, linear(g, ffn, hidden)]))
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    graph = helper.make_graph(nodes, "bert_encoder",
                              [helper.make_tensor_value_info("x", F, [batch, "seq", hidden])],
                              [helper.make_tensor_value_info("y", F, [batch, "seq", hidden])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="shapejit-bert-encoder-gen")
    m.ir_version = 8
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--ffn", type=int, default=3072)
    ap.add_argument("--seed", type=int, default=33)
    ap.add_argument("--batch", action="store_true",
                    help="a dynamic batch dim (x [batch, seq, hidden]) instead of 1")
    a = ap.parse_args()
    if a.layers < 1 or a.hidden < 1 or a.heads < 1 or a.ffn < 1 or a.hidden % a.heads:
        ap.error("layers, hidden, heads and ffn must be positive and heads must divide hidden")
    m = build(a.layers, a.hidden, a.heads, a.ffn, a.seed, "batch" if a.batch else "1")
    onnx.checker.check_model(m)
    onnx.save(m, a.out)
    print(f"{a.out}: {a.layers} layers x {a.hidden} hidden, {a.heads} heads, ffn {a.ffn}")


if __name__ == "__main__":
    main()
