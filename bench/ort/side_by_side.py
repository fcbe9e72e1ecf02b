#!/usr/bin/env python3
"""shapejit next to onnxruntime, per request size and thread count (run by
bench/ort/side_by_side.sh, which makes the venv and installs both).

For each model and thread count, one child process per runtime loads the
model and runs every N once (compiling shapejit's buckets into a store
shared by the later children, so timed figures are warm), saves its outputs
and reports its peak RSS above what it held before loading the model. Then
one child holds both runtimes and times each N: BATCHES batches of each,
alternating shapejit and ORT so that load from other processes on a shared
machine hits both alike; the figure is the median of the batch means of wall
time per request. The parent compares the outputs (np.allclose) and writes a
Markdown table and a PNG chart of the latency ratio against N.

onnxruntime runs with intra_op_num_threads = the thread count,
ORT_SEQUENTIAL, ORT_ENABLE_ALL and intra-op spinning off (see ort_session). Its Python call overhead is measured on an
identity model (one [1, 1] float input), timed alongside every N and
reported beside it; the table gives the ratio raw and with that overhead
subtracted from ORT's figure, on wall time and on process CPU time (which a
busy shared machine disturbs far less; for one thread it is the latency an
idle machine would show).

Models: the three examples (examples/models/*.sjg, rebuilt here as ONNX with
the same shapes and ops, since onnxruntime cannot read .sjg; weights drawn
by this script) and the exported transformer models of
tests/data/real_models (their own inputs' values, tiled to length N).

    side_by_side.py [--models a,b] [--sizes 1,7,64,300,1024] [--threads 1,2]
                    [--out DIR] [--budget-ms 400]
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

REPO = pathlib.Path(__file__).resolve().parents[2]
BATCHES = 11


# ---------------------------------------------------------------- models

def onnx_examples(folder):
    """The examples/models graphs as ONNX (opset 17): same shapes, same ops."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)

    def w(name, shape, scale):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32),
                                       name)

    def save(name, sym, nodes, inits, d_in, d_out):
        g = helper.make_graph(
            nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [sym, d_in])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [sym, d_out])], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        path = folder / f"{name}.onnx"
        onnx.save(m, str(path))
        return path

    n = helper.make_node
    paths = {}
    # mlp.sjg: 32 -> 64 -> 64 -> 10, relu, the middle layer a gemm.
    paths["mlp"] = save("mlp", "batch", [
        n("MatMul", ["x", "w1"], ["m1"]), n("Add", ["m1", "b1"], ["a1"]), n("Relu", ["a1"], ["h1"]),
        n("Gemm", ["h1", "w2", "b2"], ["g2"]), n("Relu", ["g2"], ["h2"]),
        n("MatMul", ["h2", "w3"], ["m3"]), n("Add", ["m3", "b3"], ["y"])],
        [w("w1", (32, 64), .18), w("b1", (64,), .01), w("w2", (64, 64), .125),
         w("b2", (64,), .01), w("w3", (64, 10), .125), w("b3", (10,), .01)], 32, 10)
    # ffn.sjg: x + gelu(layernorm(x) @ w1 + b1) @ w2 + b2 (erf GELU).
    half = numpy_helper.from_array(np.array(0.5, np.float32), "half")
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    rsq2 = numpy_helper.from_array(np.array(0.70710678, np.float32), "rsq2")
    paths["ffn"] = save("ffn", "N", [
        n("LayerNormalization", ["x", "lns", "lnb"], ["xn"], axis=-1, epsilon=1e-5),
        n("MatMul", ["xn", "w1"], ["m1"]), n("Add", ["m1", "b1"], ["a1"]),
        n("Mul", ["a1", "rsq2"], ["s1"]), n("Erf", ["s1"], ["e1"]), n("Add", ["e1", "one"], ["e2"]),
        n("Mul", ["a1", "e2"], ["e3"]), n("Mul", ["e3", "half"], ["h"]),
        n("MatMul", ["h", "w2"], ["m2"]), n("Add", ["m2", "b2"], ["f"]),
        n("Add", ["x", "f"], ["y"])],
        [numpy_helper.from_array(np.ones(64, np.float32), "lns"),
         numpy_helper.from_array(np.zeros(64, np.float32), "lnb"),
         w("w1", (64, 256), .125), w("b1", (256,), .02), w("w2", (256, 64), .0625),
         w("b2", (64,), .02), half, one, rsq2], 64, 64)
    # attention.sjg: softmax(q kT / sqrt(32)) v over the sequence.
    paths["attention"] = save("attention", "S", [
        n("MatMul", ["x", "wq"], ["q"]), n("MatMul", ["x", "wk"], ["k"]),
        n("MatMul", ["x", "wv"], ["v"]), n("Transpose", ["k"], ["kt"], perm=[1, 0]),
        n("MatMul", ["q", "kt"], ["s0"]), n("Mul", ["s0", "scale"], ["s"]),
        n("Softmax", ["s"], ["p"], axis=-1), n("MatMul", ["p", "v"], ["y"])],
        [w("wq", (32, 32), .18), w("wk", (32, 32), .18), w("wv", (32, 32), .18),
         numpy_helper.from_array(np.array(0.176776695, np.float32), "scale")], 32, 32)
    return {k: {"name": k, "path": str(v), "kind": "example"} for k, v in paths.items()}


def identity_model(folder):
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = folder / "identity.onnx"
    onnx.save(m, str(path))
    return str(path)


def real_models():
    out = {}
    for manifest in sorted((REPO / "tests" / "data" / "real_models").glob("*/manifest.json")):
        m = json.loads(manifest.read_text())
        # Each input's axis of the dynamic dim: seq for the encoders, batch
        # (axis 0) for the vision models.
        axes = {i["name"]: i["shape"].index(m["dynamic"]) for i in m["inputs"]
                if m.get("dynamic") in i["shape"]}
        out[m["name"]] = {"name": m["name"], "kind": "real", "path": str(manifest.parent / m["model"]),
                          "dynamic": m.get("dynamic"), "dims": m.get("dims"), "axes": axes,
                          "sample": str(manifest.parent / str(max(m["lengths"])) / "in")}
    return out


def feed_for(model, n, sess_inputs):
    """Inputs at length n: examples get normal floats; real models their own
    committed inputs' values tiled along the dynamic dim (token ids stay in
    the vocabulary, masks stay masks, images stay images)."""
    rng = np.random.default_rng(n)
    if model["kind"] == "example":
        return {"x": rng.standard_normal((n, sess_inputs[0][1])).astype(np.float32)}
    if model["kind"] == "generated":  # real_scale_models: x's shape with N the size
        shape = [n if d == "N" else int(d) for d in model["x"]]
        return {"x": rng.standard_normal(shape).astype(np.float32)}
    feed = {}
    for p in pathlib.Path(model["sample"]).glob("*.npy"):
        a = np.load(p)
        axis = model["axes"].get(p.stem, 1)
        feed[p.stem] = np.ascontiguousarray(np.take(a, np.arange(n) % a.shape[axis], axis=axis))
    return feed


# ---------------------------------------------------------------- child

def _status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _rss_kib():
    return _status_kib("VmRSS")


def _peak_kib():
    """This process's peak RSS. VmHWM, not ru_maxrss: the latter carries the
    parent's peak across fork and exec (the parent generated the real-scale
    models, so every child reported that figure, whatever it held)."""
    return _status_kib("VmHWM")


def interleaved(fns, budget_s):
    """Per-call ns of each fn, (wall, process CPU), medians over BATCHES
    batches; the fns' batches alternate so that load from other processes
    hits all of them alike. CPU time is what a one-thread request costs
    whatever else the machine runs; wall time is the latency seen."""
    per = []
    for fn in fns:
        fn()
        t0 = time.perf_counter()
        fn()
        one = max(time.perf_counter() - t0, 1e-7)
        per.append(max(1, int(budget_s / BATCHES / len(fns) / one)))
    wall = [[] for _ in fns]
    cpu = [[] for _ in fns]
    for _ in range(BATCHES):
        for i, fn in enumerate(fns):
            c0, t0 = time.process_time_ns(), time.perf_counter_ns()
            for _ in range(per[i]):
                fn()
            wall[i].append((time.perf_counter_ns() - t0) / per[i])
            cpu[i].append((time.process_time_ns() - c0) / per[i])
    return [(statistics.median(w), statistics.median(c)) for w, c in zip(wall, cpu)]


def ort_session(path, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # ORT's intra-op workers spin after each run by default. Timed in one
    # process with shapejit's batches in between, the spinners hold the
    # cores shapejit's own kernel threads need (measured: a 2-thread
    # shapejit run right after an ORT run took 7.35 ms against 3.45 ms
    # alone). Without spinning ORT measured 6% slower on the same model, so
    # its figures here are at most that much pessimistic.
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def sj_session(model, threads, store):
    """shapejit with `threads` kernel threads per request, like ORT's
    intra-op threads (the host device splits row-parallel kernels)."""
    import shapejit
    kw = {"dynamic": model.get("dynamic"), "dims": model.get("dims")}
    return shapejit.InferenceSession(model["path"], store=store, threads=threads, **kw)


def child(args):
    """--runtime shapejit|ort: load, run every N once (outputs saved), peak
    RSS. --runtime both: the timings, both runtimes in this one process."""
    model = json.loads(args.child)
    sizes = [int(s) for s in args.sizes.split(",")]
    threads = args.threads_one
    res = {"sizes": {}, "note": ""}
    rss0 = _rss_kib()
    sessions = {}
    if args.runtime in ("ort", "both"):
        sessions["ort"] = ort_session(model["path"], threads)
    if args.runtime in ("shapejit", "both"):
        sessions["shapejit"] = sj_session(model, threads, args.store)
    any_sess = next(iter(sessions.values()))
    inputs = [(i.name, i.shape[-1]) for i in any_sess.get_inputs()]
    names = [o.name for o in any_sess.get_outputs()]
    if args.runtime == "both":
        # ORT's own call overhead, timed alongside every N.
        ident = ort_session(model["identity"], threads)
        x1 = {"x": np.zeros((1, 1), np.float32)}
    outs = {}
    for n in sizes:
        feed = feed_for(model, n, inputs)
        try:
            got = {k: s.run(None, feed) for k, s in sessions.items()}
        except Exception as exc:  # a size the model cannot take (e.g. past its positions)
            res["sizes"][n] = {"error": str(exc).splitlines()[0][:160]}
            continue
        if args.runtime != "both":
            for name, a in zip(names, got[args.runtime]):
                outs[f"{n}:{name}"] = a
            res["sizes"][n] = {}
            continue
        sj, rt = sessions["shapejit"], sessions["ort"]
        ns = interleaved([lambda: sj.run(None, feed), lambda: rt.run(None, feed),
                          lambda: ident.run(None, x1)], args.budget_ms / 1e3)
        res["sizes"][n] = {"sj_ns": ns[0], "ort_ns": ns[1], "call_ns": ns[2]}
    res["peak_rss_mib"] = round(_peak_kib() / 1024, 1)
    res["peak_over_start_mib"] = round(
        (_peak_kib() - rss0) / 1024, 1)
    if args.outputs:
        np.savez(args.outputs, **outs)
    print(json.dumps(res))


# ---------------------------------------------------------------- parent

def run_child(runtime, model, threads, args, tmp):
    out_npz = tmp / f"{model['name']}-{runtime}-{threads}.npz"
    cmd = [sys.executable, __file__, "--runtime", runtime, "--child", json.dumps(model),
           "--threads-one", str(threads), "--sizes", model.get("sizes") or args.sizes,
           "--budget-ms", str(args.budget_ms), "--store", str(tmp / "store.db")]
    if runtime != "both":
        cmd += ["--outputs", str(out_npz)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return {"failed": (p.stderr.strip().splitlines() or ["?"])[-1][:200]}, None
    res = json.loads(p.stdout.strip().splitlines()[-1])
    return res, None if runtime == "both" else dict(np.load(out_npz))


def compare(a, b, n):
    keys = [k for k in a if k.startswith(f"{n}:")]
    if not keys or any(k not in b for k in keys):
        return None
    return all(np.allclose(a[k], b[k], rtol=1e-3, atol=1e-4) for k in keys), \
        max(float(np.max(np.abs(a[k] - b[k]))) if a[k].size else 0.0 for k in keys)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", help="comma-separated names (default: all that load)")
    ap.add_argument("--sizes", default="1,7,64,300,1024")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--out", default="bench-ort", help="folder for table.md, chart.png, raw.json")
    ap.add_argument("--budget-ms", type=float, default=300, help="timing budget per cell")
    ap.add_argument("--generated", help="also these real-scale models (bench/ort/real_scale_models.py),"
                    " comma-separated, each at its own sizes")
    ap.add_argument("--runtime", help=argparse.SUPPRESS)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--threads-one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--outputs", help=argparse.SUPPRESS)
    ap.add_argument("--store", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="sj-ort-"))
    models = {**onnx_examples(tmp), **real_models()}
    if args.generated:
        sys.path.insert(0, str(REPO / "bench" / "ort"))
        import real_scale_models
        models.update(real_scale_models.generate(args.generated.split(","), tmp))
    ident = identity_model(tmp)
    if args.models:
        models = {k: models[k] for k in args.models.split(",")}
    rows, raw = [], {}
    for name, model in models.items():
        model["identity"] = ident
        sizes = [int(s) for s in (model.get("sizes") or args.sizes).split(",")]
        for t in [int(x) for x in args.threads.split(",")]:
            sj, sj_out = run_child("shapejit", model, t, args, tmp)
            rt, rt_out = ({}, None) if "failed" in sj else run_child("ort", model, t, args, tmp)
            both = {} if "failed" in sj or "failed" in rt else run_child("both", model, t, args,
                                                                        tmp)[0]
            raw[f"{name}/{t}"] = {"shapejit": sj, "ort": rt, "timing": both}
            print(f"{name} threads={t}: shapejit {sj.get('failed', 'ok')}, "
                  f"ort {rt.get('failed', 'ok')}", file=sys.stderr, flush=True)
            for what, r in (("shapejit", sj), ("ORT", rt), ("timing", both)):
                if "failed" in r:
                    rows.append((name, t, None, f"{what}: {r['failed']}"))
                    break
            else:
                for n in sizes:
                    a = both["sizes"][str(n)]
                    if "error" in a:
                        rows.append((name, t, n, a["error"]))
                        continue
                    ok = compare(sj_out, rt_out, n)
                    (sw, sc), (ow, oc), (cw, cc) = a["sj_ns"], a["ort_ns"], a["call_ns"]
                    rows.append((name, t, n, {
                        "sj_us": sw / 1e3, "ort_us": ow / 1e3, "ort_call_us": cw / 1e3,
                        "ratio": sw / ow,
                        "ratio_net": sw / (ow - cw) if ow > cw else None,
                        "ratio_cpu_net": sc / (oc - cc) if oc > cc else None,
                        "allclose": ok, "sj_mib": sj["peak_over_start_mib"],
                        "ort_mib": rt["peak_over_start_mib"], "note": both["note"]}))
    (out / "raw.json").write_text(json.dumps(raw, indent=1))
    write_table(rows, out / "table.md")
    write_chart(rows, out / "chart.png")
    print((out / "table.md").read_text())


def fmt(ratio):
    return "–" if ratio is None else f"{ratio:.2f}×"


def write_table(rows, path):
    lines = ["| model | thr | N | shapejit µs | ORT µs | ORT call µs | sj/ORT | sj/(ORT−call) |"
             " CPU: sj/(ORT−call) | outputs | peak MiB sj / ORT | note |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, t, n, r in rows:
        if not isinstance(r, dict):
            lines.append(f"| {name} | {t} | {n if n else '–'} | – | – | – | – | – | – | – | – | {r} |")
            continue
        ok = r["allclose"]
        cmp_ = "–" if ok is None else (f"ok ({ok[1]:.1e})" if ok[0] else f"**DIFFER** ({ok[1]:.1e})")
        lines.append(
            f"| {name} | {t} | {n} | {r['sj_us']:.1f} | {r['ort_us']:.1f} | {r['ort_call_us']:.1f}"
            f" | {r['ratio']:.2f}× | {fmt(r['ratio_net'])} | {fmt(r['ratio_cpu_net'])} | {cmp_}"
            f" | {r['sj_mib']:.0f} / "
            f"{r['ort_mib']:.0f} | {r['note']} |")
    path.write_text("\n".join(lines) + "\n")


def write_chart(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    threads = sorted({t for _, t, _, _ in rows})
    fig, axes = plt.subplots(1, len(threads), figsize=(6 * len(threads), 4.5), squeeze=False)
    for ax, t in zip(axes[0], threads):
        series = {}
        for name, tt, n, r in rows:
            # One thread: CPU time (robust to a busy machine); more: wall
            # time (CPU time would count ORT's spinning workers).
            key = "ratio_cpu_net" if t == 1 else "ratio_net"
            if tt == t and isinstance(r, dict) and r[key] is not None:
                series.setdefault(name, []).append((n, r[key]))
        for name, pts in series.items():
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("N")
        ax.set_ylabel("shapejit / (ORT − call overhead), " + ("CPU time" if t == 1 else "wall"))
        ax.set_title(f"{t} thread{'s' if t > 1 else ''}: below 1 = shapejit faster")
    axes[0][-1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
