#!/usr/bin/env bash
# shapejit next to onnxruntime (bench/ort/side_by_side.py): makes the
# benchmark-only venv (bench/ort/venv.sh, with matplotlib), pip-installs
# this checkout into it, then runs the comparison from outside the source
# tree so `import shapejit` is the installed package. Writes table.md, chart.png and raw.json to --out
# (default build-python/bench-ort).
#   bench/ort/side_by_side.sh [side_by_side.py args]
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

scripts/install-deps.sh
venv=$(bench/ort/venv.sh matplotlib scikit-build-core)
# A kept build folder makes a re-run after a change an incremental build.
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation \
    -C build-dir=build-python/bench-wheel .
mkdir -p build-python/bench-ort
cd build-python
exec "$venv/bin/python" "$root/bench/ort/side_by_side.py" --out "$root/build-python/bench-ort" "$@"
