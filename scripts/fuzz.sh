#!/usr/bin/env bash
# Runs every Fuzz target in the gateway's module and in the SDK's (sdk/) for
# the given budget each.
#
#   scripts/fuzz.sh 20000x   # a count of executions per target (make fuzz-short)
#   scripts/fuzz.sh 2m       # a duration per target (make fuzz)
#
# FUZZ_JOBS (default 2) packages fuzz at once. Each package's test binary is
# built once, fuzz-instrumented as `go test -fuzz` builds it, and then runs
# each of the package's targets in turn, in the package's directory, with
# the fuzz cache `go test -fuzz` uses ($GOCACHE/fuzz/<import path>): the
# same fuzzing as one `go test -fuzz=^FuzzX$` per target, without a link
# per target. A package's output is printed whole when it finishes.
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
jobs=${FUZZ_JOBS:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fuzzcache=$(go env GOCACHE)/fuzz

# fuzz_package MOD PKG DIR N TARGET...: builds PKG's test binary in the
# module at MOD (go test -fuzz works only on the main module's packages),
# then fuzzes each TARGET; its output goes to $work/N.out, and it fails on
# the first failing target.
fuzz_package() {
  local mod=$1 pkg=$2 dir=$3 n=$4 f before after
  shift 4
  local bin=$work/$n.test log=$work/$n.log
  local start=$SECONDS
  if ! (cd "$mod" && go test -c -fuzz=. -o "$bin" "$pkg") >"$log" 2>&1; then
    echo "build $pkg"
    cat "$log"
    return 1
  fi
  echo "build $pkg: $((SECONDS - start)) s"
  for f in "$@"; do
    local corpus="$dir/testdata/fuzz/$f" start=$SECONDS
    before=$(find "$corpus" -type f 2>/dev/null | wc -l || true)
    if (cd "$dir" && "$bin" -test.run='^$' -test.fuzz="^${f}\$" -test.fuzztime="$budget" \
      -test.fuzzcachedir="$fuzzcache/$pkg" -test.paniconexit0) >"$log" 2>&1; then
      echo "fuzz $pkg $f ($budget): $((SECONDS - start)) s"
      continue
    fi
    echo "fuzz $pkg $f ($budget): $((SECONDS - start)) s, failed"
    after=$(find "$corpus" -type f 2>/dev/null | wc -l || true)
    if [[ $budget != *x && $after == "$before" ]] &&
      grep -q '^    context deadline exceeded$' "$log" &&
      ! grep -q -e 'Failing input written' -e '^panic:' -e 'fuzz: minimizing' "$log"; then
      echo "  stopped by the fuzz coordinator's deadline race (go.dev/issue/75804); no failing input"
      continue
    fi
    cat "$log"
    return 1
  done
}

# Jobs run in the background, at most $jobs at once; each one's output is
# printed when it ends. After a failure no new job starts; those running
# finish and are printed, and the script fails.
declare -A pids
failed=0
reap() {
  local id
  if ! wait -n -p id "${!pids[@]}"; then failed=1; fi
  cat "$work/${pids[$id]}.out"
  unset "pids[$id]"
}

n=0
while read -r mod pkg dir; do
  ((failed == 0)) || break
  targets=$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u || true)
  [[ -n $targets ]] || continue
  n=$((n + 1))
  # shellcheck disable=SC2086 # targets are identifiers, one a word
  fuzz_package "$mod" "$pkg" "$dir" "$n" $targets >"$work/$n.out" 2>&1 &
  pids[$!]=$n
  if ((n == 1)); then
    # The first build compiles the instrumented standard library and
    # dependencies that every package shares: let it do so alone.
    while [[ ! -e $work/1.test ]] && kill -0 "$!" 2>/dev/null; do sleep 0.2; done
  fi
  while ((${#pids[@]} >= jobs)); do reap; done
done < <(go list -f '. {{.ImportPath}} {{.Dir}}' ./... && cd sdk && go list -f 'sdk {{.ImportPath}} {{.Dir}}' ./...)
while ((${#pids[@]} > 0)); do reap; done
exit $failed
