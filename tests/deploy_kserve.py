"""deploy/: the KServe manifests parse and agree with each other and with
the Dockerfile, and the exact args the ServingRuntime gives the container
serve a model over the Open Inference Protocol here. KServe's paths are
mapped to a work folder (/mnt/models: the storage initializer's copy of
the model; /tmp: the pod's emptyDir) and the listen address to
127.0.0.1:0 (no test binds another address); every other arg is the
manifest's own.

usage: deploy_kserve.py SHAPEJIT SOURCE_DIR WORKDIR  (exit 77: no PyYAML)
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request

from server_process import stop

try:
    import yaml
except ImportError:
    print("PyYAML not installed (Debian: python3-yaml): skipped")
    sys.exit(77)

SJ, SRC, WORK = sys.argv[1:4]
DEPLOY = os.path.join(SRC, "deploy")
failures = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        failures.append(what)


def load(name):
    with open(os.path.join(DEPLOY, "kserve", name)) as f:
        docs = list(yaml.safe_load_all(f))
    check(len(docs) == 1, f"{name}: one document")
    return docs[0]


sr = load("servingruntime.yaml")
isvc = load("inferenceservice.yaml")
check(sr["apiVersion"] == "serving.kserve.io/v1alpha1" and sr["kind"] == "ServingRuntime",
      "servingruntime.yaml is a ServingRuntime")
check(isvc["apiVersion"] == "serving.kserve.io/v1beta1" and isvc["kind"] == "InferenceService",
      "inferenceservice.yaml is an InferenceService")
model = isvc["spec"]["predictor"]["model"]
check(model["runtime"] == sr["metadata"]["name"], "the InferenceService names the runtime")
formats = [f["name"] for f in sr["spec"]["supportedModelFormats"]]
check(model["modelFormat"]["name"] in formats, "the runtime supports the model's format")
check(model.get("protocolVersion") == "v2" and "v2" in sr["spec"]["protocolVersions"],
      "both speak the v2 protocol")
(c,) = sr["spec"]["containers"]
args = c["args"]
listen = args[args.index("--listen") + 1]
port = int(listen.rsplit(":", 1)[1])
check(c["ports"][0]["containerPort"] == port, "the container port is the one --listen binds")
check(c["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": port} and
      c["livenessProbe"]["httpGet"] == {"path": "/v2/health/live", "port": port},
      "the probes ask the server's health endpoints")
mounts = {m["mountPath"] for m in c.get("volumeMounts", [])}
check("/tmp" in mounts, "the store's folder (/tmp) is a volume: the root filesystem is read-only")

with open(os.path.join(DEPLOY, "Dockerfile")) as f:
    docker = f.read()
froms = re.findall(r"^FROM\s+(\S+)", docker, re.M)
check(froms and all(f.startswith("debian:") for f in froms), f"Debian base images: {froms}")
user = re.findall(r"^USER\s+(\d+)", docker, re.M)
check(user and user[-1] != "0" and int(user[-1]) == c["securityContext"]["runAsUser"],
      f"the image runs as the non-root user the runtime asks for: {user}")
check(c["securityContext"].get("runAsNonRoot") is True, "runAsNonRoot")
entry = re.search(r'^ENTRYPOINT\s+\["([^"]+)"\]', docker, re.M)
check(entry and entry.group(1) == "/usr/local/bin/shapejit", "the entrypoint is the shapejit binary")

# The args, run here: only KServe's paths and the address are mapped.
shutil.rmtree(WORK, ignore_errors=True)
mnt, tmp = os.path.join(WORK, "mnt-models"), os.path.join(WORK, "tmp")
os.makedirs(mnt)
os.makedirs(tmp)
shutil.copy(os.path.join(SRC, "tests", "data", "models", "mlp_gemm.onnx"), os.path.join(mnt, "model.onnx"))
name = isvc["metadata"]["name"]
run = []
for a in args:
    if a == listen:
        a = "127.0.0.1:0"
    elif a.startswith("/mnt/models/"):
        a = mnt + a[len("/mnt/models"):]
    elif a.startswith("/tmp/"):
        a = tmp + a[len("/tmp"):]
    run.append(a.replace("{{.Name}}", name))
print("running:", " ".join([SJ] + run))
out = open(os.path.join(WORK, "server.out"), "w")
err = open(os.path.join(WORK, "server.err"), "w")
p = subprocess.Popen([SJ] + run, stdout=out, stderr=err)
try:
    got = None
    while got is None and p.poll() is None:
        got = re.search(r"listening on http://127.0.0.1:(\d+)", open(os.path.join(WORK, "server.out")).read())
        time.sleep(0.05)
    check(got is not None, "the server listens")
    if got is None:
        sys.exit("server output: " + open(os.path.join(WORK, "server.err")).read())
    base = f"http://127.0.0.1:{got.group(1)}"

    def get(path):
        try:
            with urllib.request.urlopen(base + path, timeout=30) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    # Polled until ready or the server exits (ctest's timeout guards a hang).
    while get(c["readinessProbe"]["httpGet"]["path"])[0] != 200 and p.poll() is None:
        time.sleep(0.1)
    check(get(c["readinessProbe"]["httpGet"]["path"])[0] == 200, "readiness probe: 200 once warm")
    check(get(c["livenessProbe"]["httpGet"]["path"])[0] == 200, "liveness probe: 200")
    status, body = get(f"/v2/models/{name}")
    meta = json.loads(body)
    check(status == 200 and meta["name"] == name, f"the model is served as the InferenceService's name ({name})")
    inputs = []
    for i in meta["inputs"]:
        shape = [3 if d == -1 else d for d in i["shape"]]
        n = 1
        for d in shape:
            n *= d
        inputs.append({"name": i["name"], "shape": shape, "datatype": i["datatype"], "data": [0.5] * n})
    req = urllib.request.Request(base + f"/v2/models/{name}/infer", data=json.dumps({"inputs": inputs}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        res = json.loads(r.read())
    outs = res["outputs"]
    check(len(outs) == len(meta["outputs"]) and all(o["shape"][0] == 3 for o in outs),
          f"inference over v2: {[(o['name'], o['shape']) for o in outs]}")
    check(os.path.exists(os.path.join(tmp, "store.db")), "the store is in the pod's /tmp")
finally:
    rc = stop(p)
check(rc == 0, f"SIGTERM: exit status {rc}")
print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
