#!/usr/bin/env bash
# Runs every Fuzz target in the module for the given budget each.
#
#   scripts/fuzz.sh 20000x   # a count of executions per target (make fuzz-short)
#   scripts/fuzz.sh 2m       # a duration per target (make fuzz)
#
# A duration-bounded run can end with a bare "context deadline exceeded" and
# no crasher: a race in Go's fuzz coordinator at the -fuzztime boundary
# (go.dev/issue/75804, fixed in Go 1.27). A count budget has no deadline to
# race, so the short run in `make test` uses one. For duration runs a failure
# counts only when the output is something else or a new input was written
# to testdata/fuzz/<target>; the coordinator race is reported and skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${1:-20000x}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "fuzz $pkg $f ($budget)"
    corpus="$dir/testdata/fuzz/$f"
    before=$(find "$corpus" -type f 2>/dev/null | wc -l || true)
    if go test -run='^$' -fuzz="^${f}\$" -fuzztime="$budget" "$pkg" >"$log" 2>&1; then
      continue
    fi
    after=$(find "$corpus" -type f 2>/dev/null | wc -l || true)
    if [[ $budget != *x && $after == "$before" ]] &&
      grep -q '^    context deadline exceeded$' "$log" &&
      ! grep -q -e 'Failing input written' -e '^panic:' -e 'fuzz: minimizing' "$log"; then
      echo "  stopped by the fuzz coordinator's deadline race (go.dev/issue/75804); no failing input"
      continue
    fi
    cat "$log"
    exit 1
  done
done
