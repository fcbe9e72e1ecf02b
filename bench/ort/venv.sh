#!/usr/bin/env bash
# The benchmark-only venv the ONNX Runtime comparisons share (never needed
# by the build, the tests or CI): made on first use, numpy, onnxruntime and
# onnx installed (plus any PACKAGE given); prints its absolute path.
#   venv=$(bench/ort/venv.sh [PACKAGE...])
# $SJ_BENCH_VENV overrides the folder (default build-python/bench-venv),
# $PYTHON the interpreter that makes it.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=${SJ_BENCH_VENV:-build-python/bench-venv}
[ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv" >&2
"$venv/bin/python" -m pip install -q --disable-pip-version-check numpy onnxruntime onnx "$@" >&2
realpath "$venv"
