# Sourced by the HTTP server test scripts. Before sourcing: $SJ (the
# shapejit binary) and $W (the work folder).
#   http_server_start NAME ARGS...  runs `$SJ serve --listen 127.0.0.1:0 ARGS...`
#       in the background (killed after 120 s at most, so it always stops),
#       output in $W/NAME.out and $W/NAME.err; sets PID at once and PORT once
#       the server says where it listens; if it never does, shows its output
#       and exits 1.
#   http_server_ready  waits up to 60 s for /v2/health/ready to answer 200;
#       returns 1 if it never does.

http_server_start() {
  local name=$1
  shift
  timeout --foreground -s KILL 120 "$SJ" serve --listen 127.0.0.1:0 "$@" >"$W/$name.out" 2>"$W/$name.err" &
  PID=$!
  PORT=
  for _ in $(seq 1 300); do
    PORT=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$W/$name.out")
    [ -n "$PORT" ] && break
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$PORT" ]; then
    echo "server $name did not start:"
    cat "$W/$name.out" "$W/$name.err"
    exit 1
  fi
}

http_server_ready() {
  for _ in $(seq 1 600); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/v2/health/ready")" = 200 ] && return 0
    sleep 0.1
  done
  return 1
}
