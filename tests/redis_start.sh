# Sourced by the fleet-tier CLI tests: a throwaway redis-server on a free
# loopback port for the script's lifetime, and the helpers those scripts
# share. Before sourcing: $dir (a fresh work folder). After: $port, $url
# (redis://127.0.0.1:PORT), $dir/secret (a fleet secret file), and the
# functions below; the server is killed when the script exits. Exits 77
# (skipped) when redis-server is not installed.
redis=$(command -v redis-server || true)
[ -n "$redis" ] || { echo "redis-server not installed: skipped"; exit 77; }

pid=
stop_server() {
    if [ -n "$pid" ]; then
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        pid=
    fi
}
trap stop_server EXIT
trap 'exit 1' INT TERM HUP

ping_ok() { # port
    (exec 3<>"/dev/tcp/127.0.0.1/$1" && printf 'PING\r\n' >&3 && read -r -t 1 reply <&3 &&
        [ "${reply%$'\r'}" = "+PONG" ]) 2>/dev/null
}

port=
for attempt in 1 2 3 4 5; do
    p=$((20000 + RANDOM % 40000))
    "$redis" --bind 127.0.0.1 --port "$p" --save '' --appendonly no --daemonize no \
        --dir "$dir" --loglevel warning >"$dir/redis.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do
        if ping_ok "$p"; then port=$p; break 2; fi
        kill -0 "$pid" 2>/dev/null || break # exited: the port was taken
        sleep 0.05
    done
    stop_server
done
[ -n "$port" ] || { echo "could not start redis-server"; cat "$dir/redis.log"; exit 1; }
url="redis://127.0.0.1:$port"
printf 'fleet secret\n' >"$dir/secret" && chmod 600 "$dir/secret"

fail() { echo "FAIL: $*"; exit 1; }
# stat NAME KEY: the number KEY has in the --stats JSON kept in NAME.err
stat() { grep -o "\"$2\": [0-9]*" "$dir/$1.err" | head -1 | grep -o '[0-9]*$'; }
