#!/usr/bin/env bash
# Installs the Debian packages shapejit builds, tests and benchmarks with.
# Idempotent: checks what is there first, so a machine that already has
# everything runs no apt-get at all.
set -euo pipefail

packages=(
  cmake gcc make pkg-config
  llvm-19-dev            # LLVM C API, ORC LLJIT, NVPTX backend, llvm-c/blake3.h
  libsqlite3-dev         # the artifact store
  libzstd-dev            # artifact compression
  libcmocka-dev          # unit tests
  libhiredis-dev         # the Redis fleet tier
  redis-server           # a real Redis for the fleet-tier tests
  protobuf-c-compiler libprotobuf-c-dev  # ONNX loader code generated from onnx.proto
  libonnx-dev            # ships onnx.proto
  libmicrohttpd-dev      # serve --listen: the HTTP server
  libjansson-dev         # serve --listen: JSON
  curl python3-venv      # serve --listen tests: curl, and a venv for tritonclient
  python3-yaml           # deploy/ test: the KServe manifests parse
  libonnx-testdata       # ONNX backend node tests (conformance)
  libopenblas-dev        # matmul reference in the benchmarks
  gnuplot-nox            # benchmark charts
  clang libclang-rt-dev  # libFuzzer + ASan/UBSan runtimes for the fuzz targets (scripts/fuzz.sh)
  python3-dev python3-venv  # the Python package (pip install .) and its tests
  qemu-user              # the host compiler tests on an emulated CPU without AVX-512
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
