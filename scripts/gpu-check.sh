#!/usr/bin/env bash
# The GPU check in two halves, for GPU machines that cannot build shapejit
# (no LLVM, SQLite, zstd, hiredis, protobuf-c or cmocka dev files there):
#
#   scripts/gpu-check.sh prepare [PACK]      on a CPU build machine (CI runs it)
#     Builds the runtime-only binary and GPU programs (static but for glibc;
#     libcmocka.so.0 rides along), precompiles for sm_90 with both emitters
#     (LLVM NVPTX, NVRTC) a store of every ONNX node test that passes on the
#     host, the example and test models at three buckets each (with the
#     interpreter's outputs) and a 4096 fp32 matmul, and packs it all into
#     PACK (default gpu-check/, git-ignored, at most 64 MiB). Prints what to
#     run on the GPU machine.
#
#   scripts/gpu-check.sh run OUT [PACK]       on the GPU machine, from the repo root
#     The `gpu` tests of the runtime-only build, then tools/gpu_check.c: ONNX
#     tests and model cases on the GPU per emitter against the interpreter,
#     eager and replayed (CUDA graphs), module loads from cubin and PTX, host
#     dispatch time eager vs replayed, kernel time per bucket, the matmul
#     against torch.matmul (TF32 off). Writes OUT/summary.md (and the raw
#     OUT/gpu-check.json, OUT/ctest.log). Exit 0 when every check passed.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
node_dir=/usr/share/libonnx-testdata/data/node
max_bytes=$((64 * 1024 * 1024))

prepare() {
  local pack=${1:-gpu-check} full=build rt=build-runtime-only jobs
  jobs=$(nproc)
  scripts/install-deps.sh
  if [ ! -x /usr/local/cuda/bin/ptxas ] && ! command -v nvcc >/dev/null; then
    echo "gpu-check prepare: needs the CUDA toolkit (NVRTC, nvJitLink) at /usr/local/cuda" >&2
    exit 1
  fi
  [ -f "$full/CMakeCache.txt" ] || cmake -S . -B "$full" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$full" -j "$jobs" --target shapejit_cli sj_gpu_pack >/dev/null
  [ -f "$rt/CMakeCache.txt" ] || cmake -S . -B "$rt" -DCMAKE_BUILD_TYPE=Release -DSJ_COMPILERS=OFF >/dev/null
  cmake --build "$rt" -j "$jobs" --target shapejit_cli test_runtime_only sj_gpu_check >/dev/null

  rm -rf "$pack"
  mkdir -p "$pack/bin" "$pack/lib" "$pack/onnx" "$pack/fixture"
  local t0=$SECONDS
  if [ -d "$node_dir" ]; then
    "$full/sj_gpu_pack" . "$pack" "$node_dir"
    while read -r name; do cp -r "$node_dir/$name" "$pack/onnx/"; done < "$pack/conformance.txt"
  else
    echo "gpu-check prepare: no ONNX node tests at $node_dir (Debian: libonnx-testdata): none packed"
    "$full/sj_gpu_pack" . "$pack"
  fi
  # The store test_runtime_only loads (as scripts/test-runtime-only.sh makes it).
  "$full/shapejit" precompile examples/models/ffn.sjg --ladder list:8,32 --target all \
    --store "$pack/fixture/store.db" --jobs "$jobs" >/dev/null
  "$full/shapejit" precompile examples/models/ffn.sjg --ladder list:8,32 --target nvptx --arch sm_80 \
    --store "$pack/fixture/store.db" --jobs "$jobs" >/dev/null
  for b in shapejit test_runtime_only sj_gpu_check; do strip -o "$pack/bin/$b" "$rt/$b"; done
  cp -L "$(ldconfig -p | awk '/libcmocka.so.0 / {print $NF; exit}')" "$pack/lib/libcmocka.so.0"
  # WAL files folded in: the pack is one file per store.
  for s in "$pack/store.db" "$pack/fixture/store.db"; do
    "$pack/bin/shapejit" store verify --store "$s" >/dev/null
  done
  rm -f "$pack"/*.db-wal "$pack"/*.db-shm "$pack"/fixture/*.db-wal "$pack"/fixture/*.db-shm

  # The GPU run's whole flow, through the host backend: the pack's expected
  # outputs hold, and the program and the report work, before a GPU sees them.
  cmake --build "$full" -j "$jobs" --target sj_gpu_check_host >/dev/null
  local self
  self=$(mktemp -d)
  local src=0
  "$full/sj_gpu_check_host" "$pack" "$self" || src=$?
  head -n 3 "$self/summary.txt"
  if [ "$src" -ne 0 ]; then
    cat "$self/summary.txt" >&2
    echo "gpu-check prepare: the pack fails on the host backend" >&2
    exit 1
  fi
  python3 scripts/gpu_check_report.py "$self" "$self" 0 /dev/null > "$self/summary.md" || true
  grep -q "## Host dispatch per request" "$self/summary.md" || {
    echo "gpu-check prepare: the report script failed on the host check's results" >&2; exit 1; }
  rm -rf "$self"

  local bytes
  bytes=$(du -sb "$pack" | cut -f1)
  echo "gpu-check prepare: $pack is $((bytes / 1024)) KiB (limit $((max_bytes / 1024)) KiB), packed in $((SECONDS - t0)) s:"
  echo "  $(grep -c . "$pack/conformance.txt") ONNX node tests, $(grep -c '^model' "$pack/manifest.tsv") models, runtime-only shapejit $(($(stat -c %s "$pack/bin/shapejit") / 1024)) KiB"
  if [ "$bytes" -gt "$max_bytes" ]; then
    echo "gpu-check prepare: $pack is over 64 MiB" >&2
    exit 1
  fi
  echo "On the GPU machine, from the repository root with $pack/ beside it (carry: [\"$pack\"]):"
  echo "  scripts/gpu-check.sh run OUT_DIR $pack"
}

run() {
  local out=${1:?usage: gpu-check.sh run OUT_DIR [PACK]} pack=${2:-gpu-check}
  pack=$(cd "$pack" && pwd)
  [ -x "$pack/bin/sj_gpu_check" ] || { echo "gpu-check run: no pack at $pack (run prepare on a build machine)" >&2; exit 1; }
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  export LD_LIBRARY_PATH="$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  local rc=0 t0=$SECONDS

  # The gpu ctest label: the runtime-only test program and the CLI on the GPU.
  mkdir -p "$work/ctest"
  local env="SJ_TEST_GPU_STORE=$pack/fixture/store.db;SJ_TEST_MODELS=$repo/examples/models;CMOCKA_MESSAGE_OUTPUT=stdout;LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  {
    echo "add_test(test_runtime_only \"$pack/bin/test_runtime_only\")"
    echo "set_tests_properties(test_runtime_only PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 120 ENVIRONMENT \"$env\")"
    for emit in llvm nvrtc; do
      echo "add_test(cli_run_cuda_$emit \"$pack/bin/shapejit\" run \"$repo/examples/models/ffn.sjg\" --rows 20 --backend cuda --emit $emit --ladder list:8,32 --store \"$pack/fixture/store.db\" --out \"$work/run_$emit\" --stats)"
      echo "set_tests_properties(cli_run_cuda_$emit PROPERTIES LABELS gpu TIMEOUT 60 PASS_REGULAR_EXPRESSION \"\\\"compiles\\\": 0,\")"
      echo "add_test(cli_serve_cuda_$emit \"$pack/bin/shapejit\" serve \"$repo/examples/models/ffn.sjg\" --backend cuda --emit $emit --ladder list:8,32 --store \"$pack/fixture/store.db\" --synthetic uniform:1:32:500:3 --stats)"
      echo "set_tests_properties(cli_serve_cuda_$emit PROPERTIES LABELS gpu TIMEOUT 60 PASS_REGULAR_EXPRESSION \"\\\"compiles\\\": 0,\")"
    done
  } > "$work/ctest/CTestTestfile.cmake"
  ctest --test-dir "$work/ctest" -L gpu --output-on-failure > "$out/ctest.log" 2>&1 || rc=1
  tail -n 4 "$out/ctest.log"

  mkdir -p "$work/matmul"
  local crc=0
  timeout 400 "$pack/bin/sj_gpu_check" "$pack" "$out" "$work/matmul" || crc=$?
  [ "$crc" -eq 0 ] || rc=1
  python3 scripts/gpu_check_report.py "$out" "$work/matmul" "$crc" "$out/ctest.log" > "$out/summary.md" || rc=1
  echo "gpu-check run: $((SECONDS - t0)) s"
  cat "$out/summary.md"
  return $rc
}

case "${1:-}" in
  prepare) shift; prepare "$@" ;;
  run) shift; run "$@" ;;
  *) echo "usage: scripts/gpu-check.sh prepare [PACK] | run OUT_DIR [PACK]" >&2; exit 2 ;;
esac
