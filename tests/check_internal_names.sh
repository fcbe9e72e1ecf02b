#!/bin/sh
# Internal names look internal (docs/ARCHITECTURE.md "Names"): every symbol
# with external linkage that an object of the library defines is either
# exported from libshapejit.so (an SJ_API function, prefix sj_) or named
# sj__ (internal, shared between the library's files), never a third kind;
# and nothing named sj__ is exported. So a reach-in from cli/, server/,
# tests or benchmarks reads as one at the call.
#
#   check_internal_names.sh NM OBJECT_LIST_FILE SHARED_LIBRARY
#
# Exit 0 when every name fits, 1 listing the ones that do not, 2 when the
# objects cannot be read.
set -eu
NM=$1
LIST=$2
LIB=$3
exported=$(mktemp)
defined=$(mktemp)
trap 'rm -f "$exported" "$defined"' EXIT
"$NM" -D --defined-only "$LIB" | awk '{ print $3 }' | sort -u >"$exported"
n=0
while IFS= read -r obj; do
    [ -n "$obj" ] || continue
    "$NM" --defined-only "$obj" | awk -v f="${obj#*sj_objects.dir/}" \
        '$2 ~ /^[TDBRCV]$/ && $3 ~ /^sj_/ { print $3, f }' >>"$defined" ||
        { echo "check_internal_names: $NM $obj failed" >&2; exit 2; }
    n=$((n + 1))
done <"$LIST"
[ "$n" -gt 0 ] || { echo "check_internal_names: no objects in $LIST" >&2; exit 2; }
awk 'FILENAME == ARGV[1] { pub[$1] = 1; next }
    {
        nd++
        if ($1 ~ /^sj__/) {
            if ($1 in pub) { bad++; printf "%s (%s) is internal (sj__) but exported\n", $1, $2 }
        } else if (!($1 in pub)) {
            bad++
            printf "%s (%s) is neither exported nor named sj__: mark it SJ_API in a public header, or rename it sj__%s\n", $1, $2, substr($1, 4)
        }
    }
    END {
        if (bad) exit 1
        printf "internal names: %d library symbols, each exported (sj_) or internal (sj__)\n", nd
    }' "$exported" "$defined"
