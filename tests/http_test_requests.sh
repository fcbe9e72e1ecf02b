# Sourced after http_test_prologue.sh by the HTTP server test scripts:
#   start NAME ARGS...   http_server_start, the server killed when the script exits
#   wait_ready           http_server_ready, or a failure showing the servers' stderr
#   serve NAME ARGS...   start, wait_ready, and U (the server's base URL)
#   req NAME CODE BODY_REGEX CURL_ARGS...  one request, its status and body checked
start() {
  http_server_start "$@"
  pids+=("$PID")
}

wait_ready() {
  http_server_ready && return 0
  fail "server never became ready"
  cat "$W"/*.err
  return 1
}

serve() {
  start "$@"
  wait_ready
  U="http://127.0.0.1:$PORT"
}

req() {
  local name=$1 code=$2 re=$3
  shift 3
  local got
  got=$(curl -s -m 60 -o "$W/body" -w '%{http_code}' "$@")
  if [ "$got" != "$code" ]; then
    fail "$name: status $got, expected $code; body: $(head -c 400 "$W/body" | tr -d '\0')"
  elif ! grep -Eq -- "$re" <(head -c 100000 "$W/body" 2>/dev/null); then
    fail "$name: body does not match /$re/: $(head -c 400 "$W/body" | tr -d '\0')"
  else
    echo "ok: $name ($code) ${SECONDS}s"
  fi
}
