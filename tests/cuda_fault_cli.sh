#!/usr/bin/env bash
# The CUDA backend's command line on the fake driver (tests/fake_cuda/):
# --cuda-driver opens it for run and serve --listen; a kernel that faults on
# the device (FAKE_CUDA_FAULT, read by the fake) fails its request with the
# kernel's name and the driver's error while the server goes on serving the
# other bucket, and /metrics counts the reset. Kernels do not run on the
# fake: outputs are not checked, only what happens around them.
# usage: cuda_fault_cli.sh SHAPEJIT FAKE_DRIVER MODELS_DIR WORKDIR
set -uo pipefail
SJ=$1
FAKE=$2
MODELS=$3
W=$4
rm -rf "$W"
mkdir -p "$W"
failures=0
PID=
trap '[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null' EXIT
. "$(dirname "$0")/http_server_start.sh"

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# run: a bucket compiled, loaded on the fake GPU, run; the stats say no reset
(cd "$W" && "$SJ" run "$MODELS/ffn.sjg" --backend cuda --cuda-driver "$FAKE" --rows 5 \
  --ladder list:8,32 --store none --stats >run.out 2>run.err)
rc=$?
[ $rc = 0 ] || fail "run on the fake driver: exit $rc: $(cat "$W/run.err")"
grep -q '"device_lost": 0, "device_resets": 0, "reloads": 0' "$W/run.err" ||
  fail "run --stats lacks the device counters: $(cat "$W/run.err")"

"$SJ" run "$MODELS/ffn.sjg" --backend host --cuda-driver "$FAKE" --rows 5 --store none >/dev/null 2>"$W/usage.err"
rc=$?
[ $rc = 2 ] && grep -q -- '--cuda-driver is for --backend cuda' "$W/usage.err" ||
  fail "--cuda-driver with --backend host: exit $rc: $(cat "$W/usage.err")"

"$SJ" run "$MODELS/ffn.sjg" --backend cuda --cuda-driver "$W/no-such-driver.so" --rows 5 --store none \
  >/dev/null 2>"$W/missing.err"
rc=$?
[ $rc = 1 ] && grep -q 'no-such-driver.so' "$W/missing.err" ||
  fail "a missing --cuda-driver: exit $rc: $(cat "$W/missing.err")"

# serve --listen: the first launch at 9 rows or more faults (ILLEGAL_ADDRESS =
# 700): bucket 32's first kernel, never bucket 8's
FAKE_CUDA_FAULT='*:700:9' http_server_start serve "$MODELS/ffn.sjg" --backend cuda \
  --cuda-driver "$FAKE" --ladder list:8,32 --store none --max-batch-delay-us 0
http_server_ready
row=$(python3 -c 'print(",".join(str((i % 7) * 0.25 - 0.5) for i in range(64)))')
infer() { # infer NAME ROWS CODE REGEX
  local data=$row
  for _ in $(seq 2 "$2"); do data="$data,$row"; done
  local got
  got=$(curl -s -m 60 -o "$W/body" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    --data-binary "{\"inputs\":[{\"name\":\"x\",\"shape\":[$2,64],\"datatype\":\"FP32\",\"data\":[$data]}]}" \
    "http://127.0.0.1:$PORT/v2/models/ffn/infer")
  if [ "$got" != "$3" ]; then
    fail "$1: status $got, expected $3: $(head -c 600 "$W/body")"
  elif ! grep -Eq -- "$4" "$W/body"; then
    fail "$1: body does not match /$4/: $(head -c 600 "$W/body")"
  else
    echo "ok: $1 ($got)"
  fi
}
infer bucket_8 2 200 '"shape":\[2,64\]'
infer bucket_32_faults 20 500 'kernel sjk_[0-9a-f]* \(launch #0 of bucket 32\).*CUDA_ERROR_ILLEGAL_ADDRESS'
infer bucket_8_after 3 200 '"shape":\[3,64\]'
infer bucket_32_again 17 500 'device lost.*CUDA_ERROR_ILLEGAL_ADDRESS'
infer bucket_8_still 8 200 '"shape":\[8,64\]'
curl -s -m 20 "http://127.0.0.1:$PORT/metrics" >"$W/metrics"
# two faulting requests, each reset twice (the fault, then the rerun that names its kernel)
for want in 'shapejit_device_lost_total{model="ffn"} 2' 'shapejit_device_resets_total{model="ffn"} 4' \
  'shapejit_compiles_total{model="ffn"} 2'; do
  grep -qF "$want" "$W/metrics" || fail "metrics lack '$want': $(grep -E 'device|reload|compiles' "$W/metrics")"
done
grep -E '^shapejit_bucket_reloads_total\{model="ffn"\} [1-9]' -q "$W/metrics" ||
  fail "metrics count no reloads: $(grep reload "$W/metrics")"
kill -TERM "$PID"
wait "$PID"
rc=$?
PID=
[ $rc = 0 ] || fail "serve --listen exit $rc after SIGTERM: $(tail -5 "$W/serve.err")"

if [ $failures -gt 0 ]; then
  echo "$failures failed"
  exit 1
fi
echo "all passed"
