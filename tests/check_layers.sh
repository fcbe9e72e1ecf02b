#!/bin/sh
# The layer check (docs/ARCHITECTURE.md "Layers"): every symbol an object
# file of the library uses from another object file must be defined in a
# module its own module may use. Modules are source folders; the rules
# below are the allowed edges, and anything else is a wrong-way edge.
#
#   check_layers.sh NM OBJECT_LIST_FILE
#
# OBJECT_LIST_FILE names the library's object files one a line, as CMake
# writes them (.../sj_objects.dir/<source path>.o); the module of an object
# is its source folder (formats/onnx/gen, the generated protobuf code, counts as
# formats/onnx). Exit 0 when every edge is allowed, 1 listing the wrong ones,
# 2 when it cannot read the objects.
set -eu
NM=$1
LIST=$2

# The rules: tests/layer_rules.txt, which tests/check_headers.sh reads too.
. "$(dirname "$0")/layer_rules.sh"
layer_rules_load "$(dirname "$0")"

syms=$(mktemp)
trap 'rm -f "$syms"' EXIT
n=0
while IFS= read -r obj; do
    [ -n "$obj" ] || continue
    src=${obj#*sj_objects.dir/}
    src=${src#./}
    mod=$(dirname "$src")
    case $mod in formats/onnx/gen) mod=formats/onnx ;; esac
    if ! "$NM" "$obj" >"$syms.one" 2>"$syms.err"; then
        echo "check_layers: $NM $obj failed: $(cat "$syms.err")" >&2
        rm -f "$syms.one" "$syms.err"
        exit 2
    fi
    awk -v m="$mod" -v f="$src" '$1 == "U" { print "U", $2, m, f }
        NF == 3 && $2 ~ /^[TDBRCVW]$/ { print "D", $3, m, f }' "$syms.one" >>"$syms"
    n=$((n + 1))
done <"$LIST"
rm -f "$syms.one" "$syms.err"
if [ "$n" -eq 0 ]; then
    echo "check_layers: no object files listed in $LIST" >&2
    exit 2
fi
printf '%s\n' "$RULES" | awk -v known="$KNOWN" "$RULES_AWK"'
    $1 == "D" { def[$2] = $3; deffile[$2] = $4; next }
    $1 == "U" { nu++; us[nu] = $2; um[nu] = $3; uf[nu] = $4 }
    END {
        split(known, k, " ")
        for (i in k) isknown[k[i]] = 1
        for (i = 1; i <= nu; i++) {
            if (!isknown[um[i]]) { unknown[um[i]] = uf[i]; continue }
            if (!(us[i] in def)) continue          # a system library symbol
            dst = def[us[i]]
            if (dst == um[i] || ok[um[i] SUBSEP dst]) continue
            bad++
            printf "wrong-way edge %s -> %s: %s uses %s (defined in %s)\n", um[i], dst, uf[i], us[i], deffile[us[i]]
        }
        for (m in unknown) {
            bad++
            printf "module %s (%s) is in no layer: add it to the rules in tests/layer_rules.txt\n", m, unknown[m]
        }
        if (bad) exit 1
        printf "layers: %d uses across the library, every edge points down\n", nu
    }' - "$syms"
