#!/usr/bin/env bash
# The README's main job: install dependencies, build quietly, then serve a
# stream of requests of varying size through the bucketed cache on the host
# backend (LLVM, this CPU), twice against one store:
#   cold: an empty store, so every bucket the stream touches is compiled;
#   warm: a new process over the same store, which compiles nothing and
#         loads each bucket from the store instead.
# and print the two side by side.
#   scripts/demo.sh [--requests N]     (default 2000)
set -euo pipefail
cd "$(dirname "$0")/.."

requests=2000
if [ "${1:-}" = "--requests" ] && [ -n "${2:-}" ]; then requests=$2; fi

scripts/install-deps.sh
start=$(date +%s)
if [ ! -f build/CMakeCache.txt ]; then
  echo "demo: configuring build/ (RelWithDebInfo, the project's default)"
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
echo "demo: building the shapejit CLI (cmake --build build -j2) ..."
log=$(mktemp "${TMPDIR:-/tmp}/shapejit-build.XXXXXX")
if ! cmake --build build -j2 --target shapejit_cli >"$log" 2>&1; then
  tail -n 40 "$log"
  echo "demo: build failed (full log: $log)" >&2
  exit 1
fi
rm -f "$log"
echo "demo: built in $(( $(date +%s) - start )) s"

work=$(mktemp -d "${TMPDIR:-/tmp}/shapejit-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT
store="$work/store.db"
model=examples/models/ffn.sjg
stream="lognormal:48:1:512:$requests:7"
cmd=(build/shapejit serve "$model" --synthetic "$stream" --workers 2 --backend host --store "$store" --stats)

echo
echo "demo: the model: $model (transformer FFN block, x [N, 64] -> y [N, 64])"
echo "demo: $requests requests, N lognormal around 48 (max 512), 2 workers, ladder pow2:1:512"
echo "demo: store $store (deleted at exit)"
echo
echo "demo: \$ ${cmd[*]}"
"${cmd[@]}" 2>"$work/cold.json" | tee "$work/cold.txt"
echo
echo "demo: again, a fresh process over the same store"
"${cmd[@]}" 2>"$work/warm.json" | tee "$work/warm.txt"

# One figure from the JSON object serve prints with --stats.
field() { grep -o "\"$1\": [^,}]*" "$2" | head -n 1 | sed 's/^[^:]*: //'; }

echo
printf '%-30s %14s %14s\n' "" "cold store" "warm store"
row() { printf '%-30s %14s %14s\n' "$1" "$(field "$2" "$work/cold.json")" "$(field "$2" "$work/warm.json")"; }
row "time to first result (ms)" first_result_ms
row "latency p50 (ms)" p50_ms
row "latency p99 (ms)" p99_ms
row "throughput (requests/s)" throughput_rps
row "compiles" compiles
row "compile stalls (requests)" compile_stalls
row "store hits (buckets)" store_hits
row "wall time (s)" wall_s
echo
warm_compiles=$(field compiles "$work/warm.json")
if [ "$warm_compiles" != "0" ]; then
  echo "demo: the warm run compiled $warm_compiles buckets; expected none" >&2
  exit 1
fi
echo "demo: the warm process compiled nothing: every bucket came from the store."
echo "demo: done in $(( $(date +%s) - start )) s"
