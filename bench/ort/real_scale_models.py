"""The real-scale models of the ORT comparison (bench/ort/real_scale.sh),
generated with random weights rather than committed (hundreds of MB):

  bert_base   BERT-base-shaped encoder: 12 layers x 768, 12 heads, FFN 3072
              (85 M parameters in the layers), x [1, seq, 768]
  minilm      MiniLM-sized encoder: 12 layers x 384, 12 heads, FFN 1536
  llama_mlp   one Llama-7B gated MLP block: x [N, 4096] -> silu(x Wg) * (x Wu)
              -> Wd back to 4096 (11008 wide, 135 M parameters)

  resnet18    timm's ResNet-18 (11.7 M parameters), x [N, 3, 224, 224]
  mobilenetv3 timm's mobilenetv3_small_100 (2.5 M parameters), x [N, 3, 224, 224]

The encoders come from bench/bert_encoder_gen.py (post-norm layers, erf
GELU, LayerNormalization at opset 17); the vision models from timm with
random weights (nothing downloaded; torch and timm must be in the venv),
exported by torch's TorchScript exporter at opset 17 with N dynamic."""
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bert_encoder_gen  # noqa: E402


def llama_mlp(hidden=4096, inner=11008, seed=5):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)

    def w(name, shape):
        return numpy_helper.from_array(
            (rng.standard_normal(shape, dtype=np.float32) / np.sqrt(shape[0])).astype(np.float32), name)

    n = helper.make_node
    nodes = [n("MatMul", ["x", "wg"], ["g"]), n("Sigmoid", ["g"], ["sg"]), n("Mul", ["g", "sg"], ["silu"]),
             n("MatMul", ["x", "wu"], ["u"]), n("Mul", ["silu", "u"], ["h"]),
             n("MatMul", ["h", "wd"], ["y"])]
    g = helper.make_graph(nodes, "llama_mlp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", hidden])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", hidden])],
                          [w("wg", (hidden, inner)), w("wu", (hidden, inner)), w("wd", (inner, hidden))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def timm_vision(name, seed):
    def make(path):
        import timm
        import torch
        torch.manual_seed(seed)
        m = timm.create_model(name, pretrained=False).eval()
        torch.onnx.export(m, torch.randn(2, 3, 224, 224), str(path), input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}},
                          opset_version=17, dynamo=False)
    return make


SPECS = {
    "bert_base": dict(x=("1", "N", 768), sizes="1,8,64,256",
                      make=lambda: bert_encoder_gen.build(12, 768, 12, 3072, 33)),
    "minilm": dict(x=("1", "N", 384), sizes="1,8,64,256",
                   make=lambda: bert_encoder_gen.build(12, 384, 12, 1536, 34)),
    "llama_mlp": dict(x=("N", 4096), sizes="1,16,128,512", make=llama_mlp),
    "resnet18": dict(x=("N", 3, 224, 224), sizes="1,8,32", writes=timm_vision("resnet18", 6)),
    "mobilenetv3": dict(x=("N", 3, 224, 224), sizes="1,8,32",
                        writes=timm_vision("mobilenetv3_small_100", 7)),
}


def generate(names, folder):
    """Writes each named model into folder; returns side_by_side model dicts."""
    import onnx
    out = {}
    for name in names:
        spec = SPECS[name]
        path = pathlib.Path(folder) / f"{name}.onnx"
        if not path.exists():
            if "writes" in spec:
                spec["writes"](path)
            else:
                onnx.save(spec["make"](), str(path))
        out[name] = {"name": name, "path": str(path), "kind": "generated", "x": spec["x"],
                     "sizes": spec["sizes"], "dynamic": None, "dims": None}
    return out
