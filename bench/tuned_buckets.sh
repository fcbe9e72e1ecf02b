#!/usr/bin/env bash
# Tuned tight buckets against one bucket at the largest extent (issue 19):
# for each model, requests of N rows are served (one worker, one kernel
# thread as --tune times the schedules and as ORT runs beside it, warm
# store) on
#   tuned   pow2:1:E precompiled with --tune (a schedule timed per bucket)
#   single  list:E, untuned (every request runs in the one large bucket)
# where E is 1024, or the model's own bound (BERT's and GPT-2's 128
# positions; larger N are left out for them)
# and the median latency per request is printed side by side with the ratio
# single / tuned (above 1: the tuned ladder is faster), with what tuning
# cost per bucket (precompile --tune time minus untuned, over the buckets).
# Beside them, ONNX Runtime on the same models at the same N (one intra-op
# thread; bench/ort/ort_latency.py: median wall time per run less its Python
# call overhead), from the benchmark venv bench/ort/venv.sh makes (PyPI);
# -n leaves that column out. More ORT figures: bench/ort/side_by_side.sh.
#
#   bench/tuned_buckets.sh [-r REQUESTS] [-n] [SHAPEJIT]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
requests=200
ort=1
while getopts "r:n" o; do
  case $o in
    r) requests=$OPTARG ;;
    n) ort=0 ;;
    *) echo "usage: $0 [-r REQUESTS] [-n] [SHAPEJIT]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
sj=${1:-$here/build/shapejit}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sizes="1 7 64 300 1024"
real="$here/tests/data/real_models"
# name|model|flags|ORT name (bench/ort/side_by_side.py's)|largest extent
seq="--dynamic seq --dim batch=1"
models="mlp|$here/examples/models/mlp.sjg||mlp|1024
ffn|$here/examples/models/ffn.sjg||ffn|1024
attention|$here/examples/models/attention.sjg||attention|1024
encoder layer|$real/tel_postnorm_relu_dynamo/model.onnx|$seq|tel_postnorm_relu_dynamo|1024
mha+layernorm|$real/mha_residual_ln_dynamo/model.onnx|$seq|mha_residual_ln_dynamo|1024
bert|$real/bert_dynamo/model.onnx|$seq|bert_dynamo|128
gpt2|$real/gpt2_dynamo/model.onnx|$seq|gpt2_dynamo|128
llama|$real/llama_dynamo/model.onnx|$seq|llama_dynamo|1024"

seconds() { # COMMAND... -> wall seconds
  local t0 t1
  t0=$(date +%s.%N)
  "$@" > /dev/null 2>&1
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'
}
p50_us() { # MODEL FLAGS LADDER N TUNE -> median latency, us
  local m=$1 flags=$2 ladder=$3 n=$4 tune=$5
  # shellcheck disable=SC2086
  "$sj" serve "$m" $flags --ladder "$ladder" $tune --synthetic "uniform:$n:$n:$requests" --workers 1 \
    --threads 1 --store "$work/store.db" --stats 2> "$work/stats.json" > /dev/null
  python3 -c 'import json,sys; print("%.2f" % (1000 * json.loads(open(sys.argv[1]).read().splitlines()[-1])["p50_ms"]))' "$work/stats.json"
}

# ONNX Runtime's figures first, all models in one process: {name: {N: us}}.
echo '{}' > "$work/ort.json"
if [ "$ort" = 1 ]; then
  venv=$("$here/bench/ort/venv.sh")
  "$venv/bin/python" "$here/bench/ort/ort_latency.py" --sizes "${sizes// /,}" \
    --models "$(cut -d'|' -f4 <<< "$models" | paste -sd,)" > "$work/ort.json"
fi
ort_us() { # ORT-NAME N -> us, or - when not measured
  python3 -c 'import json,sys; v=json.load(open(sys.argv[1])).get(sys.argv[2], {}).get(sys.argv[3]); print("-" if v is None else v)' \
    "$work/ort.json" "$1" "$2"
}

printf "%-14s %6s %12s %12s %8s %10s %10s\n" model N "tuned (us)" "single (us)" "ratio" "ORT (us)" "ORT/tuned"
while IFS='|' read -r name model flags ort_name max; do
  rm -f "$work/store.db"
  # shellcheck disable=SC2086
  plain=$(seconds "$sj" precompile "$model" $flags --ladder "pow2:1:$max" --jobs 1 --store "$work/plain.db")
  # shellcheck disable=SC2086
  tuned=$(seconds "$sj" precompile "$model" $flags --ladder "pow2:1:$max" --tune --jobs 1 --store "$work/store.db")
  # shellcheck disable=SC2086
  "$sj" precompile "$model" $flags --ladder "list:$max" --store "$work/store.db" > /dev/null 2>&1
  buckets=$(awk -v m="$max" 'BEGIN { n = 0; for (e = 1; e <= m; e *= 2) n++; print n }')
  for n in $sizes; do
    [ "$n" -le "$max" ] || continue
    t=$(p50_us "$model" "$flags" "pow2:1:$max" "$n" --tune)
    s=$(p50_us "$model" "$flags" "list:$max" "$n" "")
    o=$(ort_us "$ort_name" "$n")
    printf "%-14s %6s %12s %12s %7.2fx %10s %10s\n" "$name" "$n" "$t" "$s" \
      "$(awk -v a="$s" -v b="$t" 'BEGIN { print a / b }')" "$o" \
      "$(awk -v a="$o" -v b="$t" 'BEGIN { if (a == "-") print "-"; else printf "%.2fx", a / b }')"
  done
  printf "%-14s tuning cost: %.3f s per bucket (%s s tuned vs %s s untuned, %s buckets)\n" "$name" \
    "$(awk -v a="$tuned" -v b="$plain" -v n="$buckets" 'BEGIN { print (a - b) / n }')" "$tuned" "$plain" "$buckets"
  rm -f "$work/plain.db"
done <<< "$models"
