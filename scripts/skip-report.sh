#!/usr/bin/env bash
# Prints what a ctest run skipped, from its log (BUILD/Testing/Temporary/
# LastTest.log): programs ctest reported as Skipped (every test skipped, exit
# 77) and cmocka tests skipped inside programs that passed, each with the
# first reason given, so a skip never hides behind "Passed" in the CI log.
#   scripts/skip-report.sh BUILD_DIR
set -euo pipefail
log="${1:?usage: skip-report.sh BUILD_DIR}/Testing/Temporary/LastTest.log"
[ -f "$log" ] || { echo "skip-report: no ctest log at $log" >&2; exit 1; }
awk '
  /^[0-9]+\/[0-9]+ Testing: / { name = $3; reason = ""; next }
  /^SKIP [A-Za-z0-9_]+: / && reason == "" { reason = substr($0, index($0, ": ") + 2) }
  /^\[  SKIPPED \] [0-9]+ test\(s\), listed below:/ { n[name] = $4; why[name] = reason }
  /^all [0-9]+ tests skipped: exit 77/ { whole[name] = 1 }
  END {
    total = 0; programs = 0
    for (t in n) { total += n[t]; programs++ }
    printf "skipped: %d cmocka test(s) in %d program(s)\n", total, programs
    for (t in n)
      printf "  %-28s %3d skipped%s: %s\n", t, n[t], (t in whole) ? " (all: ctest Skipped)" : "", why[t]
  }' "$log"
