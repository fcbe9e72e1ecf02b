#!/usr/bin/env bash
# The Python package's tests: a venv (build-python/venv, ignored by git),
# `pip install .` of this checkout into it (scikit-build-core builds the C
# library and the extension), then the pytest suite in python/tests.
#   scripts/test-python.sh [pytest args]
# SJ_PY_VENV=DIR puts the venv elsewhere; PYTHON=python3.X picks the interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
venv=${SJ_PY_VENV:-build-python/venv}
python=${PYTHON:-python3}
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
# kserve and PyYAML: test_kserve_manifests loads deploy/kserve into KServe's API models.
# pytest-xdist: the suite runs on every core (-n auto below), as ctest does.
"$venv/bin/python" -m pip install -q --disable-pip-version-check numpy pytest pytest-xdist kserve pyyaml
start=$(date +%s)
"$venv/bin/python" -m pip install -q --disable-pip-version-check .
echo "test-python: pip install . took $(( $(date +%s) - start )) s"
# From inside python/tests: `import shapejit` is the installed package,
# never python/shapejit (not on sys.path; it has no compiled module).
cd python/tests
exec "../../$venv/bin/python" -m pytest -q -p no:cacheprovider -n auto "$@"
