#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/fuzz_*.c) into build-fuzz/ with clang,
# ASan and UBSan, then runs each for SECONDS (default 45) from its committed
# seeds in fuzz/corpus/<target>/. Fails on any crash, leak, UB report or
# timeout; the input that did it is kept as build-fuzz/crashes/<target>-*.
#   scripts/fuzz.sh [SECONDS]
# FUZZ_TARGETS="fuzz_sjg fuzz_npy" limits the run to those targets.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-45}
case $seconds in '' | *[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, not '$seconds'" >&2; exit 2 ;; esac

scripts/install-deps.sh
CC=clang cmake -S . -B build-fuzz -DSJ_FUZZ=ON -DSJ_BUILD_TESTS=OFF -DSJ_WITH_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target fuzz_all

targets=${FUZZ_TARGETS:-$(cd fuzz && ls fuzz_*.c | sed 's/\.c$//')}
mkdir -p build-fuzz/crashes
failed=()
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for t in $targets; do
  # New inputs go to a scratch corpus, so a run never edits the committed one.
  work=build-fuzz/corpus/$t
  mkdir -p "$work"
  echo "fuzz.sh: $t for ${seconds}s" >&2
  if ! build-fuzz/"$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix=build-fuzz/crashes/"$t"- \
      "$work" fuzz/corpus/"$t" 2>build-fuzz/"$t".log; then
    tail -n 60 build-fuzz/"$t".log >&2
    failed+=("$t")
  fi
  grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|Done [0-9]+ runs)' build-fuzz/"$t".log >&2 || true
done
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz.sh: crashes in: ${failed[*]} (inputs in build-fuzz/crashes/)" >&2
  exit 1
fi
echo "fuzz.sh: every target ran ${seconds}s without a crash" >&2
