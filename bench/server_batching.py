"""Batching a transformer of real size over HTTP: a BERT-base-shaped encoder
(bench/bert_encoder_gen.py --batch: 12 x 768, x [batch, seq, 768]) served by
batch at a fixed length (`--dynamic batch --dim seq=S`), so the server
stacks concurrent requests of one sequence each into a batch bucket.

Against one server process each (started on a free loopback port, stopped
with SIGTERM), from C concurrent tritonclient clients sending the same R
seeded requests: batching off (--max-batch-delay-us 0) and on. Reports
throughput, p50 and p99 per mode, how many requests ran stacked, and
whether every answer with batching on is bitwise the answer with it off
(each request alone); then ONNX Runtime one request at a time on the same
model and threads, for scale.

usage: python bench/server_batching.py SHAPEJIT SOURCE_DIR [--seq S] [--clients C]
       [--requests R] [--threads T] [--model FILE] [--json FILE]
Run it with a venv holding numpy, onnx, onnxruntime and tritonclient[http]
(bench/ort/venv.sh onnx tritonclient[http]).
"""
import argparse
import json
import os
import platform
import sys
import tempfile
import time
import urllib.request
import re

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_load import Server, fmt, send  # noqa: E402


def drive(url, reqs, clients):
    """Sends reqs from `clients` threads; latencies (s), wall (s), answers."""
    lat, wall, fails, got = send(url, "bert", reqs, clients, output="y")
    if fails:
        raise SystemExit(f"{fails} requests failed (the first above): no result")
    return lat, wall, got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sj")
    ap.add_argument("src")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--requests", type=int, default=96)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--delay-us", type=int, default=2000)
    ap.add_argument("--model", help="the --batch encoder (default: generated into a temporary folder)")
    ap.add_argument("--json")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="sj_batching_")
    model = a.model
    if not model:
        import onnx
        sys.path.insert(0, os.path.join(a.src, "bench"))
        import bert_encoder_gen
        model = os.path.join(work, "bert_base_batch.onnx")
        onnx.save(bert_encoder_gen.build(12, 768, 12, 3072, 33, "batch"), model)
    import onnx
    hidden = onnx.load(model, load_external_data=False).graph.input[0].type.tensor_type.shape.dim[2].dim_value
    rng = np.random.default_rng(7)
    reqs = [rng.standard_normal((1, a.seq, hidden)).astype(np.float32) for _ in range(a.requests)]
    store = os.path.join(work, "store.db")
    common = ["--name", "bert", "--dynamic", "batch", "--dim", f"seq={a.seq}", "--ladder", f"pow2:1:{a.clients}",
              "--store", store, "--threads", str(a.threads), "--workers", "2"]
    res, answers = {}, {}
    for mode, delay in (("off", 0), ("on", a.delay_us)):
        d = os.path.join(work, mode)
        os.makedirs(d)
        s = Server(a.sj, model, d, *common, "--max-batch-delay-us", str(delay))
        s.wait_ready()
        drive(s.url, reqs[: 2 * a.clients], a.clients)  # every bucket it meets compiled
        lat, wall, got = drive(s.url, reqs, a.clients)
        m = urllib.request.urlopen(f"http://{s.url}/metrics").read().decode()
        s.stop()
        res[mode] = fmt(lat, wall)
        res[mode]["batched_requests"] = int(
            re.search(r'^shapejit_batched_requests_total\{model="bert"\} (\d+)', m, re.M).group(1))
        answers[mode] = got
    res["bitwise_equal"] = all(np.array_equal(x, y) for x, y in zip(answers["on"], answers["off"]))
    res["max_abs_diff"] = float(max(np.abs(x - y).max() for x, y in zip(answers["on"], answers["off"])))
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    sess.run(None, {"x": reqs[0]})
    lat = []
    t0 = time.perf_counter()
    for r in reqs:
        t1 = time.perf_counter()
        sess.run(None, {"x": r})
        lat.append(time.perf_counter() - t1)
    res["ort_one_at_a_time"] = fmt(lat, time.perf_counter() - t0)
    res["config"] = {"model": a.model or "BERT-base-shaped encoder 12 x 768 (85 M parameters)", "seq": a.seq,
                     "clients": a.clients, "requests": a.requests, "threads": a.threads,
                     "delay_us": a.delay_us, "cpu": platform.processor() or platform.machine()}
    with open("/proc/cpuinfo") as f:
        cpu = re.search(r"model name\s*:\s*(.*)", f.read())
        res["config"]["cpu"] = cpu.group(1) if cpu else res["config"]["cpu"]
    print(f"| mode | throughput (req/s) | p50 ms | p99 ms | stacked requests |")
    print(f"|---|---|---|---|---|")
    for mode in ("off", "on"):
        r = res[mode]
        print(f"| shapejit batching {mode} | {r['throughput_rps']:.2f} | {r['p50_ms']:.0f} | {r['p99_ms']:.0f} | "
              f"{r['batched_requests']} |")
    r = res["ort_one_at_a_time"]
    print(f"| ORT, one at a time | {r['throughput_rps']:.2f} | {r['p50_ms']:.0f} | {r['p99_ms']:.0f} | - |")
    print(f"on/off throughput {res['on']['throughput_rps'] / res['off']['throughput_rps']:.2f}x, "
          f"p99 {res['on']['p99_ms'] / res['off']['p99_ms']:.2f}x; answers bitwise equal: "
          f"{res['bitwise_equal']} (max |diff| {res['max_abs_diff']:.3g})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
