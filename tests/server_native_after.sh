#!/usr/bin/env bash
# serve --listen --native-after: a server over a store holding only
# x86-64-v2 code serves from that level, recompiles a bucket for this CPU
# after N requests in it without a request failing, says so in /metrics
# (per-bucket CPU, recompiles), and leaves the native row in the store.
# usage: server_native_after.sh SHAPEJIT MODELS_DIR WORKDIR
set -uo pipefail
SJ=$1
MODELS=$2
W=$3
rm -rf "$W"
mkdir -p "$W"
PID=
trap '[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null' EXIT
. "$(dirname "$0")/http_server_start.sh"
die() {
  echo "FAIL: $*"
  cat "$W"/*.err 2>/dev/null
  exit 1
}

"$SJ" precompile "$MODELS/ffn.sjg" --ladder list:8,32 --cpu x86-64-v2 --store "$W/s.db" >/dev/null 2>"$W/precompile.err" ||
  die "precompile"
http_server_start server "$MODELS/ffn.sjg" --ladder list:8,32 --store "$W/s.db" --native-after 3 \
  --max-batch-delay-us 0
U="http://127.0.0.1:$PORT"
http_server_ready

metric() { curl -s "$U/metrics" | grep -E "^$1" || true; }
metric 'shapejit_bucket_cpu\{model="ffn",extent="8",cpu="x86-64-v2"\} 1$' | grep -q . ||
  die "before: bucket 8 should serve x86-64-v2: $(metric shapejit_bucket_cpu)"

row=$(python3 -c 'print(",".join(str((i % 7) * 0.25 - 0.5) for i in range(64)))')
body="{\"inputs\":[{\"name\":\"x\",\"shape\":[2,64],\"datatype\":\"FP32\",\"data\":[$row,$row]}]}"
for i in $(seq 1 12); do
  code=$(curl -s -m 20 -o "$W/body.$i" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    --data-binary "$body" "$U/v2/models/ffn/infer")
  [ "$code" = 200 ] || die "request $i: status $code: $(head -c 300 "$W/body.$i")"
  # The same inputs give the same outputs on the level's code and on this CPU's (to 1e-5).
  python3 - "$W/body.1" "$W/body.$i" <<'PY' || die "request $i: outputs differ from request 1"
import json, sys
a, b = (json.load(open(p))["outputs"][0]["data"] for p in sys.argv[1:3])
sys.exit(0 if len(a) == len(b) and all(abs(x - y) <= 1e-5 * max(1.0, abs(x)) for x, y in zip(a, b)) else 1)
PY
done
for _ in $(seq 1 300); do
  metric 'shapejit_native_recompiles_total\{model="ffn"\} 1$' | grep -q . && break
  sleep 0.1
done
metric 'shapejit_native_recompiles_total\{model="ffn"\} 1$' | grep -q . ||
  die "no recompile counted: $(metric 'shapejit_native')"
metric 'shapejit_native_recompile_failures_total\{model="ffn"\} 0$' | grep -q . || die "failures counted"
metric 'shapejit_bucket_cpu\{model="ffn",extent="8",cpu="x86-64-v2"\}' | grep -q . &&
  die "after: bucket 8 still on x86-64-v2"
metric 'shapejit_bucket_cpu\{model="ffn",extent="8",' | grep -q . || die "after: bucket 8 not listed"
kill -TERM "$PID"
wait "$PID" || die "server exit status $?"
PID=
# The native row beside the level's: two rows of extent 8.
[ "$("$SJ" store ls --store "$W/s.db" | grep -c '^[0-9a-f]* *8  opt')" = 2 ] ||
  die "store: $("$SJ" store ls --store "$W/s.db")"
echo "ok: served from x86-64-v2, recompiled for this CPU after 3 requests, stored"
