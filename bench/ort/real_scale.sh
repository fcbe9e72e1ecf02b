#!/usr/bin/env bash
# shapejit at the sizes people serve, against this machine's limits and
# ONNX Runtime, in one run:
#   1. bench_gemm: the core's FMA peak per x86-64 level and its streaming
#      bandwidth, then linear layers at BERT-base and Llama-7B MLP sizes and
#      attention at head 64 per level (every level this CPU runs natively),
#      with single-thread OpenBLAS beside them;
#   2. bench/ort/side_by_side.py on the generated real-scale models
#      (bench/ort/real_scale_models.py: BERT-base, MiniLM, a Llama-7B MLP
#      block, timm's ResNet-18 and MobileNetV3-small at 224x224), median
#      latency beside ORT at 1 and 2 threads, outputs compared, peak memory.
# Writes gemm.md and the side-by-side table.md, chart.png and raw.json to
# --out (default build-python/bench-real-scale).
#   bench/ort/real_scale.sh [--out DIR] [--models bert_base,minilm,llama_mlp,resnet18,mobilenetv3] [--threads 1,2]
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=$root/build-python/bench-real-scale
models=bert_base,minilm,llama_mlp,resnet18,mobilenetv3
threads=1,2
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$(realpath -m "$2"); shift 2 ;;
    --models) models=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "real_scale.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
scripts/install-deps.sh
build=${SJ_BUILD_DIR:-build}
cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j "$(nproc)" --target bench_gemm >/dev/null
lscpu | sed -n 's/^Model name: *//p' | head -1 | sed 's/^/# CPU: /' | tee "$out/gemm.md"
"$build/bench_gemm" | tee -a "$out/gemm.md"
# the vision models are made by timm (torch's exporter) in the venv
extra=()
case ",$models," in *,resnet18,*|*,mobilenetv3,*) extra=(torch timm) ;; esac
venv=$(bench/ort/venv.sh matplotlib scikit-build-core "${extra[@]}")
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation \
    -C build-dir=build-python/bench-wheel .
cd build-python
"$venv/bin/python" "$root/bench/ort/side_by_side.py" --out "$out" --models "$models" \
    --generated "$models" --threads "$threads"
