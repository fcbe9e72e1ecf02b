#!/usr/bin/env bash
# serve --listen --ladder fit:K (issue 19 item 4) driven with curl: requests
# of several sizes fill the window on the provisional ladder, the switch is
# awaited through /metrics (bounded), the same requests then run on the
# fitted buckets (checked per bucket in /metrics) with the same outputs,
# and a run above the fitted top stays on the provisional ladder. A model
# repository's config.json asks for fits too: K above the distinct sizes
# (the documented fallback: fewer buckets) and a window that never fills
# (no switch, said in the metrics, the metadata and at shutdown).
# usage: server_fit.sh SHAPEJIT MODELS_DIR WORKDIR
set -uo pipefail
. "$(dirname "$0")/http_test_prologue.sh"
ok() { echo "ok: $* ${SECONDS}s"; }

start() {
  http_server_start "$@"
  pids+=("$PID")
  http_server_ready || { fail "server $1 never became ready"; cat "$W/$1.err"; exit 1; }
  U="http://127.0.0.1:$PORT"
}

# infer ROWS MODEL OUTFILE: one request of ROWS rows of ffn's 64 features
# (values from ROWS, so a size always gets the same input); the body saved.
infer() {
  local rows=$1 model=$2 out=$3
  python3 -c '
import json, sys
n = int(sys.argv[1])
data = [((i * 7 + n) % 11) * 0.125 - 0.5 for i in range(64 * n)]
print(json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [n, 64], "data": data}]}))' "$rows" >"$W/req.json"
  local code
  code=$(curl -s -m 30 -o "$out" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    --data-binary @"$W/req.json" "$U/v2/models/$model/infer")
  [ "$code" = 200 ] || fail "infer $model $rows rows: status $code: $(head -c 300 "$out")"
}

metrics() { curl -s -m 20 "$U/metrics" >"$W/metrics"; }

# wait_metric REGEX: polls /metrics until a line matches (60 s at most:
# the fit compiles in the background on a machine that may be loaded).
wait_metric() {
  for _ in $(seq 1 600); do
    metrics
    grep -Eq -- "$1" "$W/metrics" && return 0
    sleep 0.1
  done
  return 1
}

# value NAME_AND_LABELS: its value in the last /metrics (0 when absent).
value() { awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }' "$W/metrics"; }

# has_metric REGEX: the last /metrics holds a line matching.
has_metric() { grep -Eq -- "$1" "$W/metrics" || fail "metrics: no line /$1/: $(grep ladder "$W/metrics" | head -20)"; }

# ---------------------------------------------------------------- fit:3 on one model
# Cost rows (what a bucket computes, E): the window 2 2 5 9 30 5 fits
# list:5,9,30 (59 rows against list:2,9,30's 61), none of them a pow2 extent
# of the provisional pow2:1:1024, so every fitted bucket is its own compile.
start fit "$MODELS/ffn.sjg" --ladder fit:3 --fit-window 6 --fit-cost rows --store none --max-batch-delay-us 0
sizes=(2 2 5 9 30 5)
metrics
has_metric 'shapejit_ladder_fit_info\{model="ffn",k="3",window="6",cost="rows",provisional="pow2:1:1024",fitted="",state="recording"\} 1'
has_metric '^shapejit_ladder_fit_switched\{model="ffn"\} 0$'
for i in "${!sizes[@]}"; do infer "${sizes[$i]}" ffn "$W/before.$i.json"; done
if wait_metric 'shapejit_ladder_fit_info\{model="ffn",.*state="switched"\} 1'; then
  ok "switch seen in /metrics"
else
  fail "no switch within 60 s: $(grep ladder_fit "$W/metrics")"
fi
has_metric 'shapejit_ladder_fit_info\{model="ffn",k="3",window="6",cost="rows",provisional="pow2:1:1024",fitted="list:5,9,30",state="switched"\} 1'
has_metric '^shapejit_ladder_fit_window_requests\{model="ffn"\} 6$'
has_metric '^shapejit_ladder_fit_compiles_total\{model="ffn"\} 3$'
grep -q "model 'ffn': ladder fit: switched to list:5,9,30 (3 buckets fitted to the first 6 requests" "$W/fit.err" &&
  ok "switch told on stderr" || fail "stderr does not tell the switch: $(cat "$W/fit.err")"
curl -s -m 20 "$U/v2/models/ffn" >"$W/meta.json"
grep -q '"ladder":"list:5,9,30","ladder_fit":{"k":3,"window":6,"seen":6,"cost":"rows","state":"switched","provisional":"pow2:1:1024","fitted":"list:5,9,30","buckets":3' "$W/meta.json" &&
  ok "metadata tells the fit" || fail "metadata: $(cat "$W/meta.json")"

# The same requests after the switch, and one of 40 rows above the fitted
# top. Counted from here: the last window request may (on a slow machine)
# have been routed after the switch already.
keys=('shapejit_ladder_fit_runs_total{model="ffn",ladder="fitted"}'
  'shapejit_ladder_fit_runs_total{model="ffn",ladder="provisional"}'
  'shapejit_bucket_runs_total{model="ffn",extent="5",ladder="fitted"}'
  'shapejit_bucket_runs_total{model="ffn",extent="9",ladder="fitted"}'
  'shapejit_bucket_runs_total{model="ffn",extent="30",ladder="fitted"}'
  'shapejit_bucket_runs_total{model="ffn",extent="32",ladder="provisional"}'
  'shapejit_bucket_runs_total{model="ffn",extent="64",ladder="provisional"}')
# Runs after the switch: 2 2 5 5 in bucket 5, 9 in 9, 30 in 30; 40 in the
# provisional's 64; nothing more in the provisional's 32.
want=(6 1 4 1 1 0 1)
declare -A base
for k in "${keys[@]}"; do base[$k]=$(value "$k"); done
for i in "${!sizes[@]}"; do infer "${sizes[$i]}" ffn "$W/after.$i.json"; done
infer 40 ffn "$W/above.json"
python3 - "$W" "${#sizes[@]}" <<'EOF' && ok "outputs equal before and after the switch" || fail "outputs differ across the switch"
import json, sys
w, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    a = json.load(open(f"{w}/before.{i}.json"))["outputs"][0]
    b = json.load(open(f"{w}/after.{i}.json"))["outputs"][0]
    assert a["shape"] == b["shape"], (i, a["shape"], b["shape"])
    for x, y in zip(a["data"], b["data"]):
        assert abs(x - y) <= 1e-5 * (1 + abs(x)), (i, x, y)
    assert len(a["data"]) == len(b["data"]) == a["shape"][0] * 64
EOF
metrics
for i in "${!keys[@]}"; do
  k=${keys[$i]}
  got=$(($(value "$k") - ${base[$k]}))
  [ "$got" = "${want[$i]}" ] && ok "$k +$got" || fail "$k: +$got after the switch, expected +${want[$i]}"
done
kill -TERM "$PID"
wait "$PID"
rc=$?
[ "$rc" = 0 ] && ok "fit server drained (exit 0)" || fail "fit server exited $rc"

# ---------------------------------------------------------------- config.json
# few: fit:3 over one size (K above the distinct sizes: one bucket);
# never: a window of 1000 that two requests do not fill.
mkdir -p "$W/repo/few" "$W/repo/never"
cp "$MODELS/ffn.sjg" "$W/repo/few/model.sjg"
cp "$MODELS/ffn.sjg" "$W/repo/never/model.sjg"
echo '{"ladder": "fit:3", "fit_window": 4, "fit_cost": "rows"}' >"$W/repo/few/config.json"
echo '{"ladder": "fit:2"}' >"$W/repo/never/config.json"
# measured: the cost model timed here in the background (interp: cheap).
mkdir -p "$W/repo/measured"
cp "$MODELS/ffn.sjg" "$W/repo/measured/model.sjg"
echo '{"ladder": "fit:2", "fit_window": 4, "fit_cost": "measured", "backend": "interp"}' >"$W/repo/measured/config.json"
start repo --model-repository "$W/repo" --ladder pow2:1:64 --fit-cost rows --store none --max-batch-delay-us 0
for _ in 1 2 3 4; do infer 7 few "$W/few.json"; done
for n in 3 9 16 5; do infer "$n" measured "$W/measured.json"; done
infer 3 never "$W/never.json"
infer 12 never "$W/never.json"
if wait_metric 'shapejit_ladder_fit_info\{model="few",.*state="switched"\} 1'; then
  ok "few: switched"
else
  fail "few: no switch within 60 s: $(grep ladder_fit "$W/metrics")"
fi
if wait_metric 'shapejit_ladder_fit_info\{model="measured",.*state="switched"\} 1'; then
  ok "measured: switched"
else
  fail "measured: no switch within 60 s: $(grep ladder_fit "$W/metrics"; cat "$W/repo.err")"
fi
has_metric 'shapejit_ladder_fit_info\{model="measured",k="2",window="4",cost="measured",provisional="pow2:1:64",fitted="list:([0-9]+,)?16",state="switched"\} 1'
has_metric 'shapejit_ladder_fit_info\{model="few",k="3",window="4",cost="rows",provisional="pow2:1:64",fitted="list:7",state="switched"\} 1'
has_metric 'shapejit_ladder_fit_info\{model="never",k="2",window="1000",cost="rows",provisional="pow2:1:64",fitted="",state="recording"\} 1'
has_metric '^shapejit_ladder_fit_window_requests\{model="never"\} 2$'
has_metric '^shapejit_ladder_fit_switched\{model="never"\} 0$'
curl -s -m 20 "$U/v2/models/few" >"$W/meta.json"
grep -q '"fitted":"list:7","buckets":1,' "$W/meta.json" && ok "few: one bucket fitted" ||
  fail "few metadata: $(cat "$W/meta.json")"
curl -s -m 20 "$U/v2/models/never" >"$W/meta.json"
grep -q '"ladder":"pow2:1:64","ladder_fit":{"k":2,"window":1000,"seen":2,"cost":"rows","state":"recording","provisional":"pow2:1:64","fitted":null' "$W/meta.json" &&
  ok "never: metadata says recording" || fail "never metadata: $(cat "$W/meta.json")"
kill -TERM "$PID"
wait "$PID"
rc=$?
[ "$rc" = 0 ] && ok "repository server drained (exit 0)" || fail "repository server exited $rc"
grep -q "model 'never': ladder fit: the window did not fill (2 of 1000 requests): nothing fitted, pow2:1:64 served every request" "$W/repo.err" &&
  ok "never: told at shutdown" || fail "never: not told at shutdown: $(cat "$W/repo.err")"

# ---------------------------------------------------------------- bad config.json
bad_config() { # NAME CONFIG REGEX
  mkdir -p "$W/bad_$1/m"
  cp "$MODELS/ffn.sjg" "$W/bad_$1/m/model.sjg"
  echo "$2" >"$W/bad_$1/m/config.json"
  timeout 60 "$SJ" serve --listen 127.0.0.1:0 --model-repository "$W/bad_$1" --store none >"$W/bad_$1.out" 2>"$W/bad_$1.err"
  local rc=$?
  if [ "$rc" != 1 ] || ! grep -Eq -- "$3" "$W/bad_$1.err"; then
    fail "bad config $1: exit $rc, stderr: $(cat "$W/bad_$1.err")"
  else
    ok "bad config $1"
  fi
}
bad_config k_not_int '{"ladder": "fit:abc"}' 'bad_k_not_int/m/config.json: "ladder": "fit:abc": fit:K needs K, a bucket count in 1..4096'
bad_config k_zero '{"ladder": "fit:0"}' 'config.json: "ladder": "fit:0": fit:K needs K'
bad_config window_zero '{"ladder": "fit:2", "fit_window": 0}' 'config.json: "fit_window" must be an integer in 1..10000000'
bad_config cost '{"ladder": "fit:2", "fit_cost": "guess"}' 'config.json: "fit_cost" must be "measured" or "rows"'
bad_config no_fit '{"ladder": "pow2:1:8", "fit_window": 5}' 'config.json: "fit_window" and "fit_cost" need "ladder": "fit:K"'

echo "$failures failures"
[ "$failures" = 0 ]
