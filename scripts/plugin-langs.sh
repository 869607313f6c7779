#!/usr/bin/env bash
# plugin-langs: the example guard (denyguard) written in each plugin
# language by `tollgate plugin new`, built by `tollgate plugin build`, and
# measured side by side by `tollgate plugin check` (which also runs the
# conformance suite on each): module size, cold compile time (wazero, no
# cache), instance memory after configure, and the median time of a request
# and a chunk callback on a warm instance, host side included.
#
#   scripts/plugin-langs.sh [RUNS]      (default 3; the table of each run)
#
# Needs Go, and for Rust Debian's rustc with the wasm32 standard library
# and lld (`make test-deps` installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
work=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-langs.XXXXXX")
trap 'rm -rf "$work"' EXIT
go build -o "$work/tollgate" ./gateway/cmd/tollgate
tg="$work/tollgate"
config='{"deny": ["secret", "p@ssw0rd"], "replacement": "[blocked]"}'
mods=()
for lang in go rust; do
	"$tg" plugin new "denyguard-$lang" -lang "$lang" -dir "$work/$lang" -sdk "$PWD/sdk" >/dev/null
	"$tg" plugin build "$work/$lang" -o "$work/denyguard-$lang.wasm" >/dev/null
	mods+=("$work/denyguard-$lang.wasm")
done
echo "go: $(go version | cut -d' ' -f3), rust: $(/usr/bin/rustc --version | cut -d' ' -f2), $(nproc) CPUs"
for ((i = 1; i <= runs; i++)); do
	echo
	echo "run $i"
	# The reports go to a file; the side-by-side table is the last block.
	status=0
	"$tg" plugin check -config "$config" "${mods[@]}" >"$work/report" || status=$?
	if [ "$status" -ne 0 ]; then
		cat "$work/report" >&2
		exit "$status"
	fi
	awk 'BEGIN { RS = ""; ORS = "\n" } { last = $0 } END { print last }' "$work/report"
done
