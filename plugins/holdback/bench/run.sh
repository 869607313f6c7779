#!/usr/bin/env bash
# plugins/holdback/bench/run.sh — time to first token of streams through the
# gateway without a guard, with the holdback guard, and with the guard in
# buffer mode, with scripts/bench.sh (real processes: mockllm at TTFT 50 ms,
# 20 tokens 5 ms apart; tollgate serve; loadgen -stream).
#
# Each of RUNS runs of scripts/bench.sh measures the four targets (direct,
# tollgate = no guard, tollgate-holdback, tollgate-buffer) interleaved, in
# REPEATS rounds per concurrency level. The table (on stdout) gives medians
# over all rounds of all runs; "vs no guard" is the median of (target − no
# guard) within the same round.
#
# Knobs: RUNS=3 REPEATS=5 CONC="1 8 32" DURATION=3s OUT=dir (policies,
# module and raw results; default a temp dir).
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
RUNS=${RUNS:-3}
REPEATS=${REPEATS:-5}
CONC=${CONC:-1 8 32}
DURATION=${DURATION:-3s}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/holdback-bench.XXXXXX")}
mkdir -p "$OUT"

GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o "$OUT/holdback.wasm" ./plugins/holdback
for mode in holdback buffer; do
	{
		cat policies/passthrough.yaml
		printf 'plugins:\n  - name: holdback\n    path: %s\n    on_error: fail_closed\n' "$OUT/holdback.wasm"
		printf '    config:\n      markers: [oaidalleapiprodscus.blob.core.windows.net, files.oaiusercontent.com]\n'
		printf '      case_insensitive: true\n      mode: %s\n' "$mode"
	} >"$OUT/$mode.yaml"
done

for ((run = 1; run <= RUNS; run++)); do
	echo "[holdback-bench] run $run of $RUNS" >&2
	NOOP_PLUGINS=0 PREFLIGHT=0 TARGETS='direct tollgate' LEVELS='' \
		STREAM_LEVELS="$CONC" STREAM_REPEATS="$REPEATS" STREAM_DURATION="$DURATION" STREAM_WARMUP=2 \
		EXTRA="holdback=$OUT/holdback.yaml buffer=$OUT/buffer.yaml" \
		BENCH_OUT="$OUT/run$run.md" BENCH_RAW="$OUT/run$run.jsonl" scripts/bench.sh >/dev/null
	head -n 1 "$OUT/run$run.md" >&2
done

echo "| conc | target | TTFT p50 ms | TTFT p99 ms | vs no guard p50 ms | vs no guard p99 ms | total p50 ms | rounds | failed/total |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|"
for ((run = 1; run <= RUNS; run++)); do
	jq -c --argjson run "$run" '. + {run: $run}' "$OUT/run$run.jsonl"
done | jq -rs -f "$root/plugins/holdback/bench/table.jq"
echo "[holdback-bench] raw results and policies in $OUT" >&2
