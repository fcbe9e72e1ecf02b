#!/usr/bin/env bash
# serve --listen under the limits issue 29's campaign broke: values a
# client sends that FP32 or JSON cannot carry (400 naming the input or
# output, never 500), response bodies and request JSON bounded together
# by --max-json-memory-bytes (alone above it: 4xx naming the flag; while
# others hold it: 503), slow headers cut by --header-timeout-s so they
# cannot pin every connection, SIGTERM reaching a parallel warm-up, and a
# store that fills told once on stderr and counted in /metrics.
# Waits poll for the state they need; the only clocks are hang guards.
# usage: server_limits.sh SHAPEJIT MODELS_DIR WORKDIR [SECTION...]
set -uo pipefail
. "$(dirname "$0")/http_test_prologue.sh"
shift 3
sections=("$@")
[ ${#sections[@]} = 0 ] && sections=(values memory headers sigterm store weights)

. "$(dirname "$0")/http_test_requests.sh"

# metric NAME: its value in /metrics now (empty when absent).
metric() { curl -s -m 10 "$U/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

# poll_metric NAME AWK_CONDITION: waits (hang guard 30 s) until NAME's value satisfies it.
poll_metric() {
  for _ in $(seq 1 300); do
    v=$(metric "$1")
    [ -n "$v" ] && awk -v v="$v" "BEGIN { exit !($2) }" && return 0
    sleep 0.1
  done
  return 1
}

# infer NAME CODE BODY_REGEX MODEL JSON [CURL_ARGS...]: POST JSON to MODEL's infer.
infer() {
  local name=$1 code=$2 re=$3 model=$4 body=$5
  shift 5
  req "$name" "$code" "$re" -X POST --data-binary "$body" "$@" "$U/v2/models/$model/infer"
}

has() { for s in "${sections[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }

# --------------------------------------------------- values: 400, never 500
if has values; then
  serve values "$MODELS/ffn.sjg" --ladder list:4 --store none --max-batch-delay-us 0
  five=$(metric 'shapejit_http_responses_total{class="5xx"}') # the 503s while warming
  zeros=$(python3 -c 'print(",".join(["0"] * 63))')
  # 1e39 is a finite JSON number, but no float32: the client's value is wrong.
  infer fp32_out_of_range 400 "input 'x': element 0 \\(1e\\+39\\) is outside FP32's range" ffn \
    "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,64],\"datatype\":\"FP32\",\"data\":[1e39,$zeros]}]}"
  infer fp32_negative_out_of_range 400 "input 'x': element 1 \\(-4e\\+38\\) is outside FP32's range" ffn \
    "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,64],\"datatype\":\"FP32\",\"data\":[0,-4e38${zeros:1}]}]}"
  # A NaN in binary data is an IEEE value a model may take: it runs. Its
  # outputs then hold NaN, which binary data carries (200) and JSON cannot
  # (400 naming the output and the input the NaN came from).
  hdr='{"inputs":[{"name":"x","shape":[1,64],"datatype":"FP32","parameters":{"binary_data_size":256}}]}'
  { printf '%s' "$hdr"; printf '\x00\x00\xc0\x7f'; head -c 252 /dev/zero; } >"$W/nan_in"
  infer nan_binary_json_out 400 "output 'y': element 0 is nan, which JSON cannot carry \\(input 'x' holds nan at element 0\\); ask for the output as binary data" ffn \
    @"$W/nan_in" -H "Inference-Header-Content-Length: ${#hdr}"
  hdr2='{"inputs":[{"name":"x","shape":[1,64],"datatype":"FP32","parameters":{"binary_data_size":256}}],"parameters":{"binary_data_output":true}}'
  { printf '%s' "$hdr2"; printf '\x00\x00\xc0\x7f'; head -c 252 /dev/zero; } >"$W/nan_in2"
  infer nan_binary_binary_out 200 '"binary_data_size":256' ffn @"$W/nan_in2" \
    -H "Inference-Header-Content-Length: ${#hdr2}"
  [ "$(metric 'shapejit_http_responses_total{class="5xx"}')" = "$five" ] ||
    fail "values: a 5xx was answered: $(curl -s "$U/metrics" | grep 'class="5xx"')"
  kill -TERM "$PID"
  wait "$PID" || fail "values: exit status $?"
fi

# ------------------------------------- memory: one budget for every request
if has memory; then
  # A [N, 65536] output: 128 rows as JSON text is ~34 MB (the campaign's
  # request: 2 KB in, 106 MB out).
  cat >"$W/wide.sjg" <<'EOF'
graph wide(N) {
  input x: [N, 8]
  param w: [8, 65536] = fill(1)
  y = matmul(x, w)
  output y
}
EOF
  serve memory "$W/wide.sjg" --ladder list:128 --store none --max-batch-delay-us 0 \
    --max-json-memory-bytes 16000000 --idle-timeout-s 60
  rows128=$(python3 -c 'print(",".join(["1"] * (128 * 8)))')
  infer response_over_budget 400 "the response needs more than the server's 16000000 bytes of memory to write; ask for large outputs as binary data.*--max-json-memory-bytes" wide \
    "{\"inputs\":[{\"name\":\"x\",\"shape\":[128,8],\"datatype\":\"FP32\",\"data\":[$rows128]}]}"
  infer response_within_budget 200 '"shape":\[1,65536\],"data":\[8.0,8.0,' wide \
    '{"inputs":[{"name":"x","shape":[1,8],"datatype":"FP32","data":[1,1,1,1,1,1,1,1]}]}'
  poll_metric shapejit_json_memory_bytes 'v == 0' || fail "memory: the budget is not given back: $(metric shapejit_json_memory_bytes)"

  # Process-wide: a client that does not read its 12.6 MB binary response
  # holds it (the sender blocks once the socket buffers are full); a second
  # such request meanwhile gets 503 (the 16 MB budget is held), and once
  # the first hangs up it is served.
  rows48=$(python3 -c 'print(",".join(["1"] * (48 * 8)))')
  body48="{\"inputs\":[{\"name\":\"x\",\"shape\":[48,8],\"datatype\":\"FP32\",\"data\":[$rows48]}],\"parameters\":{\"binary_data_output\":true}}"
  exec 7<>"/dev/tcp/127.0.0.1/$PORT"
  printf 'POST /v2/models/wide/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s' "${#body48}" "$body48" >&7
  if poll_metric shapejit_json_memory_bytes 'v >= 12000000'; then
    echo "ok: an unread response holds $(metric shapejit_json_memory_bytes) bytes of the budget"
  else
    fail "memory: an unread response holds $(metric shapejit_json_memory_bytes) bytes, expected >= 12000000"
  fi
  infer budget_held_by_others 503 "JSON memory \\(16000000 bytes, --max-json-memory-bytes\\) is held by other requests now; retry" wide \
    "$body48"
  exec 7>&-
  poll_metric shapejit_json_memory_bytes 'v == 0' || fail "memory: not given back after the client hung up"
  infer budget_free_again 200 '"binary_data_size":12582912' wide \
    "$body48"
  grep -q '^shapejit_json_memory_refused_total{reason="busy"} 1$' <(curl -s "$U/metrics") ||
    fail "memory: busy refusals not counted: $(curl -s "$U/metrics" | grep refused)"

  # Request JSON counted as allocated: 20000 integers cost ~1.1 MB in
  # malloc'd blocks, past a 1 MB budget, though jansson asks for less.
  kill -TERM "$PID"
  wait "$PID" || fail "memory: exit status $?"
  serve memory2 "$MODELS/ffn.sjg" --ladder list:4 --store none --max-batch-delay-us 0 --max-json-memory-bytes 1000000
  many=$(python3 -c 'print(",".join(["0"] * 20000))')
  infer json_counted_as_allocated 413 "more than the server's 1000000 bytes of memory to parse; send large tensors as binary" ffn \
    "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,64],\"datatype\":\"FP32\",\"data\":[$many]}]}"
  poll_metric shapejit_json_memory_bytes 'v == 0' || fail "memory: parse memory not given back"
  kill -TERM "$PID"
  wait "$PID" || fail "memory2: exit status $?"
fi

# --------------------------- headers: slow headers cannot pin the server
if has headers; then
  # As many slow clients as there are connection slots (4), each sending a
  # header line every 0.2 s (which resets the idle timeout): before their
  # header deadline (1 s) runs out a new client is turned away; after it,
  # they are cut and a new client is served. The slow clients would go on
  # for 30 s, past the 10 s hang guard of the wait for a served client.
  serve headers "$MODELS/ffn.sjg" --ladder list:4 --store none --max-batch-delay-us 0 \
    --max-connections 4 --header-timeout-s 1 --idle-timeout-s 30 --request-timeout-s 30
  slow=()
  for i in 1 2 3 4; do
    (
      exec 3<>"/dev/tcp/127.0.0.1/$PORT" || exit 0
      printf 'GET /v2/health/live HTTP/1.1\r\n' >&3 || exit 0
      for j in $(seq 1 150); do
        printf 'X-Slow-%d: %d\r\n' "$j" "$j" >&3 2>/dev/null || { echo cut >"$W/slow$i"; exit 0; }
        sleep 0.2
      done
      echo "never cut" >"$W/slow$i"
    ) &
    slow+=($!)
  done
  served=
  for _ in $(seq 1 100); do
    if [ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' "$U/v2/health/live")" = 200 ]; then
      served=1
      break
    fi
    sleep 0.1
  done
  [ -n "$served" ] && echo "ok: a client is served while slow-header clients hold every slot" ||
    fail "headers: no client served while 4 slow-header clients held the 4 slots"
  wait "${slow[@]}"
  for i in 1 2 3 4; do
    [ "$(cat "$W/slow$i" 2>/dev/null)" = cut ] || fail "headers: slow client $i: $(cat "$W/slow$i" 2>/dev/null)"
  done
  poll_metric shapejit_http_connections_cut_total 'v >= 4' ||
    fail "headers: cut connections not counted: $(metric shapejit_http_connections_cut_total)"
  # A kept-alive connection's next request is not cut while it is quick.
  curl -s -m 10 -o /dev/null -o /dev/null -w '%{http_code}\n' "$U/v2/health/live" "$U/v2/health/ready" >"$W/keepalive"
  [ "$(tr -d '\n' <"$W/keepalive")" = 200200 ] || fail "headers: keep-alive requests: $(cat "$W/keepalive")"
  kill -TERM "$PID"
  wait "$PID" || fail "headers: exit status $?"
fi

# ------------------------ sigterm: a stop reaches a parallel warm-up
if has sigterm; then
  # 108 buckets on 2 warm-up threads; SIGTERM once two are ready. Each
  # thread finishes the bucket in hand at most, so the store holds far
  # fewer than 108 when the process has exited (it held all 108 before:
  # the parallel warm-up did not look at the stop).
  ladder="list:$(seq -s, 1 108)"
  start sigterm "$MODELS/ffn.sjg" --ladder "$ladder" --store "$W/warm.db" --jobs 2 --max-batch-delay-us 0
  U="http://127.0.0.1:$PORT"
  poll_metric 'shapejit_buckets_ready{model="ffn"}' 'v >= 2' || fail "sigterm: no bucket became ready"
  kill -TERM "$PID"
  wait "$PID" || fail "sigterm: exit status $?"
  grep -q 'stopped' "$W/sigterm.out" || fail "sigterm: no 'stopped' line"
  stored=$("$SJ" store ls --store "$W/warm.db" | grep -c ' fmt ')
  if [ "$stored" -lt 100 ]; then
    echo "ok: SIGTERM stopped the parallel warm-up ($stored of 108 buckets stored)"
  else
    fail "sigterm: the warm-up went on after SIGTERM: $stored of 108 buckets stored"
  fi
fi

# ------------------------------------ store: a full store is told, once
if has store; then
  # A file-size limit makes the store's commits fail part way, as a full
  # disk does (the server ignores SIGXFSZ, as the shell does here): the
  # buckets still serve from memory; stderr says so once, /metrics counts.
  trap '' XFSZ
  ulimit -S -f 100
  start store "$MODELS/mlp.sjg" --ladder pow2:1:1024 --store "$W/full.db" --jobs 1 --max-batch-delay-us 0
  ulimit -S -f unlimited
  wait_ready
  U="http://127.0.0.1:$PORT"
  if poll_metric 'shapejit_store_errors_total{model="mlp"}' 'v >= 1'; then
    echo "ok: store failures counted: $(metric 'shapejit_store_errors_total{model="mlp"}')"
  else
    fail "store: no store failure counted: $(curl -s "$U/metrics" | grep -i store)"
  fi
  poll_metric 'shapejit_store_not_stored_buckets{model="mlp"}' 'v >= 1' || fail "store: no bucket counted as not stored"
  # Told on stderr within a second or so of the failure (the hang guard is 30 s).
  for _ in $(seq 1 300); do grep -q 'the store failed' "$W/store.err" && break; sleep 0.1; done
  n=$(grep -c "model 'mlp': the store failed" "$W/store.err")
  [ "$n" = 1 ] && echo "ok: told once on stderr" || fail "store: told $n times on stderr: $(cat "$W/store.err")"
  grep -q "first refusal: .*full.db" "$W/store.err" || fail "store: the message does not say why: $(cat "$W/store.err")"
  infer store_full_still_serves 200 '"shape":\[1,10\]' mlp \
    "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,32],\"datatype\":\"FP32\",\"data\":[$(seq -s, 0 31)]}]}"
  kill -TERM "$PID"
  wait "$PID" || fail "store: exit status $?"
  # A fleet tier nobody listens on (loopback port 1): told once, counted.
  printf 'fleet-secret-for-the-test-0123456789' >"$W/secret"
  chmod 600 "$W/secret"
  serve remote "$MODELS/ffn.sjg" --ladder list:2,4 --store none --remote redis://127.0.0.1:1/0 \
    --remote-secret-file "$W/secret" --max-batch-delay-us 0
  poll_metric 'shapejit_remote_errors_total{model="ffn",kind="error"}' 'v >= 1' ||
    fail "remote: no failure counted: $(curl -s "$U/metrics" | grep remote_errors)"
  for _ in $(seq 1 300); do grep -q 'the remote tier' "$W/remote.err" && break; sleep 0.1; done
  n=$(grep -c "model 'ffn': the remote tier redis://127.0.0.1:1/0 failed" "$W/remote.err")
  [ "$n" = 1 ] && echo "ok: remote failure told once" || fail "remote: told $n times: $(cat "$W/remote.err")"
  kill -TERM "$PID"
  wait "$PID" || fail "remote: exit status $?"
fi

# ------------------- weights: a weights file rewritten under the server
if has weights; then
  # An ONNX model with external data; while requests run, its weights file
  # is rewritten in place with other bytes (cp truncates first) and
  # truncated and restored, over and over. The server read (copied) the
  # file at load: it neither dies (SIGBUS, before) nor fails a request nor
  # answers with other weights.
  src="$(dirname "$0")/data/real_models/tel_postnorm_relu_dynamo"
  mkdir -p "$W/tel"
  cp "$src/model.onnx" "$src/model.onnx.data" "$W/tel/"
  cp "$src/model.onnx.data" "$W/orig.data"
  head -c "$(stat -c %s "$src/model.onnx.data")" /dev/urandom >"$W/other.data"
  serve weights "$W/tel/model.onnx" --name tel --dynamic seq --dim batch=1 --ladder list:8 --store none \
    --max-batch-delay-us 0
  data=$(python3 -c 'print(",".join(str((i % 11) * 0.1 - 0.5) for i in range(5 * 32)))')
  body="{\"inputs\":[{\"name\":\"src\",\"shape\":[1,5,32],\"datatype\":\"FP32\",\"data\":[$data]}]}"
  infer weights_before 200 '"shape":\[1,5,32\]' tel \
    "$body"
  cp "$W/body" "$W/want"
  (
    for i in $(seq 1 40); do
      cp "$W/other.data" "$W/tel/model.onnx.data"
      truncate -s 0 "$W/tel/model.onnx.data"
      cp "$W/orig.data" "$W/tel/model.onnx.data"
    done
  ) &
  writer=$!
  bad=0
  for i in $(seq 1 40); do
    code=$(curl -s -m 30 -o "$W/got" -w '%{http_code}' -X POST --data-binary "$body" "$U/v2/models/tel/infer")
    if [ "$code" != 200 ] || ! cmp -s "$W/got" "$W/want"; then
      bad=$((bad + 1))
      [ "$bad" = 1 ] && echo "first bad answer: $code $(head -c 300 "$W/got")"
    fi
  done
  wait "$writer"
  [ "$bad" = 0 ] && echo "ok: 40 requests while the weights file was rewritten: all 200, all equal" ||
    fail "weights: $bad of 40 requests failed or differed while the file was rewritten"
  kill -0 "$PID" 2>/dev/null && echo "ok: the server is alive" || fail "weights: the server died: $(tail -3 "$W/weights.err")"
  kill -TERM "$PID"
  wait "$PID" || fail "weights: exit status $?"
fi

echo "$failures failures"
[ "$failures" = 0 ]
