#!/bin/sh
# The header check (docs/ARCHITECTURE.md "Layers"), beside the nm check of
# tests/check_layers.sh: every wrong-way edge that check ever found came in
# through a header, and a header edge (a struct, an inline function, a
# macro) leaves no symbol for nm to see. So every project include in the
# library's sources and headers is checked against the same rules
# (tests/layer_rules.txt): a file of module M may include headers of M and
# of the modules M may use, and the public headers (shapejit/...).
#
#   check_headers.sh SOURCE_DIR
#
# Exit 0 when every include is allowed, 1 listing the wrong ones.
set -eu
SRC=$1
. "$SRC/tests/layer_rules.sh"
layer_rules_load "$SRC/tests"

cd "$SRC"
list=$(mktemp)
trap 'rm -f "$list"' EXIT
for m in $KNOWN; do
    # A module is its folder's own files; its subfolders are modules of their own.
    for f in "$m"/*.c "$m"/*.h; do
        [ -f "$f" ] || continue
        sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
            while IFS= read -r inc; do printf '%s %s %s\n' "$m" "$f" "$inc"; done
    done
done >"$list"
if [ ! -s "$list" ]; then
    echo "check_headers: no includes found under $SRC" >&2
    exit 2
fi
printf '%s\n' "$RULES" | awk "$RULES_AWK"'
    {
        m = $1; f = $2; inc = $3; nu++
        if (inc ~ /^shapejit[\/.]/) next                 # the public headers
        if (inc !~ /\//) {                              # generated, on the include path
            if (inc == "onnx.pb-c.h" || inc == "host_target_names.h") next
            bad++; printf "%s includes \"%s\": name project headers by their path from the root\n", f, inc
            next
        }
        dst = inc; sub(/\/[^\/]*$/, "", dst)
        if (dst == m || ok[m SUBSEP dst]) next
        bad++
        printf "wrong-way header edge %s -> %s: %s includes \"%s\"\n", m, dst, f, inc
    }
    END {
        if (bad) exit 1
        printf "headers: %d includes across the library, every edge points down\n", nu
    }' - "$list"
