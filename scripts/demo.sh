#!/usr/bin/env bash
# The README's main job (for now): install dependencies, build quietly, run
# the transformer FFN example through the reference interpreter on 5 tokens
# and show the result.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
echo "demo: building (build/, -j2) ..."
cmake -S . -B build >/dev/null
cmake --build build -j2 >/dev/null

out=$(mktemp -d "${TMPDIR:-/tmp}/shapejit-demo.XXXXXX")
trap 'rm -rf "$out"' EXIT
echo "demo: shapejit run examples/models/ffn.sjg --rows 5 --backend interp --out $out"
build/shapejit run examples/models/ffn.sjg --rows 5 --backend interp --out "$out" --stats
echo "demo: graph hash $(build/shapejit hash examples/models/ffn.sjg)"
echo "demo: wrote $(ls "$out")"
