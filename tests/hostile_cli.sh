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
*) fail "unknown case" ;;
esac
exit 0
