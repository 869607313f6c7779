#!/usr/bin/env bash
# scripts/bench.sh — what `make bench` runs: the latency proxies add over
# talking to the mock model directly, measured in one run, interleaved.
#
# Targets (each in front of the same mock process):
#   direct          loadgen → mockllm
#   fasthttp        loadgen → baseproxy (a plain fasthttp reverse proxy, no
#                   pipeline: gateway/cmd/baseproxy) → mockllm
#   nginx           loadgen → nginx (worker_processes 1, upstream keepalive)
#                   → mockllm; skipped with a note if nginx cannot be had
#   tollgate        loadgen → tollgate serve -policy policies/passthrough.yaml
#                   (no plugins, memory stores) → mockllm
#   tollgate-all4   the same with the four built-in plugins enforcing on the
#                   in-process stores (policies/bench-all4.yaml)
#   tollgate-all4-pg (BENCH_STORES=pg) the four plugins on Postgres + Redis,
#                   started here (policies/bench-all4-pg.yaml)
#
# Modes: latency (non-streaming; mock without delays), stream (mock: first
# token after 50 ms, 20 tokens 5 ms apart) and stream0 (streams from the
# mock without delays). For each mode and concurrency level, REPEATS rounds
# run every target once, back to back, the order rotating each round, so
# drifts of a shared machine hit all targets alike; levels are separated by
# a pause and a wait for every gateway's in-flight count to reach 0.
# "added" is the median over rounds of (target − direct) in the same round.
#
# Output: the markdown report on stdout; with BENCH_DOC (make bench sets
# docs/BENCHMARKS.md) it replaces the block between the make-bench markers
# there; with BENCH_OUT it is also written to that file. Progress on
# stderr. Exit status 1 if any request failed (after writing the report).
#
# Knobs (environment):
#   BENCH_STORES=memory       pg: also tollgate-all4-pg (starts Postgres + Redis)
#   BENCH_QUICK=1             a quick check of the harness, not a measurement:
#                             0.5 s runs at 1 and 32 concurrent, short pauses;
#                             never writes docs/BENCHMARKS.md unless BENCH_DOC
#                             is set explicitly
#   BENCH_PLAN=1              print the plan and its estimated time, then exit
#   BENCH_PIN=0               1: each target under test on one CPU (the last), the
#                             load generator, mocks, Redis and Postgres on the
#                             others (taskset); both: every level measured
#                             unpinned and pinned, in one run
#   LEVELS="1 8 32 128"       non-streaming concurrency levels ("" to skip)
#   STREAM_LEVELS=$LEVELS     streaming levels, 50 ms first token ("" to skip)
#   STREAM0_LEVELS=$LEVELS    streaming levels, no mock delays ("" to skip)
#   REPEATS=2                 rounds per level (STREAM_REPEATS, STREAM0_REPEATS)
#   DURATION=2s               measured time per run (STREAM_DURATION, STREAM0_DURATION)
#   WARMUP=20                 warmup requests per worker (STREAM_WARMUP=1, STREAM0_WARMUP=5)
#   PAUSE=2                   seconds of pause between levels
#   TARGETS="direct fasthttp nginx tollgate tollgate-all4"
#                             also: tollgate-preflight, tollgate-limits (preflight,
#                             ratelimit, budget), tollgate-ratelimit, tollgate-budget,
#                             tollgate-holdback (each preflight + that plugin but
#                             holdback), each with -pg for the Postgres + Redis
#                             stores; tollgate-noop4 / tollgate-noop4t (four
#                             no-op plugins, interruptible / not);
#                             tollgate-cachehit / tollgate-cachemiss (preflight
#                             and the response cache, every request cacheable:
#                             one body repeated, all hits; a new body per
#                             request, all misses), -pg: entries in Redis;
#                             direct-mcp (loadgen -mcp → the mock's MCP
#                             endpoint /mcp: tools/call of echo, a session
#                             per worker) and tollgate-mcp (loadgen -mcp →
#                             gateway /mcp/mock → the mock's /mcp, preflight
#                             on: policies/bench-mcp.yaml), its added
#                             latency over direct-mcp's; tollgate-pii-mcp:
#                             the same with pii redacting arguments and
#                             results (the chunk phase on every result); in
#                             the streaming modes the mock answers tools/call
#                             as SSE with 20 progress notifications
#                             (X-Mock-MCP-*, forwarded by the policy); an
#                             EXTRA named *-mcp is an MCP target too
#   POLICY=policies/passthrough.yaml      policy of the tollgate target
#   EXTRA="name=policy.yaml[@binary] ..."
#                             more gateway targets (tollgate-NAME), each with
#                             its own tollgate binary if given (A/B of two
#                             builds in one run: build the old one elsewhere)
#   TOLLGATE_BIN=path         use this tollgate binary instead of building one
#   BENCH_MODEL=mock-1        model name in request bodies
#   BENCH_HEADER=""           an extra "Name: value" header for every target
#                             (default: the bench key's Authorization)
#   LOADGEN_GOMAXPROCS=1      GOMAXPROCS of the load generator (see below)
#   BENCH_OUT=file            also write the report there
#   BENCH_RAW=file            also write the raw JSON lines there
#   KEEP_WORK=1               keep the temp dir (logs, policies, raw results)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/bench/lib.sh
source scripts/bench/lib.sh
# shellcheck source=scripts/bench/targets.sh
source scripts/bench/targets.sh
# shellcheck source=scripts/bench/measure.sh
source scripts/bench/measure.sh
# shellcheck source=scripts/bench/pin.sh
source scripts/bench/pin.sh

BENCH_QUICK=${BENCH_QUICK:-0}
if [[ $BENCH_QUICK == 1 ]]; then
	q_levels="1 32" q_dur=0.5s q_pause=0.5 q_warm=5
else
	q_levels="1 8 32 128" q_dur=2s q_pause=2 q_warm=20
fi
LEVELS=${LEVELS-$q_levels}
STREAM_LEVELS=${STREAM_LEVELS-$LEVELS}
STREAM0_LEVELS=${STREAM0_LEVELS-$LEVELS}
REPEATS=${REPEATS:-2}
STREAM_REPEATS=${STREAM_REPEATS:-$REPEATS}
STREAM0_REPEATS=${STREAM0_REPEATS:-$STREAM_REPEATS}
DURATION=${DURATION:-$q_dur}
STREAM_DURATION=${STREAM_DURATION:-$DURATION}
STREAM0_DURATION=${STREAM0_DURATION:-$DURATION}
WARMUP=${WARMUP:-$q_warm}
STREAM_WARMUP=${STREAM_WARMUP:-1}
STREAM0_WARMUP=${STREAM0_WARMUP:-5}
PAUSE=${PAUSE:-$q_pause}
BENCH_PIN=${BENCH_PIN:-0}
case $BENCH_PIN in
0) PIN_MODES=("") ;;
1) PIN_MODES=(pinned) ;;
both) PIN_MODES=("" pinned) ;;
*) die "BENCH_PIN must be 0, 1 or both, got '$BENCH_PIN'" ;;
esac
[[ $BENCH_PIN == 0 ]] || pin_init
BENCH_STORES=${BENCH_STORES:-memory}
case $BENCH_STORES in
memory) default_targets="direct fasthttp nginx tollgate tollgate-all4" ;;
pg) default_targets="direct fasthttp nginx tollgate tollgate-all4 tollgate-all4-pg" ;;
*) die "BENCH_STORES must be memory or pg, got '$BENCH_STORES'" ;;
esac
TARGETS=${TARGETS:-$default_targets}
POLICY=${POLICY:-policies/passthrough.yaml}
EXTRA=${EXTRA:-}
BENCH_MODEL=${BENCH_MODEL:-mock-1}
BENCH_KEY=tg_bench_key_0123456789 # policies/bench-all4.yaml holds its SHA-256
BENCH_HEADER=${BENCH_HEADER:-"Authorization: Bearer $BENCH_KEY"}
BENCH_DOC=${BENCH_DOC:-}
[[ -z $BENCH_DOC && $BENCH_QUICK != 1 ]] && BENCH_DOC=${BENCH_DOC_DEFAULT:-}
# The load generator shares the 2 cores with the mock and the proxy under
# test, so it runs with GOMAXPROCS=1 by default. Measured on the 2-core dev
# machine (2 × 8 alternating 3 s runs per setting, loadgen → mock direct),
# spread = median absolute deviation / median:
#              req/s spread    p50 spread     p99 spread    CPU per 10k req
#   c=1   GMP=1: 5.5%          3.8%           7.5%          0.50 s
#         GMP=2: 8.0%          7.3%           7.0%          0.48 s
#   c=8   GMP=1: 7.6%         13.7%          16.7%          0.26 s
#         GMP=2: 17.6%        13.4%           8.3%          0.27 s
#   c=32  GMP=1: 8.7%          5.5%           9.7%          0.21 s
#         GMP=2: 17.5%        13.1%           6.9%          0.22 s
# GOMAXPROCS=1 halves the run-to-run spread of req/s and of p50 at most
# levels, uses slightly less CPU per request at c >= 8, and can never take
# both cores from the system under test; GOMAXPROCS=2 gave a somewhat
# steadier p99 at c >= 8. The medians themselves agree within noise.
LOADGEN_GOMAXPROCS=${LOADGEN_GOMAXPROCS:-1}

# Modes: name, mock ("fast": no delays, "slow": 50 ms first token), levels,
# rounds, duration, warmup.
MODES=(latency stream stream0)
declare -A M_MOCK=([latency]=fast [stream]=slow [stream0]=fast)
declare -A M_LEVELS=([latency]=$LEVELS [stream]=$STREAM_LEVELS [stream0]=$STREAM0_LEVELS)
declare -A M_REPEATS=([latency]=$REPEATS [stream]=$STREAM_REPEATS [stream0]=$STREAM0_REPEATS)
declare -A M_DURATION=([latency]=$DURATION [stream]=$STREAM_DURATION [stream0]=$STREAM0_DURATION)
declare -A M_WARMUP=([latency]=$WARMUP [stream]=$STREAM_WARMUP [stream0]=$STREAM0_WARMUP)
declare -A M_NAME=([latency]="non-streaming" [stream]="streaming, 50 ms first token" [stream0]="streaming, no delays")
declare -A M_MOCKDESC=([latency]="mock: 20 tokens, no delays" [stream]="mock: first token after 50 ms, 20 tokens 5 ms apart"
	[stream0]="mock: 20 tokens, no delays")
ACTIVE_MODES=()
for m in "${MODES[@]}"; do
	[[ -n ${M_LEVELS[$m]// /} ]] && ACTIVE_MODES+=("$m")
done
((${#ACTIVE_MODES[@]} > 0)) || die "nothing to measure: LEVELS, STREAM_LEVELS and STREAM0_LEVELS are all empty"
need_mock() { # need_mock fast|slow
	local m
	for m in "${ACTIVE_MODES[@]}"; do [[ ${M_MOCK[$m]} == "$1" ]] && return 0; done
	return 1
}

# The exact command, with every knob spelled out, for the report header.
KNOBS="LEVELS='$LEVELS' STREAM_LEVELS='$STREAM_LEVELS' STREAM0_LEVELS='$STREAM0_LEVELS'"
KNOBS+=" REPEATS=$REPEATS STREAM_REPEATS=$STREAM_REPEATS STREAM0_REPEATS=$STREAM0_REPEATS"
KNOBS+=" DURATION=$DURATION STREAM_DURATION=$STREAM_DURATION STREAM0_DURATION=$STREAM0_DURATION"
KNOBS+=" WARMUP=$WARMUP STREAM_WARMUP=$STREAM_WARMUP STREAM0_WARMUP=$STREAM0_WARMUP PAUSE=$PAUSE"
KNOBS+=" BENCH_STORES=$BENCH_STORES TARGETS='$TARGETS' LOADGEN_GOMAXPROCS=$LOADGEN_GOMAXPROCS"
[[ $BENCH_PIN != 0 ]] && KNOBS+=" BENCH_PIN=$BENCH_PIN"
[[ $BENCH_QUICK == 1 ]] && KNOBS="BENCH_QUICK=1 $KNOBS"
[[ -n ${TOLLGATE_BIN:-} ]] && KNOBS+=" TOLLGATE_BIN=$TOLLGATE_BIN"
[[ $POLICY != policies/passthrough.yaml ]] && KNOBS+=" POLICY=$POLICY"
[[ -n $EXTRA ]] && KNOBS+=" EXTRA='$EXTRA'"
[[ $BENCH_HEADER != "Authorization: Bearer $BENCH_KEY" ]] && KNOBS+=" BENCH_HEADER='${BENCH_HEADER%%:*}: …'"
KNOBS+=" scripts/bench.sh"
INVOKED=${BENCH_INVOKED:-scripts/bench.sh}

# Targets in row order: the named ones, then EXTRA's.
ORDER=(direct) # always measured: the others are compared with it
for t in $TARGETS; do
	has_target "$t" || ORDER+=("$t")
done
for extra in $EXTRA; do
	[[ $extra == *=* ]] || die "EXTRA entries are NAME=POLICY[@BINARY], got '$extra'"
	[[ $extra != *@* || -x ${extra#*@} ]] || die "EXTRA: ${extra#*@} is not an executable"
	ORDER+=("tollgate-${extra%%=*}")
done
# The MCP targets (tollgate-*-mcp, an EXTRA named *-mcp included) are
# compared with direct-mcp: measured whenever one is.
for t in "${ORDER[@]}"; do
	[[ $t == tollgate-*mcp ]] && ! has_target direct-mcp && ORDER+=(direct-mcp)
done
for t in "${ORDER[@]}"; do
	case $t in
	direct | direct-mcp | fasthttp | nginx | tollgate | tollgate-noop4 | tollgate-noop4t | tollgate-pii-mcp) ;;
	tollgate-*) [[ -n $(variant_of "$t") || " $EXTRA " == *" ${t#tollgate-}="* ]] || die "unknown target '$t'" ;;
	*) die "unknown target '$t'" ;;
	esac
done
uses_pg() {
	local t
	for t in "${ORDER[@]}"; do [[ $(variant_of "$t") == pg:* ]] && return 0; done
	return 1
}

# ---------------------------------------------------------------- plan
plan_estimate # sets PLAN_RUNS, PLAN_SECONDS (per-run overheads included)
log "plan: ${#ACTIVE_MODES[@]} modes (${ACTIVE_MODES[*]}), targets: ${ORDER[*]}"
log "plan: $PLAN_RUNS runs, measuring takes about $(fmt_secs "$PLAN_SECONDS"); add builds and startup (under a minute with a warm Go build cache, about 3 min from a cold one on 2 idle cores)"
if [[ ${BENCH_PLAN:-0} == 1 ]]; then
	plan_print
	exit 0
fi
T_START=$(date +%s)
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-bench.XXXXXX")
# nginx workers and Postgres may run as unprivileged users: let them
# traverse WORK.
chmod 755 "$WORK"
BIN=$WORK/bin
RESULTS=$WORK/results.jsonl
: >"$RESULTS"
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- build
mkdir -p "$BIN/plugins" "$WORK/policies"
cmds=(./gateway/cmd/mockllm ./gateway/cmd/loadgen ./gateway/cmd/baseproxy)
if [[ -n ${TOLLGATE_BIN:-} ]]; then
	cp "$TOLLGATE_BIN" "$BIN/tollgate" || die "cannot copy TOLLGATE_BIN=$TOLLGATE_BIN"
else
	cmds+=(./gateway/cmd/tollgate)
fi
log "building ${cmds[*]}"
go build -o "$BIN/" "${cmds[@]}" || die "go build failed"
build_plugins # the plugins the gateway targets need, into $BIN/plugins

if has_target nginx && ! find_nginx; then
	drop_target nginx
	NOTES+=("nginx: not installed, and installing it failed; the nginx target was skipped")
fi

# ---------------------------------------------------------------- services
ADMIN_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
uses_pg && start_pg_redis
start_mocks
has_target fasthttp && start_baseproxies
has_target nginx && start_nginx
start_gateways

smoke_test
check_gateways
log "all targets answer: ${ORDER[*]} (startup took $(fmt_secs $(($(date +%s) - T_START))))"

# ---------------------------------------------------------------- measure
measure_all
T_END=$(date +%s)
log "measured in $(fmt_secs $((T_END - T_MEASURE))); wall time $(fmt_secs $((T_END - T_START)))"
while IFS= read -r w; do
	[[ -n $w ]] || continue
	log "WARNING: $w"
	NOTES+=("Gateway log, $w")
done <<<"$(gateway_warnings)"

# ---------------------------------------------------------------- report
write_report
