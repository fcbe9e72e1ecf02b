#!/usr/bin/env bash
# Time per generated token, shapejit beside onnxruntime
# (bench/decode/decode_tokens.py): makes the benchmark-only venv
# (bench/ort/venv.sh, with torch and transformers for the model's export),
# pip-installs this checkout into it, then runs the comparison from outside
# the source tree so `import shapejit` is the installed package. The model
# and the stores go to --out (default build-python/bench-decode).
#   bench/decode/decode_tokens.sh [decode_tokens.py args]
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

scripts/install-deps.sh
venv=$(bench/ort/venv.sh scikit-build-core torch transformers)
# A kept build folder makes a re-run after a change an incremental build.
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation \
    -C build-dir=build-python/bench-wheel .
mkdir -p build-python/bench-decode
cd build-python
exec "$venv/bin/python" "$root/bench/decode/decode_tokens.py" --out "$root/build-python/bench-decode" "$@"
