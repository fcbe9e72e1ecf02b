#!/usr/bin/env python3
"""ONNX Runtime's latency per request size, for bench/tuned_buckets.sh.

The models as bench/ort/side_by_side.py builds and names them (the examples
rebuilt as ONNX, the exported models of tests/data/real_models) and its
inputs, session options and interleaved timing; one intra-op thread, as
shapejit's serve runs a request. Prints one JSON object, {model: {N: us}}:
the median wall time per run minus ONNX Runtime's Python call overhead
(an identity model timed alongside), so the figure is comparable to
shapejit's C-level latency; null for a size the model cannot take.

    ort_latency.py --models mlp,ffn --sizes 1,7,64 [--budget-ms 300]
"""
import argparse
import json
import pathlib
import sys
import tempfile

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import side_by_side as sbs  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", required=True, help="comma-separated side_by_side.py names")
    ap.add_argument("--sizes", default="1,7,64,300,1024")
    ap.add_argument("--budget-ms", type=float, default=300, help="timing budget per size")
    args = ap.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="sj-ort-lat-"))
    known = {**sbs.onnx_examples(tmp), **sbs.real_models()}
    ident = sbs.ort_session(sbs.identity_model(tmp), 1)
    x1 = {"x": np.zeros((1, 1), np.float32)}
    out = {}
    for name in args.models.split(","):
        if name not in known:
            sys.exit(f"ort_latency.py: no model '{name}' (known: {', '.join(sorted(known))})")
        model = known[name]
        sess = sbs.ort_session(model["path"], 1)
        inputs = [(i.name, i.shape[-1]) for i in sess.get_inputs()]
        out[name] = {}
        for n in [int(s) for s in args.sizes.split(",")]:
            feed = sbs.feed_for(model, n, inputs)
            try:
                sess.run(None, feed)
            except Exception:  # a size the model cannot take (e.g. past its positions)
                out[name][str(n)] = None
                continue
            (run_ns, _), (call_ns, _) = sbs.interleaved(
                [lambda: sess.run(None, feed), lambda: ident.run(None, x1)], args.budget_ms / 1e3)
            out[name][str(n)] = round(max(run_ns - call_ns, 0) / 1e3, 1)
        print(f"ort_latency.py: {name} done", file=sys.stderr, flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
