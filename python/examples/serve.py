#!/usr/bin/env python3
"""Serve a dynamic-shape model from Python with shapejit.

    python python/examples/serve.py [--store DIR]

1. The model: a small torch module (LayerNorm -> Linear -> GELU -> Linear,
   rows of 64 features) exported to ONNX with a dynamic batch dim when torch
   is installed; otherwise the shipped examples/models/ffn.sjg (the same
   block written in shapejit's own format).
2. A request loop of varying sizes through shapejit.Engine: each size lands
   in a power-of-two bucket, compiled the first time it is needed.
3. The warm start: the same loop in a second process over the same store
   compiles nothing; every bucket is loaded from the store.
"""
import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

import shapejit

REPO = pathlib.Path(__file__).resolve().parents[2]
SIZES = [3, 17, 5, 120, 9, 33, 2, 250, 17, 64, 1, 31, 100, 7]


def export_torch_model(folder):
    """The torch model as ONNX, or None without torch (or onnx for export)."""
    try:
        import torch
    except ImportError:
        return None
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.LayerNorm(64), torch.nn.Linear(64, 256), torch.nn.GELU(),
        torch.nn.Linear(256, 64)).eval()
    path = os.path.join(folder, "block.onnx")
    kwargs = dict(input_names=["x"], output_names=["y"], opset_version=17,
                  dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    try:
        with warnings.catch_warnings():  # newer torch calls this exporter legacy
            warnings.simplefilter("ignore", DeprecationWarning)
            try:  # torch >= 2.5 has two exporters; dynamic_axes is this one's
                torch.onnx.export(model, (torch.zeros(2, 64),), path, dynamo=False, **kwargs)
            except TypeError:
                torch.onnx.export(model, (torch.zeros(2, 64),), path, **kwargs)
    except Exception as exc:  # e.g. the onnx package missing
        print(f"torch export failed ({exc}); using the shipped model", file=sys.stderr)
        return None
    return path


def serve(model, store):
    """The request loop; returns the engine's stats."""
    x = np.random.default_rng(0).standard_normal((max(SIZES), 64)).astype(np.float32)
    with shapejit.Engine(model, ladder="pow2:1:256", store=store) as engine:
        for n in SIZES:
            t0 = time.perf_counter()
            y = engine.run({engine.inputs[0].name: x[:n]})[engine.outputs[0].name]
            ms = (time.perf_counter() - t0) * 1e3
            print(f"  N = {n:3d} -> y {tuple(y.shape)} in {ms:7.2f} ms")
        return engine.stats()


def main():
    ap = argparse.ArgumentParser(description="shapejit request loop with a warm start")
    ap.add_argument("--store", help="store folder (default: a temporary one)")
    ap.add_argument("--model", help=argparse.SUPPRESS)  # the second process
    args = ap.parse_args()
    if args.model:  # the second process: serve only
        st = serve(args.model, os.path.join(args.store, "store.db"))
        print(f"  second process: {st['compiles']} compiled, {st['store_hits']} loaded "
              f"from the store")
        return
    with tempfile.TemporaryDirectory() as tmp:
        store_dir = args.store or tmp
        model = export_torch_model(tmp)
        if model:
            print(f"exported a torch model to {model}")
        else:
            model = str(REPO / "examples" / "models" / "ffn.sjg")
            print(f"torch is not installed: serving {model}")
        print("first process (cold store):")
        st = serve(model, os.path.join(store_dir, "store.db"))
        print(f"  first process: {st['compiles']} buckets compiled in "
              f"{st['compile_ms']:.0f} ms, {st['memory_hits']} requests hit memory")
        print("second process (warm store):")
        subprocess.run([sys.executable, __file__, "--model", model, "--store", store_dir],
                       check=True)


if __name__ == "__main__":
    main()
