#!/usr/bin/env python3
"""Exports real PyTorch / Hugging Face models to ONNX as test data for
tests/real_models.cmake, with torch's outputs as the expectations.

Dev aid only: the tests read the committed files under tests/data/real_models
and never run this script (CI has no torch). To regenerate:

    python3 -m venv /work/venv-export
    /work/venv-export/bin/pip install -r tools/requirements-export.txt
    /work/venv-export/bin/python tools/export_models.py [--out DIR] [--only REGEX]
    /work/venv-export/bin/python tools/onnx_op_inventory.py   # refreshes OPS.md

Every model is built from a small configuration with random weights drawn
under a fixed seed (nothing is downloaded) and exported with both of
torch.onnx's exporters: the TorchScript one (dynamo=False, opset 17) and the
dynamo one (dynamo=True, the opset it picks). An exporter that refuses a
module is reported and that pair is left out; the script lists them at the
end and in tests/data/real_models/EXPORT_FAILURES.md.

Inputs have a dynamic `seq` dim and a dynamic `batch` dim. The tests bucket
one of them and fix the other: seq with --dim batch=1, and batch with --dim
seq=BATCH_SEQ. For each length in LENGTHS and each batch in TEXT_BATCHES the
script writes

    <model>_<exporter>/model.onnx            (+ model.onnx.data: external data)
    <model>_<exporter>/<len>/in/<input>.npy  seeded inputs, batch 1
    <model>_<exporter>/<len>/out/<output>.npy  what torch computes
    <model>_<exporter>/b<batch>/in|out/...   batch <batch> at seq BATCH_SEQ
    <model>_<exporter>/manifest.json         inputs, dims, lengths, batches, tolerances

--batches-only rewrites the b<batch> folders and the manifest's batch fields
of models already exported, from the same seeded modules, without exporting
again (the module's outputs at length BATCH_SEQ must still match the stored
ones within the tests' tolerance, or the script stops: the weights would not
be the exported ones).

bad/ holds damaged copies (external data missing, truncated, or located
outside the model's folder) and .npy inputs of the wrong dtype for the error
tests. The script runs onnxruntime on every length and compares with torch
(the tests' tolerances): an export that onnxruntime cannot run or that
disagrees is the exporter's failure, reported like a refusal, not test data.
Token inputs are int64 ids in [0, vocab); attention masks are int64 ones
with the last (len + 1) // 4 positions zero (right padding).
"""
import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch
import transformers

LENGTHS = [1, 3, 7, 16, 37, 64]
ATOL, RTOL = 1e-5, 1e-3
TS_OPSET = 17
HIDDEN, HEADS, FFN, LAYERS, VOCAB, MAX_POS = 32, 4, 64, 2, 100, 128
EXPORT_BATCH, EXPORT_SEQ = 2, 16  # example shape: not 0/1, so no size specialisation
# text models served by batch: the batches run at one sequence length (3 and
# 5 are padded into the buckets 4 and 8)
BATCH_SEQ, TEXT_BATCHES = 7, [3, 5]
# models whose weights go to a side file model.onnx.data (ONNX external data)
EXTERNAL_DATA = {"bert_torchscript", "llama_dynamo", "tel_postnorm_relu_dynamo"}
EXTERNAL_FILE = "model.onnx.data"


# ---- the modules ------------------------------------------------------------

class HFWrapper(torch.nn.Module):
    """Calls a transformers model with keyword inputs and returns the chosen
    output fields as a tuple, as a user exporting one writes it."""

    def __init__(self, model, outputs):
        super().__init__()
        self.model = model
        self.outputs = outputs

    def forward(self, input_ids, attention_mask):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
        return tuple(getattr(out, k) for k in self.outputs)


class MHAResidualNorm(torch.nn.Module):
    """Self-attention with a residual connection and a LayerNorm after it."""

    def __init__(self):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(HIDDEN, HEADS, dropout=0.0, batch_first=True)
        self.norm = torch.nn.LayerNorm(HIDDEN)

    def forward(self, x):
        a, _ = self.attn(x, x, x, need_weights=False)
        return self.norm(x + a)


def tel(norm_first, activation):
    return torch.nn.TransformerEncoderLayer(
        HIDDEN, HEADS, dim_feedforward=FFN, dropout=0.0, activation=activation,
        batch_first=True, norm_first=norm_first)


def bert():
    cfg = transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, intermediate_size=FFN, max_position_embeddings=MAX_POS)
    return HFWrapper(transformers.BertModel(cfg), ["last_hidden_state", "pooler_output"])


def gpt2():
    cfg = transformers.GPT2Config(
        vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_inner=FFN,
        n_positions=MAX_POS, bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1, use_cache=False)
    return HFWrapper(transformers.GPT2Model(cfg), ["last_hidden_state"])


def distilbert():
    cfg = transformers.DistilBertConfig(
        vocab_size=VOCAB, dim=HIDDEN, n_layers=LAYERS, n_heads=HEADS, hidden_dim=FFN,
        max_position_embeddings=MAX_POS)
    return HFWrapper(transformers.DistilBertModel(cfg), ["last_hidden_state"])


def llama():
    cfg = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=HEADS // 2,
        max_position_embeddings=MAX_POS, use_cache=False)
    return HFWrapper(transformers.LlamaModel(cfg), ["last_hidden_state"])


def roberta():
    # position ids come from the ids themselves: padding_idx + the running
    # count (CumSum) of non-padding tokens, so a pad token (id 1) among the
    # ids keeps its position at padding_idx
    cfg = transformers.RobertaConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, intermediate_size=FFN, max_position_embeddings=MAX_POS + 2,
        pad_token_id=1)
    return HFWrapper(transformers.RobertaModel(cfg, add_pooling_layer=False), ["last_hidden_state"])


def bloom():
    # ALiBi: per-head slopes times the position of each key, the position a
    # running sum (CumSum) of the attention mask
    cfg = transformers.BloomConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, n_layer=LAYERS, n_head=HEADS, use_cache=False)
    return HFWrapper(transformers.BloomModel(cfg), ["last_hidden_state"])


def randomise(module):
    """Draws every parameter anew (under the caller's seed). Default inits
    leave biases at 0, norm gains at 1 and, in transformers, weights at std
    0.02, where attention scores are ~0 and softmax is uniform: a wrong bias,
    gain, scale or mask could then pass. Matrices get std 0.2 (scores of
    order 1 at width 32), gains 1 + 0.1 z, biases 0.1 z."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.2)
            elif name.endswith("weight"):
                p.normal_(1.0, 0.1)
            else:
                p.normal_(0.0, 0.1)
    return module


class ConvNet(torch.nn.Module):
    """A small conv net as a user writes one: Conv, BatchNorm, ReLU, MaxPool,
    a strided conv, AdaptiveAvgPool and a Linear head."""

    def __init__(self):
        super().__init__()
        n = torch.nn
        self.body = n.Sequential(
            n.Conv2d(3, 8, 3, padding=1), n.BatchNorm2d(8), n.ReLU(), n.MaxPool2d(2),
            n.Conv2d(8, 16, 3, stride=2, padding=1, groups=2), n.BatchNorm2d(16), n.ReLU(),
            n.Conv2d(16, 16, 3, padding=1, groups=16), n.ReLU6(),
            n.AdaptiveAvgPool2d(1), n.Flatten(), n.Linear(16, 10))

    def forward(self, x):
        return self.body(x)


class LayoutMix(torch.nn.Module):
    """Conv-net pieces around activations that shapejit keeps channels last
    between convs (formats/onnx/onnx_layout.h): a per-channel parameter and
    a scalar, a BatchNorm no conv absorbs, a residual from the channels-first input, a squeeze-excite
    gate, a grouped conv and a concat (both read channels first), a max
    pool, an average pool counting its padding, a mean over everything, a
    flatten sized by Shape, and an intermediate activation as an output."""

    def __init__(self):
        super().__init__()
        n = torch.nn
        self.c1 = n.Conv2d(3, 8, 3, padding=1)
        self.scale = n.Parameter(torch.randn(8, 1, 1))
        self.bn = n.BatchNorm2d(8)  # after a ReLU: no conv to fold it into
        with torch.no_grad():
            self.bn.running_mean.normal_(0.0, 0.3)
            self.bn.running_var.uniform_(0.5, 1.5)
        self.c2 = n.Conv2d(8, 3, 1)
        self.c3 = n.Conv2d(3, 8, 3, padding=1)
        self.se1, self.se2 = n.Conv2d(8, 4, 1), n.Conv2d(4, 8, 1)
        self.grouped = n.Conv2d(8, 8, 3, padding=1, groups=2)
        self.dw = n.Conv2d(16, 16, 3, padding=1, groups=16)
        self.pool = n.AvgPool2d(3, stride=2, padding=1, count_include_pad=True)
        self.head = n.Linear(16, 10)

    def forward(self, x):
        f = torch.nn.functional
        a = self.bn(torch.relu(self.c1(x) * self.scale + 0.5))
        b = self.c2(a) + x
        c = f.hardswish(self.c3(b))
        gate = torch.sigmoid(self.se2(torch.relu(self.se1(c.mean((2, 3), keepdim=True)))))
        c = c * gate
        e = torch.cat([c, self.grouped(c)], 1)
        e = f.max_pool2d(self.dw(e), 2)
        feature = self.pool(e) - e.mean()
        pooled = f.adaptive_avg_pool2d(feature, 1)
        return self.head(pooled.view(pooled.shape[0], -1)), feature


def timm_model(kind):
    """timm's architectures at a narrow width (the topology as published,
    random weights, nothing downloaded)."""
    import timm
    from timm.models import efficientnet, mobilenetv3
    if kind == "resnet18":
        return timm.create_model("resnet18", pretrained=False, num_classes=10,
                                 channels=(8, 16, 32, 64), stem_width=8)
    if kind == "mobilenetv3_small":
        return mobilenetv3._gen_mobilenet_v3("mobilenetv3_small_100", 0.25, pretrained=False,
                                             num_classes=10)
    if kind == "efficientnet_b0":
        return efficientnet._gen_efficientnet("efficientnet_b0", channel_multiplier=0.25,
                                              depth_multiplier=0.25, pretrained=False,
                                              num_classes=10)
    if kind == "convnext_tiny":
        return timm.create_model("convnext_atto", pretrained=False, num_classes=10,
                                 dims=(8, 16, 32, 64), depths=(1, 1, 2, 1))
    raise ValueError(kind)


TOKENS = ["input_ids", "attention_mask"]
IMAGE = ["pixel_values"]
IMAGE_SIZE = 32
# Vision models bucket their batch: these batch sizes cross buckets (3 runs
# in the 4 bucket, 5 in the 8 one).
BATCHES = [1, 3, 5]
# Exported by the dynamo exporter only, as timm's users export them.
DYNAMO_ONLY = {"resnet18", "mobilenetv3_small", "efficientnet_b0", "convnext_tiny"}
FLOAT = ["src"]
# name: (seed, factory, input names, output names, description)
MODELS = {
    "tel_postnorm_relu": (11, lambda: tel(False, "relu"), FLOAT, ["out"],
                          "nn.TransformerEncoderLayer, post-norm, ReLU, batch_first"),
    "tel_prenorm_gelu": (12, lambda: tel(True, "gelu"), FLOAT, ["out"],
                         "nn.TransformerEncoderLayer, pre-norm (norm_first), GELU, batch_first"),
    "mha_residual_ln": (13, MHAResidualNorm, FLOAT, ["out"],
                        "nn.MultiheadAttention (batch_first) + residual + LayerNorm"),
    "bert": (21, bert, TOKENS, ["last_hidden_state", "pooler_output"],
             "transformers BertModel with attention_mask"),
    "gpt2": (22, gpt2, TOKENS, ["last_hidden_state"],
             "transformers GPT2Model (use_cache=False) with attention_mask"),
    "distilbert": (23, distilbert, TOKENS, ["last_hidden_state"],
                   "transformers DistilBertModel with attention_mask"),
    "llama": (24, llama, TOKENS, ["last_hidden_state"],
              "transformers LlamaModel (RMSNorm, rotary, causal mask, GQA; use_cache=False)"
              " with attention_mask"),
    "roberta": (25, roberta, TOKENS, ["last_hidden_state"],
                "transformers RobertaModel (position ids by CumSum over non-padding ids)"
                " with attention_mask"),
    "bloom": (26, bloom, TOKENS, ["last_hidden_state"],
              "transformers BloomModel (ALiBi from a CumSum over the mask; use_cache=False)"
              " with attention_mask"),
    "convnet": (31, ConvNet, IMAGE, ["logits"],
                "a small conv net (Conv, BatchNorm, ReLU, MaxPool, grouped and depthwise conv,"
                " AdaptiveAvgPool, Linear), batch dynamic"),
    "layouts": (36, LayoutMix, IMAGE, ["logits", "feature"],
                "conv-net ops around channels-last activations: per-channel and scalar"
                " constants, BatchNorm after a ReLU, a residual from the input, squeeze-excite, grouped conv, concat,"
                " pools, a flatten by Shape, an intermediate output; batch dynamic"),
    "resnet18": (32, lambda: timm_model("resnet18"), IMAGE, ["logits"],
                 "timm resnet18 topology at width 8-64, batch dynamic"),
    "mobilenetv3_small": (33, lambda: timm_model("mobilenetv3_small"), IMAGE, ["logits"],
                          "timm mobilenetv3_small_100 at channel multiplier 0.25, batch dynamic"),
    "efficientnet_b0": (34, lambda: timm_model("efficientnet_b0"), IMAGE, ["logits"],
                        "timm efficientnet_b0 at channel and depth multiplier 0.25, batch dynamic"),
    "convnext_tiny": (35, lambda: timm_model("convnext_tiny"), IMAGE, ["logits"],
                      "timm ConvNeXt (convnext_atto blocks) at width 8-64, batch dynamic"),
}


# ---- inputs -------------------------------------------------------------------

def make_inputs(names, seed, batch, length):
    """Seeded inputs for one length; the same for both exporters."""
    rng = np.random.default_rng([seed, batch, length])
    out = {}
    for n in names:
        if n == "input_ids":
            out[n] = rng.integers(0, VOCAB, (batch, length), dtype=np.int64)
        elif n == "attention_mask":
            m = np.ones((batch, length), np.int64)
            pad = (length + 1) // 4
            if pad:
                m[:, length - pad:] = 0
            out[n] = m
        elif n in IMAGE:  # `length` is the batch: images have no sequence
            out[n] = rng.standard_normal((length, 3, IMAGE_SIZE, IMAGE_SIZE)).astype(np.float32)
        else:
            out[n] = rng.standard_normal((batch, length, HIDDEN)).astype(np.float32)
    return out


def is_vision(in_names):
    return in_names == IMAGE


def torch_outputs(module, inputs):
    with torch.no_grad():
        res = module(*[torch.from_numpy(v) for v in inputs.values()])
    if isinstance(res, torch.Tensor):
        res = (res,)
    return [r.detach().numpy().astype(np.float32) for r in res]


# ---- export -------------------------------------------------------------------

def dynamic_dims(name):
    return {0: "batch", 1: "seq"} if name in TOKENS + FLOAT + ["out", "last_hidden_state"] \
        else {0: "batch"}


def example_of(in_names, seed):
    """The example the exporters trace: batch 2 (not 0/1, so no size
    specialisation), images at batch 2 as well."""
    return make_inputs(in_names, seed, EXPORT_BATCH, EXPORT_BATCH if is_vision(in_names) else EXPORT_SEQ)


def export_torchscript(module, example, in_names, out_names, path):
    torch.onnx.export(
        module, tuple(torch.from_numpy(v) for v in example.values()), path,
        input_names=in_names, output_names=out_names,
        dynamic_axes={n: dynamic_dims(n) for n in in_names + out_names},
        opset_version=TS_OPSET, dynamo=False, do_constant_folding=True)


def export_dynamo(module, example, in_names, out_names, path):
    batch = torch.export.Dim("batch", min=1, max=64)
    seq = torch.export.Dim("seq", min=1, max=MAX_POS)
    dims = {0: batch} if is_vision(in_names) else {0: batch, 1: seq}
    prog = torch.onnx.export(
        module, tuple(torch.from_numpy(v) for v in example.values()),
        input_names=in_names, output_names=out_names,
        dynamic_shapes=tuple(dims for _ in in_names),
        dynamo=True, verbose=False)
    prog.save(path)


# What was found about a refusal by hand, written under it.
MHA_NOTE = ("The TorchScript exporter traces `k.view(k.shape[0], bsz * num_heads, head_dim)` in "
            "F.multi_head_attention_forward with k.shape[0] frozen to the example length, so the "
            "graph only runs at that length.")
NOTES = {
    "tel_postnorm_relu_torchscript": "Wrapping the layer in a module whose forward takes only "
    "`src` gets past this, and then hits the frozen length of nn.MultiheadAttention: " + MHA_NOTE,
    "tel_prenorm_gelu_torchscript": "As for tel_postnorm_relu_torchscript.",
    "mha_residual_ln_torchscript": MHA_NOTE,
}

EXPORTERS = {"torchscript": export_torchscript, "dynamo": export_dynamo}


def save_model(src, dst_dir, external):
    """Re-saves the exported model in one canonical form: inline weights, or
    every initialiser above 64 bytes in one side file next to the model
    (EXTERNAL_FILE, offsets and lengths per the ONNX spec)."""
    m = onnx.load(src)
    # The dynamo exporter records each node's Python stack (this machine's
    # paths and this script's line numbers): dropped, so that the files are
    # the same wherever they are made. Its other node metadata stays.
    for node in m.graph.node:
        keep = [p for p in node.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
        del node.metadata_props[:]
        node.metadata_props.extend(keep)
    path = os.path.join(dst_dir, "model.onnx")
    if external:
        onnx.save(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                  location=EXTERNAL_FILE, size_threshold=64, convert_attribute=False)
    else:
        onnx.save(m, path)
    onnx.checker.check_model(path, full_check=True)
    return path


def dims_of(value_info):
    return [d.dim_param if d.dim_param else d.dim_value
            for d in value_info.type.tensor_type.shape.dim]


DTYPES = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.INT64: "int64",
          onnx.TensorProto.INT32: "int32", onnx.TensorProto.BOOL: "bool"}


def save_case(folder, inputs, outputs):
    """folder/in/<input>.npy and folder/out/<output>.npy (dicts by name)."""
    for sub, arrays in (("in", inputs), ("out", outputs)):
        d = os.path.join(folder, sub)
        os.makedirs(d)
        for n, a in arrays.items():
            np.save(os.path.join(d, n + ".npy"), np.ascontiguousarray(a))


def io_manifest(model):
    """The manifest's inputs and outputs: names, dtypes, shapes."""
    def entries(values):
        return [{"name": v.name, "dtype": DTYPES[v.type.tensor_type.elem_type],
                 "shape": dims_of(v)} for v in values]
    return {"inputs": entries(model.graph.input), "outputs": entries(model.graph.output)}


def write_manifest(dst, manifest):
    manifest["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__,
                            "onnx": onnx.__version__, "onnxruntime": ort.__version__}
    with open(os.path.join(dst, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


def close(got, want):
    return got.shape == want.shape and np.allclose(got, want, atol=ATOL, rtol=RTOL)


def build(name, exporter, out_root, failures):
    seed, factory, in_names, out_names, desc = MODELS[name]
    tag = f"{name}_{exporter}"
    torch.manual_seed(seed)
    module = randomise(factory()).eval()
    example = example_of(in_names, seed)
    vision = is_vision(in_names)
    lengths = BATCHES if vision else LENGTHS
    tmp = tempfile.mkdtemp(prefix="sj_export_")
    try:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                EXPORTERS[exporter](module, example, in_names, out_names,
                                    os.path.join(tmp, "m.onnx"))
        except Exception as e:  # the exporter refused the module: reported, not fatal
            msg = str(e).strip().splitlines()
            msg = next((l for l in msg if "Error" in l or "not supported" in l), msg[0] if msg else "")
            failures.append((tag, f"{type(e).__name__}: {msg[:300]}"))
            print(f"{tag}: exporter refused the module: {failures[-1][1]}", file=sys.stderr)
            return None
        dst = os.path.join(out_root, tag)
        shutil.rmtree(dst, ignore_errors=True)
        os.makedirs(dst)
        path = save_model(os.path.join(tmp, "m.onnx"), dst, tag in EXTERNAL_DATA)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    model = onnx.load(path, load_external_data=False)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ort_out_names = [o.name for o in sess.get_outputs()]
    if ort_out_names != out_names:
        raise SystemExit(f"{tag}: outputs are {ort_out_names}, want {out_names}")
    worst = 0.0
    for length in lengths:
        inputs = make_inputs(in_names, seed, 1, length)
        want = torch_outputs(module, inputs)
        # An export that is wrong at another length (a traced size frozen
        # into a constant) is the exporter's failure, not test data.
        try:
            got = sess.run(None, inputs)
            bad = [n for n, w, g in zip(out_names, want, got) if not close(g, w)]
        except Exception as e:
            got, bad = None, [f"onnxruntime fails: {str(e).strip().splitlines()[0][:300]}"]
        if bad:
            failures.append((tag, f"exported, but the graph is wrong at length {length} "
                                  f"(exported at {EXPORT_BATCH if vision else EXPORT_SEQ}): "
                                  f"{', '.join(bad)}"))
            print(f"{tag}: {failures[-1][1]}", file=sys.stderr)
            shutil.rmtree(dst)
            return None
        worst = max([worst] + [float(np.abs(g - w).max()) for w, g in zip(want, got)])
        save_case(os.path.join(dst, str(length)), inputs, dict(zip(out_names, want)))

    batches = [] if vision else write_batches(tag, module, sess, in_names, out_names, seed, dst)
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    manifest = {
        "name": tag,
        "description": desc,
        "exporter": exporter,
        "dynamo": exporter == "dynamo",
        "opset": opset,
        "model": "model.onnx",
        "external_data": EXTERNAL_FILE if tag in EXTERNAL_DATA else None,
        **io_manifest(model),
        "compare": out_names,
        "dynamic": "batch" if vision else "seq",
        "dims": {} if vision else {"batch": 1},
        "lengths": lengths,
        "batch_seq": None if vision else BATCH_SEQ,
        "batches": batches,
        "atol": ATOL,
        "rtol": RTOL,
        "onnxruntime_max_abs_diff": float(f"{worst:.3g}"),
        "seed": seed,
    }
    write_manifest(dst, manifest)
    size = sum(os.path.getsize(os.path.join(r, x)) for r, _, fs in os.walk(dst) for x in fs)
    print(f"{tag}: opset {opset}, {len(model.graph.node)} nodes, {size / 1024:.0f} KiB, "
          f"onnxruntime vs torch max |diff| {worst:.2e}")
    return tag


def write_batches(tag, module, sess, in_names, out_names, seed, dst):
    """b<batch>/in and out for each of TEXT_BATCHES at seq BATCH_SEQ: torch's
    outputs, checked against onnxruntime on the exported graph as the
    lengths are. Returns the batches written."""
    for batch in TEXT_BATCHES:
        inputs = make_inputs(in_names, seed, batch, BATCH_SEQ)
        want = torch_outputs(module, inputs)
        got = sess.run(None, inputs)
        bad = [n for n, w, g in zip(out_names, want, got) if not close(g, w)]
        if bad:
            raise SystemExit(f"{tag}: onnxruntime disagrees with torch at batch {batch}: {bad}")
        d = os.path.join(dst, f"b{batch}")
        shutil.rmtree(d, ignore_errors=True)
        save_case(d, inputs, dict(zip(out_names, want)))
    return TEXT_BATCHES


def batches_only(name, exporter, out_root):
    """write_batches for a model already exported (see the module docstring)."""
    seed, factory, in_names, out_names, _ = MODELS[name]
    tag = f"{name}_{exporter}"
    dst = os.path.join(out_root, tag)
    mf = os.path.join(dst, "manifest.json")
    if is_vision(in_names) or not os.path.exists(mf):
        return None
    torch.manual_seed(seed)
    module = randomise(factory()).eval()
    inputs = make_inputs(in_names, seed, 1, BATCH_SEQ)
    for n, w in zip(out_names, torch_outputs(module, inputs)):
        stored = np.load(os.path.join(dst, str(BATCH_SEQ), "out", n + ".npy"))
        if not close(w, stored):  # kernels may differ in the last bits, weights may not
            raise SystemExit(f"{tag}: the rebuilt module's {n} differs from the stored one; "
                             "export the model again instead")
    sess = ort.InferenceSession(os.path.join(dst, "model.onnx"), providers=["CPUExecutionProvider"])
    with open(mf) as f:
        manifest = json.load(f)
    manifest["batch_seq"] = BATCH_SEQ
    manifest["batches"] = write_batches(tag, module, sess, in_names, out_names, seed, dst)
    with open(mf, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print(f"{tag}: batches {TEXT_BATCHES} at seq {BATCH_SEQ}")
    return tag


def set_location(model, location):
    for t in model.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = location


def make_bad(out_root):
    """bad/: damaged copies for the error tests of tests/real_models.cmake.
    ext_missing: the side file is absent; ext_truncated: it is cut short;
    ext_escape / ext_absolute: `location` leaves the model's folder (a real
    file there, so only the rule refuses it); wrong-dtype .npy inputs."""
    src_dir = os.path.join(out_root, "tel_postnorm_relu_dynamo")
    bad = os.path.join(out_root, "bad")
    shutil.rmtree(bad, ignore_errors=True)
    model = onnx.load(os.path.join(src_dir, "model.onnx"), load_external_data=False)
    with open(os.path.join(src_dir, EXTERNAL_FILE), "rb") as f:
        data = f.read()
    cases = {"ext_missing": (EXTERNAL_FILE, None), "ext_truncated": (EXTERNAL_FILE, data[:len(data) // 2]),
             "ext_escape": (f"../../tel_postnorm_relu_dynamo/{EXTERNAL_FILE}", None),
             "ext_absolute": ("/dev/zero", None)}
    for case, (location, payload) in cases.items():
        d = os.path.join(bad, case)
        os.makedirs(d)
        set_location(model, location)
        onnx.save(model, os.path.join(d, "model.onnx"))
        if payload is not None:
            with open(os.path.join(d, EXTERNAL_FILE), "wb") as f:
                f.write(payload)
    ok = make_inputs(TOKENS, MODELS["bert"][0], 1, 7)
    np.save(os.path.join(bad, "attention_mask_f32.npy"), ok["attention_mask"].astype(np.float32))
    np.save(os.path.join(bad, "input_ids_i32.npy"), ok["input_ids"].astype(np.int32))
    x = make_inputs(FLOAT, MODELS["tel_postnorm_relu"][0], 1, 7)["src"]
    np.save(os.path.join(bad, "src_i64.npy"), np.rint(x * 10).astype(np.int64))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "data", "real_models"))
    ap.add_argument("--only", default=".", help="regex on <model>_<exporter>")
    ap.add_argument("--batches-only", action="store_true",
                    help="only rewrite the batch data of models already exported")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)  # reproducible reductions
    if args.batches_only:
        for name in MODELS:
            for exporter in EXPORTERS:
                if re.search(args.only, f"{name}_{exporter}"):
                    batches_only(name, exporter, args.out)
        return
    failures, made = [], []
    for name in MODELS:
        for exporter in EXPORTERS:
            if name in DYNAMO_ONLY and exporter != "dynamo":
                continue
            if re.search(args.only, f"{name}_{exporter}"):
                tag = build(name, exporter, args.out, failures)
                if tag:
                    made.append(tag)
    if args.only == ".":
        make_bad(args.out)
        with open(os.path.join(args.out, "EXPORT_FAILURES.md"), "w") as f:
            f.write("# Module/exporter pairs that torch.onnx refused\n\n"
                    "Written by tools/export_models.py (torch %s, transformers %s). These pairs\n"
                    "have no folder here; every other pair does.\n\n" %
                    (torch.__version__, transformers.__version__))
            for tag, msg in failures or [("(none)", "")]:
                f.write(f"- `{tag}`: {msg}\n")
                if tag in NOTES:
                    f.write(f"  {NOTES[tag]}\n")
    print(f"{len(made)} exported, {len(failures)} refused by the exporter")
    for tag, msg in failures:
        print(f"  refused: {tag}: {msg}")


if __name__ == "__main__":
    main()
