# shellcheck shell=bash
# scripts/bench/lib.sh — processes, ports, HTTP probes and formatting for
# scripts/bench.sh (sourced; it uses the caller's WORK, BIN and PIDS).

# shellcheck disable=SC2034 # NOTES and STOPSIG are read by the other files
NOTES=() # lines added to the report's header
PIDS=()  # background processes, in start order
declare -A STOPSIG # pid → the signal that stops it quickly (default TERM)

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
	log "ERROR: $*"
	exit 1
}

# has_target NAME: NAME is among the measured targets.
has_target() { [[ " ${ORDER[*]-} " == *" $1 "* ]]; }

# drop_target NAME removes NAME from the measured targets.
drop_target() {
	local t kept=()
	for t in "${ORDER[@]}"; do [[ $t == "$1" ]] || kept+=("$t"); done
	ORDER=("${kept[@]}")
}

# cleanup stops every process started here (newest first), then removes
# WORK unless KEEP_WORK=1. On failure it shows the tail of each log.
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	local pid i
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
		kill "-${STOPSIG[${PIDS[i]}]:-TERM}" "${PIDS[i]}" 2>/dev/null || true
	done
	for pid in ${PIDS[@]+"${PIDS[@]}"}; do
		for ((i = 0; i < 100; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	if ((rc != 0 && rc != EXIT_FAILURES && rc != 130 && rc != 143)) && [[ -n ${WORK:-} ]]; then
		local f
		for f in "$WORK"/*.log; do
			[[ -s $f ]] || continue
			log "--- tail of $f"
			tail -n 15 "$f" >&2 || true
		done
	fi
	if [[ -n ${WORK:-} ]]; then
		if [[ ${KEEP_WORK:-} == 1 ]]; then
			log "kept $WORK"
		else
			rm -rf "$WORK"
		fi
	fi
	exit "$rc"
}

# EXIT_FAILURES is the exit status when the report was written but some
# requests failed.
EXIT_FAILURES=3

# start NAME CMD... runs CMD in the background, logging to $WORK/NAME.log.
# STARTED is its pid.
start() {
	local name=$1
	shift
	"$@" >"$WORK/$name.log" 2>&1 &
	STARTED=$!
	PIDS+=("$STARTED")
	log "started $name (pid $STARTED)"
}

alive() { kill -0 "$1" 2>/dev/null; }

# wait_port PORT PID: wait until something accepts on 127.0.0.1:PORT.
wait_port() {
	local port=$1 pid=$2 i
	for ((i = 0; i < 600; i++)); do
		alive "$pid" || return 1
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# http_get PORT PATH prints the status line's code, then the body, of
# GET PATH (bash only: no curl needed).
http_get() {
	(
		exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 0
		printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' "$2" >&3
		local line='' code=''
		IFS= read -r -t 5 line <&3 || exit 0
		# shellcheck disable=SC2086 # split "HTTP/1.1 200 OK" into words
		set -- $line
		code=${2:-}
		while IFS= read -r -t 5 line <&3 && [[ $line != $'\r' && -n $line ]]; do :; done
		echo "$code"
		timeout 5 cat <&3
	) 2>/dev/null
}

# wait_ready PORT PATH PID: wait until GET PATH answers 200.
wait_ready() {
	local port=$1 path=$2 pid=$3 i
	for ((i = 0; i < 600; i++)); do
		alive "$pid" || return 1
		[[ $(http_get "$port" "$path" | head -n 1) == 200 ]] && return 0
		sleep 0.1
	done
	return 1
}

# inflight ADMINPORT prints a gateway's tollgate_inflight_requests.
inflight() {
	http_get "$1" /metrics | awk '$1 == "tollgate_inflight_requests" { print $2; found = 1 } END { if (!found) print "?" }'
}

# free_port prints a loopback port not yet handed out by this script.
USED_PORTS=" "
free_port() {
	local p
	while :; do
		p=$("$BIN/loadgen" -free-port)
		if [[ $USED_PORTS != *" $p "* ]]; then
			USED_PORTS+="$p "
			echo "$p"
			return
		fi
	done
}

# apt_install PKG... installs the first of the packages that installs.
apt_install() {
	command -v apt-get >/dev/null || return 1
	if [[ -z ${APT_UPDATED:-} ]]; then
		apt-get update -qq >&2 || true
		APT_UPDATED=1
	fi
	local pkg
	for pkg in "$@"; do
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=120 "$pkg" >&2 && return 0
	done
	return 1
}

# ensure_tool CMD APT-PACKAGE... installs CMD if missing, or dies.
ensure_tool() {
	local cmd=$1
	shift
	command -v "$cmd" >/dev/null && return 0
	log "$cmd not found; installing $*"
	apt_install "$@" || true
	command -v "$cmd" >/dev/null || die "could not install $cmd (apt-get install $*)"
}

# dur_ms DURATION prints a Go-style duration ("2s", "0.5s", "1500ms", "1m")
# in milliseconds.
dur_ms() {
	local d=$1 num unit
	[[ $d =~ ^([0-9]+(\.[0-9]+)?)(ms|s|m)$ ]] || die "cannot read the duration '$d' (use e.g. 2s, 0.5s, 1500ms)"
	num=${BASH_REMATCH[1]} unit=${BASH_REMATCH[3]}
	case $unit in
	ms) awk -v n="$num" 'BEGIN { printf "%d", n }' ;;
	s) awk -v n="$num" 'BEGIN { printf "%d", n * 1000 }' ;;
	m) awk -v n="$num" 'BEGIN { printf "%d", n * 60000 }' ;;
	esac
}

# fmt_secs N prints N seconds as "5m07s" or "42s".
fmt_secs() {
	local s=${1%.*}
	((s < 0)) && s=0
	if ((s >= 60)); then printf '%dm%02ds' $((s / 60)) $((s % 60)); else printf '%ds' "$s"; fi
}

# json_num JSON REGEX prints the number right after the first match of
# REGEX in JSON, e.g. json_num "$out" '"rps":'.
json_num() {
	if [[ $1 =~ $2([-0-9.e+]+) ]]; then echo "${BASH_REMATCH[1]}"; else echo "?"; fi
}
