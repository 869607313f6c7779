# shellcheck shell=bash
# shellcheck disable=SC2004 # keys of associative arrays need their $ in arithmetic
# scripts/bench/measure.sh — the plan, the interleaved runs, and the report
# of scripts/bench.sh (sourced).

# Fixed cost of one run beyond its measured duration, in ms: starting the
# load generator, its warmup and connection setup, and, for streams, the
# streams still open when the clock stops (they are completed and counted).
# BENCH_QUICK=1 on the shared 2-core machine at load average 10 measured
# about 0.45 s a run; a quiet machine needs less.
RUN_OVERHEAD_MS=300
STREAM_MS=160 # one stream from the 50 ms mock: 50 ms + 20 × 5 ms + slack

# run_cost_ms MODE prints the planned wall time of one run of MODE.
run_cost_ms() {
	local m=$1 d
	d=$(dur_ms "${M_DURATION[$m]}")
	if [[ ${M_MOCK[$m]} == slow ]]; then
		echo $((d + RUN_OVERHEAD_MS + (M_WARMUP[$m] + 1) * STREAM_MS))
	else
		echo $((d + RUN_OVERHEAD_MS))
	fi
}

# plan_estimate sets PLAN_RUNS and PLAN_MS (the measuring phase's planned
# wall time, pauses included) and PLAN_SECONDS.
plan_estimate() {
	local m lv n=${#ORDER[@]} levels=0
	PLAN_RUNS=0 PLAN_MS=0
	for m in "${ACTIVE_MODES[@]}"; do
		for lv in ${M_LEVELS[$m]}; do
			levels=$((levels + 1))
			PLAN_RUNS=$((PLAN_RUNS + M_REPEATS[$m] * n * ${#PIN_MODES[@]}))
			PLAN_MS=$((PLAN_MS + M_REPEATS[$m] * n * ${#PIN_MODES[@]} * $(run_cost_ms "$m")))
		done
	done
	PLAN_MS=$((PLAN_MS + (levels - 1) * $(dur_ms "${PAUSE}s")))
	# Switching the pin mode waits about a second for GOMAXPROCS.
	[[ $BENCH_PIN == 0 ]] || PLAN_MS=$((PLAN_MS + levels * ${#PIN_MODES[@]} * 1500))
	PLAN_SECONDS=$((PLAN_MS / 1000))
}

plan_print() {
	local m
	echo "Plan ($INVOKED: $KNOBS)"
	for m in "${ACTIVE_MODES[@]}"; do
		printf '  %-8s levels %-12s × %s rounds × %d targets × %d pin modes, %s per run (≈ %s ms with overhead)\n' \
			"$m" "${M_LEVELS[$m]}" "${M_REPEATS[$m]}" "${#ORDER[@]}" "${#PIN_MODES[@]}" "${M_DURATION[$m]}" "$(run_cost_ms "$m")"
	done
	echo "  targets: ${ORDER[*]}"
	echo "  $PLAN_RUNS runs, pauses of ${PAUSE}s between levels: measuring ≈ $(fmt_secs "$PLAN_SECONDS")"
	echo "  plus builds and startup: under a minute with a warm Go build cache, about 3 min from a cold one on 2 idle cores"
}

# loadgen ARGS... runs the load generator with the chosen GOMAXPROCS and
# the bench header.
loadgen() {
	GOMAXPROCS=$LOADGEN_GOMAXPROCS ${PIN_PREFIX[@]+"${PIN_PREFIX[@]}"} "$BIN/loadgen" -model "$BENCH_MODEL" -H "$BENCH_HEADER" "$@"
}

# target_args TARGET MODE sets TARGET_ARGS, the load generator's flags for
# TARGET in MODE beyond the URL and the run's length: -stream in the
# streaming modes; -mcp for the MCP targets, whose streams are the mock's
# SSE answers to tools/call with 20 progress notifications before the
# result (as a chat stream has 20 tokens: the first after the mock's TTFT,
# the rest its inter-token delay apart); -unique for the cache misses.
target_args() {
	TARGET_ARGS=()
	[[ $2 != latency ]] && TARGET_ARGS+=(-stream)
	if [[ $1 == *-mcp ]]; then
		TARGET_ARGS+=(-mcp)
		[[ $2 != latency ]] && TARGET_ARGS+=(-H "X-Mock-MCP-Stream: true" -H "X-Mock-MCP-Progress: 20")
	fi
	[[ $1 == tollgate-cachemiss* ]] && TARGET_ARGS+=(-unique)
	return 0
}

# smoke_test: every target answers every mode, before any time is spent
# measuring.
smoke_test() {
	local t m out args
	for t in "${ORDER[@]}"; do
		for m in "${ACTIVE_MODES[@]}"; do
			target_args "$t" "$m"
			args=(-url "${URL[$t:${M_MOCK[$m]}]}" -n 3 -warmup 0 -json "${TARGET_ARGS[@]}")
			out=$(loadgen "${args[@]}") || die "loadgen failed against $t ($m)"
			[[ $(json_num "$out" '"failures":') == 0 ]] ||
				die "smoke test ($m) against $t failed: $out"
		done
	done
}

# metric_value ADMINPORT SERIES prints the value of one exact series (name
# and labels, e.g. tollgate_plugin_calls_total{plugin="budget"}) from a
# gateway's /metrics, or "?" if it is absent.
metric_value() {
	http_get "$1" /metrics | awk -v series="$2" '$1 == series { v = $2 + 0; found = 1 } END { print (found ? v : "?") }'
}

# check_gateways runs after the smoke test: in every gateway each plugin of
# its policy ran, ratelimit charged its limits, and no gateway logged a
# warning or an error (a limit the limiter refuses as invalid makes
# ratelimit admit without charging, with a warning: no failure shows it).
check_gateways() {
	local k t v p n r
	for k in "${!ADMINS[@]}"; do
		t=${k%:*} v=$(variant_of "${k%:*}")
		for p in ${v#*:}; do
			n=$(metric_value "${ADMINS[$k]}" "tollgate_plugin_calls_total{plugin=\"$p\"}")
			[[ $n != "?" && $n != 0 ]] || die "$t (${k#*:} mock): plugin $p did not run during the smoke test"
		done
		[[ " ${v#*:} " == *" ratelimit "* ]] || continue
		# The Redis limiter counts its decisions; the in-process one logs
		# a warning instead when it admits without charging.
		n=$(metric_value "${ADMINS[$k]}" 'tollgate_ratelimit_decisions_total{result="admitted"}')
		[[ $n == "?" ]] && continue
		[[ $n != 0 ]] || die "$t (${k#*:} mock): ratelimit charged no request during the smoke test"
		for r in rejected fallback; do
			n=$(metric_value "${ADMINS[$k]}" "tollgate_ratelimit_decisions_total{result=\"$r\"}")
			[[ $n == 0 ]] || die "$t (${k#*:} mock): $n rate-limit decisions were $r during the smoke test"
		done
	done
	local w
	w=$(gateway_warnings)
	[[ -z $w ]] || die "a gateway warned during the smoke test: $w"
}

# gateway_warnings prints, for each gateway log with warnings or errors,
# their count and the first one.
gateway_warnings() {
	local f n
	for f in "$WORK"/tollgate*.log; do
		[[ -f $f ]] || continue
		n=$(grep -c '"level":"\(WARN\|ERROR\)"' "$f" || true)
		((n > 0)) || continue
		printf '%s: %d warnings or errors, the first: %s\n' "$(basename "$f" .log)" "$n" \
			"$(grep -m 1 '"level":"\(WARN\|ERROR\)"' "$f" | cut -c 1-300)"
	done
}

# wait_idle waits until no gateway has a request in flight (at most 30 s).
wait_idle() {
	local k n i
	for k in "${!ADMINS[@]}"; do
		for ((i = 0; i < 300; i++)); do
			n=$(inflight "${ADMINS[$k]}")
			[[ $n == 0 ]] && break
			sleep 0.1
		done
		[[ $n == 0 ]] || log "WARNING: $k still has $n requests in flight after 30 s"
	done
}

# section_key MODE PIN prints the results' mode of a mode measured in a
# pin mode: "latency", or "latency+pinned".
section_key() { echo "$1${2:++$2}"; }

# run_one MODE LEVEL ROUND TARGET [PIN] appends one JSON line to $RESULTS
# and prints a progress line.
run_one() {
	local mode=$1 level=$2 round=$3 target=$4 pin=${5:-} out args key
	key=$(section_key "$mode" "$pin")
	target_args "$target" "$mode"
	args=(-url "${URL[$target:${M_MOCK[$mode]}]}" -c "$level" -d "${M_DURATION[$mode]}"
		-warmup "${M_WARMUP[$mode]}" -label "$key/$target/c$level/r$round" -json "${TARGET_ARGS[@]}")
	out=$(loadgen "${args[@]}") || die "loadgen failed ($key $target c=$level)"
	printf '{"mode":"%s","target":"%s","level":%d,"round":%d,%s\n' "$key" "$target" "$level" "$round" "${out#\{}" >>"$RESULTS"

	RUNS_DONE=$((RUNS_DONE + 1))
	PLANNED_DONE_MS=$((PLANNED_DONE_MS + $(run_cost_ms "$mode")))
	local now elapsed eta p50 fails what=p50
	now=$(date +%s)
	elapsed=$((now - T_MEASURE))
	eta=$(((PLAN_MS - PLANNED_DONE_MS) * (elapsed > 0 ? elapsed : 1) / PLANNED_DONE_MS))
	if [[ $mode == latency ]]; then
		p50=$(json_num "$out" '"latency_us":\{[^}]*"p50":')
	else
		p50=$(json_num "$out" '"ttft_us":\{[^}]*"p50":') what="ttft p50"
	fi
	fails=$(json_num "$out" '"failures":')
	local msg
	msg=$(printf 'run %d/%d %s c=%d r%d %-16s %8s req/s, %s %sµs, %s failed · elapsed %s, ETA %s' \
		"$RUNS_DONE" "$PLAN_RUNS" "$key" "$level" "$round" "$target" "$(json_num "$out" '"rps":')" \
		"$what" "$p50" "$fails" "$(fmt_secs "$elapsed")" "$(fmt_secs "$eta")")
	[[ $fails != 0 ]] && msg+=" — FAILURES: $(sed -n 's/.*"errors":\[{"message":"\([^"]*\)".*/\1/p' <<<"$out")"
	log "$msg"
}

# measure_all runs the matrix: per mode and level, in each pin mode,
# ROUNDS rounds of every target, the order rotating each round; a pause
# and an idle wait between levels.
measure_all() {
	local m lv r i pin n=${#ORDER[@]} first=1
	RUNS_DONE=0 PLANNED_DONE_MS=0
	plan_estimate # targets may have been dropped since the first estimate
	T_MEASURE=$(date +%s)
	log "measuring: $PLAN_RUNS runs, about $(fmt_secs "$PLAN_SECONDS")"
	for m in "${ACTIVE_MODES[@]}"; do
		for lv in ${M_LEVELS[$m]}; do
			if ((!first)); then
				sleep "$PAUSE"
				wait_idle
			fi
			first=0
			for pin in "${PIN_MODES[@]}"; do
				if [[ $BENCH_PIN != 0 ]]; then
					set_pin "$([[ $pin == pinned ]] && echo on || echo off)"
					sleep 0.5
				fi
				for ((r = 1; r <= M_REPEATS[$m]; r++)); do
					for ((i = 0; i < n; i++)); do
						run_one "$m" "$lv" "$r" "${ORDER[$(((i + r - 1) % n))]}" "$pin"
					done
				done
			done
		done
	done
}

# describe TARGET prints what a target is, for the report.
describe() {
	local v
	case $1 in
	direct) echo "direct: the load generator talking to the mock" ;;
	fasthttp) echo "fasthttp: \`gateway/cmd/baseproxy\`, a plain fasthttp reverse proxy (HostClient keep-alive pool, body streamed through), no pipeline" ;;
	nginx) echo "nginx: nginx $NGINX_VERSION, \`worker_processes 1\`, \`proxy_pass\` with an upstream keep-alive pool, \`proxy_buffering off\`" ;;
	tollgate)
		if [[ $POLICY == policies/passthrough.yaml ]]; then
			echo "tollgate: \`tollgate serve\` on \`policies/passthrough.yaml\` (no plugins, no external services)"
		else
			echo "tollgate: \`tollgate serve\` on \`$POLICY\`"
		fi
		;;
	direct-mcp) echo "direct-mcp: the load generator calling the mock's MCP tool \`echo\` (\`loadgen -mcp\`: a session per worker, opened untimed, then \`tools/call\` with a new id each); in the streaming modes the mock answers as SSE, 20 progress notifications before the result, and TTFT is the first of them" ;;
	tollgate-mcp) echo "tollgate-mcp: the same tool calls through \`tollgate serve\` on \`policies/bench-mcp.yaml\` (\`POST /mcp/mock\`, preflight checking the bench key), compared with direct-mcp" ;;
	tollgate-pii-mcp) echo "tollgate-pii-mcp: tollgate-mcp plus the built-in pii in \`redact\` mode with \`reply: redact\`: each call's arguments scanned in the request phase and each result's strings in the chunk phase, compared with direct-mcp" ;;
	tollgate-noop4) echo "$1: \`policies/passthrough.yaml\` plus four no-op plugins, one per phase" ;;
	tollgate-noop4t) echo "$1: \`policies/passthrough.yaml\` plus four no-op plugins, one per phase, \`interruptible: false\`" ;;
	*)
		v=$(variant_of "$1")
		local plugins=${v#*:}
		plugins=${plugins// /, }
		local cache=""
		[[ $1 == tollgate-cachehit* ]] && cache=" plus the cache plugin (\`when: always\`): one body repeated, every request after the first a hit"
		[[ $1 == tollgate-cachemiss* ]] && cache=" plus the cache plugin (\`when: always\`): a new body per request (\`loadgen -unique\`), every request a miss looked up and stored"
		plugins=${plugins%, cache}
		if [[ -z $v ]]; then
			echo "$1: \`$(policy_for "$1")\`"
		elif [[ ${v%%:*} == pg ]]; then
			echo "$1: $plugins enforcing on Postgres $PG_VERSION (tenant store, call log) and Redis $REDIS_VERSION (limits, budget, cache entries), \`policies/bench-all4-pg.yaml\`$cache"
		else
			echo "$1: $plugins enforcing on the in-process stores, \`policies/bench-all4.yaml\`$cache"
		fi
		;;
	esac
}

# write_report writes the markdown report (stdout, BENCH_OUT, BENCH_DOC)
# and exits 1 if any request failed.
write_report() {
	local commit cpu mem title t m args=() rc=0
	commit=$(git rev-parse --short HEAD 2>/dev/null || echo "unknown (not a git checkout)")
	if git rev-parse --git-dir >/dev/null 2>&1 && [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null | head -n 1) ]]; then
		commit+=" + uncommitted changes"
	fi
	cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
	mem=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo 2>/dev/null)
	title="\`$INVOKED\` — $(date -u '+%Y-%m-%d %H:%M UTC')"
	[[ $BENCH_QUICK == 1 ]] && title+=" — quick check of the harness (BENCH_QUICK=1), not a measurement"
	args+=(-title "$title")
	args+=(-header "Machine: $(nproc) CPUs (\`nproc\`), ${cpu:-unknown CPU}, ${mem:-? GiB}, $(uname -sr); load average at the start $LOADAVG")
	local software
	software="$(go env GOVERSION), commit $commit"
	[[ -n ${NGINX_VERSION:-} ]] && software+=", nginx $NGINX_VERSION"
	[[ -n ${PG_VERSION:-} ]] && software+=", PostgreSQL $PG_VERSION, Redis $REDIS_VERSION"
	args+=(-header "Software: $software")
	args+=(-header "Command: \`$INVOKED\`, that is \`$KNOBS\`")
	args+=(-header "Wall time $(fmt_secs $((T_END - T_START))): builds and startup $(fmt_secs $((T_MEASURE - T_START))), measuring $(fmt_secs $((T_END - T_MEASURE)))")
	args+=(-header "Load: \`gateway/cmd/loadgen\`, closed loop (each worker keeps one keep-alive connection and sends back to back), GOMAXPROCS=$LOADGEN_GOMAXPROCS; every request is a chat completion for \`$BENCH_MODEL\` with \`max_tokens\` 64 and the bench key$(has_target direct-mcp && echo ' (the MCP targets: a tool call, below)' || true). Per level, every round runs each target once, the order rotating; ${PAUSE}s pause and every gateway idle (in-flight 0) between levels. Figures are medians over rounds; *added* is the median over rounds of (target − direct) in the same round")
	for t in "${ORDER[@]}"; do
		args+=(-header "$(describe "$t")")
	done
	for t in ${NOTES[@]+"${NOTES[@]}"}; do
		args+=(-header "$t")
	done
	[[ $BENCH_PIN != 0 ]] && args+=(-header "Pinning (BENCH_PIN=$BENCH_PIN, taskset on every thread of the running processes): $(pin_desc pinned); GOMAXPROCS of the Go programs follows their CPUs. Other work on the machine is not pinned: the load average says how much of the targets' CPU it may have taken")
	local unit pin
	for m in "${ACTIVE_MODES[@]}"; do
		unit=stream
		[[ $m == latency ]] && unit=request
		((M_WARMUP[$m] == 1)) || unit+=s
		for pin in "${PIN_MODES[@]}"; do
			local name=${M_NAME[$m]}
			[[ -n $pin ]] && name+=", $pin"
			[[ -z $pin && $BENCH_PIN == both ]] && name+=", unpinned"
			args+=(-section "$(section_key "$m" "$pin"):$name:${M_MOCKDESC[$m]}; ${M_DURATION[$m]} × ${M_REPEATS[$m]} rounds, ${M_WARMUP[$m]} warmup $unit/worker")
		done
	done
	has_target fasthttp && args+=(-floor fasthttp)
	has_target nginx && args+=(-yardstick nginx)
	# direct-mcp is the MCP targets' baseline, compared with nothing.
	local t
	for t in "${ORDER[@]}"; do
		[[ $t == tollgate-*mcp ]] && args+=(-compare "$t=direct-mcp")
	done
	has_target tollgate-all4 && args+=(-summary "tollgate-all4=all four plugins on, memory stores")
	has_target tollgate-all4-pg && args+=(-summary "tollgate-all4-pg=all four plugins on, Postgres + Redis")
	[[ -n ${BENCH_OUT:-} ]] && args+=(-out "$BENCH_OUT")
	[[ -n $BENCH_DOC ]] && args+=(-into "$BENCH_DOC")
	"$BIN/loadgen" report "${args[@]}" -targets "${ORDER[*]}" -baseline direct -summary-levels 1,32 "$RESULTS" || rc=$?
	if [[ -n ${BENCH_RAW:-} ]]; then
		cp "$RESULTS" "$BENCH_RAW"
		log "raw results written to $BENCH_RAW"
	fi
	[[ -n ${BENCH_OUT:-} ]] && ((rc == 0 || rc == 3)) && log "report written to $BENCH_OUT"
	[[ -n $BENCH_DOC ]] && ((rc == 0 || rc == 3)) && log "report written into $BENCH_DOC (between the make-bench markers)"
	case $rc in
	0) ;;
	3)
		log "FAILED: some requests failed; see the failed/total columns"
		exit "$EXIT_FAILURES"
		;;
	*) die "loadgen report failed (exit $rc)" ;;
	esac
}
