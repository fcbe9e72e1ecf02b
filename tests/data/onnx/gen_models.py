#!/usr/bin/env python3
"""Regenerates the ONNX models with a dynamic dim under tests/data/onnx/models.

A development aid only (needs the `onnx` and `numpy` packages); the tests
read the committed files and never run Python. Each model folder has the
layout of the ONNX backend node tests: model.onnx and test_data_set_N/ with
input_K.pb and output_K.pb, one data set per extent of the dynamic dim.
Expected outputs come from onnx.reference.ReferenceEvaluator. Names imitate
the PyTorch exporter ('/fc1/Gemm', 'onnx::MatMul_12')."""
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
rng = np.random.default_rng(1234)


def w(*shape, scale=0.3):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def vi(name, dims):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def coerced_softmax(x, axis):
    """Softmax before opset 13: rows of x flattened to 2-D at axis. (onnx's
    ReferenceEvaluator normalises over `axis` alone for every opset.)"""
    rows = x.reshape(int(np.prod(x.shape[:axis])), -1).astype(np.float64)
    e = np.exp(rows - rows.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).reshape(x.shape).astype(np.float32)


def save(name, graph, opset, inputs_for, fix=None):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="shapejit-gen")
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)  # value_info, as exporters write
    onnx.checker.check_model(model)
    d = os.path.join(HERE, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    ref = ReferenceEvaluator(model)
    for i, feeds in enumerate(inputs_for):
        sd = os.path.join(d, f"test_data_set_{i}")
        os.makedirs(sd)
        outs = ref.run(None, feeds)
        if fix:
            outs = fix(ref, feeds, outs)
        for k, (n, a) in enumerate(feeds.items()):
            with open(os.path.join(sd, f"input_{k}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(a, n).SerializeToString())
        for k, (o, a) in enumerate(zip(model.graph.output, outs)):
            with open(os.path.join(sd, f"output_{k}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(np.asarray(a, np.float32), o.name).SerializeToString())


def mlp():
    n = [
        helper.make_node("Gemm", ["input", "fc1.weight", "fc1.bias"], ["/fc1/Gemm_output_0"],
                         "/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["/fc1/Gemm_output_0"], ["/act/Relu_output_0"], "/act/Relu"),
        helper.make_node("MatMul", ["/act/Relu_output_0", "onnx::MatMul_12"],
                         ["/fc2/MatMul_output_0"], "/fc2/MatMul"),
        helper.make_node("Add", ["fc2.bias", "/fc2/MatMul_output_0"], ["/fc2/Add_output_0"],
                         "/fc2/Add"),
        helper.make_node("LeakyRelu", ["/fc2/Add_output_0"], ["/act2/LeakyRelu_output_0"],
                         "/act2/LeakyRelu", alpha=0.1),
        helper.make_node("Tanh", ["/act2/LeakyRelu_output_0"], ["/fc3/Tanh_output_0"],
                         "/fc3/Tanh"),
        helper.make_node("Sigmoid", ["/fc3/Tanh_output_0"], ["output"], "/out/Sigmoid"),
    ]
    g = helper.make_graph(n, "mlp", [vi("input", ["batch", 16])], [vi("output", ["batch", 8])],
                          [init("fc1.weight", w(24, 16)), init("fc1.bias", w(24)),
                           init("onnx::MatMul_12", w(24, 8)), init("fc2.bias", w(8))])
    save("mlp_dynamic_batch", g, 17,
         [{"input": w(b, 16, scale=1)} for b in (1, 3, 17)])


def ffn():
    D, H = 16, 32
    c = lambda name, v: helper.make_node("Constant", [], [name], name.replace("_output_0", ""),
                                         value=numpy_helper.from_array(np.array(v, np.float32)))
    n = [
        helper.make_node("ReduceMean", ["x"], ["/ln/ReduceMean_output_0"], "/ln/ReduceMean",
                         axes=[-1]),
        helper.make_node("Sub", ["x", "/ln/ReduceMean_output_0"], ["/ln/Sub_output_0"], "/ln/Sub"),
        c("/ln/Constant_output_0", 2.0),
        helper.make_node("Pow", ["/ln/Sub_output_0", "/ln/Constant_output_0"],
                         ["/ln/Pow_output_0"], "/ln/Pow"),
        helper.make_node("ReduceMean", ["/ln/Pow_output_0"], ["/ln/ReduceMean_1_output_0"],
                         "/ln/ReduceMean_1", axes=[-1]),
        c("/ln/Constant_1_output_0", 1e-5),
        helper.make_node("Add", ["/ln/ReduceMean_1_output_0", "/ln/Constant_1_output_0"],
                         ["/ln/Add_output_0"], "/ln/Add"),
        helper.make_node("Sqrt", ["/ln/Add_output_0"], ["/ln/Sqrt_output_0"], "/ln/Sqrt"),
        helper.make_node("Div", ["/ln/Sub_output_0", "/ln/Sqrt_output_0"], ["/ln/Div_output_0"],
                         "/ln/Div"),
        helper.make_node("Mul", ["/ln/Div_output_0", "ln.weight"], ["/ln/Mul_output_0"],
                         "/ln/Mul"),
        helper.make_node("Add", ["/ln/Mul_output_0", "ln.bias"], ["/ln/Add_1_output_0"],
                         "/ln/Add_1"),
        helper.make_node("MatMul", ["/ln/Add_1_output_0", "onnx::MatMul_40"],
                         ["/fc1/MatMul_output_0"], "/fc1/MatMul"),
        helper.make_node("Add", ["fc1.bias", "/fc1/MatMul_output_0"], ["/fc1/Add_output_0"],
                         "/fc1/Add"),
        c("/act/Constant_output_0", 1.4142135381698608),
        helper.make_node("Div", ["/fc1/Add_output_0", "/act/Constant_output_0"],
                         ["/act/Div_output_0"], "/act/Div"),
        helper.make_node("Erf", ["/act/Div_output_0"], ["/act/Erf_output_0"], "/act/Erf"),
        c("/act/Constant_1_output_0", 1.0),
        helper.make_node("Add", ["/act/Erf_output_0", "/act/Constant_1_output_0"],
                         ["/act/Add_output_0"], "/act/Add"),
        helper.make_node("Mul", ["/fc1/Add_output_0", "/act/Add_output_0"],
                         ["/act/Mul_output_0"], "/act/Mul"),
        c("/act/Constant_2_output_0", 0.5),
        helper.make_node("Mul", ["/act/Mul_output_0", "/act/Constant_2_output_0"],
                         ["/act/Mul_1_output_0"], "/act/Mul_1"),
        helper.make_node("MatMul", ["/act/Mul_1_output_0", "onnx::MatMul_41"],
                         ["/fc2/MatMul_output_0"], "/fc2/MatMul"),
        helper.make_node("Add", ["fc2.bias", "/fc2/MatMul_output_0"], ["/fc2/Add_output_0"],
                         "/fc2/Add"),
        helper.make_node("Add", ["x", "/fc2/Add_output_0"], ["y"], "/Add"),
    ]
    g = helper.make_graph(n, "ffn", [vi("x", ["batch", 4, D])], [vi("y", ["batch", 4, D])],
                          [init("ln.weight", 1 + w(D)), init("ln.bias", w(D)),
                           init("onnx::MatMul_40", w(D, H)), init("fc1.bias", w(H)),
                           init("onnx::MatMul_41", w(H, D)), init("fc2.bias", w(D))])
    save("ffn_layernorm_gelu_dynamic_batch", g, 13,
         [{"x": w(b, 4, D, scale=1)} for b in (1, 2, 9)])


def classifier():
    D, C = 16, 5
    n = [
        helper.make_node("LayerNormalization", ["tokens", "norm.weight", "norm.bias"],
                         ["/norm/LayerNormalization_output_0"], "/norm/LayerNormalization",
                         epsilon=1e-5, axis=-1),
        helper.make_node("ReduceMean", ["/norm/LayerNormalization_output_0", "/pool/axes"],
                         ["/pool/ReduceMean_output_0"], "/pool/ReduceMean", keepdims=0),
        helper.make_node("ReduceMax", ["/norm/LayerNormalization_output_0", "/pool/axes"],
                         ["/pool/ReduceMax_output_0"], "/pool/ReduceMax", keepdims=0),
        helper.make_node("Add", ["/pool/ReduceMean_output_0", "/pool/ReduceMax_output_0"],
                         ["/pool/Add_output_0"], "/pool/Add"),
        helper.make_node("Reshape", ["/pool/Add_output_0", "/head/shape"],
                         ["/head/Reshape_output_0"], "/head/Reshape"),
        helper.make_node("Gemm", ["/head/Reshape_output_0", "head.weight", "head.bias"],
                         ["/head/Gemm_output_0"], "/head/Gemm", transB=1, alpha=1.0, beta=1.0),
        helper.make_node("LogSoftmax", ["/head/Gemm_output_0"], ["log_probs"], "/LogSoftmax",
                         axis=-1),
        helper.make_node("ReduceSum", ["/norm/LayerNormalization_output_0", "/sum/axes"],
                         ["token_sums"], "/sum/ReduceSum", keepdims=1),
    ]
    g = helper.make_graph(n, "classifier", [vi("tokens", ["seq", D])],
                          [vi("log_probs", [1, C]), vi("token_sums", ["seq", 1])],
                          [init("norm.weight", 1 + w(D)), init("norm.bias", w(D)),
                           init("/pool/axes", np.array([0], np.int64)),
                           init("/sum/axes", np.array([-1], np.int64)),
                           init("/head/shape", np.array([1, -1], np.int64)),
                           init("head.weight", w(C, D)), init("head.bias", w(C))])
    save("classifier_head_dynamic_seq", g, 18,
         [{"tokens": w(s, D, scale=1)} for s in (1, 6, 13)])


def attention(opset):
    E, Hd, NH = 16, 4, 4
    n = [
        helper.make_node("MatMul", ["hidden", "onnx::MatMul_q"], ["/q/MatMul_output_0"],
                         "/q/MatMul"),
        helper.make_node("Add", ["q.bias", "/q/MatMul_output_0"], ["/q/Add_output_0"], "/q/Add"),
        helper.make_node("MatMul", ["hidden", "onnx::MatMul_k"], ["/k/MatMul_output_0"],
                         "/k/MatMul"),
        helper.make_node("Reshape", ["/q/Add_output_0", "/shape_heads"], ["/Reshape_output_0"],
                         "/Reshape"),
        helper.make_node("Reshape", ["/k/MatMul_output_0", "/shape_heads"],
                         ["/Reshape_1_output_0"], "/Reshape_1"),
        helper.make_node("Transpose", ["/Reshape_output_0"], ["/Transpose_output_0"],
                         "/Transpose", perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["/Reshape_1_output_0"], ["/Transpose_1_output_0"],
                         "/Transpose_1", perm=[0, 2, 3, 1]),
        helper.make_node("MatMul", ["/Transpose_output_0", "/Transpose_1_output_0"],
                         ["/MatMul_output_0"], "/MatMul"),
        helper.make_node("Div", ["/MatMul_output_0", "/Constant_output_0"], ["/Div_output_0"],
                         "/Div"),
        helper.make_node("Softmax", ["/Div_output_0"], ["scores"], "/Softmax", axis=3),
        helper.make_node("MatMul", ["scores", "/Transpose_output_0"], ["/MatMul_1_output_0"],
                         "/MatMul_1"),
        helper.make_node("Transpose", ["/MatMul_1_output_0"], ["/Transpose_2_output_0"],
                         "/Transpose_2", perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["/Transpose_2_output_0", "/shape_merge"], ["context"],
                         "/Reshape_2"),
    ]
    outs = [vi("scores", [1, NH, "seq", "seq"]), vi("context", [1, "seq", E])]
    if opset < 13:
        # the opset-11 default: one row per batch item, over heads x seq x seq
        n.append(helper.make_node("Softmax", ["/Div_output_0"], ["coerced"], "/Softmax_1"))
        outs.append(vi("coerced", [1, NH, "seq", "seq"]))
    g = helper.make_graph(n, "attention", [vi("hidden", [1, "seq", E])], outs,
                          [init("onnx::MatMul_q", w(E, E)), init("q.bias", w(E)),
                           init("onnx::MatMul_k", w(E, E)),
                           init("/shape_heads", np.array([0, 0, NH, Hd], np.int64)),
                           init("/shape_merge", np.array([0, -1, E], np.int64)),
                           init("/Constant_output_0", np.array(2.0, np.float32))])
    def fix(ref, feeds, outs):
        if opset < 13:
            (div,) = ref.run(["/Div_output_0"], feeds)
            outs = list(outs[:2]) + [coerced_softmax(div, 1)]
        return outs

    save(f"attention_scores_dynamic_seq_opset{opset}", g, opset,
         [{"hidden": w(1, s, E, scale=1)} for s in (1, 5, 12)], fix)


if __name__ == "__main__":
    mlp()
    ffn()
    classifier()
    attention(13)
    attention(11)
