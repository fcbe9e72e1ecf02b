#!/usr/bin/env bash
# The README's test command: install dependencies, build, run every test.
#   scripts/test.sh            release build in build/
#   scripts/test.sh --asan     AddressSanitizer + UBSan build in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."

build=build
flags=()
# SJ_BUILD_DIR=DIR builds there instead (CI builds once outside the source
# tree, so no test may find its files from the working directory).
if [ "${1:-}" = "--asan" ]; then
  build=build-asan
  # -O1, as the sanitizers' authors advise: every check stays, and the
  # instrumented library runs about 1.5-2x faster than at -O0 (test_threads
  # 116 -> 81 s, test_attention_fuse 84 -> 41 s on a 2-core VM).
  flags=(-DSJ_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_C_FLAGS_DEBUG=-g -O1")
  # allocator_may_return_null: out-of-memory paths are tested (huge --rows);
  # the library must see NULL from malloc there, as it would without ASan.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi

build=${SJ_BUILD_DIR:-$build}
# CMake refuses a build folder configured from another checkout with a bare
# "does not match" error; say which folder and what to do instead.
if [ -f "$build/CMakeCache.txt" ]; then
  home=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")
  if [ -n "$home" ] && [ "$(cd "$home" 2>/dev/null && pwd -P)" != "$(pwd -P)" ]; then
    echo "scripts/test.sh: build folder $build was configured from $home, not $(pwd -P);" \
         "remove it or choose another SJ_BUILD_DIR" >&2
    exit 1
  fi
fi
scripts/install-deps.sh
cmake -S . -B "$build" "${flags[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)"
rc=0
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" --timeout 900 || rc=$?
# Skips are counted in the log, never folded into the passes.
scripts/skip-report.sh "$build"
exit $rc
