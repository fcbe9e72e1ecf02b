#!/usr/bin/env bash
# The runtime-only build (-DSJ_COMPILERS=OFF, the deploy artifact for GPU
# nodes) in its own build folder, with its own ctest run. A full build's
# shapejit first precompiles the store the runtime-only tests load
# (examples/models/ffn.sjg at list:8,32: host, nvptx and nvrtc for sm_90,
# nvptx for sm_80); without a GPU they load it up to the missing driver.
#   scripts/test-runtime-only.sh [FULL_BUILD_DIR]   (default build/, made if missing)
# Prints the binary's size and what ctest skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
full=${1:-build}
rt=build-runtime-only
jobs=$(nproc)

scripts/install-deps.sh
if [ ! -x "$full/shapejit" ]; then
  echo "test-runtime-only: no full build at $full: building its shapejit to precompile with" >&2
  cmake -S . -B "$full" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$full" -j "$jobs" --target shapejit_cli
fi

mkdir -p "$rt"
store="$PWD/$rt/fixture/store.db"
rm -rf "$rt/fixture"
mkdir -p "$rt/fixture"
"$full/shapejit" precompile examples/models/ffn.sjg --ladder list:8,32 --target all \
  --store "$store" --jobs "$jobs"
"$full/shapejit" precompile examples/models/ffn.sjg --ladder list:8,32 --target nvptx --arch sm_80 \
  --store "$store" --jobs "$jobs"

cmake -S . -B "$rt" -DCMAKE_BUILD_TYPE=Release -DSJ_COMPILERS=OFF \
  -DSJ_TEST_GPU_STORE="$store" >/dev/null
cmake --build "$rt" -j "$jobs" >/dev/null
size=$(stat -c %s "$rt/shapejit")
strip -o "$rt/shapejit.stripped" "$rt/shapejit"
stripped=$(stat -c %s "$rt/shapejit.stripped")
echo "runtime-only shapejit: $((size / 1024)) KiB ($((stripped / 1024)) KiB stripped), shared libraries: $(readelf -d "$rt/shapejit" | grep -o 'Shared library: \[[^]]*\]' | sed 's/Shared library: //' | tr '\n' ' ')"
rc=0
ctest --test-dir "$rt" --output-on-failure -j "$jobs" --timeout 120 || rc=$?
scripts/skip-report.sh "$rt"
exit $rc
