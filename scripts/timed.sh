#!/usr/bin/env bash
# Runs a command and prints how long it took and when it ended, so a log of
# `make test` shows where its wall time goes (its groups run at once and
# print when they end).
#
#   scripts/timed.sh NAME COMMAND [ARG...]
set -uo pipefail
name=$1
shift
start=$(date +%s)
"$@"
rc=$?
echo "-- $name: $(($(date +%s) - start)) s, ended $(date -u +%H:%M:%S) UTC, exit $rc"
exit $rc
