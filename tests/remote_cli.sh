#!/usr/bin/env bash
# The fleet tier from the command line, against a real redis-server on a
# free loopback port (stopped on every way out of this script):
#   - two `run --backend host` with separate stores and one --remote: the
#     second compiles nothing (remote_hits >= 1) and writes the same output;
#   - a reader with another secret rejects what the fleet wrote and compiles;
#   - --remote-read-only publishes nothing;
#   - `store stats --remote` answers while the server is up, exits 1 after;
#   - with the server gone a run still succeeds, compiling, errors counted.
# Usage: remote_cli.sh SHAPEJIT MODEL WORKDIR. Exit 77 (skipped) without redis-server.
set -u
cli=$1 model=$2 dir=$3
rm -rf "$dir" && mkdir -p "$dir" || exit 1
. "$(dirname "$0")/redis_start.sh"

# run NAME ARGS...: shapejit run, stderr (the --stats JSON) kept in NAME.err
run() {
    local name=$1
    shift
    "$cli" run "$model" --backend host --ladder pow2:1:64 --stats --out "$dir/$name" "$@" \
        >"$dir/$name.out" 2>"$dir/$name.err"
    local rc=$?
    [ $rc -eq 0 ] || { cat "$dir/$name.err"; fail "$name: exit $rc"; }
}
expect() { # NAME KEY OP VALUE
    local v
    v=$(stat "$1" "$2")
    [ -n "$v" ] && [ "$v" "$3" "$4" ] || { cat "$dir/$1.err"; fail "$1: $2 is '$v', expected $3 $4"; }
}

run first --rows 20 --store "$dir/a.db" --remote "$url" --remote-secret-file "$dir/secret"
expect first compiles -eq 1
expect first remote_puts -eq 1

run second --rows 20 --store "$dir/b.db" --remote "$url" --remote-secret-file "$dir/secret"
expect second compiles -eq 0
expect second remote_hits -ge 1
cmp -s "$dir/first/y.npy" "$dir/second/y.npy" || fail "second: output differs from first's"

# The environment is the default: URL and secret from $SHAPEJIT_REMOTE*.
SHAPEJIT_REMOTE=$url SHAPEJIT_REMOTE_SECRET="another secret" run other --rows 20 --store "$dir/c.db"
expect other remote_rejected -ge 1
expect other remote_hits -eq 0
expect other compiles -eq 1
# ... and leaves the fleet's value alone, saying once why (issue 13 item 5:
# it used to publish over it, and the fleet then recompiled and published
# back, every node compiling every time).
expect other remote_foreign -ge 1
expect other remote_kept_foreign -eq 1
expect other remote_puts -eq 0
[ "$(grep -c 'likely uses another secret' "$dir/other.err")" = 1 ] ||
    { cat "$dir/other.err"; fail "other: the secret mismatch warning is not there exactly once"; }
run third --rows 20 --store "$dir/c3.db" --remote "$url" --remote-secret-file "$dir/secret"
expect third compiles -eq 0
expect third remote_hits -ge 1
# Without a secret every start says what that exposes (issue 13 item 15).
run open --rows 20 --store "$dir/o.db" --remote "$url"
grep -q "warning: --remote without a secret.*inject code" "$dir/open.err" ||
    { cat "$dir/open.err"; fail "open: no warning about running without a secret"; }

run reader --rows 50 --store "$dir/d.db" --remote "$url" --remote-secret-file "$dir/secret" \
    --remote-read-only
expect reader compiles -eq 1
expect reader remote_puts -eq 0
run after_reader --rows 50 --store "$dir/e.db" --remote "$url" --remote-secret-file "$dir/secret"
expect after_reader compiles -eq 1

"$cli" store stats --store "$dir/b.db" --remote "$url" >"$dir/stats.out" 2>&1 ||
    { cat "$dir/stats.out"; fail "store stats --remote failed"; }
grep -q "remote $url/0: answered" "$dir/stats.out" || { cat "$dir/stats.out"; fail "store stats"; }

stop_server
run down --rows 20 --store "$dir/f.db" --remote "$url" --remote-secret-file "$dir/secret"
expect down compiles -eq 1
expect down remote_errors -ge 1
cmp -s "$dir/first/y.npy" "$dir/down/y.npy" || fail "down: output differs from first's"
"$cli" store stats --store "$dir/b.db" --remote "$url" >"$dir/stats_down.out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "does not answer" "$dir/stats_down.out" ||
    { cat "$dir/stats_down.out"; fail "store stats on a dead remote: exit $rc"; }
echo "remote CLI: all checks passed"
