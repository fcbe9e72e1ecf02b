#!/usr/bin/env bash
# The Python venv the serve --listen tests, benchmarks and README snippet
# drive the server from: the real tritonclient[http] (and numpy) from PyPI,
# so the endpoint is checked against the client people use, not against
# our reading of the protocol. Kept apart from any other venv of the
# project. Idempotent: a venv that already imports both is left alone.
# usage: scripts/server-test-venv.sh [DIR]   (default: build/venv-server-tests)
set -euo pipefail
dir=${1:-build/venv-server-tests}
if [ -x "$dir/bin/python" ] && "$dir/bin/python" -c 'import tritonclient.http, numpy' 2>/dev/null; then
  exit 0
fi
py=${PYTHON:-python3}
rm -rf "$dir"
"$py" -m venv "$dir" || {
  echo "server-test-venv: '$py -m venv' failed (Debian: python3-venv)" >&2
  exit 1
}
"$dir/bin/pip" install --disable-pip-version-check -q "tritonclient[http]==2.73.0" numpy || {
  echo "server-test-venv: pip could not install tritonclient[http] and numpy from PyPI" >&2
  rm -rf "$dir"
  exit 1
}
"$dir/bin/python" -c 'import tritonclient.http, numpy'
