#!/usr/bin/env python3
"""Time per generated token: greedy decoding with a KV cache on a GPT-2
small-sized model (12 layers x 768, vocabulary 50257, random weights made
in the run by tools/export_generate.py --size gpt2-small), shapejit beside
ONNX Runtime, the same loop (shapejit.greedy_generate) driving both.

For each batch size, both runtimes generate NEW_TOKENS after a prompt of
PROMPT tokens, alternating runtime by run; the table gives the median time
per step by the cache length it read (windows of powers of two), the
prefill, and whether both picked the same tokens. shapejit's step buckets
(a ladder of `past`) are precompiled into a store first, its compile time
reported apart. Run through bench/decode/decode_tokens.sh (venv, install).
"""
import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort

import shapejit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def ensure_model(folder):
    pair = os.path.join(folder, "gpt2_lm_torchscript")
    if not os.path.exists(os.path.join(pair, "step.onnx")):
        print(f"exporting GPT-2 small (random weights) to {pair} ...", flush=True)
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "export_generate.py"),
                        "--size", "gpt2-small", "--only", "gpt2", "--out", folder], check=True)
    return pair


def windows(pasts, seconds):
    """{(lo, hi): [ms...]}: steps grouped by the power-of-two window of the
    cache length they read."""
    out = {}
    for p, s in zip(pasts, seconds):
        lo = 1 << (p.bit_length() - 1)
        out.setdefault((lo, 2 * lo), []).append(s * 1e3)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "build-python", "bench-decode"))
    ap.add_argument("--batches", default="1,4")
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--new-tokens", type=int, default=241)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=2, help="runs per runtime, alternating")
    ap.add_argument("--cpu", default=None,
                    help="shapejit's host code level (x86-64-v2, x86-64-v3, x86-64-v4); "
                         "default: this CPU")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    pair = ensure_model(a.out)
    prefill_path, step_path = (os.path.join(pair, f) for f in ("prefill.onnx", "step.onnx"))
    top = a.prompt + a.new_tokens
    ladder = f"pow2:{1 << (a.prompt.bit_length() - 1)}:{1 << (top - 1).bit_length()}"
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = a.threads
    opts.inter_op_num_threads = 1
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; shapejit code {a.cpu or 'native'}; "
          f"threads {a.threads}; onnxruntime "
          f"{ort.__version__}; prompt {a.prompt}, {a.new_tokens} new tokens; step ladder {ladder}")
    rows = []
    for batch in (int(b) for b in a.batches.split(",")):
        store = os.path.join(a.out, f"store-b{batch}-{a.cpu or 'native'}.db")
        t0 = time.perf_counter()
        sj = [shapejit.InferenceSession(prefill_path, store=store, dynamic="seq",
                                        dims={"batch": batch}, ladder=f"list:{a.prompt}",
                                        threads=a.threads, cpu=a.cpu),
              shapejit.InferenceSession(step_path, store=store, dynamic="past",
                                        dims={"batch": batch, "total": "past+1"}, ladder=ladder,
                                        threads=a.threads, cpu=a.cpu)]
        for s in sj:
            s.engine.precompile()
        compile_s = time.perf_counter() - t0
        ref = [ort.InferenceSession(p, opts, providers=["CPUExecutionProvider"])
               for p in (prefill_path, step_path)]
        prompt = np.random.default_rng(batch).integers(0, 50257, (batch, a.prompt), dtype=np.int64)
        runs = {"shapejit": [], "onnxruntime": []}
        for _ in range(a.runs):
            for name, pair_ in (("shapejit", sj), ("onnxruntime", ref)):
                runs[name].append(shapejit.greedy_generate(*pair_, prompt, a.new_tokens))
        same = all(np.array_equal(r.tokens, runs["shapejit"][0].tokens)
                   for r in runs["shapejit"] + runs["onnxruntime"])
        stats = {}
        for name, rs in runs.items():
            w = {}
            for r in rs:
                for k, v in windows(r.step_pasts, r.step_seconds).items():
                    w.setdefault(k, []).extend(v)
            stats[name] = ({k: statistics.median(v) for k, v in w.items()},
                           statistics.median(r.prefill_seconds * 1e3 for r in rs))
        rows.append((batch, compile_s, stats, same))
        del sj, ref  # their weights, before the next batch's
    print()
    print("| batch | cache length | shapejit ms/token | onnxruntime ms/token | ratio |")
    print("|---|---|---|---|---|")
    for batch, compile_s, stats, same in rows:
        (sw, sp), (ow, op) = stats["shapejit"], stats["onnxruntime"]
        print(f"| {batch} | prefill of {a.prompt} | {sp:.1f} | {op:.1f} | {sp / op:.2f}x |")
        for k in sorted(sw):
            print(f"| {batch} | {k[0]}-{k[1] - 1} | {sw[k]:.2f} | {ow[k]:.2f} | "
                  f"{sw[k] / ow[k]:.2f}x |")
    print()
    for batch, compile_s, stats, same in rows:
        print(f"batch {batch}: shapejit precompile (prefill + {ladder}) {compile_s:.1f} s; "
              f"tokens {'equal' if same else 'DIFFER'} between runtimes and runs")


if __name__ == "__main__":
    main()
