#!/usr/bin/env bash
# coldstart: how long `tollgate serve` takes from start to ready (GET
# /readyz answers 200) on the embedded default policy (the four built-in
# plugins), RUNS times each: with an empty compilation cache (cold); with
# one made by `tollgate plugin warm` (warm); and with an empty one that
# `plugin warm -seed` first fills from a finished cache, as the Helm
# chart's init container does from the image's (seeded: init_s is that
# step). And the RSS once ready, after a second idle.
#
#   make build && scripts/coldstart.sh [RUNS]      (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
bin=bin/tollgate
work=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-coldstart.XXXXXX")
trap 'rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# ready_after CACHE prints the seconds from start to the first 200 from
# /readyz, and the RSS in MiB once ready.
ready_after() {
	local t0 t1 pid rss
	t0=$(date +%s.%N)
	XDG_CACHE_HOME=$1 "$bin" serve -listen "127.0.0.1:$port" >/dev/null 2>"$work/serve.log" &
	pid=$!
	until curl -fsS -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null; do
		kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
		sleep 0.01
	done
	t1=$(date +%s.%N)
	sleep 1
	rss=$(awk '/^VmRSS/ {print int($2 / 1024)}' "/proc/$pid/status")
	kill -INT "$pid"
	wait "$pid" || true
	echo "$(echo "$t1 - $t0" | bc) $rss"
}

printf '%-7s %-4s %7s %8s %8s\n' cache run init_s ready_s rss_mib
for ((i = 1; i <= runs; i++)); do
	rm -rf "$work/cache"
	read -r s rss < <(ready_after "$work/cache")
	printf '%-7s %-4s %7s %8.2f %8s\n' cold "$i" - "$s" "$rss"
done
"$bin" plugin warm -cache-dir "$work/cache/tollgate/wazero" >/dev/null
for ((i = 1; i <= runs; i++)); do
	read -r s rss < <(ready_after "$work/cache")
	printf '%-7s %-4s %7s %8.2f %8s\n' warm "$i" - "$s" "$rss"
done
mv "$work/cache" "$work/shipped"
for ((i = 1; i <= runs; i++)); do
	rm -rf "$work/cache"
	t0=$(date +%s.%N)
	"$bin" plugin warm -seed "$work/shipped/tollgate/wazero" -cache-dir "$work/cache/tollgate/wazero" >/dev/null
	init=$(echo "$(date +%s.%N) - $t0" | bc)
	read -r s rss < <(ready_after "$work/cache")
	printf '%-7s %-4s %7.2f %8.2f %8s\n' seeded "$i" "$init" "$s" "$rss"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, $(go version | cut -d' ' -f3), $(git rev-parse --short HEAD)"
