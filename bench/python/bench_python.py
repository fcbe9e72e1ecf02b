#!/usr/bin/env python3
"""Benchmarks of the Python package (run by bench/python/run.sh).

1. Engine.run overhead over the C API at N = 1 (goal: <= 2 us): the same
   model and inputs timed through shapejit.Engine.run and through
   sj_engine_run in C (bench_engine_run); both on thread CPU time, median of
   15 batches, outputs freed each call on both sides.
2. shapejit.InferenceSession.run vs onnxruntime.InferenceSession.run on the
   exported test models at several sizes, and on the transformer exports of
   tests/data/real_models that the library loads (wall time per call,
   median), once every bucket is compiled: the steady state of a server.

    bench_python.py --c-bench build/bench_engine_run [--calls 20000] [--json out.json]
"""
import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import time

import numpy as np

import shapejit

REPO = pathlib.Path(__file__).resolve().parents[2]
BATCHES = 15


def per_call_ns(fn, calls, clock=time.thread_time_ns):
    per_batch = calls // BATCHES + 1
    for _ in range(per_batch):  # warm
        fn()
    times = []
    for _ in range(BATCHES):
        t0 = clock()
        for _ in range(per_batch):
            fn()
        times.append((clock() - t0) / per_batch)
    return statistics.median(times)


def feed_for(inputs, n, seed=0):
    rng = np.random.default_rng(seed)
    feed = {}
    for name, dtype, shape in inputs:
        dims = tuple(n if d is None else d for d in shape)
        if dtype == "float32":
            feed[name] = rng.standard_normal(dims).astype(np.float32)
        else:
            feed[name] = np.zeros(dims, dtype=dtype)
    return feed


def overhead(c_bench, calls):
    rows = []
    for model in ("mlp.sjg", "ffn.sjg"):
        path = REPO / "examples" / "models" / model
        out = subprocess.run([c_bench, str(path), "1", str(calls)], capture_output=True,
                             text=True, check=True).stdout
        c_ns = float(out.split(":")[1].split()[0])
        with shapejit.Engine(path, store=None) as e:
            feed = feed_for([tuple(i) for i in e.inputs], 1)
            e.run(feed)
            py_ns = per_call_ns(lambda: e.run(feed), calls)
        rows.append({"model": model, "n": 1, "c_api_ns": round(c_ns, 1),
                     "engine_run_ns": round(py_ns, 1), "overhead_ns": round(py_ns - c_ns, 1)})
    return rows


MODELS = {"mlp_matmul": {}, "ffn_layernorm_op17": {}, "classifier_op18": {},
          "attention_2d": {}, "two_inputs": {}}
SIZES = (1, 8, 37, 64, 256)  # 37 runs padded in the 64 bucket


def versus_ort(calls):
    try:
        import onnxruntime as ort
    except ImportError:
        sys.exit("bench_python: onnxruntime is not installed (bench/python/run.sh installs it)")
    rows = []
    for model, opts in MODELS.items():
        path = str(REPO / "tests" / "data" / "models" / f"{model}.onnx")
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        ref = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        sess = shapejit.InferenceSession(path, store=None, threads=1, **opts)
        inputs = [(i.name, "float32" if i.type == "tensor(float)" else i.type[7:-1],
                   tuple(None if isinstance(d, str) else d for d in i.shape))
                  for i in sess.get_inputs()]
        for n in SIZES:
            feed = feed_for(inputs, n, seed=n)
            want = ref.run(None, feed)
            got = sess.run(None, feed)
            err = max(float(np.max(np.abs(a - b))) if a.size else 0.0 for a, b in zip(got, want))
            k = max(50, calls // (10 * n))
            sj = per_call_ns(lambda: sess.run(None, feed), k, time.perf_counter_ns)
            rt = per_call_ns(lambda: ref.run(None, feed), k, time.perf_counter_ns)
            rows.append({"model": model, "n": n, "shapejit_us": round(sj / 1e3, 2),
                         "onnxruntime_us": round(rt / 1e3, 2), "speedup": round(rt / sj, 2),
                         "max_abs_diff": err})
    return rows


def versus_ort_real_models(calls):
    """The transformer exports of tests/data/real_models at their committed
    inputs, for those the library loads; the others are listed with why."""
    import onnxruntime as ort
    rows, skipped = [], []
    for manifest in sorted((REPO / "tests" / "data" / "real_models").glob("*/manifest.json")):
        m = json.loads(manifest.read_text())
        path = str(manifest.parent / m["model"])
        try:
            sess = shapejit.InferenceSession(path, store=None, dynamic=m.get("dynamic"),
                                             dims=m.get("dims"))
        except shapejit.Error as exc:
            skipped.append({"model": m["name"], "why": str(exc)})
            continue
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        ref = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        for n in m["lengths"]:
            folder = manifest.parent / str(n) / "in"
            feed = {p.stem: np.load(p) for p in folder.glob("*.npy")}
            got, want = sess.run(None, feed), ref.run(None, feed)
            err = max(float(np.max(np.abs(a - b))) if a.size else 0.0 for a, b in zip(got, want))
            k = max(20, calls // (20 * n))
            sj = per_call_ns(lambda: sess.run(None, feed), k, time.perf_counter_ns)
            rt = per_call_ns(lambda: ref.run(None, feed), k, time.perf_counter_ns)
            rows.append({"model": m["name"], "n": n, "shapejit_us": round(sj / 1e3, 2),
                         "onnxruntime_us": round(rt / 1e3, 2), "speedup": round(rt / sj, 2),
                         "max_abs_diff": err})
    return rows, skipped


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--c-bench", required=True, help="the bench_engine_run program")
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--skip-ort", action="store_true")
    args = ap.parse_args()
    report = {"overhead": overhead(args.c_bench, args.calls)}
    print("Engine.run overhead over sj_engine_run, N = 1 (thread CPU time, goal <= 2000 ns):")
    for r in report["overhead"]:
        print(f"  {r['model']:10s} C {r['c_api_ns']:9.1f} ns  Python {r['engine_run_ns']:9.1f} ns"
              f"  overhead {r['overhead_ns']:7.1f} ns")
    if not args.skip_ort:
        report["vs_onnxruntime"] = versus_ort(args.calls)
        print("\nInferenceSession.run vs onnxruntime (1 thread each, wall time per call):")
        print(f"  {'model':20s} {'N':>4s} {'shapejit us':>12s} {'ORT us':>10s} {'speedup':>8s}"
              f" {'max|diff|':>10s}")
        for r in report["vs_onnxruntime"]:
            print(f"  {r['model']:20s} {r['n']:4d} {r['shapejit_us']:12.2f}"
                  f" {r['onnxruntime_us']:10.2f} {r['speedup']:8.2f} {r['max_abs_diff']:10.2e}")
        rows, skipped = versus_ort_real_models(args.calls)
        report["real_models"], report["real_models_not_loaded"] = rows, skipped
        for r in rows:
            print(f"  {r['model']:20s} {r['n']:4d} {r['shapejit_us']:12.2f}"
                  f" {r['onnxruntime_us']:10.2f} {r['speedup']:8.2f} {r['max_abs_diff']:10.2e}")
        for r in skipped:
            print(f"  {r['model']}: not loaded by shapejit: {r['why']}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
