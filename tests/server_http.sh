#!/usr/bin/env bash
# serve --listen driven with curl on a free loopback port: every endpoint,
# every protocol error code (400 404 405 413 503), edge cases (malformed
# JSON, lying lengths, binary sizes that disagree with shapes, huge and
# negative shapes, unknown datatypes, slow and half-open connections, a
# request during shutdown), zero-stall promotion and the metrics that
# count it, and SIGTERM draining to exit 0.
# usage: server_http.sh SHAPEJIT MODELS_DIR WORKDIR
set -uo pipefail
. "$(dirname "$0")/http_test_prologue.sh"

. "$(dirname "$0")/http_test_requests.sh"

post() { # post NAME CODE REGEX JSON [CURL_ARGS...]
  local name=$1 code=$2 re=$3 body=$4
  shift 4
  req "$name" "$code" "$re" -X POST -H 'Content-Type: application/json' --data-binary "$body" "$@" \
    "http://127.0.0.1:$PORT/v2/models/ffn/infer"
}

row=$(python3 -c 'print(",".join(str((i % 7) * 0.25 - 0.5) for i in range(64)))')
rows2="$row,$row"

# ---------------------------------------------------------------- main server
start main "$MODELS/ffn.sjg" --ladder pow2:1:64 --store none --max-body-bytes 200000 --max-json-memory-bytes 1000000 \
  --idle-timeout-s 2 --request-timeout-s 4 --max-batch-delay-us 0 --max-connections 8
wait_ready
U="http://127.0.0.1:$PORT"
req live 200 '^\{\}$' "$U/v2/health/live"
req ready 200 '^\{\}$' "$U/v2/health/ready"
req server_metadata 200 '"binary_tensor_data"' "$U/v2"
req model_metadata 200 '"inputs":\[\{"name":"x","datatype":"FP32","shape":\[-1,64\]\}\]' "$U/v2/models/ffn"
req model_metadata_outputs 200 '"outputs":\[\{"name":"y","datatype":"FP32","shape":\[-1,64\]\}\]' "$U/v2/models/ffn"
req model_ready 200 '^\{\}$' "$U/v2/models/ffn/ready"
req model_version 200 '"name":"ffn"' "$U/v2/models/ffn/versions/1"
req unknown_version 404 '"error":"model .ffn. has no version .7.' "$U/v2/models/ffn/versions/7"
req unknown_model 404 '"error":"no model named .nope.' "$U/v2/models/nope"
req unknown_model_infer 404 '"error":"no model named .nope.' -X POST -d '{}' "$U/v2/models/nope/infer"
req unknown_path 404 '"error":"no such path' "$U/v3/whatever"
req get_infer 405 '"error":"GET is not allowed' "$U/v2/models/ffn/infer"
req post_ready 405 '"error":"POST is not allowed' -X POST -d '' "$U/v2/health/ready"

post json_infer 200 '"model_name":"ffn".*"outputs":\[\{"name":"y","datatype":"FP32","shape":\[2,64\],"data":\[' \
  "{\"id\":\"r1\",\"inputs\":[{\"name\":\"x\",\"shape\":[2,64],\"datatype\":\"FP32\",\"data\":[$rows2]}]}"
grep -q '"id":"r1"' "$W/body" || fail "json_infer: id not echoed"
post json_nested 200 '"shape":\[2,64\]' \
  "{\"inputs\":[{\"name\":\"x\",\"shape\":[2,64],\"datatype\":\"FP32\",\"data\":[[$row],[$row]]}]}"
post json_binary_output 200 '"binary_data_size":512' \
  "{\"inputs\":[{\"name\":\"x\",\"shape\":[2,64],\"datatype\":\"FP32\",\"data\":[$rows2]}],\"outputs\":[{\"name\":\"y\",\"parameters\":{\"binary_data\":true}}]}" \
  -D "$W/headers"
grep -qi '^Inference-Header-Content-Length: [0-9]' "$W/headers" || fail "binary output: no Inference-Header-Content-Length header"

# Binary input: the JSON header, then 2 x 64 float32 bytes.
hdr='{"inputs":[{"name":"x","shape":[2,64],"datatype":"FP32","parameters":{"binary_data_size":512}}],"parameters":{"binary_data_output":true}}'
{ printf '%s' "$hdr"; head -c 512 /dev/zero; } >"$W/bin_ok"
req binary_infer 200 '"binary_data_size":512' -X POST --data-binary @"$W/bin_ok" \
  -H "Inference-Header-Content-Length: ${#hdr}" -H 'Content-Type: application/octet-stream' "$U/v2/models/ffn/infer"
[ "$(stat -c %s "$W/body")" -gt 512 ] || fail "binary_infer: body has no binary output"
{ printf '%s' "$hdr"; head -c 500 /dev/zero; } >"$W/bin_short"
req binary_short 400 'binary data ends after 500 of its 512 bytes' -X POST --data-binary @"$W/bin_short" \
  -H "Inference-Header-Content-Length: ${#hdr}" "$U/v2/models/ffn/infer"
{ printf '%s' "$hdr"; head -c 600 /dev/zero; } >"$W/bin_long"
req binary_long 400 'holds 600 bytes of binary data after the JSON header.*add up to 512' -X POST \
  --data-binary @"$W/bin_long" -H "Inference-Header-Content-Length: ${#hdr}" "$U/v2/models/ffn/infer"
hdr2='{"inputs":[{"name":"x","shape":[2,64],"datatype":"FP32","parameters":{"binary_data_size":100}}]}'
{ printf '%s' "$hdr2"; head -c 100 /dev/zero; } >"$W/bin_disagree"
req binary_size_disagrees 400 'binary_data_size is 100 bytes, its shape and FP32 need 512' -X POST \
  --data-binary @"$W/bin_disagree" -H "Inference-Header-Content-Length: ${#hdr2}" "$U/v2/models/ffn/infer"
req header_length_past_body 400 'Inference-Header-Content-Length .99999. is not a length within' -X POST \
  --data-binary @"$W/bin_ok" -H "Inference-Header-Content-Length: 99999" "$U/v2/models/ffn/infer"
req header_length_garbage 400 'Inference-Header-Content-Length .12abc.' -X POST \
  --data-binary @"$W/bin_ok" -H "Inference-Header-Content-Length: 12abc" "$U/v2/models/ffn/infer"
req header_length_cuts_json 400 'malformed JSON' -X POST \
  --data-binary @"$W/bin_ok" -H "Inference-Header-Content-Length: 10" "$U/v2/models/ffn/infer"

post malformed_json 400 '"error":"malformed JSON at line 1' '{"inputs": [ {"name": "x",'
post not_object 400 'must be a JSON object' '[1,2,3]'
post deep_nesting 400 'malformed JSON' "$(python3 -c 'print("[" * 100000)')"
post nested_too_deep 400 'nested deeper than its shape' \
  '{"inputs":[{"name":"x","shape":[1,64],"datatype":"FP32","data":[[[[[[[[1]]]]]]]]}]}'
post bool_for_float 400 'element 0 is not a number' \
  '{"inputs":[{"name":"x","shape":[1,64],"datatype":"FP32","data":[true]}]}'
post no_inputs 400 "'inputs' must be an array" '{"outputs":[]}'
post missing_input 400 "input 'x' is missing" '{"inputs":[]}'
post unknown_input 400 "has no input 'z' \\(its inputs: x\\)" \
  '{"inputs":[{"name":"z","shape":[1,64],"datatype":"FP32","data":[]}]}'
post twice 400 "input 'x' given twice" \
  "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,64],\"datatype\":\"FP32\",\"data\":[$row]},{\"name\":\"x\",\"shape\":[1,64],\"datatype\":\"FP32\",\"data\":[$row]}]}"
post wrong_dtype 400 "datatype FP16, but the model takes FP32" \
  "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,64],\"datatype\":\"FP16\",\"data\":[$row]}]}"
post unknown_dtype 400 "unknown datatype 'FLOAT99'" \
  "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,64],\"datatype\":\"FLOAT99\",\"data\":[$row]}]}"
post wrong_rank 400 'shape has 3 dims, the model.s has 2' \
  "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,1,64],\"datatype\":\"FP32\",\"data\":[$row]}]}"
post wrong_inner 400 'shape\[1\] is 63, the model.s is 64' \
  '{"inputs":[{"name":"x","shape":[1,63],"datatype":"FP32","data":[]}]}'
post negative_shape 400 'shape\[0\] is negative' \
  '{"inputs":[{"name":"x","shape":[-2,64],"datatype":"FP32","data":[]}]}'
post zero_rows 400 'needs at least one row' '{"inputs":[{"name":"x","shape":[0,64],"datatype":"FP32","data":[]}]}'
post huge_shape 400 'outside every bucket \(at most 64\)' \
  '{"inputs":[{"name":"x","shape":[9223372036854775807,64],"datatype":"FP32","data":[]}]}'
post shape_not_int 400 'shape\[0\] is not an integer' \
  '{"inputs":[{"name":"x","shape":[1.5,64],"datatype":"FP32","data":[]}]}'
post too_few 400 'data holds 64 elements, its shape says 128' \
  "{\"inputs\":[{\"name\":\"x\",\"shape\":[2,64],\"datatype\":\"FP32\",\"data\":[$row]}]}"
post too_many 400 'data holds more than the 64 elements' \
  "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,64],\"datatype\":\"FP32\",\"data\":[$rows2]}]}"
post not_number 400 'element 0 is not a number' \
  '{"inputs":[{"name":"x","shape":[1,64],"datatype":"FP32","data":["a"]}]}'
post no_data 400 "no 'data' and no binary_data_size" '{"inputs":[{"name":"x","shape":[1,64],"datatype":"FP32"}]}'
post unknown_output 400 "has no output 'q'" \
  "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,64],\"datatype\":\"FP32\",\"data\":[$row]}],\"outputs\":[{\"name\":\"q\"}]}"

# 413: declared too large (refused before reading), and sent chunked.
head -c 300000 /dev/zero | tr '\0' ' ' >"$W/big"
req too_large 413 'above the limit of 200000 bytes' -X POST --data-binary @"$W/big" "$U/v2/models/ffn/infer"
req too_large_chunked 413 'above the limit of 200000 bytes' -X POST -H 'Transfer-Encoding: chunked' \
  --data-binary @"$W/big" "$U/v2/models/ffn/infer"

# Within the body limit, but too many JSON numbers to parse within the
# JSON memory budget (1 MB): 413, asking for binary data.
many=$(python3 -c 'print(",".join(["0"] * 60000))')
post json_memory 413 'more than the server.s 1000000 bytes of memory to parse; send large tensors as binary' \
  "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,64],\"datatype\":\"FP32\",\"data\":[$many]}]}"
post after_json_memory 200 '"shape":\[2,64\]' \
  "{\"inputs\":[{\"name\":\"x\",\"shape\":[2,64],\"datatype\":\"FP32\",\"data\":[$rows2]}]}"

# A Content-Length that promises more than is sent: the connection is
# closed after the idle timeout (2 s), and other clients are served meanwhile.
t0=$(date +%s%N)
curl -s -m 10 -o /dev/null -X POST -H 'Content-Length: 5000' --data-binary '{"inputs":[]}' \
  "$U/v2/models/ffn/infer" &
lying=$!
sleep 0.3
req served_during_lying_client 200 '^\{\}$' "$U/v2/health/live"
wait "$lying"
rc=$?
t1=$(date +%s%N)
ms=$(((t1 - t0) / 1000000))
if [ "$rc" = 0 ] || [ "$ms" -gt 8000 ]; then
  fail "lying Content-Length: curl rc $rc after $ms ms (expected a closed connection after ~2 s)"
else
  echo "ok: lying Content-Length closed after $ms ms (curl rc $rc)"
fi

# A slow sender (a byte a second keeps it past the idle timeout) is cut at
# the request timeout (4 s); half-open connections that never send are
# closed at the idle timeout; neither stalls other clients.
exec 7<>"/dev/tcp/127.0.0.1/$PORT"
printf 'POST /v2/models/ffn/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n' >&7
exec 8<>"/dev/tcp/127.0.0.1/$PORT"
for i in $(seq 1 7); do
  printf ' ' >&7 2>/dev/null || break
  [ "$i" = 2 ] && req served_during_slow_client 200 '^\{\}$' "$U/v2/health/live"
  sleep 1
done
# EOF (cat ends) means the server closed it; a timeout (124) means it did not.
timeout 3 cat <&7 >/dev/null
[ $? != 124 ] && echo "ok: slow sender cut" || fail "slow sender still connected after the request timeout"
timeout 3 cat <&8 >/dev/null
[ $? != 124 ] && echo "ok: half-open connection closed" || fail "half-open connection still open after the idle timeout"
exec 7>&- 8>&-
grep -q 'shapejit_http_connections_cut_total [1-9]' <(curl -s "$U/metrics") ||
  fail "metrics: cut connections not counted"

# Many connections at once: above --max-connections (8) some are turned
# away, and the server still answers afterwards.
burst=()
for i in $(seq 1 16); do
  curl -s -m 10 -o /dev/null "$U/v2/health/live" &
  burst+=($!)
done
wait "${burst[@]}"
req after_burst 200 '^\{\}$' "$U/v2/health/live"

req metrics 200 '^shapejit_requests_total\{model="ffn"\} [1-9]' "$U/metrics"
for m in shapejit_request_failures_total shapejit_request_duration_seconds_bucket shapejit_compiles_total \
  shapejit_compile_seconds_total shapejit_store_hits_total shapejit_remote_hits_total \
  shapejit_compile_stalls_total shapejit_promotions_total shapejit_buckets_ready \
  shapejit_bucket_runs_total shapejit_bucket_padded_rows_allocated_total \
  shapejit_bucket_padded_rows_computed_total shapejit_bucket_arena_bytes; do
  grep -q "^$m{" "$W/body" || fail "metrics: no $m"
done
# Host kernels run over the active rows: no padding row is ever computed.
! grep '^shapejit_bucket_padded_rows_computed_total{' "$W/body" | grep -qv ' 0$' ||
  fail "metrics: padded rows computed on the host backend"
grep -q '^shapejit_bucket_arena_bytes{model="ffn",extent="64"} [1-9]' "$W/body" ||
  fail "metrics: no arena bytes for bucket 64"
grep -q '^shapejit_buckets_ready{model="ffn"} 7$' "$W/body" || fail "metrics: ready=all should have 7 buckets ready"
grep -q '^# TYPE shapejit_request_duration_seconds histogram$' "$W/body" || fail "metrics: no histogram TYPE"

# Shutdown: a request in flight when SIGTERM comes (its body half sent) is
# still answered; a new request on a kept-alive connection gets 503; new
# connections are refused; then the process exits 0.
body="{\"inputs\":[{\"name\":\"x\",\"shape\":[1,64],\"datatype\":\"FP32\",\"data\":[$row]}]}"
exec 9<>"/dev/tcp/127.0.0.1/$PORT"
printf 'GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n' >&9
sleep 0.2
exec 7<>"/dev/tcp/127.0.0.1/$PORT"
printf 'POST /v2/models/ffn/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s' "${#body}" "${body:0:10}" >&7
sleep 0.3
kill -TERM "$PID"
sleep 0.3
curl -s -m 2 -o /dev/null "$U/v2/health/live" && fail "a new connection was accepted while draining"
printf 'GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n' >&9
resp9=$(timeout 5 cat <&9)
exec 9>&-
# Either answered 503 or closed unanswered: never served.
n9=$(grep -c '^HTTP/1.1' <<<"$resp9")
if [ "$n9" = 1 ] || { [ "$n9" = 2 ] && grep -q '^HTTP/1.1 503' <<<"$(grep '^HTTP/1.1' <<<"$resp9" | tail -1)" &&
  grep -q 'shutting down' <<<"$resp9"; }; then
  echo "ok: new request on a kept-alive connection during shutdown: $([ "$n9" = 1 ] && echo closed || echo 503)"
else
  fail "keep-alive during shutdown: $resp9"
fi
printf '%s' "${body:10}" >&7
resp=$(timeout 5 cat <&7)
exec 7>&-
grep -q '^HTTP/1.1 200' <<<"$resp" && grep -q '"model_name":"ffn"' <<<"$resp" &&
  echo "ok: request in flight at SIGTERM answered" || fail "request in flight at SIGTERM: $resp"
wait "$PID"
rc=$?
[ "$rc" = 0 ] && echo "ok: SIGTERM drained, exit 0" || fail "exit status after SIGTERM: $rc"
grep -q 'stopped' "$W/main.out" || fail "no 'stopped' line"

# --------------------------------------------- zero-stall promotion, and 503
# Ready at once: the first request (64 rows) compiles its bucket; a
# 3-row request then runs in it at once (a promotion) while bucket 4
# compiles in the background.
for mode in promote no-promote; do
  extra=()
  [ "$mode" = no-promote ] && extra=(--no-promote)
  start "$mode" "$MODELS/ffn.sjg" --ladder pow2:1:64 --store none --ready-when now "${extra[@]}"
  U="http://127.0.0.1:$PORT"
  big=$(python3 -c "print(','.join(['$row']*64))")
  post "${mode}_first" 200 '"shape":\[64,64\]' \
    "{\"inputs\":[{\"name\":\"x\",\"shape\":[64,64],\"datatype\":\"FP32\",\"data\":[$big]}]}"
  post "${mode}_small" 200 '"shape":\[3,64\]' \
    "{\"inputs\":[{\"name\":\"x\",\"shape\":[3,64],\"datatype\":\"FP32\",\"data\":[$row,$row,$row]}]}"
  cp "$W/body" "$W/$mode.small"
  curl -s "$U/metrics" >"$W/$mode.metrics"
  if [ "$mode" = promote ]; then
    grep -q '^shapejit_promotions_total{model="ffn"} 1$' "$W/$mode.metrics" &&
      grep -q '^shapejit_compile_stalls_total{model="ffn"} 1$' "$W/$mode.metrics" &&
      echo "ok: one promotion, one stall" || fail "promote metrics: $(grep -E 'promotions|stalls' "$W/$mode.metrics")"
    # The background compile makes bucket 4 ready (bounded wait).
    for _ in $(seq 1 100); do
      grep -q '^shapejit_buckets_ready{model="ffn"} 2$' <<<"$(curl -s "$U/metrics")" && break
      sleep 0.1
    done
    grep -q '^shapejit_buckets_ready{model="ffn"} 2$' <<<"$(curl -s "$U/metrics")" &&
      echo "ok: promoted request's bucket compiled in the background" ||
      fail "bucket 4 never compiled: $(curl -s "$U/metrics" | grep -E 'buckets|compiles|promotions|stalls'; cat "$W/$mode.err")"
  else
    grep -q '^shapejit_promotions_total{model="ffn"} 0$' "$W/$mode.metrics" &&
      grep -q '^shapejit_compile_stalls_total{model="ffn"} 2$' "$W/$mode.metrics" &&
      echo "ok: no promotion, two stalls" || fail "no-promote metrics: $(grep -E 'promotions|stalls' "$W/$mode.metrics")"
  fi
  kill -TERM "$PID"
  wait "$PID" || fail "$mode: exit status $?"
done
cmp -s "$W/promote.small" "$W/no-promote.small" && echo "ok: promoted result equals the unpromoted one" ||
  fail "promoted output differs from the unpromoted one"

# 503 while warming: every bucket of a wide ladder must be compiled first.
start warming "$MODELS/attention.sjg" --ladder pow2:1:4096 --store none --ready-when all
U="http://127.0.0.1:$PORT"
req not_ready 503 '"error":"not ready' "$U/v2/health/ready"
req model_not_ready 503 "is not ready: warming up" "$U/v2/models/attention/ready"
req infer_not_ready 503 "is not ready: warming up" -X POST -d '{}' "$U/v2/models/attention/infer"
wait_ready && echo "ok: ready after warm-up"
kill -INT "$PID"
wait "$PID" && echo "ok: SIGINT exit 0" || fail "SIGINT exit status $?"

# Usage errors.
"$SJ" serve --listen 127.0.0.1:99999 "$MODELS/ffn.sjg" 2>"$W/e1" && fail "bad port accepted"
grep -q 'PORT must be 0..65535' "$W/e1" || fail "bad port message: $(cat "$W/e1")"
"$SJ" serve --listen 0 2>"$W/e2" && fail "no model accepted"
grep -q 'give one MODEL or --model-repository DIR' "$W/e2" || fail "no model message: $(cat "$W/e2")"

echo "$failures failures"
[ "$failures" = 0 ]
