#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds and runs a consumer
# with find_package(shapejit) and with pkg-config.
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/tests/packaging" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/consumer/consumer"
PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" cc -o "$tmp/pc_consumer" "$src/tests/packaging/consumer.c" \
  $(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs shapejit)
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/pc_consumer"
test -x "$tmp/prefix/bin/shapejit"
