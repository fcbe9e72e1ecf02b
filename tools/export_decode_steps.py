#!/usr/bin/env python3
"""Exports KV-cache decode steps of causal language models to ONNX as test
data for tests/real_models.cmake (issue #30), with torch's outputs as the
expectations, next to tools/export_models.py's models and in its format.

Dev aid only (CI has no torch). To regenerate:

    /work/venv-export/bin/python tools/export_decode_steps.py [--out DIR]

A step takes this step's token (input_ids [1, 1]), the attention mask over
the cached tokens and this one ([1, total]) and each layer's cached keys and
values ([1, heads, past, head_dim]), and returns the hidden state and the
grown caches ([1, heads, total, head_dim]). The TorchScript exporter names
total apart from past, so the tests tie them: --dynamic past --dim
total=past+1. For each past in PASTS the script writes

    <model>_step_torchscript/model.onnx
    <model>_step_torchscript/<past>/in/<input>.npy   seeded inputs
    <model>_step_torchscript/<past>/out/<output>.npy what torch computes
    <model>_step_torchscript/manifest.json

after checking onnxruntime against torch at every past (an export that
disagrees is the exporter's failure, not test data). The models are
export_models.py's (same sizes, weights drawn by its randomise()).
"""
import argparse
import os
import shutil
import sys
import tempfile
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_models as em  # noqa: E402

PASTS = [4, 31, 100]
EXPORT_PAST = 5  # the traced example: not 0/1, so no size specialisation


def flat_outputs(out, first):
    """A transformers output as a tuple: field `first`, then each layer's
    cached keys and values."""
    res = [getattr(out, first)]
    for layer in out.past_key_values.layers:
        res += [layer.keys, layer.values]
    return tuple(res)


class Step(torch.nn.Module):
    """One decode step of a transformers decoder over tensors: the caches
    in as a flat list of (key, value) per layer; `first` (the hidden state,
    or an LM's logits), then the grown caches out."""

    def __init__(self, model, layers, first="last_hidden_state"):
        super().__init__()
        self.model, self.layers, self.first = model, layers, first

    def forward(self, input_ids, attention_mask, *kv):
        cache = transformers.DynamicCache()
        for i in range(self.layers):
            cache.update(kv[2 * i], kv[2 * i + 1], i)
        return flat_outputs(self.model(input_ids=input_ids, attention_mask=attention_mask,
                                       past_key_values=cache, use_cache=True), self.first)


def gpt2():
    cfg = transformers.GPT2Config(
        vocab_size=em.VOCAB, n_embd=em.HIDDEN, n_layer=em.LAYERS, n_head=em.HEADS, n_inner=em.FFN,
        n_positions=em.MAX_POS, bos_token_id=em.VOCAB - 1, eos_token_id=em.VOCAB - 1)
    return transformers.GPT2Model(cfg), em.HEADS


def llama():
    cfg = transformers.LlamaConfig(
        vocab_size=em.VOCAB, hidden_size=em.HIDDEN, intermediate_size=em.FFN,
        num_hidden_layers=em.LAYERS, num_attention_heads=em.HEADS,
        num_key_value_heads=em.HEADS // 2, max_position_embeddings=em.MAX_POS)
    return transformers.LlamaModel(cfg), em.HEADS // 2


MODELS = {"gpt2": (51, gpt2, "GPT-2 decode step with a KV cache"),
          "llama": (52, llama, "Llama decode step with a KV cache (grouped-query attention)")}


def names(layers):
    ins = ["input_ids", "attention_mask"] + [f"past_{k}_{i}" for i in range(layers) for k in ("key", "value")]
    outs = ["last_hidden_state"] + [f"present_{k}_{i}" for i in range(layers) for k in ("key", "value")]
    return ins, outs


def inputs_at(seed, past, kv_heads, layers):
    rng = np.random.default_rng([seed, past])
    feed = {"input_ids": rng.integers(0, em.VOCAB, (1, 1), dtype=np.int64),
            "attention_mask": np.ones((1, past + 1), np.int64)}
    for i in range(layers):
        for k in ("key", "value"):
            feed[f"past_{k}_{i}"] = rng.standard_normal((1, kv_heads, past, em.HIDDEN // em.HEADS)) \
                .astype(np.float32)
    return feed


def build(name, out_root):
    seed, factory, desc = MODELS[name]
    tag = f"{name}_step_torchscript"
    torch.manual_seed(seed)
    model, kv_heads = factory()
    step = Step(em.randomise(model).eval(), em.LAYERS).eval()
    ins, outs = names(em.LAYERS)
    example = inputs_at(seed, EXPORT_PAST, kv_heads, em.LAYERS)
    dst = os.path.join(out_root, tag)
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    path = os.path.join(dst, "model.onnx")
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = os.path.join(tmp, "m.onnx")
        torch.onnx.export(step, tuple(torch.from_numpy(v) for v in example.values()), raw,
                          input_names=ins, output_names=outs, opset_version=em.TS_OPSET, dynamo=False,
                          dynamic_axes={"attention_mask": {1: "total"},
                                        **{n: {2: "past"} for n in ins[2:]},
                                        **{n: {2: "total"} for n in outs[1:]}})
        em.save_model(raw, dst, False)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    worst = 0.0
    for past in PASTS:
        feed = inputs_at(seed, past, kv_heads, em.LAYERS)
        want = em.torch_outputs(step, feed)
        got = sess.run(None, feed)
        bad = [n for n, w, g in zip(outs, want, got) if not em.close(g, w)]
        if bad:
            raise SystemExit(f"{tag}: onnxruntime disagrees with torch at past {past}: {bad}")
        worst = max([worst] + [float(np.abs(g - w).max()) for w, g in zip(want, got)])
        em.save_case(os.path.join(dst, str(past)), feed, dict(zip(outs, want)))
    m = onnx.load(path, load_external_data=False)
    em.write_manifest(dst, {
        "name": tag, "description": desc, "exporter": "torchscript", "dynamo": False,
        "opset": em.TS_OPSET, "model": "model.onnx", "external_data": None, **em.io_manifest(m),
        "compare": outs, "dynamic": "past", "dims": {"total": "past+1"}, "lengths": PASTS,
        "batch_seq": None, "batches": [], "atol": em.ATOL, "rtol": em.RTOL,
        "onnxruntime_max_abs_diff": float(f"{worst:.3g}"), "seed": seed})
    print(f"{tag}: {len(m.graph.node)} nodes, onnxruntime vs torch max |diff| {worst:.2e}")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "data", "real_models"))
    ap.add_argument("--only", default=None, help="one of " + ", ".join(MODELS))
    a = ap.parse_args()
    torch.set_num_threads(1)
    for name in MODELS:
        if a.only in (None, name):
            build(name, a.out)


if __name__ == "__main__":
    main()
