#!/usr/bin/env bash
# `shapejit ladder fit` against pow2 with as many buckets, expected and
# measured: for a lognormal and a bimodal trace, the fitted ladder and pow2
# are each precompiled into one store, then the trace is served on each
# (one worker, warm) and the mean latency per request is set beside the
# cost model's expectation.
#
#   bench/ladder_fit.sh [-m MODEL] [-k BUCKETS] [-n REQUESTS] [SHAPEJIT]
#
# Defaults: examples/models/attention.sjg, 5 buckets, 2000 requests, the
# shapejit of build/. Needs python3 (to read serve's --stats JSON).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
model="$here/examples/models/attention.sjg"
k=5
n=2000
while getopts "m:k:n:" o; do
  case $o in
    m) model=$OPTARG ;;
    k) k=$OPTARG ;;
    n) n=$OPTARG ;;
    *) echo "usage: $0 [-m MODEL] [-k BUCKETS] [-n REQUESTS] [SHAPEJIT]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
sj=${1:-$here/build/shapejit}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The two traces: lognormal around 64 (to 1024), and two modes (short
# prompts 1..16, long documents 400..512), both seeded.
"$sj" serve --help > /dev/null
awk -v n="$n" 'BEGIN { srand(1); for (i = 0; i < n; i++) print (i % 2) ? 1 + int(rand() * 16) : 400 + int(rand() * 113) }' > "$work/bimodal.txt"
awk -v n="$n" 'BEGIN { srand(2); for (i = 0; i < n; i++) { do { u = rand() } while (u == 0);
  z = sqrt(-2 * log(u)) * cos(6.283185307179586 * rand()); v = int(64 * exp(z) + 0.5);
  print (v < 1) ? 1 : (v > 1024 ? 1024 : v) } }' > "$work/lognormal.txt"

mean_ms() { # LADDER TRACE -> the mean latency of serving TRACE, ms
  "$sj" precompile "$model" --ladder "$1" --store "$work/store.db" > /dev/null 2>&1
  "$sj" serve "$model" --trace "$2" --ladder "$1" --store "$work/store.db" --workers 1 --stats \
    2> "$work/stats.json" > /dev/null
  python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["mean_ms"])' "$work/stats.json"
}

printf "model %s, %s requests per trace, %s buckets\n" "$(basename "$model")" "$n" "$k"
printf "%-10s %-8s %-40s %14s %14s\n" trace ladder spec "expected (us)" "measured (us)"
for trace in lognormal bimodal; do
  "$sj" ladder fit "$model" --trace "$work/$trace.txt" --buckets "$k" --store "$work/store.db" > "$work/fit.txt"
  for which in fitted pow2; do
    line=$(grep "^$which " "$work/fit.txt")
    spec=$(echo "$line" | awk '{print $2}')
    expected=$(echo "$line" | sed -E 's/.*expected ([0-9.e+]+) us.*/\1/')
    measured=$(awk -v m="$(mean_ms "$spec" "$work/$trace.txt")" 'BEGIN { printf "%.2f", m * 1000 }')
    printf "%-10s %-8s %-40s %14s %14s\n" "$trace" "$which" "$spec" "$expected" "$measured"
  done
  grep "^cost model" "$work/fit.txt" | sed 's/^/  /'
done
