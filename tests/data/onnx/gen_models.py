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


def i64(*v):
    return np.array(v, np.int64)


BIG = np.iinfo(np.int64).max


def gpt2_like():
    """A GPT-2 style block as exporters write it: one projection split into
    q, k, v (Split num_outputs), heads by Reshape/Transpose, Einsum for the
    scores and the context, a causal Trilu, tanh-Gelu, Clip with bound
    inputs, n-ary Sum/Mean/Max, slices of the last, first and reversed
    tokens, Concat, Expand, Tile, an Einsum linear and ReduceL2."""
    D, H, Hd = 16, 2, 8
    mk = helper.make_node
    n = [
        mk("MatMul", ["x", "c_attn.weight"], ["/attn/MatMul_output_0"], "/attn/MatMul"),
        mk("Add", ["/attn/MatMul_output_0", "c_attn.bias"], ["/attn/Add_output_0"], "/attn/Add"),
        mk("Split", ["/attn/Add_output_0"], ["q", "k", "v"], "/attn/Split", axis=2, num_outputs=3),
        mk("Reshape", ["q", "/heads"], ["qh0"], "/attn/Reshape"),
        mk("Reshape", ["k", "/heads"], ["kh0"], "/attn/Reshape_1"),
        mk("Reshape", ["v", "/heads"], ["vh0"], "/attn/Reshape_2"),
        mk("Transpose", ["qh0"], ["qh"], "/attn/Transpose", perm=[0, 2, 1, 3]),
        mk("Transpose", ["kh0"], ["kh"], "/attn/Transpose_1", perm=[0, 2, 1, 3]),
        mk("Transpose", ["vh0"], ["vh"], "/attn/Transpose_2", perm=[0, 2, 1, 3]),
        mk("Einsum", ["qh", "kh"], ["scores0"], "/attn/Einsum", equation="bhqd,bhkd->bhqk"),
        mk("Div", ["scores0", "/scale"], ["scores1"], "/attn/Div"),
        mk("Trilu", ["scores1"], ["scores2"], "/attn/Trilu", upper=0),
        mk("Softmax", ["scores2"], ["probs"], "/attn/Softmax", axis=-1),
        mk("Einsum", ["probs", "vh"], ["ctx0"], "/attn/Einsum_1", equation="bhqk,bhkd->bhqd"),
        mk("Transpose", ["ctx0"], ["ctx1"], "/attn/Transpose_3", perm=[0, 2, 1, 3]),
        mk("Reshape", ["ctx1", "/merge"], ["ctx"], "/attn/Reshape_3"),
        mk("Gelu", ["ctx"], ["g"], "/mlp/Gelu", approximate="tanh"),
        mk("Clip", ["g", "/lo", "/hi"], ["gc"], "/mlp/Clip"),
        mk("Sum", ["gc", "x", "ctx"], ["s3"], "/Sum"),
        mk("Mean", ["s3", "x"], ["m2"], "/Mean"),
        mk("Max", ["m2", "x", "gc"], ["mx"], "/Max"),
        mk("Slice", ["mx", i64n("/s_last"), i64n("/e_big"), i64n("/ax1")], ["last"], "/Slice"),
        mk("Slice", ["mx", i64n("/s0"), i64n("/e1"), i64n("/ax1")], ["first"], "/Slice_1"),
        mk("Slice", ["mx", i64n("/s_last"), i64n("/e_neg_big"), i64n("/ax1"), i64n("/step_neg")],
           ["rev"], "/Slice_2"),
        mk("Slice", ["mx", i64n("/s2"), i64n("/e_big"), i64n("/ax2"), i64n("/step2")], ["odd"],
           "/Slice_3"),
        mk("Concat", ["rev", "odd", "rev"], ["cat"], "/Concat", axis=-1),
        mk("Expand", ["bias", "/eshape"], ["bias_e"], "/Expand"),
        mk("Add", ["mx", "bias_e"], ["mb"], "/Add"),
        mk("Tile", ["mb", "/reps"], ["tiled"], "/Tile"),
        mk("Einsum", ["tiled", "lin.weight"], ["lin"], "/lin/Einsum", equation="bid,jd->bij"),
        mk("ReduceL2", ["lin", "/axm1"], ["l2"], "/ReduceL2", keepdims=1),
    ]
    inits = [init("c_attn.weight", w(D, 3 * D)), init("c_attn.bias", w(3 * D)),
             init("/heads", i64(1, -1, H, Hd)), init("/merge", i64(1, -1, D)),
             init("/scale", np.array(np.sqrt(Hd), np.float32)),
             init("/lo", np.array(-0.1, np.float32)), init("/hi", np.array(0.3, np.float32)),
             init("/s_last", i64(-1)), init("/e_big", i64(BIG)), init("/ax1", i64(1)),
             init("/s0", i64(0)), init("/e1", i64(1)), init("/e_neg_big", i64(-BIG)),
             init("/step_neg", i64(-1)), init("/s2", i64(1)), init("/ax2", i64(2)),
             init("/step2", i64(2)), init("bias", w(D)), init("/eshape", i64(1, 1, D)),
             init("/reps", i64(1, 1, 2)), init("lin.weight", w(12, 2 * D)), init("/axm1", i64(-1))]
    g = helper.make_graph(n, "gpt2_like", [vi("x", [1, "seq", D])],
                          [vi("l2", [1, "seq", 1]), vi("last", [1, 1, D]), vi("first", [1, 1, D]),
                           vi("cat", [1, "seq", 2 * D + D // 2]), vi("lin", [1, "seq", 12])],
                          inits)
    save("gpt2_like_layout_dynamic_seq", g, 20,
         [{"x": w(1, s, D, scale=1)} for s in (1, 5, 13)])


def i64n(name):
    return name


def llama_like(reciprocal):
    """Llama's RMSNorm (Pow with a constant exponent, ReduceMean with an axes
    input, Add, Sqrt, then Reciprocal or Div) and rotary embeddings (Cos and
    Sin of the angles, rotate-half by Slice, Neg and Concat), SiLU MLP."""
    D, Hd = 16, 8
    mk = helper.make_node
    c = lambda name, v: mk("Constant", [], [name], name, value=numpy_helper.from_array(np.array(v, np.float32)))
    n = [
        c("/two", 2.0),
        mk("Pow", ["x", "/two"], ["sq"], "/norm/Pow"),
        mk("ReduceMean", ["sq", "/axm1"], ["ms"], "/norm/ReduceMean", keepdims=1),
        c("/eps", 1e-6),
        mk("Add", ["ms", "/eps"], ["mse"], "/norm/Add"),
        mk("Sqrt", ["mse"], ["rms"], "/norm/Sqrt"),
    ]
    if reciprocal:
        n.append(mk("Reciprocal", ["rms"], ["inv"], "/norm/Reciprocal"))
    else:
        n += [c("/one", 1.0), mk("Div", ["/one", "rms"], ["inv"], "/norm/Div")]
    n += [
        mk("Mul", ["x", "inv"], ["xn"], "/norm/Mul"),
        mk("Mul", ["norm.weight", "xn"], ["h"], "/norm/Mul_1"),
        mk("MatMul", ["h", "q.weight"], ["q0"], "/q/MatMul"),
        mk("Reshape", ["q0", "/heads"], ["q1"], "/q/Reshape"),
        mk("Transpose", ["q1"], ["q"], "/q/Transpose", perm=[0, 2, 1, 3]),
        mk("Cos", ["angles"], ["cos"], "/rope/Cos"),
        mk("Sin", ["angles"], ["sin"], "/rope/Sin"),
        mk("Slice", ["q", "/s0", "/half", "/axm1"], ["x1"], "/rope/Slice"),
        mk("Slice", ["q", "/half", "/big", "/axm1"], ["x2"], "/rope/Slice_1"),
        mk("Neg", ["x2"], ["nx2"], "/rope/Neg"),
        mk("Concat", ["nx2", "x1"], ["rot"], "/rope/Concat", axis=-1),
        mk("Mul", ["q", "cos"], ["qc"], "/rope/Mul"),
        mk("Mul", ["rot", "sin"], ["rs"], "/rope/Mul_1"),
        mk("Add", ["qc", "rs"], ["qr"], "/rope/Add"),
        mk("Einsum", ["qr", "qr"], ["sc"], "/attn/Einsum", equation="bhqd,bhkd->bhqk"),
        mk("Trilu", ["sc", "/k0"], ["scm"], "/attn/Trilu", upper=0),
        mk("Softmax", ["scm"], ["p"], "/attn/Softmax", axis=-1),
        mk("MatMul", ["p", "qr"], ["o0"], "/attn/MatMul"),
        mk("Transpose", ["o0"], ["o1"], "/attn/Transpose", perm=[0, 2, 1, 3]),
        mk("Reshape", ["o1", "/merge"], ["o"], "/attn/Reshape"),
        mk("Sigmoid", ["o"], ["sg"], "/mlp/Sigmoid"),
        mk("Mul", ["o", "sg"], ["y"], "/mlp/Mul"),
    ]
    inits = [init("/axm1", i64(-1)), init("norm.weight", 1 + w(D)), init("q.weight", w(D, D)),
             init("/heads", i64(1, -1, 2, Hd)), init("/merge", i64(1, -1, D)), init("/s0", i64(0)),
             init("/half", i64(Hd // 2)), init("/big", i64(BIG)), init("/k0", i64(0))]
    g = helper.make_graph(n, "llama_like", [vi("x", [1, "seq", D]), vi("angles", [1, 1, "seq", Hd])],
                          [vi("y", [1, "seq", D])], inits)
    name = "llama_like_rmsnorm_rope_dynamic_seq_" + ("reciprocal" if reciprocal else "div")
    save(name, g, 18,
         [{"x": w(1, s, D, scale=1), "angles": w(1, 1, s, Hd, scale=3)} for s in (1, 5, 13)])


if __name__ == "__main__":
    mlp()
    ffn()
    classifier()
    attention(13)
    attention(11)
    gpt2_like()
    llama_like(True)
    llama_like(False)
