#!/bin/sh
# The clients' include check (docs/ARCHITECTURE.md "Layers"): the command
# (cli/), the HTTP endpoint (server/), the Python extension (python/src/)
# and the serving library (serve/) are built on the public API, so a
# project include in any of their files names a public header
# (shapejit/..., include/shapejit/ of either tier) or a header of its own
# folder, never a library internal. Besides those, each client may name
# the interfaces of the client-side libraries it links:
#   serve/                          for cli/, server/, python/src/
#   client_util/                    for cli/, server/ (file checks they share)
#   server/server.h                 for cli/ (serve --listen)
#   tools/conformance/conformance.h for cli/ (onnx-conformance)
#   bench/bench_timing.h, bench/bench_mdcache.h  for cli/ (`shapejit bench`
#                                   reports the figures bench_runtime does)
# and those headers (client_util/ whole) are held to the same rule: public
# headers and their own folder only. A library internal (sj__...) named
# anywhere in those files is a reach-in too, header or not. The Python extension is built without
# the repository root on its path, so its own headers are named bare.
#
#   check_client_headers.sh SOURCE_DIR
#
# Exit 0 when every include is allowed, 1 listing the wrong ones.
set -eu
SRC=$1
cd "$SRC"
list=$(mktemp)
trap 'rm -f "$list"' EXIT
# "CLIENT FILE INCLUDE" per project include.
for f in $(find cli server python/src serve client_util -name '*.[ch]' | sort) \
         bench/bench_timing.h bench/bench_mdcache.h; do
    case $f in
    python/src/*) client=python/src ;;
    bench/*) client=bench ;;
    *) client=${f%%/*} ;;
    esac
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
        while IFS= read -r inc; do printf '%s %s %s\n' "$client" "$f" "$inc"; done
done >"$list"
if [ ! -s "$list" ]; then
    echo "check_client_headers: no includes found under $SRC" >&2
    exit 2
fi
bad=0
n=0
while read -r client f inc; do
    n=$((n + 1))
    dir=${f%/*}
    case $inc in
    shapejit/* | shapejit.h) continue ;;          # the public headers, both tiers
    */*) ;;
    *) [ -f "$dir/$inc" ] && continue ;;          # its own folder, named bare
    esac
    case "$client $inc" in
    "cli cli/"* | "server server/"* | "serve serve/"* | "client_util client_util/"*) continue ;;
    "cli serve/"* | "server serve/"* | "python/src serve/"*) continue ;;
    "cli client_util/"* | "server client_util/"*) continue ;;
    "cli server/server.h" | "cli tools/conformance/conformance.h") continue ;;
    "cli bench/bench_timing.h" | "cli bench/bench_mdcache.h" | "bench bench/bench_timing.h") continue ;;
    esac
    bad=$((bad + 1))
    echo "$f includes \"$inc\": a client of libshapejit names public headers (shapejit/...) and its own"
done <"$list"
for f in $(find cli server python/src serve client_util -name '*.[ch]' | sort); do
    if grep -n 'sj__[A-Za-z0-9_]' "$f" >/dev/null; then
        bad=$((bad + 1))
        grep -n 'sj__[A-Za-z0-9_]' "$f" | sed "s|^|$f:|; s|\$| (names a library internal, sj__)|"
    fi
done
[ "$bad" -eq 0 ] || exit 1
echo "client headers: $n includes across cli/, server/, python/src/, serve/, client_util/, every one public or the client's own"
