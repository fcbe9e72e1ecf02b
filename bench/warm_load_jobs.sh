#!/usr/bin/env bash
# Warm load with parallel jobs: how fast `precompile` loads an already-stored
# ladder with --jobs 1 and --jobs 2, median of R runs each, side by side.
# A store that serialises its reads (lock held across decompression and
# verification) shows no gain from the second job; one that reads in
# parallel does. Each binary gets its own store, filled by one cold run.
#
#   bench/warm_load_jobs.sh [-m MODEL] [-l LADDER] [-r RUNS] SHAPEJIT [SHAPEJIT...]
#
# Defaults: the BERT test model, pow2:1:512, 9 runs. Several binaries (say a
# build before a change and one after) are timed in the same run, so their
# figures share the machine's state.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
model="$here/tests/data/real_models/bert_dynamo/model.onnx"
ladder="pow2:1:512"
runs=9
while getopts "m:l:r:" o; do
  case $o in
    m) model=$OPTARG ;;
    l) ladder=$OPTARG ;;
    r) runs=$OPTARG ;;
    *) echo "usage: $0 [-m MODEL] [-l LADDER] [-r RUNS] SHAPEJIT..." >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: $0 [-m MODEL] [-l LADDER] [-r RUNS] SHAPEJIT..." >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Seconds of one warm precompile (wall clock of the whole command).
warm() { # BIN STORE JOBS
  local t0 t1
  t0=$(date +%s.%N)
  "$1" precompile "$model" --ladder "$ladder" --store "$2" --jobs "$3" > "$work/out" 2>&1 ||
    { cat "$work/out" >&2; exit 1; }
  grep -q ": 0 compiled" "$work/out" || { echo "not warm:" >&2; cat "$work/out" >&2; exit 1; }
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", b - a }' 
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

printf "model %s, ladder %s, %d runs each\n" "$(basename "$(dirname "$model")")/$(basename "$model")" "$ladder" "$runs"
printf "%-40s %12s %12s %10s\n" binary "jobs 1 (s)" "jobs 2 (s)" "speed-up"
i=0
for bin in "$@"; do
  i=$((i + 1))
  store="$work/store$i.db"
  "$bin" precompile "$model" --ladder "$ladder" --store "$store" --jobs 2 > /dev/null 2>&1
  : > "$work/j1"; : > "$work/j2"
  for _ in $(seq "$runs"); do # interleaved, so drift hits both alike
    warm "$bin" "$store" 1 >> "$work/j1"
    warm "$bin" "$store" 2 >> "$work/j2"
  done
  m1=$(median < "$work/j1"); m2=$(median < "$work/j2")
  printf "%-40s %12.3f %12.3f %9.2fx\n" "$bin" "$m1" "$m2" "$(awk -v a="$m1" -v b="$m2" 'BEGIN { print a / b }')"
done
