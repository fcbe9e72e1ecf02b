#!/usr/bin/env bash
# CLI cases from the hostile-input campaign (issue 13) that need a shell:
# resource limits, special files, fake servers. One case per call:
#   hostile_cli.sh SHAPEJIT SOURCE_DIR WORKDIR CASE
# Exit 0 = the case held, 1 = it did not (with what was seen on stderr).
set -u
cli=$1 src=$2 dir=$3/$4 case=$4
models=$src/examples/models
rm -rf "$dir" && mkdir -p "$dir" || exit 1
cd "$dir" || exit 1

fail() { echo "FAIL ($case): $*" >&2; for f in out err; do [ -f $f ] && { echo "--- $f" >&2; cat $f >&2; }; done; exit 1; }
expect_rc() { [ "$1" = "$2" ] || fail "exit code $1, wanted $2"; }
expect_in() { grep -Eq -- "$2" "$1" || fail "$1 lacks /$2/"; }

case $case in
precompile_disk_full)
    # A file-size limit makes the store's commits fail part way (as a full
    # disk does): precompile must exit 1 naming the buckets not stored and
    # count them in its summary, not report them compiled and exit 0.
    (trap '' XFSZ; ulimit -f 100; exec "$cli" precompile "$models/mlp.sjg" --ladder pow2:1:1024 \
        --store st.db --jobs 2 >out 2>err)
    expect_rc $? 1
    expect_in err "buckets were compiled but not stored \\(extents? [0-9]"
    expect_in err "st.db"
    expect_in out "[0-9]+ NOT STORED; store st.db"
    ;;
trace_comment)
    # '#' starts a comment anywhere on a line, as --help says
    printf '7 # seven\n# whole line\n\n3\n' >tr.txt
    "$cli" serve "$models/ffn.sjg" --trace tr.txt --store none --backend interp >out 2>err
    expect_rc $? 0
    expect_in out "2 requests from"
    ;;
control_bytes)
    # names and trace lines reach the terminal escaped
    printf 'graph g(N) {\n  input x: [N, 4]\n  output "a\033[31mred" = relu(x)\n}\n' >ctl.sjg
    "$cli" run ctl.sjg --rows 2 --store none --backend interp --out o >out 2>err
    expect_rc $? 0
    grep -q $'\033' out && fail "an escape byte reached stdout"
    expect_in out 'a\\x1b\[31mred: \[2, 4\]'
    printf '7\033[2J\n' >tr.txt
    "$cli" serve "$models/ffn.sjg" --trace tr.txt --store none >out 2>err
    expect_rc $? 1
    grep -q $'\033' err && fail "an escape byte reached stderr"
    expect_in err "'7\\\\x1b\\[2J' is not a request size"
    ;;
input_exit_codes)
    # an unknown --input name and a repeated one are both usage errors
    "$cli" run "$models/ffn.sjg" --rows 3 --store none --backend interp --out o >out 2>err
    expect_rc $? 0
    "$cli" run "$models/ffn.sjg" --input q=o/y.npy --store none --out o2 >out 2>err
    expect_rc $? 2
    "$cli" run "$models/ffn.sjg" --input x=o/y.npy --input x=o/y.npy --store none --out o2 >out 2>err
    expect_rc $? 2
    ;;
import_reasons)
    # a rejected record is named with why, not only counted
    "$cli" precompile "$models/mlp.sjg" --ladder list:1,2 --store a.db --jobs 1 >out 2>err
    expect_rc $? 0
    "$cli" store export x.sjs --store a.db >out 2>err
    expect_rc $? 0
    size=$(stat -c %s x.sjs)
    # flip a byte near the end: inside the last record's zstd frame
    printf 'Z' | dd of=x.sjs bs=1 seek=$((size - 20)) conv=notrunc 2>/dev/null
    "$cli" store import x.sjs --store b.db >out 2>err
    # a record that did not arrive is a failure a script must see (issue 29 item 13)
    expect_rc $? 1
    expect_in out "imported 1, rejected 1"
    expect_in err "rejected graph [0-9a-f]{16} extent 2: record #2: "
    expect_in err "1 of 2 records in x.sjs were rejected"
    "$cli" store --help >out 2>err
    expect_in out "only archives from sources you trust"
    ;;
special_out_targets)
    # A writer puts its file in place by rename, which would replace a FIFO,
    # a symlink or (as root) a device node with a regular file: each is
    # refused, named, and left as it was (issue 29 item 1).
    echo keep >target
    ln -s target link
    mkfifo fifo
    targets="link fifo"
    # a character device of our own (the null device's numbers), as root only
    mknod chr c 1 3 2>/dev/null && targets="$targets chr"
    for t in $targets; do
        kind=$(stat -c %F "$t")
        "$cli" emit "$models/ffn.sjg" --rows 2 --target llvm-ir --out "$t" >out 2>err
        expect_rc $? 1
        expect_in err "--out: $t exists and is not a regular file \\(a "
        [ "$(stat -c %F "$t")" = "$kind" ] || fail "emit replaced $t ($kind)"
    done
    [ "$(cat target)" = keep ] || fail "emit wrote through the symlink"
    mkdir o && mkfifo o/y.npy
    "$cli" run "$models/ffn.sjg" --rows 2 --store none --backend interp --out o >out 2>err
    expect_rc $? 1
    expect_in err "--out: o/y.npy exists and is not a regular file \\(a FIFO\\)"
    [ -p o/y.npy ] || fail "run replaced the FIFO o/y.npy"
    [ "$(ls o)" = y.npy ] || fail "run left files in o: $(ls o)"
    ;;
stdout_full)
    # An answer that cannot be written is a failure (issue 29 item 12).
    printf '3\n5\n9\n' >tr.txt
    "$cli" precompile "$models/ffn.sjg" --ladder list:1,2 --store st.db >/dev/full 2>err
    expect_rc $? 1
    expect_in err "shapejit precompile: writing to stdout failed"
    for c in "hash $models/ffn.sjg" "store ls --store st.db" "store verify --store st.db" \
             "ladder fit --trace tr.txt --buckets 2" "print $models/ffn.sjg" \
             "emit $models/ffn.sjg --rows 2 --target llvm-ir" "--version"; do
        # shellcheck disable=SC2086
        "$cli" $c >/dev/full 2>err
        expect_rc $? 1
        expect_in err "writing to stdout failed"
    done
    ;;
config_fifo)
    # A model repository whose config.json is a FIFO fails at once naming
    # it; it used to block the server's start for ever (issue 29 item 9).
    "$cli" serve --help 2>&1 | grep -q -- --model-repository || exit 0 # a build without the server
    mkdir -p repo/m && cp "$models/ffn.sjg" repo/m/model.sjg && mkfifo repo/m/config.json
    timeout 60 "$cli" serve --listen 127.0.0.1:0 --model-repository repo --store none >out 2>err
    expect_rc $? 1
    expect_in err "repo/m/config.json: not a regular file \\(a FIFO\\)"
    ;;
remote_not_redis)
    # A server on the port that answers bytes that are not Redis replies:
    # `store stats --remote` said "answered" and exited 0 (issue 29 item 18).
    command -v python3 >/dev/null || { echo "SKIP: no python3 for the fake server" >&2; exit 77; }
    python3 - >port 2>fake.err <<'PY' &
import os, socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(8)
print(s.getsockname()[1], flush=True)
s.settimeout(60)  # a hang guard: it goes away on its own
while True:
    try:
        c, _ = s.accept()
    except OSError:
        break
    c.settimeout(5)
    try:
        c.recv(4096)
        c.sendall(b"SSH-2.0-not-redis\r\n" + os.urandom(512))
    except OSError:
        pass
    c.close()
PY
    fake=$!
    trap 'kill "$fake" 2>/dev/null' EXIT
    for _ in $(seq 100); do [ -s port ] && break; sleep 0.1; done
    [ -s port ] || fail "the fake server did not start: $(cat fake.err)"
    "$cli" store stats --store st.db --remote "redis://127.0.0.1:$(cat port)" >out 2>err
    expect_rc $? 1
    expect_in out "answered, but not with a Redis reply"
    expect_in err "is not a Redis server \\(its reply is not a Redis reply\\): .*starts with 'S'"
    ;;
read_only_store)
    # A store made read-only (chmod -R a-w) is read, never written: ls and
    # verify work, a serving run loads what is stored instead of compiling,
    # writes fail naming why, and not a byte or file in it changes (issue
    # 29 item 14: every command refused it). shapejit honours the mode bits
    # even for root, who could write anyway, so this holds as root too.
    "$cli" precompile "$models/ffn.sjg" --ladder list:4,8 --store st/s.db >out 2>err
    expect_rc $? 0
    chmod -R a-w st
    trap 'chmod -R u+w st' EXIT
    snapshot() { (ls -ld --time-style=full-iso st && ls -lA --time-style=full-iso st && md5sum st/*) >"$1"; }
    snapshot before
    "$cli" store ls --store st/s.db >out 2>err
    expect_rc $? 0
    [ "$(wc -l <out)" = 2 ] || fail "store ls listed $(wc -l <out) rows, wanted 2"
    "$cli" store verify --store st/s.db >out 2>err
    expect_rc $? 0
    expect_in out "2 checked, 0 corrupt"
    "$cli" run "$models/ffn.sjg" --rows 3 --ladder list:4,8 --store st/s.db --stats --out o >out 2>err
    expect_rc $? 0
    expect_in err "warning: store st/s.db is read-only \\(the store file st/s.db has mode 0[0-7]{3}\\): artifacts are read from it, new ones are not saved"
    expect_in err '"store_hits": 1,.*"compiles": 0,'
    [ "$(grep -c warning err)" = 1 ] || fail "the read-only warning is not there exactly once"
    "$cli" serve "$models/ffn.sjg" --synthetic uniform:1:16:20:1 --ladder list:4,8,16 --store st/s.db \
        --stats >out 2>err
    expect_rc $? 0
    expect_in err '"compiles": 1,'
    [ "$(grep -c 'is read-only' err)" = 1 ] || fail "serve: the read-only warning is not there exactly once"
    "$cli" store gc --max-bytes 0 --store st/s.db >out 2>err
    expect_rc $? 1
    expect_in err "store st/s.db is read-only .*: nothing is written to it"
    # the HTTP server warms its buckets from it: loaded, none compiled
    if "$cli" serve --help 2>&1 | grep -q -- --listen && command -v curl >/dev/null; then
        SJ=$cli W=$PWD
        . "$src/tests/http_server_start.sh"
        http_server_start srv "$models/ffn.sjg" --ladder list:4,8 --store st/s.db --ready-when all
        trap 'kill "$PID" 2>/dev/null; chmod -R u+w st' EXIT
        http_server_ready || fail "the server never got ready: $(cat srv.err)"
        curl -s "http://127.0.0.1:$PORT/metrics" >metrics
        kill "$PID" && wait "$PID"
        expect_in metrics '^shapejit_store_hits_total\{model="ffn"\} 2$'
        expect_in metrics '^shapejit_compiles_total\{model="ffn"\} 0$'
        expect_in srv.err "model 'ffn': warning: store st/s.db is read-only"
    fi
    snapshot after
    cmp -s before after || fail "the read-only store changed: $(diff before after)"
    ;;
*) fail "unknown case" ;;
esac
exit 0
