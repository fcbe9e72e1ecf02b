#!/usr/bin/env python3
"""Exports a causal language model as the two ONNX models a generate loop
runs (issue #31): prefill.onnx takes the prompt and returns the logits and
the KV cache; step.onnx takes one token and the cache and returns the
logits and the grown cache. With torch's greedy tokens as the expectation.

Dev aid and benchmark generator (CI has no torch). Test data:

    /work/venv-export/bin/python tools/export_generate.py

writes tests/data/generate/<model>_lm_torchscript/{prefill,step}.onnx and
manifest.json (a prompt, and three prompts generated together; the dims
each model is opened with; torch's greedy tokens), after checking that
onnxruntime, run by the same loop (python/shapejit/_generate.py), picks
the same tokens. --size gpt2-small
exports GPT-2 small's shape (12 layers x 768, vocabulary 50257; random
weights) for bench/decode/decode_tokens.py instead.

Both models name the batch `batch`; the prefill's length is `seq`, the
step's cache length `past` and its mask's `total` (= past + 1: the
TorchScript exporter names them apart, so the manifest ties them).
"""
import argparse
import importlib.util
import json
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_decode_steps as eds  # noqa: E402
import export_models as em  # noqa: E402


def _load_generate():
    """python/shapejit/_generate.py by path: it needs numpy only, and this
    venv has no shapejit installed."""
    path = os.path.join(HERE, "..", "python", "shapejit", "_generate.py")
    spec = importlib.util.spec_from_file_location("sj_generate", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# (hidden, heads, ffn, layers, vocab, positions)
SIZES = {"test": (em.HIDDEN, em.HEADS, em.FFN, em.LAYERS, em.VOCAB, em.MAX_POS),
         "gpt2-small": (768, 12, 3072, 12, 50257, 1024)}
PROMPT_LEN, NEW_TOKENS, EXPORT_LEN = 5, 12, 6
BATCH = 3  # the second case: three prompts generated together


def gpt2(size):
    hidden, heads, ffn, layers, vocab, positions = size
    cfg = transformers.GPT2Config(
        vocab_size=vocab, n_embd=hidden, n_layer=layers, n_head=heads, n_inner=ffn,
        n_positions=positions, bos_token_id=vocab - 1, eos_token_id=vocab - 1)
    return transformers.GPT2LMHeadModel(cfg)


def llama(size):
    hidden, heads, ffn, layers, vocab, positions = size
    cfg = transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=ffn, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=heads // 2,
        max_position_embeddings=positions)
    return transformers.LlamaForCausalLM(cfg)


MODELS = {"gpt2": (61, gpt2), "llama": (62, llama)}


class Prefill(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return eds.flat_outputs(self.model(input_ids=input_ids, attention_mask=attention_mask,
                                           use_cache=True), "logits")


def cache_names(layers, word):
    return [f"{word}_{k}_{i}" for i in range(layers) for k in ("key", "value")]


def export(module, example, ins, outs, axes, path):
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = os.path.join(tmp, "m.onnx")
        torch.onnx.export(module, example, raw, input_names=ins, output_names=outs,
                          opset_version=em.TS_OPSET, dynamo=False, dynamic_axes=axes)
        shutil.move(raw, path)
    onnx.checker.check_model(path)


def build(name, size_name, dst):
    seed, factory = MODELS[name]
    size = SIZES[size_name]
    layers = size[3]
    torch.manual_seed(seed)
    model = factory(size).eval()
    if size_name == "test":
        em.randomise(model)
    cfg = model.config
    kv_heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)

    pasts_in, presents = cache_names(layers, "past"), cache_names(layers, "present")
    rng = np.random.default_rng(seed)
    ids = torch.from_numpy(rng.integers(0, cfg.vocab_size, (1, EXPORT_LEN), dtype=np.int64))
    export(Prefill(model).eval(), (ids, torch.ones_like(ids)), ["input_ids", "attention_mask"],
           ["logits"] + presents,
           {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
            "logits": {0: "batch", 1: "seq"}, **{n: {0: "batch", 2: "seq"} for n in presents}},
           os.path.join(dst, "prefill.onnx"))
    kv = [torch.from_numpy(rng.standard_normal((1, kv_heads, EXPORT_LEN, head_dim))
                           .astype(np.float32)) for _ in pasts_in]
    mask = torch.ones((1, EXPORT_LEN + 1), dtype=torch.int64)
    export(eds.Step(model, layers, "logits").eval(), (ids[:, :1], mask, *kv),
           ["input_ids", "attention_mask"] + pasts_in, ["logits"] + presents,
           {"input_ids": {0: "batch"}, "attention_mask": {0: "batch", 1: "total"},
            "logits": {0: "batch"}, **{n: {0: "batch", 2: "past"} for n in pasts_in},
            **{n: {0: "batch", 2: "total"} for n in presents}},
           os.path.join(dst, "step.onnx"))

    gen = _load_generate()
    sessions = [ort.InferenceSession(os.path.join(dst, f), providers=["CPUExecutionProvider"])
                for f in ("prefill.onnx", "step.onnx")]
    cases = []
    for batch in (1, BATCH):
        prompt = rng.integers(0, cfg.vocab_size, (batch, PROMPT_LEN), dtype=np.int64)
        with torch.no_grad():
            want = model.generate(torch.from_numpy(prompt), attention_mask=torch.ones(
                (batch, PROMPT_LEN), dtype=torch.int64), max_new_tokens=NEW_TOKENS,
                do_sample=False, pad_token_id=cfg.vocab_size - 1)[:, PROMPT_LEN:].numpy()
        got = gen.greedy_generate(*sessions, prompt, NEW_TOKENS).tokens
        if not np.array_equal(got, want):
            raise SystemExit(f"{name}: onnxruntime's greedy tokens {got.tolist()} differ from "
                             f"torch's {want.tolist()} at batch {batch}")
        cases.append((prompt, want))
    (prompt, want), (batch_prompt, batch_want) = cases
    manifest = {
        "name": f"{name}_lm_torchscript", "exporter": "torchscript", "opset": em.TS_OPSET,
        "size": size_name, "layers": layers, "vocab": cfg.vocab_size, "seed": seed,
        "prefill": {"model": "prefill.onnx", "dynamic": "seq", "dims": {"batch": 1}},
        "step": {"model": "step.onnx", "dynamic": "past", "dims": {"batch": 1, "total": "past+1"}},
        "prompt": prompt[0].tolist(), "new_tokens": NEW_TOKENS, "tokens": want[0].tolist(),
        "batch_prompt": batch_prompt.tolist(), "batch_tokens": batch_want.tolist(),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "onnx": onnx.__version__, "onnxruntime": ort.__version__}}
    with open(os.path.join(dst, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print(f"{name} ({size_name}): torch and onnxruntime both generate {want[0].tolist()}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "..", "tests", "data", "generate"))
    ap.add_argument("--only", choices=sorted(MODELS), default=None)
    ap.add_argument("--size", choices=sorted(SIZES), default="test")
    a = ap.parse_args()
    torch.set_num_threads(1)
    for name in MODELS:
        if a.only in (None, name):
            build(name, a.size, os.path.join(a.out, f"{name}_lm_torchscript"))


if __name__ == "__main__":
    main()
