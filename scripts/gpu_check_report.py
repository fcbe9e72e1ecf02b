#!/usr/bin/env python3
"""The summary of `scripts/gpu-check.sh run`, from what tools/gpu_check.c
wrote: pass/fail per emitter, host dispatch time per request eager vs
replayed, kernel time per bucket, and the large fp32 matmul against
torch.matmul on the same device (TF32 off). torch and numpy are used only
for that comparison; without them the summary says so.

    gpu_check_report.py OUT_DIR MATMUL_DIR CHECK_EXIT CTEST_LOG > OUT_DIR/summary.md
"""
import json
import os
import re
import statistics
import sys


def torch_matmul(mm_dir, ours_ms):
    """Lines comparing our matmul with torch.matmul, and whether it agrees."""
    try:
        import numpy as np
        import torch
    except ImportError as e:
        return [f"- torch comparison not run: {e}"], True
    if not torch.cuda.is_available():
        return ["- torch comparison not run: torch sees no CUDA device"], True
    a_path, b_path = os.path.join(mm_dir, "a.npy"), os.path.join(mm_dir, "b.npy")
    if not (os.path.exists(a_path) and os.path.exists(b_path)):
        return ["- torch comparison not run: the matmul's inputs were not written"], False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    a = torch.from_numpy(np.load(a_path)).cuda()
    b = torch.from_numpy(np.load(b_path)).cuda()
    y = torch.matmul(a, b)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(3):
        torch.matmul(a, b)
    for _ in range(10):
        start.record()
        torch.matmul(a, b)
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop))
    torch_ms = statistics.median(times)
    m, k = a.shape
    n = b.shape[1]
    flops = 2.0 * m * n * k
    lines = [f"- torch.matmul fp32 (TF32 off) {m}x{k} @ {k}x{n}: {torch_ms:.3f} ms "
             f"({flops / torch_ms / 1e9:.1f} TFLOP/s)"]
    ok = True
    for emitter, ms in ours_ms.items():
        y_path = os.path.join(mm_dir, f"y_{emitter}.npy")
        if not os.path.exists(y_path) or ms <= 0:
            lines.append(f"- {emitter}: no result")
            ok = False
            continue
        ours = torch.from_numpy(np.load(y_path)).cuda()
        err = ((ours - y).abs().max() / y.abs().max().clamp_min(1e-30)).item()
        share = torch_ms / ms
        agree = err < 1e-3
        ok = ok and agree
        lines.append(f"- {emitter}: {ms:.3f} ms ({flops / ms / 1e9:.1f} TFLOP/s), "
                     f"{100 * share:.0f}% of torch's speed (goal >= 50%: "
                     f"{'met' if share >= 0.5 else 'NOT met'}); max error vs torch "
                     f"{err:.2e} relative{'' if agree else ' (DIFFERS)'}")
    return lines, ok


def main():
    out, mm_dir, check_exit, ctest_log = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    print("# shapejit GPU check\n")
    if check_exit == 77:
        print("No GPU: sj_gpu_check found no CUDA device; nothing was checked.")
        return 1
    ok = check_exit == 0
    with open(ctest_log) as f:
        log = f.read()
    m = re.search(r"(\d+)% tests passed, (\d+) tests failed out of (\d+)", log)
    print("## `gpu` ctest label\n")
    skipped = re.findall(r"(\S+) \.+\s*\*+Skipped", log)
    print(f"- {m.group(0) if m else 'ctest summary missing'}"
          + (f"; skipped: {', '.join(skipped)}" if skipped else ""))
    ok = ok and bool(m) and m.group(2) == "0"
    summary_txt = os.path.join(out, "summary.txt")
    raw_path = os.path.join(out, "gpu-check.json")
    if not os.path.exists(raw_path):
        print("\nsj_gpu_check wrote no results.")
        return 1
    with open(summary_txt) as f:
        head = f.read()
    with open(raw_path) as f:
        raw = json.load(f)
    print("\n## Conformance and model cases per emitter\n")
    print("```\n" + head.rstrip() + "\n```")
    print("\n## Host dispatch per request, eager vs replayed (CUDA graph)\n")
    print("| emitter | model | rows | bucket | eager dispatch us | replay dispatch us | ratio | "
          "kernel us (replay) | wall us eager | wall us replay |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    ratios = {}
    for c in raw["cases"]:
        if not c["ok"]:
            continue
        r = c["eager_dispatch_us"] / c["replay_dispatch_us"] if c["replay_dispatch_us"] > 0 else 0
        ratios.setdefault(c["emitter"], []).append(r)
        print(f"| {c['emitter']} | {c['model']} | {c['rows']} | {c['bucket']} | "
              f"{c['eager_dispatch_us']:.1f} | {c['replay_dispatch_us']:.1f} | {r:.1f}x | "
              f"{c['replay_kernel_us']:.1f} | {c['eager_wall_us']:.1f} | {c['replay_wall_us']:.1f} |")
    print()
    for emitter, rs in ratios.items():
        med = statistics.median(rs)
        print(f"- {emitter}: replay needs {med:.1f}x less host dispatch time per request (median "
              f"over {len(rs)} buckets; goal >= 2x: {'met' if med >= 2 else 'NOT met'})")
    print("\n## Large fp32 matmul vs torch.matmul\n")
    ours = {e: v["matmul_kernel_ms"] for e, v in raw["emitters"].items()}
    lines, mm_ok = torch_matmul(mm_dir, ours)
    print("\n".join(lines))
    ok = ok and mm_ok
    print(f"\nResult: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
