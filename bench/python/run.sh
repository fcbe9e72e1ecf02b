#!/usr/bin/env bash
# Runs bench_python.py: a benchmark-only venv (build-python/bench-venv, with
# onnxruntime, which the package and its tests never need), this checkout
# pip-installed into it, and the C-side program bench_engine_run from a
# Release build in build/.
#   bench/python/run.sh [bench_python.py args]
set -euo pipefail
cd "$(dirname "$0")/../.."

scripts/install-deps.sh
venv=${SJ_BENCH_VENV:-build-python/bench-venv}
[ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check numpy onnxruntime
"$venv/bin/python" -m pip install -q --disable-pip-version-check .
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target bench_engine_run -j "$(nproc)" >/dev/null
cd build   # not the source tree: `import shapejit` must be the installed package
exec "../$venv/bin/python" ../bench/python/bench_python.py --c-bench ./bench_engine_run "$@"
