# Sourced first by HTTP server test scripts called as SCRIPT SHAPEJIT
# MODELS_DIR WORKDIR: sets SJ, MODELS and W (emptied), counts failures
# (fail MESSAGE), kills every server in pids, and PID (a server that never
# said its port is not in pids yet), when the script exits, and sources
# http_server_start.sh.
trap '' PIPE # a write to a socket the server closed fails instead of killing the script
SJ=$1
MODELS=$2
W=$3
rm -rf "$W"
mkdir -p "$W"
failures=0
pids=()
cleanup() { for p in "${pids[@]}" ${PID:-}; do kill -9 "$p" 2>/dev/null; done; }
trap cleanup EXIT

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

. "$(dirname "${BASH_SOURCE[0]}")/http_server_start.sh"
