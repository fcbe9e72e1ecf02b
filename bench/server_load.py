"""Bounded load test of `shapejit serve --listen` on loopback.

Three measurements, each against its own server process that this script
starts on a free loopback port and stops with SIGTERM (every server also
has a watchdog, and every loop a fixed count, so the script always ends):

1. load: a stream of lognormal request sizes sent over HTTP (binary tensor
   data, several client threads, tritonclient[http]); throughput, p50 and
   p99 against in-process `shapejit serve --trace` on the same sizes; no
   failed request; the server's RSS after the run against after warm-up.
2. zero-stall: a cold store, --ready-when first-bucket; the p99 of the
   first 100 requests with promotion and with --no-promote.
3. batching: the examples/models MLP under concurrent single-digit-row
   requests, with --max-batch-delay-us against 0 (off); throughput and p99.

usage: python bench/server_load.py SHAPEJIT SOURCE_DIR [--requests N] [--threads T]
       [--json FILE] [--quick]
Run it with the venv of scripts/server-test-venv.sh.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import numpy as np
import tritonclient.http as httpclient


def percentile(xs, q):
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(round(q * len(s) + 0.5)) - 1))]


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


class Server:
    def __init__(self, sj, model, work, *args):
        self.log = open(os.path.join(work, "server.out"), "w+")
        self.err = open(os.path.join(work, "server.err"), "w+")
        self.p = subprocess.Popen([sj, "serve", "--listen", "127.0.0.1:0", model, *args],
                                  stdout=self.log, stderr=self.err)
        self.watchdog = threading.Timer(600, self.p.kill)
        self.watchdog.daemon = True
        self.watchdog.start()
        for _ in range(3000):
            self.log.seek(0)
            m = re.search(r"listening on http://127.0.0.1:(\d+)", self.log.read())
            if m:
                self.url = f"127.0.0.1:{m.group(1)}"
                return
            if self.p.poll() is not None:
                break
            time.sleep(0.01)
        self.err.seek(0)
        raise SystemExit("server did not start: " + self.err.read())

    def wait_ready(self):
        c = httpclient.InferenceServerClient(self.url)
        for _ in range(6000):
            try:
                if c.is_server_ready():
                    return
            except Exception:
                pass
            time.sleep(0.01)
        raise SystemExit("server never became ready")

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        rc = self.p.wait(60)
        self.watchdog.cancel()
        if rc != 0:
            raise SystemExit(f"server exit status {rc}")


def send(url, model, reqs, threads, output=None):
    """Sends the input arrays reqs (input "x" each) from `threads` clients;
    returns latencies (s), wall (s), failures, and each answer's `output`
    (None when not asked for or failed)."""
    lat, got = [0.0] * len(reqs), [None] * len(reqs)
    fails = [0]
    nxt = [0]
    lock = threading.Lock()
    barrier = threading.Barrier(threads + 1)

    def worker():
        c = httpclient.InferenceServerClient(url)
        barrier.wait()
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(reqs):
                return
            t = httpclient.InferInput("x", list(reqs[i].shape), "FP32")
            t.set_data_from_numpy(reqs[i], binary_data=True)
            outs = [httpclient.InferRequestedOutput(output, binary_data=True)] if output else None
            t0 = time.perf_counter()
            try:
                r = c.infer(model, [t], outputs=outs)
                if output:
                    got[i] = r.as_numpy(output)
            except Exception as e:
                with lock:
                    fails[0] += 1
                    if fails[0] == 1:
                        print("request failed:", e, file=sys.stderr)
            lat[i] = time.perf_counter() - t0

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    return lat, time.perf_counter() - t0, fails[0], got


def drive(url, model, sizes, inner, threads, seed=1):
    """Sends sizes[i] rows from `threads` clients; returns latencies (s), wall (s), failures."""
    rng = np.random.default_rng(seed)
    pool = rng.uniform(-1, 1, (max(sizes), inner)).astype(np.float32)
    lat, wall, fails, _ = send(url, model, [pool[:n] for n in sizes], threads)
    return lat, wall, fails


def lognormal_sizes(n, median, sigma, top, seed):
    rng = np.random.default_rng(seed)
    return [int(v) for v in np.clip(np.round(median * np.exp(sigma * rng.standard_normal(n))), 1, top)]


def fmt(lat, wall):
    return {"requests": len(lat), "throughput_rps": len(lat) / wall,
            "p50_ms": percentile(lat, 0.5) * 1e3, "p99_ms": percentile(lat, 0.99) * 1e3}


def load(a, work):
    model = os.path.join(a.src, "examples", "models", "ffn.sjg")
    sizes = lognormal_sizes(a.requests, 32, 1.0, 512, 7)
    trace = os.path.join(work, "sizes.trace")
    with open(trace, "w") as f:
        f.write("\n".join(map(str, sizes)) + "\n")
    store = os.path.join(work, "load.db")
    common = ["--ladder", "pow2:1:512", "--store", store, "--workers", "2"]
    s = Server(a.sj, model, work, *common, "--max-batch-delay-us", "0")
    s.wait_ready()  # every bucket compiled into the store
    # Warm-up: every bucket has run once, allocator pools are filled.
    drive(s.url, "ffn", sizes[: min(len(sizes), 300)], 64, a.threads)
    rss_warm = rss_kb(s.p.pid)
    lat, wall, fails = drive(s.url, "ffn", sizes, 64, a.threads)
    rss_after = rss_kb(s.p.pid)
    s.stop()
    # In process: the same sizes through the same engine and the same
    # (now warm) store, no HTTP.
    r = subprocess.run([a.sj, "serve", model, "--trace", trace, "--workers", str(a.threads), *common,
                        "--stats"], capture_output=True, text=True, check=True)
    inproc = json.loads(r.stderr.strip().splitlines()[-1])
    out = fmt(lat, wall)
    out.update({"failed": fails, "rss_after_warmup_kb": rss_warm, "rss_after_run_kb": rss_after,
                "rss_growth": rss_after / rss_warm - 1,
                "in_process": {k: inproc[k] for k in ("throughput_rps", "p50_ms", "p99_ms")}})
    return out


def zero_stall(a, work):
    model = os.path.join(a.src, "examples", "models", "ffn.sjg")
    sizes = lognormal_sizes(100, 24, 1.2, 1024, 11)
    out = {}
    for mode in ("promote", "no_promote"):
        d = os.path.join(work, mode)
        os.makedirs(d)
        args = ["--ladder", "pow2:1:1024", "--store", os.path.join(d, "cold.db"),
                "--ready-when", "first-bucket", "--max-batch-delay-us", "0"]
        if mode == "no_promote":
            args.append("--no-promote")
        s = Server(a.sj, model, d, *args)
        s.wait_ready()
        lat, wall, fails = drive(s.url, "ffn", sizes, 64, 1)
        m = urllib.request.urlopen(f"http://{s.url}/metrics").read().decode()
        s.stop()
        prom = int(re.search(r'^shapejit_promotions_total\{model="ffn"\} (\d+)', m, re.M).group(1))
        stalls = int(re.search(r'^shapejit_compile_stalls_total\{model="ffn"\} (\d+)', m, re.M).group(1))
        out[mode] = {"p50_ms": percentile(lat, 0.5) * 1e3, "p99_ms": percentile(lat, 0.99) * 1e3,
                     "max_ms": max(lat) * 1e3, "promotions": prom, "stalls": stalls, "failed": fails}
    return out


def batching(a, work):
    model = os.path.join(a.src, "examples", "models", "mlp.sjg")
    sizes = lognormal_sizes(a.requests, 3, 0.7, 16, 5)
    out = {}
    for mode, delay in (("off", "0"), ("on", str(a.batch_delay_us))):
        d = os.path.join(work, "batch_" + mode)
        os.makedirs(d)
        s = Server(a.sj, model, d, "--ladder", "pow2:1:256", "--store", os.path.join(work, "mlp.db"),
                   "--max-batch-delay-us", delay, "--workers", "2")
        s.wait_ready()
        drive(s.url, "mlp", sizes[:200], 32, a.batch_threads)
        lat, wall, fails = drive(s.url, "mlp", sizes, 32, a.batch_threads)
        m = urllib.request.urlopen(f"http://{s.url}/metrics").read().decode()
        s.stop()
        out[mode] = fmt(lat, wall)
        out[mode]["failed"] = fails
        out[mode]["batched_requests"] = int(
            re.search(r'^shapejit_batched_requests_total\{model="mlp"\} (\d+)', m, re.M).group(1))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sj")
    ap.add_argument("src")
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--batch-threads", type=int, default=16)
    ap.add_argument("--batch-delay-us", type=int, default=500)
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="a few hundred requests (a smoke run)")
    a = ap.parse_args()
    if a.quick:
        a.requests = 400
    res = {}
    with tempfile.TemporaryDirectory(prefix="sj_server_load_") as work:
        for name, fn in (("load", load), ("zero_stall", zero_stall), ("batching", batching)):
            d = os.path.join(work, name)
            os.makedirs(d)
            res[name] = fn(a, d)
            print(name, json.dumps(res[name], indent=1), flush=True)
    l, z, b = res["load"], res["zero_stall"], res["batching"]
    print(f"\nload ({l['requests']} lognormal requests, {a.threads} client threads, ffn):")
    print(f"  HTTP        {l['throughput_rps']:8.1f} req/s  p50 {l['p50_ms']:.3f} ms  p99 {l['p99_ms']:.3f} ms  "
          f"failed {l['failed']}")
    ip = l["in_process"]
    print(f"  in-process  {ip['throughput_rps']:8.1f} req/s  p50 {ip['p50_ms']:.3f} ms  p99 {ip['p99_ms']:.3f} ms")
    print(f"  RSS         {l['rss_after_warmup_kb']} kB after warm-up, {l['rss_after_run_kb']} kB after "
          f"({100 * l['rss_growth']:+.1f}%)")
    print("zero-stall (cold store, first 100 requests, --ready-when first-bucket):")
    for k in ("promote", "no_promote"):
        print(f"  {k:11s} p50 {z[k]['p50_ms']:.3f} ms  p99 {z[k]['p99_ms']:.3f} ms  max {z[k]['max_ms']:.3f} ms  "
              f"promotions {z[k]['promotions']}  stalls {z[k]['stalls']}")
    print(f"batching (mlp, {a.batch_threads} client threads, 1..16 rows):")
    for k in ("off", "on"):
        print(f"  {k:3s} {b[k]['throughput_rps']:8.1f} req/s  p50 {b[k]['p50_ms']:.3f} ms  p99 {b[k]['p99_ms']:.3f} ms"
              f"  batched {b[k]['batched_requests']}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    bad = l["failed"] or z["promote"]["failed"] or z["no_promote"]["failed"] or b["on"]["failed"] or b["off"]["failed"]
    if bad:
        sys.exit("failed requests")


if __name__ == "__main__":
    main()
