#!/usr/bin/env bash
# Runs, without the race detector, the allocation tests (testing.AllocsPerRun)
# that skip under it: `make test` runs the package tests with -race, where
# sync.Pool drops items at random and the detector allocates, so those tests
# skip there and would otherwise never run in CI.
#
#   scripts/alloc-tests.sh        # what make unit-compile runs
#
# A test is one of them when its file calls testing.AllocsPerRun and mentions
# raceEnabled (the packages' guard). The run is -v so that a test that skips
# here as well fails the script: a skipped allocation test proves nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

# run MODDIR: the tests of the module rooted at MODDIR (. or sdk).
run() {
  local mod=$1 files dirs names out exclude=()
  # The main module's files leave out the sdk module's (run sdk reads them).
  [[ $mod == . ]] && exclude=(':(exclude)sdk/**')
  files=$(cd "$mod" && git grep -l -e 'raceEnabled' -- '*_test.go' "${exclude[@]}" | xargs -r grep -l 'AllocsPerRun' || true)
  [[ -n $files ]] || return 0
  # The Test functions of those files that call AllocsPerRun.
  names=$(cd "$mod" && awk 'FNR == 1 || /^func / { name = "" } /^func Test/ { name = $2; sub(/\(.*/, "", name) } /AllocsPerRun/ && name != "" { print name }' $files | sort -u | paste -sd'|')
  dirs=$(for f in $files; do echo "./$(dirname "$f")"; done | sort -u)
  echo "no -race: ^($names)\$ in" $dirs
  # shellcheck disable=SC2086 # dirs are package paths, one a word
  out=$(cd "$mod" && go test -count=1 -v -run "^($names)\$" $dirs 2>&1) || { echo "$out"; return 1; }
  if grep -q -e '^--- SKIP' -e '^    --- SKIP' <<<"$out"; then
    echo "$out" | grep -B1 -A3 -e 'SKIP'
    echo "an allocation test skipped without the race detector"
    return 1
  fi
  grep '^ok' <<<"$out" || true
  # Each test named ran and passed here.
  local name
  for name in ${names//|/ }; do
    if ! grep -q "^--- PASS: $name " <<<"$out"; then
      echo "$out"
      echo "$name did not run"
      return 1
    fi
  done
}
run .
run sdk
