"""serve --listen against the real tritonclient[http] from PyPI.

A model repository of exported ONNX models from the test data (and the
.sjg examples) is served on a free loopback port; for each model the
metadata is checked, and JSON and binary inference at sizes across buckets
must equal `shapejit run` on the same inputs exactly. Concurrent requests
to a row-independent model are batched (and still exact); models that are
not row-independent are never batched. Errors come back as the protocol's
status codes through the client's exception.

usage: server_tritonclient.py SHAPEJIT SOURCE_DIR WORKDIR
"""
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request

from server_process import stop

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

SJ, SRC, WORK = sys.argv[1:4]
DATA = os.path.join(SRC, "tests", "data", "models")
REAL = os.path.join(SRC, "tests", "data", "real_models")
# Exported transformers (int64 token ids and masks; BERT's weights in an
# external-data file beside the model), served with their batch dim fixed.
EXPORTED = ["bert_torchscript", "gpt2_dynamo"]
# The same BERT export served by batch at a fixed length: rows independent,
# so concurrent requests are stacked.
BY_BATCH = {"bert_batch": "bert_torchscript"}
# A decode step bucketed by its cache length, its mask tied to it.
STEP = {"gpt2_step": "gpt2_step_torchscript"}
STEP_DIMS = {"dynamic": "past", "dims": {"total": "past+1"}}
BY_BATCH_SEQ, BY_BATCH_LADDER = 7, "pow2:1:8"
LADDER = "pow2:1:64"
SIZES = [1, 5, 17, 64]
failures = []


def check(cond, what):
    if cond:
        print("ok:", what)
    else:
        print("FAIL:", what)
        failures.append(what)


def make_repository():
    repo = os.path.join(WORK, "repo")
    onnx = ["mlp_gemm", "two_inputs", "attention_2d", "ffn_layernorm_op17"]
    for name in onnx:
        os.makedirs(os.path.join(repo, name))
        shutil.copy(os.path.join(DATA, name + ".onnx"), os.path.join(repo, name, "model.onnx"))
    for name in ["mlp", "ffn"]:
        os.makedirs(os.path.join(repo, name))
        shutil.copy(os.path.join(SRC, "examples", "models", name + ".sjg"),
                    os.path.join(repo, name, "model.sjg"))
    for name in onnx + ["mlp", "ffn"]:
        with open(os.path.join(repo, name, "config.json"), "w") as f:
            json.dump({"ladder": LADDER}, f)
    for name, src_name in [(n, n) for n in EXPORTED] + list(BY_BATCH.items()) + list(STEP.items()):
        src = os.path.join(REAL, src_name)
        os.makedirs(os.path.join(repo, name))
        for f in os.listdir(src):
            if f.startswith("model.onnx"):
                shutil.copy(os.path.join(src, f), os.path.join(repo, name, f))
        config = {"ladder": LADDER, "dynamic": "seq", "dims": {"batch": 1}}
        if name in BY_BATCH:
            config = {"ladder": BY_BATCH_LADDER, "dynamic": "batch", "dims": {"seq": BY_BATCH_SEQ}}
        if name in STEP:
            config = {"ladder": LADDER, **STEP_DIMS}
        with open(os.path.join(repo, name, "config.json"), "w") as f:
            json.dump(config, f)
    return repo


def die_with_parent():
    """In the child before exec: SIGKILL when the parent (this script) dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def start(repo):
    out = open(os.path.join(WORK, "server.out"), "w")
    err = open(os.path.join(WORK, "server.err"), "w")
    # The server dies with this script (PR_SET_PDEATHSIG), however it ends:
    # ctest's timeout is the hang guard. (A 200 s timer used to kill the
    # server instead, and on a loaded machine it did so mid-test.)
    p = subprocess.Popen([SJ, "serve", "--listen", "127.0.0.1:0", "--model-repository", repo,
                          "--store", os.path.join(WORK, "serve.db"), "--max-batch-delay-us", "3000"],
                         stdout=out, stderr=err, preexec_fn=die_with_parent)
    while True:
        with open(os.path.join(WORK, "server.out")) as f:
            m = re.search(r"listening on http://127.0.0.1:(\d+)", f.read())
        if m:
            return p, int(m.group(1))
        if p.poll() is not None:
            break
        time.sleep(0.1)
    p.kill()
    sys.exit("server did not start: " + open(os.path.join(WORK, "server.err")).read())


def shapejit_run(model_file, inputs, tag):
    """Outputs of `shapejit run` on the same inputs, by name."""
    d = os.path.join(WORK, "run", tag)
    os.makedirs(d, exist_ok=True)
    name = os.path.basename(os.path.dirname(model_file))
    args = [SJ, "run", model_file, "--backend", "host", "--ladder", BY_BATCH_LADDER if name in BY_BATCH else LADDER,
            "--store", os.path.join(WORK, "run.db"), "--out", os.path.join(d, "out")]
    if name in EXPORTED:
        args += ["--dynamic", "seq", "--dim", "batch=1"]
    if name in BY_BATCH:
        args += ["--dynamic", "batch", "--dim", f"seq={BY_BATCH_SEQ}"]
    if name in STEP:
        args += ["--dynamic", "past", "--dim", "total=past+1"]
    for name, arr in inputs.items():
        path = os.path.join(d, name + ".npy")
        np.save(path, arr)
        args += ["--input", f"{name}={path}"]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    out = os.path.join(d, "out")
    return {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out) if f.endswith(".npy")}


def model_file(repo, name):
    d = os.path.join(repo, name)
    return os.path.join(d, [f for f in os.listdir(d) if f.startswith("model.")][0])


def inputs_for(meta, rows, seed):
    rng = np.random.default_rng(seed)
    out = {}
    for i in meta["inputs"]:
        shape = [rows if d == -1 else d for d in i["shape"]]
        if i["datatype"] == "INT64":  # token ids below the tiny vocabulary; masks 0/1
            high = 2 if "mask" in i["name"] else 100
            out[i["name"]] = rng.integers(0, high, shape).astype(np.int64)
        else:
            out[i["name"]] = rng.uniform(-1, 1, shape).astype(np.float32)
    return out


def infer(client, name, meta, inputs, binary):
    ins = []
    for k, arr in inputs.items():
        t = httpclient.InferInput(k, list(arr.shape), "INT64" if arr.dtype == np.int64 else "FP32")
        t.set_data_from_numpy(arr, binary_data=binary)
        ins.append(t)
    outs = [httpclient.InferRequestedOutput(o["name"], binary_data=binary) for o in meta["outputs"]]
    res = client.infer(name, ins, outputs=outs)
    return {o["name"]: res.as_numpy(o["name"]) for o in meta["outputs"]}


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    repo = make_repository()
    p, port = start(repo)
    url = f"127.0.0.1:{port}"
    client = httpclient.InferenceServerClient(url=url)
    try:
        check(client.is_server_live(), "server live")
        # Warm-up takes what the machine gives it: polled until ready, or
        # until the server has exited (ctest's timeout guards a hang).
        while not client.is_server_ready() and p.poll() is None:
            time.sleep(0.1)
        check(client.is_server_ready(), "server ready (every bucket of every model warm)")
        smeta = client.get_server_metadata()
        check(smeta["name"] == "shapejit" and "binary_tensor_data" in smeta["extensions"],
              "server metadata")

        for name in ["mlp_gemm", "two_inputs", "attention_2d", "ffn_layernorm_op17", "mlp", "ffn"] + EXPORTED:
            check(client.is_model_ready(name), f"{name}: ready")
            meta = client.get_model_metadata(name)
            want_type = "INT64" if name in EXPORTED else "FP32"
            check(meta["name"] == name and all(i["datatype"] == want_type for i in meta["inputs"]),
                  f"{name}: metadata")
            check(any(-1 in i["shape"] for i in meta["inputs"]), f"{name}: dynamic dim is -1")
            for rows in SIZES:
                inputs = inputs_for(meta, rows, rows)
                want = shapejit_run(model_file(repo, name), inputs, f"{name}_{rows}")
                for binary in (False, True):
                    got = infer(client, name, meta, inputs, binary)
                    same = all(np.array_equal(got[k], want[k]) for k in want) and set(got) == set(want)
                    check(same, f"{name}: rows {rows}, {'binary' if binary else 'JSON'}: equals shapejit run")

        # Errors through the client: the status and the server's message.
        def expect_error(fn, status, pattern, what):
            try:
                fn()
                check(False, f"{what}: no error")
            except InferenceServerException as e:
                ok = str(e.status()) == str(status) and re.search(pattern, e.message() or "")
                check(bool(ok), f"{what}: {e.status()} {e.message()}")

        meta = client.get_model_metadata("ffn")
        expect_error(lambda: client.get_model_metadata("nope"), 404, "no model named 'nope'",
                     "unknown model")
        bad = httpclient.InferInput("x", [2, 63], "FP32")
        bad.set_data_from_numpy(np.zeros((2, 63), np.float32))
        expect_error(lambda: client.infer("ffn", [bad]), 400, r"shape\[1\] is 63", "wrong shape")
        big = httpclient.InferInput("x", [65, 64], "FP32")
        big.set_data_from_numpy(np.zeros((65, 64), np.float32))
        expect_error(lambda: client.infer("ffn", [big]), 400, "outside every bucket", "size above the ladder")
        i64 = httpclient.InferInput("x", [2, 64], "INT64")
        i64.set_data_from_numpy(np.zeros((2, 64), np.int64))
        expect_error(lambda: client.infer("ffn", [i64]), 400, "datatype INT64, but the model takes FP32",
                     "wrong datatype")

        # Batching: concurrent small requests to the MLP (rows independent)
        # run stacked, and each still equals its own `shapejit run`. An idle
        # server runs a request at once, so stacks form only when requests
        # pile up behind a run: bursts are repeated (at most 20) until one did.
        def batched(name):
            m = urllib.request.urlopen(f"http://{url}/metrics").read().decode()
            n = re.search(r'^shapejit_batched_requests_total\{model="%s"\} (\d+)$' % name, m, re.M)
            return int(n.group(1)), m

        def bursts(name, reqs, want, same):
            """Bursts of the requests from 8 clients until some were stacked
            (at most 20); whether every answer was `same` as its own run."""
            meta = client.get_model_metadata(name)
            ok = True
            for burst in range(20):
                got = [None] * len(reqs)
                barrier = threading.Barrier(8)

                def worker(t):
                    c = httpclient.InferenceServerClient(url=url)
                    barrier.wait()
                    for k in range(t, len(reqs), 8):
                        got[k] = infer(c, name, meta, reqs[k], True)

                threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                ok &= all(g is not None and set(g) == set(w) and all(same(g[o], w[o]) for o in w)
                          for g, w in zip(got, want))
                if batched(name)[0] >= 2:
                    break
            return ok, burst + 1

        mlp_meta = client.get_model_metadata("mlp")
        reqs = [inputs_for(mlp_meta, 8 + (5 * k) % 25, 100 + k) for k in range(16)]
        want = [shapejit_run(model_file(repo, "mlp"), r, f"batch_{k}") for k, r in enumerate(reqs)]
        exact, tries = bursts("mlp", reqs, want, np.array_equal)
        check(exact, "MLP results under concurrent load (batched) equal shapejit run")
        n, metrics = batched("mlp")
        check(n >= 2, f"mlp: requests were batched ({n}, after {tries} bursts)")
        # A transformer served by batch: 1 to 3 sequences a request, stacked
        # into larger batch buckets, each answer its own run's (within float
        # rounding: a stack runs another bucket's kernels).
        bert_meta = client.get_model_metadata("bert_batch")
        reqs = [inputs_for(bert_meta, 1 + k % 3, 300 + k) for k in range(16)]
        want = [shapejit_run(model_file(repo, "bert_batch"), r, f"bert_batch_{k}") for k, r in enumerate(reqs)]
        close, tries = bursts("bert_batch", reqs, want,
                              lambda g, w: g.shape == w.shape and np.allclose(g, w, atol=1e-5, rtol=1e-4))
        check(close, "BERT served by batch: answers under concurrent load equal shapejit run")
        n, metrics = batched("bert_batch")
        check(n >= 2, f"bert_batch: requests were batched ({n}, after {tries} bursts)")
        for name in ["attention_2d", "two_inputs"]:
            n = re.search(r'^shapejit_batches_total\{model="%s"\} (\d+)$' % name, metrics, re.M)
            check(n and n.group(1) == "0", f"{name}: never batched")
        err = open(os.path.join(WORK, "server.err")).read()
        check("model 'attention_2d': batching off:" in err and "model 'two_inputs': batching off:" in err,
              "batching off is reported for models that are not row-independent")
        check("model 'mlp': batching off" not in err, "mlp is batched")
        check("model 'bert_batch': batching off" not in err, "bert_batch is batched")
        # A decode step, its mask tied to the cache length: served one
        # request at a time (a tied input is no request's rows), each
        # answer its shapejit run's; a mask of the wrong length is a 400
        # naming both inputs.
        step_dir = os.path.join(REAL, STEP["gpt2_step"])
        step_meta = client.get_model_metadata("gpt2_step")
        for past in (4, 31):
            feed = {p[:-4]: np.load(os.path.join(step_dir, str(past), "in", p))
                    for p in sorted(os.listdir(os.path.join(step_dir, str(past), "in")))}
            want = shapejit_run(model_file(repo, "gpt2_step"), feed, f"gpt2_step_{past}")
            got = infer(client, "gpt2_step", step_meta, feed, True)
            check(set(got) == set(want) and all(np.array_equal(got[k], want[k]) for k in want),
                  f"gpt2_step: past {past} equals shapejit run")
        feed["attention_mask"] = np.ones((1, 7), np.int64)
        expect_error(lambda: infer(client, "gpt2_step", step_meta, feed, True), 400,
                     "input 'attention_mask' dim 1 is 7, but past = 31", "gpt2_step: a mask of the wrong length")
        # The model configuration says the same: how it is batched, or why not.
        cfg = client.get_model_config("bert_batch")
        check(cfg["dynamic_batching"]["max_queue_delay_microseconds"] == 3000 and cfg["max_batch_size"] == 0,
              f"bert_batch config: dynamic batching ({cfg.get('dynamic_batching')})")
        cfg = client.get_model_config("attention_2d")
        check("dynamic_batching" not in cfg and "request rows" in cfg.get("batching_off", ""),
              f"attention_2d config: why batching is off ({cfg.get('batching_off')})")
    finally:
        rc = stop(p)
        check(rc == 0, f"SIGTERM: exit status {rc}")
    print(f"{len(failures)} failures")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
