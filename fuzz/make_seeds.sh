#!/usr/bin/env bash
# Regenerates the seeds that hold compiled code, which change whenever the
# artifact format does: corpus/fuzz_artifact (a host and an NVPTX artifact
# of examples/models/mlp.sjg at extent 1) and corpus/fuzz_store_import
# (export archives of an empty store, one row and two rows).
#
#   fuzz/make_seeds.sh [SHAPEJIT]     (default: build/shapejit)
#
# Needs the sqlite3 and zstd command-line tools (Debian: sqlite3, zstd): a
# store row's blob is one zstd frame of the artifact's bytes.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
sj=${1:-$here/build/shapejit}
model="$here/examples/models/mlp.sjg"
corpus="$here/fuzz/corpus"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The artifact bytes of the one row a store holds.
artifact_of() { # STORE OUT
  sqlite3 "$1" "SELECT writefile('$work/blob.zst', blob) FROM artifacts;" > /dev/null
  zstd -q -d -f "$work/blob.zst" -o "$2"
}

"$sj" precompile "$model" --ladder list:1 --store "$work/host.db" > /dev/null
artifact_of "$work/host.db" "$corpus/fuzz_artifact/host_mlp_e1.bin"
"$sj" precompile "$model" --ladder list:1 --target nvptx --store "$work/nvptx.db" > /dev/null
artifact_of "$work/nvptx.db" "$corpus/fuzz_artifact/nvptx_mlp_e1.bin"

"$sj" store ls --store "$work/empty.db" > /dev/null
"$sj" store export "$corpus/fuzz_store_import/empty.sjstore" --store "$work/empty.db" > /dev/null
"$sj" store export "$corpus/fuzz_store_import/mlp_one_row.sjstore" --store "$work/host.db" > /dev/null
"$sj" precompile "$model" --ladder list:1,2 --store "$work/host.db" > /dev/null
"$sj" store export "$corpus/fuzz_store_import/mlp_two_rows.sjstore" --store "$work/host.db" > /dev/null
echo "seeds written under $corpus"
