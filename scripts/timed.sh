#!/usr/bin/env bash
# Runs a command and prints how long it took, the CPU time it and the
# processes it waited for used (user + system), and when it ended, so a log
# of `make test` shows where its wall time goes (its groups run at once and
# print when they end) and which of them the CPUs were busy with.
#
#   scripts/timed.sh NAME COMMAND [ARG...]
set -uo pipefail
name=$1
shift
start=$(date +%s)
"$@"
rc=$?
# The second line of `times` is the children's user and system time, as
# 1m2.345s 0m6.789s.
# `times` runs in this shell (in a pipeline or $(...) it would run in a
# subshell, whose children are not these).
tf=$(mktemp)
times >"$tf"
cpu=$(awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } printf "%d", t }' "$tf")
rm -f "$tf"
echo "-- $name: $(($(date +%s) - start)) s (CPU ${cpu} s), ended $(date -u +%H:%M:%S) UTC, exit $rc"
exit $rc
