# shellcheck shell=bash
# shellcheck disable=SC2034 # globals shared with scripts/bench.sh
# scripts/bench/pin.sh — CPU pinning for scripts/bench.sh (sourced).
#
# Pinned, each target under test (a gateway, the plain fasthttp proxy,
# nginx's master and worker) runs on one CPU, TARGET_CPU (the last one
# this script may use), and everything that serves or loads it — the
# mocks, Redis, Postgres and its backends, the load generator — on the
# others, FIXTURE_CPUS. Unpinned, every process may run anywhere. The
# affinity of the running processes (every thread, and the children:
# nginx's worker, Postgres's backends) is changed with `taskset -a -p`
# between runs, so one invocation can measure both ways on the same
# processes; Go programs notice the new CPU count within about a second
# and set GOMAXPROCS to match (Go ≥ 1.25), which set_pin waits for.

# cpu_list_expand LIST prints the CPUs of a taskset list ("0-2,5"), one a line.
cpu_list_expand() {
	local part
	for part in ${1//,/ }; do
		if [[ $part == *-* ]]; then seq "${part%-*}" "${part#*-}"; else echo "$part"; fi
	done
}

# pin_init sets ALL_CPUS (those this script may use), TARGET_CPU and
# FIXTURE_CPUS, or dies without taskset or on a single CPU.
pin_init() {
	local cpus
	command -v taskset >/dev/null || die "BENCH_PIN needs taskset (util-linux)"
	ALL_CPUS=$(taskset -pc $$ | sed 's/.*: //')
	mapfile -t cpus < <(cpu_list_expand "$ALL_CPUS")
	((${#cpus[@]} >= 2)) || die "BENCH_PIN needs at least 2 CPUs, this script may use only $ALL_CPUS"
	TARGET_CPU=${cpus[-1]}
	FIXTURE_CPUS=$(
		IFS=,
		echo "${cpus[*]:0:${#cpus[@]}-1}"
	)
}

# with_descendants PID... prints the pids and all their descendants.
with_descendants() {
	local pid
	for pid in "$@"; do
		echo "$pid"
		# shellcheck disable=SC2046 # one pid a word
		with_descendants $(pgrep -P "$pid")
	done
}

# set_affinity CPUS PID... moves every thread of the processes and their
# descendants to CPUS.
set_affinity() {
	local list=$1 pid
	shift
	for pid in $(with_descendants "$@"); do
		taskset -a -pc "$list" "$pid" >/dev/null 2>&1 || log "WARNING: could not set the CPU affinity of pid $pid to $list"
	done
}

# set_pin on|off pins the targets and fixtures, or lets everything run
# anywhere, then waits until every gateway's GOMAXPROCS matches.
PIN_PREFIX=() # the command prefix of the load generator
set_pin() {
	local k want_gw want_fx
	if [[ $1 == on ]]; then
		want_gw=$TARGET_CPU want_fx=$FIXTURE_CPUS
		PIN_PREFIX=(taskset -c "$FIXTURE_CPUS")
	else
		want_gw=$ALL_CPUS want_fx=$ALL_CPUS
		PIN_PREFIX=()
	fi
	# shellcheck disable=SC2046 # one pid a word
	set_affinity "$want_gw" $(printf '%s\n' "${GW_PIDS[@]}" | sort -u)
	set_affinity "$want_fx" "${FIXTURE_PIDS[@]}"
	local want n i seen=""
	want=$(cpu_list_expand "$want_gw" | wc -l)
	for k in "${!ADMINS[@]}"; do
		for ((i = 0; i < 50; i++)); do
			n=$(http_get "${ADMINS[$k]}" /metrics | awk '$1 == "go_sched_gomaxprocs_threads" { print $2 }')
			[[ $n == "$want" || -z $n ]] && break
			sleep 0.1
		done
		[[ $n == "$want" || -z $n ]] || log "WARNING: $k kept GOMAXPROCS=$n after its CPUs became $want_gw"
		seen+=" $k=${n:-?}"
	done
	log "pinning $1: targets on CPUs $want_gw, fixtures on $want_fx; gateways' GOMAXPROCS:$seen"
}

# pin_desc MODE describes a pin mode ("" or "pinned") for the report.
pin_desc() {
	[[ $1 == pinned ]] && echo "pinned: each target on CPU $TARGET_CPU, the load generator, mocks, Redis and Postgres on CPU $FIXTURE_CPUS"
	return 0
}
