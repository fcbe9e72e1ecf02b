#!/usr/bin/env bash
# One compile per fleet, with real processes through the CLI, against a real
# redis-server on a free loopback port (stopped on every way out):
#   - 4 `precompile` processes, empty stores, one ladder, started together:
#     the compiles of all four add up to the number of buckets;
#   - leases taken by hand (redis-cli, never released) on every bucket: a
#     precompile waits for them about the lease time, then compiles each
#     bucket itself;
#   - a precompile killed with SIGKILL while it holds a lease: three more
#     started at once finish within about its lease time, all buckets stored,
#     no bucket compiled twice. Their own lease (how long a waiter gives a
#     live holder, which renews it, before compiling beside it) is long: on
#     a loaded machine one compile can outlast a short one, and the count
#     would then measure the machine's load, not the leases;
#   - --remote-lease-ms 0 takes no lease; a bad value is a usage error.
# Usage: fleet_cli.sh SHAPEJIT MODEL WORKDIR. Exit 77 (skipped) without redis-server.
set -u
cli=$1 model=$2 dir=$3
rcli=$(command -v redis-cli || true)
[ -n "$rcli" ] || { echo "redis-cli not installed: skipped"; exit 77; }
rm -rf "$dir" && mkdir -p "$dir" || exit 1
. "$(dirname "$0")/redis_start.sh"
ladder=pow2:1:64
buckets=7

now_ms() { date +%s%3N; }
# precompile NAME DB ARGS...: in the background; stdout NAME.out, --stats JSON NAME.err
precompile() {
    local name=$1 db=$2
    shift 2
    "$cli" precompile "$model" --ladder "$ladder" --store "$dir/$name.db" --stats \
        --remote "$url/$db" --remote-secret-file "$dir/secret" "$@" \
        >"$dir/$name.out" 2>"$dir/$name.err" &
}
finished() { # NAME PID: the process exited 0
    wait "$2" || { cat "$dir/$1.out" "$dir/$1.err"; fail "$1: exit status $?"; }
}
sum() { # KEY NAMES...: the KEY stats of NAMES added up
    local key=$1 total=0 v
    shift
    for n in "$@"; do
        v=$(stat "$n" "$key")
        [ -n "$v" ] || { cat "$dir/$n.err"; fail "$n: no $key in its stats"; }
        total=$((total + v))
    done
    echo "$total"
}

# 1. Four cold processes started together compile each bucket once in all.
pids=()
for i in 1 2 3 4; do
    precompile "cold$i" 1
    pids+=($!)
done
for i in 1 2 3 4; do finished "cold$i" "${pids[$((i - 1))]}"; done
total=$(sum compiles cold1 cold2 cold3 cold4)
[ "$total" -eq "$buckets" ] || fail "4 cold processes compiled $total times, expected $buckets"
won=$(sum remote_leases_won cold1 cold2 cold3 cold4)
[ "$won" -eq "$buckets" ] || fail "4 cold processes won $won leases, expected $buckets"
grep -q "leases: [0-9]* won" "$dir/cold1.out" || { cat "$dir/cold1.out"; fail "no lease summary"; }
[ "$("$rcli" -p "$port" -n 1 --scan --pattern 'shapejit:lease:*' | wc -l)" -eq 0 ] ||
    fail "leases left behind after every process published"

# 2. Leases taken by hand, never released: the lease time, then compiles.
#    They outlive the test (10 minutes), so however long the precompile
#    takes to start (a loaded machine took longer than a 1.5 s lease, which
#    had expired before it looked: nothing to wait for), it finds them held
#    and waits its own lease time (--remote-lease-ms) for each, then
#    compiles alone. No clock but the lower bound and a hang guard. The
#    waits add up (one per bucket and job), so each is short.
hand_ms=400
keys=$("$rcli" -p "$port" -n 1 --scan --pattern 'shapejit:*')
[ "$(echo "$keys" | wc -l)" -eq "$buckets" ] || fail "expected $buckets published keys: $keys"
for k in $keys; do
    [ "$("$rcli" -p "$port" -n 2 SET "shapejit:lease:${k#shapejit:}" crashed-node NX PX 600000)" = OK ] ||
        fail "could not take a lease by hand"
done
t0=$(now_ms)
precompile hand 2 --remote-lease-ms "$hand_ms"
finished hand $!
took=$(($(now_ms) - t0))
[ "$(stat hand compiles)" -eq "$buckets" ] || fail "hand: compiled $(stat hand compiles), expected $buckets"
[ "$(stat hand remote_lease_waits)" -ge 1 ] || fail "hand: did not wait for the hand-taken lease"
[ "$(stat hand remote_lease_waited_compiles)" -ge 1 ] || fail "hand: did not compile after waiting"
[ "$took" -ge "$hand_ms" ] || fail "hand: took $took ms, did not wait for the leases"
[ "$took" -le 120000 ] || fail "hand: took $took ms, hung (each wait is $hand_ms ms)"

# 3. A holder killed with SIGKILL while it holds a lease: the others finish
#    within about its lease time, each with every bucket, each bucket
#    compiled once. The crashed holder's lease (lease_ms) bounds the wait;
#    the others' (patient_ms) is how long they wait for one live holder.
#    patient_ms is far past the hang guard below, so finishing under it
#    says the crashed lease's expiry freed them, on a machine of any speed.
lease_ms=1500
patient_ms=600000
precompile victim 3 --remote-lease-ms "$lease_ms"
victim=$!
# Until the victim holds a lease (a hang guard of 60 s: a loaded machine
# may take seconds to start it), then SIGKILL.
for _ in $(seq 12000); do
    [ -n "$("$rcli" -p "$port" -n 3 --scan --pattern 'shapejit:lease:*')" ] && break
    kill -0 "$victim" 2>/dev/null || break
    sleep 0.005
done
kill -KILL "$victim" 2>/dev/null
wait "$victim" 2>/dev/null
t0=$(now_ms)
pids=()
for i in 1 2 3; do
    precompile "after$i" 3 --remote-lease-ms "$patient_ms"
    pids+=($!)
done
for i in 1 2 3; do finished "after$i" "${pids[$((i - 1))]}"; done
took=$(($(now_ms) - t0))
[ "$took" -le 120000 ] || fail "after the kill: took $took ms: waited for the patient lease, not the crashed one's expiry"
total=$(sum compiles after1 after2 after3)
[ "$total" -le "$buckets" ] || {
    for i in 1 2 3; do grep -o '"remote_[a-z_]*": [0-9]*' "$dir/after$i.err" | tr '\n' ' '; echo; done
    fail "after the kill: $total compiles, more than $buckets buckets"
}
for i in 1 2 3; do
    grep -q "precompiled $buckets buckets" "$dir/after$i.out" || { cat "$dir/after$i.out"; fail "after$i"; }
done

# 4. --remote-lease-ms 0: no leases; a bad value is a usage error.
precompile off 4 --remote-lease-ms 0
finished off $!
[ "$(stat off remote_leases_won)" -eq 0 ] || fail "off: took leases with --remote-lease-ms 0"
"$cli" precompile "$model" --ladder "$ladder" --store none --remote "$url" \
    --remote-lease-ms -5 >"$dir/bad.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q -- "--remote-lease-ms must be milliseconds" "$dir/bad.out" ||
    { cat "$dir/bad.out"; fail "--remote-lease-ms -5: exit $rc"; }
echo "fleet CLI: all checks passed"
