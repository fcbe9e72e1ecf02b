#!/usr/bin/env bash
# Time to first result of a fresh process at real scale, shapejit (bucket
# in the store, and compiling it) beside ONNX Runtime's cold process, in one
# run (issue #33): generates a BERT-base-shaped encoder (12 x 768, 340 MB of
# weights, bench/bert_encoder_gen.py) once into the output folder, then
# bench/ort/warm_start.py. Writes warm_start.md to --out (default
# build-python/bench-warm-start).
#   bench/ort/warm_start.sh [--out DIR] [--rows N] [--threads N] [--runs N]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$PWD/build-python/bench-warm-start
py_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$(realpath -m "$2"); shift 2 ;;
    --rows|--threads|--runs) py_args+=("$1" "$2"); shift 2 ;;
    *) echo "warm_start.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
scripts/install-deps.sh
build=${SJ_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc)" --target shapejit_cli >/dev/null
venv=$(bench/ort/venv.sh)
[ -f "$out/bert_base.onnx" ] || "$venv/bin/python" bench/bert_encoder_gen.py "$out/bert_base.onnx"
"$venv/bin/python" bench/ort/warm_start.py --shapejit "$build/shapejit" --model "$out/bert_base.onnx" \
    "${py_args[@]}" | tee "$out/warm_start.md"
