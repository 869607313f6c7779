#!/usr/bin/env bash
# shellcheck disable=SC2030,SC2031 # the base tree's plugins are built in a subshell with its own BIN and ORDER, on purpose
# scripts/cpubreak.sh — where a gateway's CPU goes, per request, under load.
#
# For each gateway target (the names of scripts/bench.sh: tollgate-all4,
# tollgate-all4-pg, tollgate-limits-pg, ...), in front of the same mock, it
# runs the load generator at LEVEL concurrent (non-streaming) and measures:
#   - CPU per request of the gateway, redis-server, Postgres (the postmaster
#     and every backend) and the mock: utime + stime deltas of
#     /proc/PID/stat over the run ÷ the requests the run completed;
#   - read and write system calls per request of the gateway and
#     redis-server (syscr + syscw of /proc/PID/io): what batching saves,
#     whatever the machine's load;
#   - the gateway's context switches per request (voluntary and not, every
#     thread's, /proc/PID/task/*/status): the wake-ups a hand-off between
#     goroutines or a woken runtime thread costs;
#   - the mean Redis call as the gateway waited for it
#     (tollgate_redis_call_duration_seconds, every call label, /metrics
#     deltas; 0 for a build without the metric);
#   - the gateway's CPU split into buckets, from a CPU profile
#     (net/http/pprof, `tollgate serve -pprof`) taken over the same run;
#     each sample goes to one bucket (`loadgen cpubuckets`, the rules in
#     gateway/internal/testkit/loadgen/cpubuckets.go): the leaf decides
#     guest wasm and copies, a syscall frame syscalls, the runtime's frames
#     the scheduler + GC; otherwise the innermost frame outside Go's
#     standard library does; the samples taken inside a plugin's callbacks
#     (the gateway labels them with -pprof) split again by plugin: its own
#     guest code, and the host's work for it inside them;
#   - per plugin, the callbacks that waited for a free instance
#     (tollgate_plugin_pool_waits_total ÷ tollgate_plugin_calls_total,
#     /metrics deltas) and the mean request-phase callback (from asking for
#     an instance to the guest's return) at each of WAIT_LEVELS.
# Runs repeat REPEATS times, the targets alternating; the tables give each
# run's figures and the median. Output: markdown on stdout (and CPUBREAK_OUT);
# progress on stderr.
#
# Knobs (environment):
#   CB_TARGETS="tollgate-all4 tollgate-all4-pg"   gateway targets (bench.sh names)
#   LEVEL=32             concurrency of the profiled runs
#   WAIT_LEVELS="32 128" concurrency levels of the pool-wait runs ("" to skip)
#   DURATION=3s          measured time per run
#   REPEATS=2            profiled runs per target (pool-wait runs: one per level and round)
#   WARMUP=2s            load before each target's first run (not measured)
#   BENCH_PIN=1          the gateways on the last CPU, the load generator, mock,
#                        Redis and Postgres on the others (scripts/bench/pin.sh)
#   TOLLGATE_BIN=path    use this tollgate binary instead of building one
#   BASE_TREE=dir        A/B: also measure every target as built from the source
#                        tree in dir (tollgate and the plugins; e.g. an export
#                        of an older commit), named TARGET@base, each run
#                        right after the same target of this tree
#   CPUBREAK_OUT=file    also write the report there
#   KEEP_WORK=1          keep the temp dir (profiles: $WORK/prof-*.pb.gz)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/bench/lib.sh
source scripts/bench/lib.sh
# shellcheck source=scripts/bench/targets.sh
source scripts/bench/targets.sh
# shellcheck source=scripts/bench/pin.sh
source scripts/bench/pin.sh
# shellcheck source=scripts/bench/measure.sh
source scripts/bench/measure.sh # gateway_warnings; loadgen and metric_value are redefined below

CB_TARGETS=${CB_TARGETS:-"tollgate-all4 tollgate-all4-pg"}
LEVEL=${LEVEL:-32}
WAIT_LEVELS=${WAIT_LEVELS-"32 128"}
DURATION=${DURATION:-3s}
REPEATS=${REPEATS:-2}
WARMUP=${WARMUP:-2s}
BENCH_PIN=${BENCH_PIN:-0}
[[ $BENCH_PIN == 0 || $BENCH_PIN == 1 ]] || die "BENCH_PIN must be 0 or 1, got '$BENCH_PIN'"
[[ $BENCH_PIN == 1 ]] && pin_init
EXTRA=""
BENCH_MODEL=mock-1
BENCH_KEY=tg_bench_key_0123456789 # policies/bench-all4.yaml holds its SHA-256
BENCH_HEADER="Authorization: Bearer $BENCH_KEY"
GATEWAY_PPROF=1
BASE_TREE=${BASE_TREE:-}
if [[ -n $BASE_TREE ]]; then
	[[ -d $BASE_TREE/gateway/cmd/tollgate && -d $BASE_TREE/plugins ]] || die "BASE_TREE=$BASE_TREE is not a source tree of the gateway"
	BASE_TREE=$(cd "$BASE_TREE" && pwd)
fi
# cb_variant TARGET is variant_of without the @base suffix.
cb_variant() { variant_of "${1%@base}"; }
ORDER=()
for t in $CB_TARGETS; do
	[[ -n $(variant_of "$t") ]] || die "unknown gateway target '$t' (want tollgate-all4, tollgate-all4-pg, tollgate-limits-pg, ...)"
	ORDER+=("$t")
	[[ -n $BASE_TREE ]] && ORDER+=("$t@base")
done
need_mock() { [[ $1 == fast ]]; }
KNOBS="CB_TARGETS='$CB_TARGETS' LEVEL=$LEVEL WAIT_LEVELS='$WAIT_LEVELS' DURATION=$DURATION REPEATS=$REPEATS WARMUP=$WARMUP"
[[ $BENCH_PIN == 1 ]] && KNOBS+=" BENCH_PIN=1"
[[ -n ${TOLLGATE_BIN:-} ]] && KNOBS+=" TOLLGATE_BIN=$TOLLGATE_BIN"
[[ -n $BASE_TREE ]] && KNOBS+=" BASE_TREE=$BASE_TREE"
LOADAVG_START=$(cut -d' ' -f1-3 /proc/loadavg)
CLK_TCK=$(getconf CLK_TCK)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-cpubreak.XXXXXX")
chmod 755 "$WORK"
BIN=$WORK/bin
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$BIN/plugins" "$WORK/policies"
cmds=(./gateway/cmd/mockllm ./gateway/cmd/loadgen)
if [[ -n ${TOLLGATE_BIN:-} ]]; then
	cp "$TOLLGATE_BIN" "$BIN/tollgate" || die "cannot copy TOLLGATE_BIN=$TOLLGATE_BIN"
else
	cmds+=(./gateway/cmd/tollgate)
fi
log "building ${cmds[*]}"
go build -o "$BIN/" "${cmds[@]}" || die "go build failed"
build_plugins # the @base targets have no variant here: only this tree's
if [[ -n $BASE_TREE ]]; then
	mkdir -p "$WORK/base/bin/plugins" "$WORK/base/policies"
	log "building tollgate and its plugins from $BASE_TREE"
	(cd "$BASE_TREE" && go build -o "$WORK/base/bin/" ./gateway/cmd/tollgate) || die "go build in $BASE_TREE failed"
	ln -s "$BIN/loadgen" "$WORK/base/bin/loadgen"
	(
		cd "$BASE_TREE" || exit 1
		BIN=$WORK/base/bin
		read -ra ORDER <<<"$CB_TARGETS"
		build_plugins
	) || die "building the plugins of $BASE_TREE failed"
fi

ADMIN_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
for t in "${ORDER[@]}"; do
	if [[ $(cb_variant "$t") == pg:* ]]; then
		start_pg_redis
		break
	fi
done
start_mocks
for t in "${ORDER[@]}"; do
	if [[ $t == *@base ]]; then
		# The base tree's policy, its plugins in $WORK/base/bin/plugins.
		policy=$(cd "$BASE_TREE" && WORK=$WORK/base policy_for "${t%@base}")
		BIN=$WORK/base/bin start_gateway "$t" fast "$MOCK_PORT" "$policy"
	else
		start_gateway "$t" fast "$MOCK_PORT" "$(policy_for "$t")"
	fi
done
for t in "${ORDER[@]}"; do
	[[ -n ${ADMINS[$t:fast]:-} ]] || die "$t: its admin listener did not answer GET /metrics"
done

loadgen() { GOMAXPROCS=1 ${PIN_PREFIX[@]+"${PIN_PREFIX[@]}"} "$BIN/loadgen" -model "$BENCH_MODEL" -H "$BENCH_HEADER" "$@"; }
# unique_for TARGET prints -unique for the cache-miss targets (every body new).
unique_for() { [[ $1 == tollgate-cachemiss* ]] && echo -unique || true; }

# cpu_ticks PID... prints the utime + stime of the processes and their
# children (Postgres backends, nginx workers), in clock ticks.
cpu_ticks() {
	local pid kids=() sum=0 v
	for pid in "$@"; do
		read -ra kids <<<"$(pgrep -P "$pid" | tr '\n' ' ')"
		for v in "$pid" ${kids[@]+"${kids[@]}"}; do
			# Fields 14 and 15, counted after the ")" closing the command
			# name (which may hold spaces).
			v=$(sed 's/.*) //' "/proc/$v/stat" 2>/dev/null | awk '{ print $12 + $13 }') || v=0
			sum=$((sum + ${v:-0}))
		done
	done
	echo "$sum"
}

# io_calls PID prints the read and write system calls the process has made
# (syscr + syscw of /proc/PID/io, all its threads; sockets included): what
# batching saves shows here whatever the machine's load.
io_calls() {
	awk '$1 == "syscr:" || $1 == "syscw:" { n += $2 } END { print n + 0 }' "/proc/$1/io" 2>/dev/null || echo 0
}

# ctx_switches PID prints the context switches of the process's threads
# (voluntary and not, /proc/PID/task/*/status; a thread that ended takes
# its count with it, and a Go process's rarely end).
ctx_switches() {
	cat "/proc/$1"/task/*/status 2>/dev/null |
		awk '$1 == "voluntary_ctxt_switches:" || $1 == "nonvoluntary_ctxt_switches:" { n += $2 } END { print n + 0 }'
}

# metric_value ADMINPORT SERIES prints one series' value, or 0 if absent.
metric_value() {
	http_get "$1" /metrics | awk -v series="$2" '$1 == series { v = $2 + 0 } END { print v + 0 }'
}

# redis_calls ADMINPORT prints "seconds calls": the sum and count of
# tollgate_redis_call_duration_seconds over every call label, the time the
# gateway's Redis calls took from its side.
redis_calls() {
	http_get "$1" /metrics | awk '
		index($1, "tollgate_redis_call_duration_seconds_sum{") == 1 { s += $2 }
		index($1, "tollgate_redis_call_duration_seconds_count{") == 1 { n += $2 }
		END { printf "%.9f %d\n", s, n }'
}

# plugin_counts ADMINPORT PLUGIN... prints "calls waits rsum rcount" per
# plugin, one line each: its callbacks, those that waited for an instance,
# and the sum (s) and count of its request-phase callback durations.
plugin_counts() {
	local admin=$1 p m
	shift
	m=$(http_get "$admin" /metrics)
	for p in "$@"; do
		awk -v c="tollgate_plugin_calls_total{plugin=\"$p\"}" -v w="tollgate_plugin_pool_waits_total{plugin=\"$p\"}" -v pl="plugin=\"$p\"" '
			$1 == c { calls = $2 }
			$1 == w { waits = $2 }
			index($1, "tollgate_plugin_phase_duration_seconds_sum{") == 1 && index($1, pl) && index($1, "phase=\"request\"") { rsum = $2 }
			index($1, "tollgate_plugin_phase_duration_seconds_count{") == 1 && index($1, pl) && index($1, "phase=\"request\"") { rcount = $2 }
			END { printf "%d %d %.9f %d\n", calls, waits, rsum, rcount }' <<<"$m"
	done
}

declare -A CPU # "target/round/what" → µs per request; what: gw redis pg mock; also rps, load, failed
FAILED_NOTES=()
declare -A BUCKET # "target/round/bucket" → share of the gateway's profile samples (per mille)
declare -A WAITS  # "target/level/round/plugin" → "waits/calls"
declare -A RCB    # "target/level/round/plugin" → mean request-phase callback, µs

# profile_run TARGET ROUND: one measured run with a CPU profile.
profile_run() {
	local t=$1 r=$2 k=$1:fast secs out n prof=$WORK/prof-$1-r$2.pb.gz
	local gw0 rd0=0 pg0=0 mk0 gw1 rd1=0 pg1=0 mk1
	secs=$(($(dur_ms "$DURATION") / 1000))
	((secs >= 1)) || secs=1
	local rc0 rc1 gs0 gs1 rs0=0 rs1=0 rt0 rt1 gc0 gc1
	rc0=$(metric_value "${ADMINS[$k]}" tollgate_redis_commands_total)
	rt0=$(redis_calls "${ADMINS[$k]}")
	gw0=$(cpu_ticks "${GW_PIDS[$k]}") mk0=$(cpu_ticks "$MOCK_PID") gs0=$(io_calls "${GW_PIDS[$k]}") gc0=$(ctx_switches "${GW_PIDS[$k]}")
	[[ -n ${REDIS_PID:-} ]] && rd0=$(cpu_ticks "$REDIS_PID") pg0=$(cpu_ticks "$PG_PID") rs0=$(io_calls "$REDIS_PID")
	curl -sf -o "$prof" "http://127.0.0.1:${PPROFS[$k]}/debug/pprof/profile?seconds=$secs" &
	local curl_pid=$!
	# shellcheck disable=SC2046 # unique_for prints one flag or nothing
	out=$(loadgen -url "${URL[$k]}" -c "$LEVEL" -d "$DURATION" -warmup 0 -json $(unique_for "$t")) || die "loadgen failed against $t"
	gw1=$(cpu_ticks "${GW_PIDS[$k]}") mk1=$(cpu_ticks "$MOCK_PID") gs1=$(io_calls "${GW_PIDS[$k]}") gc1=$(ctx_switches "${GW_PIDS[$k]}")
	[[ -n ${REDIS_PID:-} ]] && rd1=$(cpu_ticks "$REDIS_PID") pg1=$(cpu_ticks "$PG_PID") rs1=$(io_calls "$REDIS_PID")
	rc1=$(metric_value "${ADMINS[$k]}" tollgate_redis_commands_total)
	rt1=$(redis_calls "${ADMINS[$k]}")
	wait "$curl_pid" || die "fetching the CPU profile of $t failed"
	n=$(json_num "$out" '"count":')
	CPU[$t/$r/failed]=$(json_num "$out" '"failures":')
	if [[ ${CPU[$t/$r/failed]} != 0 ]]; then
		log "WARNING: ${CPU[$t/$r/failed]} of $n requests failed against $t: $(sed -n 's/.*"errors":\[{"message":"\([^"]*\)".*/\1/p' <<<"$out")"
		FAILED_NOTES+=("$t, run $r: ${CPU[$t/$r/failed]} of $n requests failed: $(grep -o '"errors":\[[^]]*\]' <<<"$out" | cut -c 1-300)")
	fi
	per_req() { awk -v d="$1" -v n="$n" -v hz="$CLK_TCK" 'BEGIN { printf "%.1f", d / hz * 1e6 / n }'; }
	# each_req COUNT: a count over the run, per request.
	each_req() { awk -v d="$1" -v n="$n" 'BEGIN { printf "%.2f", d / n }'; }
	CPU[$t/$r/gw]=$(per_req $((gw1 - gw0)))
	CPU[$t/$r/redis]=$(per_req $((rd1 - rd0)))
	CPU[$t/$r/pg]=$(per_req $((pg1 - pg0)))
	CPU[$t/$r/mock]=$(per_req $((mk1 - mk0)))
	CPU[$t/$r/rps]=$(json_num "$out" '"rps":')
	# Redis commands a request (a script call is one), as the gateway
	# counts them; the requests still open when the counter was read make
	# it approximate.
	CPU[$t/$r/rcmd]=$(each_req $((rc1 - rc0)))
	# The mean Redis call as the gateway waited for it, µs: against
	# redis-server's own time, what the machine's load adds.
	CPU[$t/$r/rcall]=$(awk -v a="$rt0" -v b="$rt1" 'BEGIN { split(a, x, " "); split(b, y, " "); n = y[2] - x[2]; printf "%.1f", (n > 0 ? (y[1] - x[1]) / n * 1e6 : 0) }')
	CPU[$t/$r/gsys]=$(each_req $((gs1 - gs0)))
	CPU[$t/$r/rsys]=$(each_req $((rs1 - rs0)))
	CPU[$t/$r/gcsw]=$(each_req $((gc1 - gc0)))
	CPU[$t/$r/load]=$(cut -d' ' -f1 /proc/loadavg)
	local b v
	while read -r b v; do
		BUCKET[$t/$r/$b]=$v
	done < <(go tool pprof -traces "$prof" 2>/dev/null | "$BIN/loadgen" cpubuckets)
	log "$t r$r: ${CPU[$t/$r/rps]} req/s, gateway ${CPU[$t/$r/gw]} µs/req, redis ${CPU[$t/$r/redis]}, postgres ${CPU[$t/$r/pg]}, mock ${CPU[$t/$r/mock]}; ${CPU[$t/$r/rcmd]} Redis commands/req; read+write syscalls/req gateway ${CPU[$t/$r/gsys]}, redis ${CPU[$t/$r/rsys]}; gateway context switches/req ${CPU[$t/$r/gcsw]} (load ${CPU[$t/$r/load]})"
}

# wait_run TARGET LEVEL ROUND: one run reading the plugins' pool waits.
wait_run() {
	local t=$1 lv=$2 r=$3 k=$1:fast v p before after i out
	v=$(cb_variant "$t")
	local plugins
	read -ra plugins <<<"${v#*:}"
	before=$(plugin_counts "${ADMINS[$k]}" "${plugins[@]}")
	# shellcheck disable=SC2046
	out=$(loadgen -url "${URL[$k]}" -c "$lv" -d "$DURATION" -warmup 0 -json $(unique_for "$t")) || die "loadgen failed against $t"
	after=$(plugin_counts "${ADMINS[$k]}" "${plugins[@]}")
	paste <(echo "$before") <(echo "$after") | {
		i=0
		while read -r c0 w0 s0 n0 c1 w1 s1 n1; do
			echo "${plugins[i]} $((w1 - w0)) $((c1 - c0)) $(awk -v s="$s1" -v t="$s0" -v n=$((n1 - n0)) 'BEGIN { if (n) printf "%.0f", (s - t) * 1e6 / n; else printf "-" }')"
			i=$((i + 1))
		done
	} >"$WORK/waits"
	while read -r p w c d; do WAITS[$t/$lv/$r/$p]="$w/$c" RCB[$t/$lv/$r/$p]=$d; done <"$WORK/waits"
	local failed
	failed=$(json_num "$out" '"failures":')
	if [[ $failed != 0 ]]; then
		log "WARNING: $failed requests failed against $t at c=$lv"
		FAILED_NOTES+=("$t, c=$lv, pool-wait run $r: $failed requests failed: $(grep -o '"errors":\[[^]]*\]' <<<"$out" | cut -c 1-300)")
	fi
	log "$t c=$lv r$r: $(json_num "$out" '"rps":') req/s, $failed failed; pool waits/callbacks, mean request callback µs: $(awk '{ printf "%s %d/%d %s  ", $1, $2, $3, $4 }' "$WORK/waits")"
}

T_START=$(date +%s)
[[ $BENCH_PIN == 1 ]] && set_pin on
log "warming up: $WARMUP at c=$LEVEL on each target"
for t in "${ORDER[@]}"; do
	loadgen -url "${URL[$t:fast]}" -c "$LEVEL" -n 3 -warmup 0 -json | grep -q '"failures":0' || die "smoke test against $t failed"
	loadgen -url "${URL[$t:fast]}" -c "$LEVEL" -d "$WARMUP" -warmup 0 -json >/dev/null
done
for ((r = 1; r <= REPEATS; r++)); do
	for t in "${ORDER[@]}"; do profile_run "$t" "$r"; done
done
for lv in $WAIT_LEVELS; do
	for ((r = 1; r <= REPEATS; r++)); do
		for t in "${ORDER[@]}"; do wait_run "$t" "$lv" "$r"; done
	done
done
LOADAVG_END=$(cut -d' ' -f1-3 /proc/loadavg)

# ------------------------------------------------------------------ report
# median V... prints the median of the numbers.
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%.3f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# med TARGET WHAT: the median over rounds of CPU[TARGET/round/WHAT].
med() {
	local r vs=()
	for ((r = 1; r <= REPEATS; r++)); do vs+=("${CPU[$1/$r/$2]}"); done
	median "${vs[@]}"
}

declare -A BUCKET_NAME=(
	[guest]="guest wasm (wazero-compiled plugin code)"
	[wasmhost]="plugin host: sdk/wasmhost + wazero runtime (calls in and out, memory, pool)"
	[hostsvc]="host services: hostsvc, limiter, budget, tenant store (in-process work)"
	[rueidis]="Redis client (rueidis + redisx), syscalls excluded"
	[pgx]="Postgres client (pgx), syscalls excluded"
	[fasthttp]="fasthttp + proxy (server, upstream client, pipeline glue)"
	[json]="JSON / SSE parsing and writing (fastjson, openai, sse, proxy/stream)"
	[memmove]="copies (runtime.memmove)"
	[syscall]="syscalls (read, write, epoll/netpoll), whoever makes them"
	[sys_fasthttp]="… of which made by fasthttp + proxy (client and upstream sockets)"
	[sys_rueidis]="… of which made by the Redis client"
	[sys_pgx]="… of which made by the Postgres client"
	[sys_other]="… of which made by the runtime (netpoll from the scheduler) and others"
	[sched_gc]="scheduler + GC (schedule, findRunnable, gcBgMarkWorker, mallocgc, stacks)"
	[other]="other (metrics, call log, logging, timers, ...)"
)

# report_cpu writes the heading and the table of CPU per request.
report_cpu() {
	local t r line
	echo "### \`scripts/cpubreak.sh\` — $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo
	echo "- Command: \`$KNOBS scripts/cpubreak.sh\`; commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$([[ -n $(git status --porcelain --untracked-files=no 2>/dev/null | head -n 1) ]] && echo ' + uncommitted changes'), $(go env GOVERSION)"
	echo "- Machine: $(nproc) CPUs, load average $LOADAVG_START at the start, $LOADAVG_END at the end (other work on the machine included); wall time $(fmt_secs $(($(date +%s) - T_START)))"
	[[ -n $BASE_TREE ]] && echo "- TARGET@base: built from $BASE_TREE ($(git -C "$BASE_TREE" log -1 --format='commit %h, %cs' 2>/dev/null || echo 'not a git checkout')), each run right after TARGET's"
	[[ $BENCH_PIN == 1 ]] && echo "- Pinned (taskset): $(pin_desc pinned); other work on the machine is not pinned"
	echo "- Load: \`loadgen\` (GOMAXPROCS=1) at c=$LEVEL, non-streaming, $DURATION per run, $REPEATS runs per target alternating; CPU from /proc/PID/stat (utime + stime, $CLK_TCK ticks/s) over each run ÷ the requests it completed"
	echo
	echo "CPU per request, µs (median of $REPEATS runs; each run's figure in brackets):"
	echo
	echo "| target | req/s | gateway | redis-server | postgres | gateway + redis + postgres | mock | Redis commands/request | Redis call from the gateway, mean µs | gateway read+write syscalls/request | redis-server read+write syscalls/request | gateway context switches/request | load avg (1 min) |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	for t in "${ORDER[@]}"; do
		for ((r = 1; r <= REPEATS; r++)); do
			if [[ $(cb_variant "$t") == pg:* ]]; then
				CPU[$t/$r/sum]=$(awk -v a="${CPU[$t/$r/gw]}" -v b="${CPU[$t/$r/redis]}" -v c="${CPU[$t/$r/pg]}" 'BEGIN { printf "%.1f", a + b + c }')
			else
				CPU[$t/$r/sum]=${CPU[$t/$r/gw]}
			fi
		done
		line="| $t"
		local w
		for w in rps gw redis pg sum mock rcmd rcall gsys rsys gcsw load; do
			local vs=() prec=0
			[[ $w == load ]] && prec=1
			[[ $w == rcmd || $w == gsys || $w == rsys || $w == gcsw ]] && prec=2
			if [[ ($w == redis || $w == pg || $w == rcmd || $w == rcall || $w == rsys) && $(cb_variant "$t") != pg:* ]]; then
				line+=" | –"
				continue
			fi
			for ((r = 1; r <= REPEATS; r++)); do vs+=("$(printf '%.*f' "$prec" "${CPU[$t/$r/$w]}")"); done
			line+=" | $(printf '%.*f' "$prec" "$(med "$t" "$w")") [$(
				IFS=/
				echo "${vs[*]}"
			)]"
		done
		echo "$line |"
	done
}

# bucket_row LABEL KEY... writes one row of report_buckets' table: per
# target, the buckets KEY... summed (per mille of each run's samples).
bucket_row() {
	local label=$1 t r k line
	shift
	line="| $label"
	for t in "${ORDER[@]}"; do
		local vs=() pooled pms=()
		for ((r = 1; r <= REPEATS; r++)); do
			local sum=0
			for k in "$@"; do sum=$((sum + ${BUCKET[$t/$r/$k]:-0})); done
			pms+=("$sum")
			vs+=("$(awk -v pm="$sum" 'BEGIN { printf "%.0f", pm / 10 }')")
		done
		pooled=$(for ((r = 1; r <= REPEATS; r++)); do echo "${pms[r - 1]} ${BUCKET[$t/$r/samples]:-0}"; done |
			awk '{ s += $1 * $2; n += $2 } END { printf "%.1f", n ? s / n : 0 }')
		line+=" | $(awk -v pm="$pooled" -v g="$(med "$t" gw)" 'BEGIN { printf "%.0f µs (%.0f%%)", pm * g / 1000, pm / 10 }') [$(
			IFS=/
			echo "${vs[*]}"
		)]"
	done
	echo "$line |"
}

# report_buckets writes the table of the gateway's CPU by bucket.
report_buckets() {
	local t r b line
	echo
	echo "The gateway's CPU per request by where it goes: µs (the gateway's median µs/request × the bucket's share of all runs' profile samples pooled) and the share; each run's share in brackets:"
	echo
	line="| bucket"
	local sep="|---"
	for t in "${ORDER[@]}"; do line+=" | $t"; sep+="|---:"; done
	echo "$line |"
	echo "$sep|"
	# The plugins whose callbacks the profiles labelled (tollgate -pprof).
	local plugins=() k p
	for k in "${!BUCKET[@]}"; do
		[[ $k == */plugin:*:guest ]] || continue
		p=${k#*/plugin:}
		p=${p%:guest}
		[[ " ${plugins[*]} " == *" $p "* ]] || plugins+=("$p")
	done
	mapfile -t plugins < <(printf '%s\n' "${plugins[@]}" | sort)
	local host="wasmhost hostsvc rueidis pgx fasthttp json memmove syscall sched_gc other"
	for b in guest wasmhost hostsvc rueidis pgx fasthttp json memmove syscall sys_fasthttp sys_rueidis sys_pgx sys_other sched_gc other; do
		bucket_row "${BUCKET_NAME[$b]}" "$b"
		if [[ $b == guest ]]; then
			for p in "${plugins[@]}"; do bucket_row "… of which $p's own code" "plugin:$p:guest"; done
		fi
	done
	for p in "${plugins[@]}"; do
		# shellcheck disable=SC2086
		bucket_row "inside $p's callbacks, the host's work for it (all buckets but guest wasm; included above)" $(printf "plugin:$p:%s " $host)
	done
	line="| profile samples (10 ms of CPU each), per run"
	for t in "${ORDER[@]}"; do
		local vs=()
		for ((r = 1; r <= REPEATS; r++)); do vs+=("${BUCKET[$t/$r/samples]:-0}"); done
		line+=" | $(
			IFS=/
			echo "${vs[*]}"
		)"
	done
	echo "$line |"
}

# report_waits writes the table of pool waits and callback durations.
report_waits() {
	local t r line sep
	[[ -n $WAIT_LEVELS ]] || return 0
	echo
	echo "Plugin callbacks that waited for a free instance (tollgate_plugin_pool_waits_total ÷ tollgate_plugin_calls_total, /metrics deltas over each $DURATION run, runs separated by /, then the callbacks of all runs), and the mean request-phase callback, from asking for an instance to the guest's return (tollgate_plugin_phase_duration_seconds, median of the runs):"
	echo
	line="| plugin | conc"
	sep="|---|---:"
	for t in "${ORDER[@]}"; do line+=" | $t: waited | $t: request callback"; sep+="|---:|---:"; done
	echo "$line |"
	echo "$sep|"
	local p lv plugins=()
	for t in "${ORDER[@]}"; do
		local v
		v=$(cb_variant "$t")
		for p in ${v#*:}; do [[ " ${plugins[*]-} " == *" $p "* ]] || plugins+=("$p"); done
	done
	for p in "${plugins[@]}"; do
		for lv in $WAIT_LEVELS; do
			line="| $p | $lv"
			for t in "${ORDER[@]}"; do
				local cellv="" calls=0 ds=()
				for ((r = 1; r <= REPEATS; r++)); do
					local wc=${WAITS[$t/$lv/$r/$p]:-}
					[[ -n $wc ]] || continue
					[[ -n $cellv ]] && cellv+=" / "
					cellv+=$(awk -v w="${wc%/*}" -v c="${wc#*/}" 'BEGIN { printf "%.0f%%", c ? 100 * w / c : 0 }')
					calls=$((calls + ${wc#*/}))
					[[ ${RCB[$t/$lv/$r/$p]} == - ]] || ds+=("${RCB[$t/$lv/$r/$p]}")
				done
				if [[ -n $cellv ]]; then
					local d="– (no request phase)"
					((${#ds[@]} == 0)) || d="$(printf '%.0f' "$(median "${ds[@]}")") µs"
					line+=" | $cellv of $calls | $d"
				else
					line+=" | – | –"
				fi
			done
			echo "$line |"
		done
	done
}

{
	report_cpu
	report_buckets
	report_waits
	for note in ${FAILED_NOTES[@]+"${FAILED_NOTES[@]}"}; do
		printf '\nFAILED: %s\n' "$note"
	done
} | tee ${CPUBREAK_OUT:+"$CPUBREAK_OUT"}
while IFS= read -r w; do
	[[ -n $w ]] || continue
	log "WARNING: gateway log, $w"
	printf '\nGateway log, %s\n' "$w" | tee -a ${CPUBREAK_OUT:+"$CPUBREAK_OUT"}
done <<<"$(gateway_warnings)"
((${#FAILED_NOTES[@]} == 0)) || exit "$EXIT_FAILURES"
