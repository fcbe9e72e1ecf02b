#!/usr/bin/env python3
"""Time to first result of a fresh process, shapejit beside ONNX Runtime
(issue #33), on one model in one run, interleaved:

- shapejit warm: a new `shapejit run` process whose bucket is in the store
  (precompiled once before the timed runs), from spawn to exit;
- shapejit cold: the same with an empty store (the bucket compiled in the
  process, `--store none`);
- ORT cold: a new Python process that imports numpy and onnxruntime,
  creates a session and runs it once, from spawn to exit (what a restarted
  ORT server pays before its first answer), with session creation and the
  first run timed inside it too.

Every process gets the same input (seeded uniform [-1, 1), x [1, ROWS,
hidden]) and the outputs are compared. Prints a Markdown table of medians
and ratios, and shapejit's own split of its time to ready (--stats).

    warm_start.py --shapejit build/shapejit --model /tmp/bert_base.onnx --rows 8 [--runs 7]
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ORT_CHILD = r"""
import sys, time, json
t0 = time.perf_counter()
import numpy as np
import onnxruntime as ort
t1 = time.perf_counter()
so = ort.SessionOptions()
so.intra_op_num_threads = int(sys.argv[3])
s = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
t2 = time.perf_counter()
x = np.load(sys.argv[2])
y = s.run(None, {s.get_inputs()[0].name: x})[0]
t3 = time.perf_counter()
np.save(sys.argv[4], y)
print(json.dumps({"import_ms": (t1 - t0) * 1e3, "session_ms": (t2 - t1) * 1e3, "first_run_ms": (t3 - t2) * 1e3}))
"""


def timed(cmd, env=None):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    ms = (time.perf_counter() - t0) * 1e3
    if p.returncode != 0:
        sys.exit(f"warm_start.py: {' '.join(map(str, cmd))} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return ms, p


def stats_of(stderr):
    for line in stderr.splitlines():
        if line.startswith("{") and '"load_ms"' in line:
            return json.loads(line)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapejit", required=True, help="the CLI binary")
    ap.add_argument("--model", required=True, help="an ONNX model with one float input [1, seq, hidden]")
    ap.add_argument("--rows", type=int, default=8, help="the sequence length of the request")
    ap.add_argument("--runs", type=int, default=7, help="timed processes per side")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cold-runs", type=int, default=1, help="cold shapejit processes (each compiles)")
    args = ap.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="sj-warm-start-"))
    model = str(pathlib.Path(args.model).resolve())
    import onnx  # the input's shape, without loading the weights

    m = onnx.load(model, load_external_data=False)
    inp = m.graph.input[0]
    hidden = inp.type.tensor_type.shape.dim[2].dim_value
    x = np.random.default_rng(0).uniform(-1, 1, (1, args.rows, hidden)).astype(np.float32)
    xin = tmp / "x.npy"
    np.save(xin, x)
    store = tmp / "store.db"
    ladder = f"list:{args.rows}"
    common = [args.shapejit, "run", model, "--input", f"{inp.name}={xin}", "--ladder", ladder,
              "--threads", str(args.threads), "--stats"]
    # the deploy-time precompile the warm runs read
    timed([args.shapejit, "precompile", model, "--ladder", ladder, "--store", str(store)])
    sj_warm, sj_cold, ort_cold, sj_split, ort_split = [], [], [], [], []
    for i in range(args.runs):
        ms, p = timed(common + ["--store", str(store), "--out", str(tmp / "sj")])
        sj_warm.append(ms)
        st = stats_of(p.stderr)
        if not st or st.get("compiles") != 0 or st.get("store_hits") != 1:
            sys.exit(f"warm_start.py: a warm run compiled or missed the store: {st}")
        sj_split.append(st)
        ms, p = timed([sys.executable, "-c", ORT_CHILD, model, str(xin), str(args.threads), str(tmp / "ort.npy")])
        ort_cold.append(ms)
        ort_split.append(json.loads(p.stdout.strip().splitlines()[-1]))
        if i < args.cold_runs:
            ms, _ = timed(common + ["--store", "none", "--out", str(tmp / "sj_cold")])
            sj_cold.append(ms)
    out_name = m.graph.output[0].name
    y_sj = np.load(tmp / "sj" / f"{out_name}.npy")
    y_ort = np.load(tmp / "ort.npy")
    diff = float(np.max(np.abs(y_sj - y_ort)))
    med = statistics.median
    warm, ort_ms = med(sj_warm), med(ort_cold)
    ort_session = med(s["session_ms"] + s["first_run_ms"] for s in ort_split)
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    size_mb = os.path.getsize(model) / 2**20
    print(f"# Time to first result, fresh process: {pathlib.Path(model).name} ({size_mb:.0f} MiB), "
          f"{args.rows} rows, {args.threads} thread(s)")
    print(f"CPU: {cpu}; {os.cpu_count()} cores; medians of {args.runs} interleaved runs; "
          f"max |shapejit - ORT| = {diff:.2e}\n")
    print("| | median ms | vs ORT cold process | vs ORT session + first run |")
    print("|---|---|---|---|")
    print(f"| shapejit warm process (bucket in the store) | {warm:.0f} | {warm / ort_ms:.2f}x | "
          f"{warm / ort_session:.2f}x |")
    if sj_cold:
        cold = med(sj_cold)
        print(f"| shapejit cold process (compiles the bucket) | {cold:.0f} | {cold / ort_ms:.2f}x | "
              f"{cold / ort_session:.2f}x |")
    print(f"| ORT cold process (import, session, first run) | {ort_ms:.0f} | 1.00x | |")
    print(f"| ORT session creation + first run, in it | {ort_session:.0f} | | 1.00x |")
    print()
    keys = ["load_ms", "ready_ms", "run_ms"]
    split = ", ".join(f"{k} {med(s[k] for s in sj_split):.0f}" for k in keys)
    ort_keys = ["import_ms", "session_ms", "first_run_ms"]
    osplit = ", ".join(f"{k} {med(s[k] for s in ort_split):.0f}" for k in ort_keys)
    print(f"shapejit warm, its --stats (medians): {split}; peak RSS "
          f"{med(s['peak_rss_bytes'] for s in sj_split) / 2**20:.0f} MiB")
    print(f"ORT cold, inside the process (medians): {osplit}")
    if diff > 1e-3:
        sys.exit(f"warm_start.py: outputs differ by {diff}")


if __name__ == "__main__":
    main()
