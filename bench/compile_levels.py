#!/usr/bin/env python3
"""Cold compile time and request latency per CPU level, for one or more
shapejit builds side by side in one run (a change to code generation is
judged by both: a bucket's compile is what a cold start and every CI run
pay, its requests what a user pays after).

    bench/compile_levels.py --shapejit NAME=PATH [--shapejit NAME=PATH ...]
        [--model PATH[@SIZES][@ARGS]] ... [--levels native,x86-64-v3,...]
        [--reps 3] [--out FILE.md]

For every model, request size and CPU level, each build runs `shapejit
serve` on a trace of that size alone (no store, one worker, one thread, so
every run compiles its one bucket cold): the figures are the run's
compile_ms and its p50 request latency (--stats). Builds alternate run by
run, reps times, and the table gives each build's medians and the ratio of
every build to the first. Levels default to native and every x86-64 level
this CPU runs (read from /proc/cpuinfo); a level it cannot run is left out
and named. Models default to the small exported models under
tests/data/real_models and the examples (their sizes: what CI compiles).
Needs only the Python standard library.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REAL = os.path.join(ROOT, "tests", "data", "real_models")


def real_model(name, sizes):
    """A model of tests/data/real_models, run as its manifest says: its
    dims fixed, its dynamic dim the ladder's."""
    with open(os.path.join(REAL, name, "manifest.json")) as f:
        m = json.load(f)
    args = [a for k, v in (m.get("dims") or {}).items() for a in ("--dim", "%s=%s" % (k, v))]
    return os.path.join(REAL, name, m["model"]), sizes, args + ["--dynamic", m["dynamic"]]


DEFAULT_MODELS = [
    real_model("bert_dynamo", [8, 64]),
    real_model("llama_dynamo", [8, 64]),
    real_model("tel_prenorm_gelu_dynamo", [8, 64, 256]),
    real_model("mha_residual_ln_dynamo", [8, 64, 256]),
    real_model("resnet18_dynamo", [1, 4]),
    (os.path.join(ROOT, "examples", "models", "ffn.sjg"), [8, 256], []),
    (os.path.join(ROOT, "examples", "models", "mlp.sjg"), [8, 64, 1024], []),
]
# x86-64 levels and the /proc/cpuinfo flags each needs (the psABI's lists,
# each level needing the ones below it too), highest first.
V2 = {"cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3"}
V3 = V2 | {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"}
V4 = V3 | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
LEVELS = [("x86-64-v4", V4), ("x86-64-v3", V3), ("x86-64-v2", V2)]


def cpuinfo(field):
    """The first /proc/cpuinfo line's value for field, or None."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.split(":", 1)[0].strip() == field:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def parse_model(spec):
    path, _, rest = spec.partition("@")
    sizes_s, _, args = rest.partition("@")
    sizes = [int(s) for s in sizes_s.split(",")] if sizes_s else [8, 64]
    return os.path.abspath(path), sizes, args.split() if args else []


def run_once(exe, model, extra, level, trace):
    cmd = [exe, "serve", model, "--trace", trace, "--store", "none", "--workers", "1",
           "--threads", "1", "--stats", "--cpu", level] + extra
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("compile_levels: %s failed (exit %d): %s" % (" ".join(cmd), out.returncode,
                                                              out.stderr.strip()[-400:]))
    for line in reversed((out.stdout + out.stderr).splitlines()):
        if line.startswith("{"):
            j = json.loads(line)
            return j["compile_ms"], j["p50_ms"] * 1000.0
    sys.exit("compile_levels: no --stats line from %s" % " ".join(cmd))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapejit", action="append", required=True, metavar="NAME=PATH")
    ap.add_argument("--model", action="append", metavar="PATH[@SIZES][@ARGS]")
    ap.add_argument("--levels", help="comma-separated (default: native and every level this CPU runs)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", help="also write the table here")
    a = ap.parse_args()
    builds = []
    for s in a.shapejit:
        name, _, path = s.partition("=")
        if not path or not os.access(path, os.X_OK):
            sys.exit("compile_levels: --shapejit %r: expected NAME=PATH to an executable" % s)
        builds.append((name, path))
    models = [parse_model(m) for m in a.model] if a.model else DEFAULT_MODELS
    flags = set((cpuinfo("flags") or "").split())
    if a.levels:
        levels = a.levels.split(",")
    else:
        levels = ["native"] + [n for n, need in LEVELS if need <= flags]
        missing = [n for n, need in LEVELS if not need <= flags]
        if missing:
            print("levels this CPU cannot run, not timed: %s" % ", ".join(missing))
    model_name = cpuinfo("model name") or "unknown CPU"
    head = "| model | N | level | " + " | ".join(
        "%s compile ms | %s p50 us" % (n, n) for n, _ in builds)
    if len(builds) > 1:
        head += " | " + " | ".join("%s/%s compile | %s/%s p50" % (n, builds[0][0], n, builds[0][0])
                                   for n, _ in builds[1:])
    lines = ["CPU: %s, %d cores; medians of %d runs per cell, builds alternating" %
             (model_name, os.cpu_count(), a.reps), "", head + " |",
             "|" + "---|" * (3 + 2 * len(builds) + 2 * (len(builds) - 1))]
    print("\n".join(lines), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace")
        for model, sizes, extra in models:
            label = os.path.basename(os.path.dirname(model)) if model.endswith("model.onnx") \
                else os.path.basename(model)
            for size in sizes:
                with open(trace, "w") as f:
                    f.write(("%d\n" % size) * max(40, min(400, 100000 // (size * size))))
                for level in levels:
                    got = {n: ([], []) for n, _ in builds}
                    for _ in range(a.reps):
                        for n, exe in builds:
                            c, p = run_once(exe, model, extra, level, trace)
                            got[n][0].append(c)
                            got[n][1].append(p)
                    med = {n: (statistics.median(c), statistics.median(p)) for n, (c, p) in got.items()}
                    row = "| %s | %d | %s | " % (label, size, level) + " | ".join(
                        "%.0f | %.1f" % med[n] for n, _ in builds)
                    if len(builds) > 1:
                        b0 = med[builds[0][0]]
                        row += " | " + " | ".join("%.2f | %.2f" % (med[n][0] / b0[0], med[n][1] / b0[1])
                                                  for n, _ in builds[1:])
                    lines.append(row + " |")
                    print(lines[-1], flush=True)
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
