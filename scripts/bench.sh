#!/usr/bin/env bash
# scripts/bench.sh — measure, in one run and interleaved, the latency a proxy
# adds over talking to the mock model directly.
#
# Targets (each in front of the same mock process):
#   direct    loadgen → mockllm
#   nginx     loadgen → nginx (worker_processes 1, upstream keepalive) → mockllm
#   tollgate  loadgen → tollgate serve → mockllm
#
# For every concurrency level, REPEATS rounds are run; each round runs every
# target once, back to back (target order rotates per round), so slow drifts
# of the shared 2-core machine hit all targets alike. "added" is the median
# over rounds of (target − direct) within the same round.
#
# Output: a markdown report on stdout (and in $BENCH_OUT if set); progress
# on stderr; raw per-run JSON lines in $BENCH_RAW if set.
#
# Knobs (environment):
#   LEVELS="1 8 32"           non-streaming concurrency levels
#   REPEATS=5                 interleaved rounds per non-streaming level
#   DURATION=3s               measured time per non-streaming run
#   WARMUP=20                 warmup requests per worker (non-streaming)
#   STREAM_LEVELS="1 8 32"    streaming concurrency levels ("" to skip)
#   STREAM_REPEATS=2          interleaved rounds per streaming level
#   STREAM_DURATION=3s        measured time per streaming run
#   STREAM_WARMUP=2           warmup streams per worker
#   TARGETS="direct nginx tollgate"   which targets (direct is always run)
#   POLICY=policies/default.yaml      policy for tollgate serve
#   EXTRA="plugins=policies/bench-noop-plugins.yaml"
#                                     more gateway targets, NAME=POLICY each,
#                                     measured beside the others (target tollgate-NAME)
#   TOLLGATE_BIN=path         use this tollgate binary instead of building
#                             ./gateway/cmd/tollgate
#   BENCH_MODEL=mock-1        model name in request bodies
#   BENCH_HEADER=""           one extra "Name: value" header sent to every
#                             target (e.g. the gateway's Authorization)
#   LOADGEN_GOMAXPROCS=1      GOMAXPROCS of the load generator (see below)
#   BENCH_OUT=file            also write the markdown report there
#   BENCH_RAW=file            also write the raw JSON lines there
#   KEEP_WORK=1               keep the temp dir (logs, configs, raw results)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

LEVELS=${LEVELS-1 8 32}
REPEATS=${REPEATS:-5}
DURATION=${DURATION:-3s}
WARMUP=${WARMUP:-20}
STREAM_LEVELS=${STREAM_LEVELS-1 8 32}
STREAM_REPEATS=${STREAM_REPEATS:-2}
STREAM_DURATION=${STREAM_DURATION:-3s}
STREAM_WARMUP=${STREAM_WARMUP:-2}
TARGETS=${TARGETS:-direct nginx tollgate}
POLICY=${POLICY:-policies/default.yaml}
EXTRA=${EXTRA:-}
BENCH_MODEL=${BENCH_MODEL:-mock-1}
BENCH_HEADER=${BENCH_HEADER:-}
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
# Override to compare.
LOADGEN_GOMAXPROCS=${LOADGEN_GOMAXPROCS:-1}

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
	log "ERROR: $*"
	exit 1
}

# The exact command, with every knob spelled out, for the report header.
COMMAND="LEVELS='$LEVELS' REPEATS=$REPEATS DURATION=$DURATION WARMUP=$WARMUP"
COMMAND+=" STREAM_LEVELS='$STREAM_LEVELS' STREAM_REPEATS=$STREAM_REPEATS"
COMMAND+=" STREAM_DURATION=$STREAM_DURATION STREAM_WARMUP=$STREAM_WARMUP"
COMMAND+=" TARGETS='$TARGETS' LOADGEN_GOMAXPROCS=$LOADGEN_GOMAXPROCS"
[[ -n ${TOLLGATE_BIN:-} ]] && COMMAND+=" TOLLGATE_BIN=$TOLLGATE_BIN"
[[ $POLICY != policies/default.yaml ]] && COMMAND+=" POLICY=$POLICY"
[[ -n $EXTRA ]] && COMMAND+=" EXTRA='$EXTRA'"
[[ -n ${LIMITS:-} ]] && COMMAND+=" LIMITS=$LIMITS"
[[ -n $BENCH_HEADER ]] && COMMAND+=" BENCH_HEADER='${BENCH_HEADER%%:*}: …'"
COMMAND+=" scripts/bench.sh"

want_target() { [[ " $TARGETS " == *" $1 "* ]]; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-bench.XXXXXX")
# nginx workers may run as an unprivileged user: let them traverse WORK.
chmod 755 "$WORK"
BIN=$WORK/bin
RESULTS=$WORK/results.jsonl
: >"$RESULTS"
PIDS=()

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	local pid i
	for pid in ${PIDS[@]+"${PIDS[@]}"}; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in ${PIDS[@]+"${PIDS[@]}"}; do
		for ((i = 0; i < 50; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	if ((rc != 0)); then
		local f
		for f in "$WORK"/*.log; do
			[[ -s $f ]] || continue
			log "--- tail of $f"
			tail -n 15 "$f" >&2 || true
		done
	fi
	if [[ ${KEEP_WORK:-} == 1 ]]; then
		log "kept $WORK"
	else
		rm -rf "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start NAME CMD... runs CMD in the background, logging to $WORK/NAME.log.
start() {
	local name=$1
	shift
	"$@" >"$WORK/$name.log" 2>&1 &
	PIDS+=($!)
	log "started $name (pid $!)"
}

# alive PID fails if the process has exited.
alive() { kill -0 "$1" 2>/dev/null; }

# wait_port PORT PID: wait until something accepts on 127.0.0.1:PORT.
wait_port() {
	local port=$1 pid=$2 i
	for ((i = 0; i < 300; i++)); do
		alive "$pid" || return 1
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# http_status PORT PATH prints the status code of GET PATH (bash only, no
# curl needed).
http_status() {
	(
		exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 0
		printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' "$2" >&3
		local line=
		IFS= read -r -t 2 line <&3 || true
		# shellcheck disable=SC2086 # split "HTTP/1.1 200 OK" into words
		set -- $line
		echo "${2:-}"
	) 2>/dev/null
}

# wait_ready PORT PATH PID: wait until GET PATH answers 200.
wait_ready() {
	local port=$1 path=$2 pid=$3 i
	for ((i = 0; i < 300; i++)); do
		alive "$pid" || return 1
		[[ $(http_status "$port" "$path") == 200 ]] && return 0
		sleep 0.1
	done
	return 1
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

ensure_tool() { # ensure_tool CMD APT-PACKAGE...
	local cmd=$1
	shift
	command -v "$cmd" >/dev/null && return 0
	log "$cmd not found; installing $*"
	local pkg
	apt-get update -qq >&2 || true
	for pkg in "$@"; do
		if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=120 "$pkg" >&2; then
			break
		fi
	done
	command -v "$cmd" >/dev/null || die "could not install $cmd"
}

# ---------------------------------------------------------------- build
mkdir -p "$BIN"
cmds=(mockllm loadgen)
if want_target tollgate; then
	if [[ -n ${TOLLGATE_BIN:-} ]]; then
		cp "$TOLLGATE_BIN" "$BIN/tollgate" || die "cannot copy TOLLGATE_BIN=$TOLLGATE_BIN"
	else
		cmds+=(tollgate)
	fi
fi
for c in "${cmds[@]}"; do
	log "building $c"
	go build -o "$BIN/$c" "./gateway/cmd/$c" || die "go build ./gateway/cmd/$c failed"
done

# NOOP_PLUGINS=1 (off by default) adds two targets: tollgate-noop4, the policy plus
# four no-op plugins, one per phase (request, response_headers, chunk, end),
# to measure what the plugin runtime itself costs; and tollgate-noop4t, the
# same plugins with `interruptible: false` (no per-call termination watch).
if want_target tollgate && [[ ${NOOP_PLUGINS:-0} == 1 ]]; then
	log "building the no-op plugin"
	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o "$BIN/noop.wasm" ./gateway/wasm/testdata/testplugin ||
		die "building the test plugin failed"
	for variant in noop4:true noop4t:false; do
		{
			cat "$POLICY"
			echo "plugins:"
			for ph in request response_headers chunk end; do
				printf '  - name: noop-%s\n    path: %s\n    limits: {interruptible: %s}\n    config: {%s: continue, phases: [%s]}\n' \
					"$ph" "$BIN/noop.wasm" "${variant#*:}" "$ph" "$ph"
			done
		} >"$WORK/${variant%%:*}.yaml"
	done
	EXTRA="noop4=$WORK/noop4.yaml noop4t=$WORK/noop4t.yaml${EXTRA:+ $EXTRA}"
fi

# PREFLIGHT=1 (default) adds tollgate-preflight: the policy plus the
# preflight plugin with the memory tenant store (one tenant, one key); every
# target then gets the key's Authorization header (ignored by the others).
if want_target tollgate && [[ ${PREFLIGHT:-1} == 1 ]]; then
	log "building the preflight plugin"
	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o "$BIN/preflight.wasm" ./plugins/preflight ||
		die "building the preflight plugin failed"
	bench_key=tg_bench_key_0123456789
	key_sha=$(printf '%s' "$bench_key" | sha256sum | cut -d' ' -f1)
	{
		cat "$POLICY"
		printf 'tenants:\n  plans: [{id: bench, rpm: 1000000, max_tokens: 4096, allowed_models: ["mock-*"]}]\n'
		printf '  tenants: [{id: bench, plan: bench, keys: [{id: k1, key_sha256: %s}]}]\n' "$key_sha"
		printf 'plugins:\n  - name: preflight\n    path: %s\n' "$BIN/preflight.wasm"
	} >"$WORK/preflight.yaml"
	EXTRA="preflight=$WORK/preflight.yaml${EXTRA:+ $EXTRA}"
	BENCH_HEADER=${BENCH_HEADER:-"Authorization: Bearer $bench_key"}
fi

# PG=1 (default, with PREFLIGHT) adds tollgate-preflight-pg: the same
# preflight on the Postgres store (warm: the key is a cache hit). Postgres
# runs as the postgres user in the work dir, fsync off, on a free port.
if want_target tollgate && [[ ${PREFLIGHT:-1} == 1 && ${PG:-1} == 1 ]]; then
	pgbin=$(dirname "$(readlink -f "$(command -v postgres 2>/dev/null || ls -d /usr/lib/postgresql/*/bin/postgres | tail -n 1)")")
	[[ -x $pgbin/initdb ]] || die "PG=1 needs PostgreSQL (apt-get install -y postgresql), or set PG=0"
	id postgres >/dev/null 2>&1 || die "PG=1 needs the postgres OS user, or set PG=0"
	chmod o+x "$WORK"
	mkdir -p "$WORK/pg" && chown postgres "$WORK/pg"
	as_pg() { setpriv --reuid postgres --regid postgres --init-groups "$@"; }
	as_pg "$pgbin/initdb" -D "$WORK/pg/data" -U postgres --auth=trust >"$WORK/initdb.log" 2>&1 || die "initdb failed"
	PG_PORT=$(free_port)
	start postgres setpriv --reuid postgres --regid postgres --init-groups "$pgbin/postgres" -D "$WORK/pg/data" \
		-p "$PG_PORT" -k "$WORK/pg" -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off
	export TOLLGATE_DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/postgres?sslmode=disable"
	for _ in $(seq 100); do "$BIN/tollgate" migrate status >/dev/null 2>&1 && break; sleep 0.1; done
	"$BIN/tollgate" migrate >"$WORK/migrate.log" 2>&1 || die "tollgate migrate failed"
	psql -q "$TOLLGATE_DATABASE_URL" -c "INSERT INTO plans (id, rpm, max_tokens, allowed_models) VALUES ('bench', 1000000, 4096, '{mock-*}');
		INSERT INTO tenants (id, plan_id) VALUES ('bench', 'bench');
		INSERT INTO api_keys (id, tenant_id, key_hash, prefix) VALUES ('k1', 'bench', decode('$key_sha', 'hex'), 'tg_bench');" ||
		die "seeding Postgres failed"
	{
		cat "$POLICY"
		printf 'store: {kind: postgres}\nplugins:\n  - name: preflight\n    path: %s\n' "$BIN/preflight.wasm"
	} >"$WORK/preflight-pg.yaml"
	EXTRA="preflight-pg=$WORK/preflight-pg.yaml${EXTRA:+ $EXTRA}"
fi

# LIMITS=1 (default, with PREFLIGHT) adds tollgate-limits: preflight,
# ratelimit and budget enforcing on the in-process stores (every request is
# admitted: the limits are far above the load); and, with PG,
# tollgate-limits-redis: the same on the Postgres store with Redis counters
# (redis-server started here) and the call log written to Postgres.
if want_target tollgate && [[ ${PREFLIGHT:-1} == 1 && ${LIMITS:-1} != 0 ]]; then
	for p in ratelimit budget; do
		log "building the $p plugin"
		GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o "$BIN/$p.wasm" "./plugins/$p" ||
			die "building the $p plugin failed"
	done
	# limit_plugins [ratelimit|budget]: preflight plus both limit plugins,
	# or only the one named.
	limit_plugins() {
		printf 'plugins:\n'
		printf '  - name: preflight\n    path: %s\n' "$BIN/preflight.wasm"
		[[ ${1:-ratelimit} == ratelimit ]] &&
			printf '  - name: ratelimit\n    path: %s\n    config: {default_max_tokens: 16}\n' "$BIN/ratelimit.wasm"
		[[ ${1:-budget} == budget ]] &&
			printf '  - name: budget\n    path: %s\n    config: {default_max_tokens: 16}\n' "$BIN/budget.wasm"
		return 0
	}
	# LIMITS=each measures the two plugins one at a time instead:
	# targets ratelimit, budget (memory) and ratelimit-redis, budget-redis.
	if [[ ${LIMITS:-1} == each ]]; then variants="ratelimit budget"; else variants="limits"; fi
	for v in $variants; do
		{
			cat "$POLICY"
			printf 'tenants:\n  plans: [{id: bench, rpm: 50000000, tpm: 50000000, monthly_budget_usd: 1000000, max_tokens: 4096, allowed_models: ["mock-*"]}]\n'
			printf '  tenants: [{id: bench, plan: bench, keys: [{id: k1, key_sha256: %s}]}]\n' "$key_sha"
			printf '  prices: [{model: mock-1, input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60, effective_from: 2026-01-01T00:00:00Z}]\n'
			limit_plugins "${v#limits}"
		} >"$WORK/$v.yaml"
		EXTRA="${EXTRA:+$EXTRA }$v=$WORK/$v.yaml"
	done
	if [[ ${PG:-1} == 1 ]]; then
		ensure_tool redis-server redis-server
		REDIS_PORT=$(free_port)
		start redis redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK"
		wait_port "$REDIS_PORT" "$!" || die "redis-server did not start"
		psql -q "$TOLLGATE_DATABASE_URL" -c "UPDATE plans SET rpm = 50000000, tpm = 50000000, monthly_budget_micros = 1000000000000 WHERE id = 'bench';
			INSERT INTO model_prices (model, input_micros_per_mtok, output_micros_per_mtok, effective_from) VALUES ('mock-1', 150000, 600000, '2026-01-01');" ||
			die "seeding Postgres for limits-redis failed"
		for v in $variants; do
			{
				cat "$POLICY"
				printf 'store: {kind: postgres}\n'
				printf 'redis: {addrs: ["127.0.0.1:%s"]}\n' "$REDIS_PORT"
				printf 'call_log: {spool_dir: "${TOLLGATE_SPOOL_DIR}"}\n'
				limit_plugins "${v#limits}"
			} >"$WORK/$v-redis.yaml"
			EXTRA="${EXTRA:+$EXTRA }$v-redis=$WORK/$v-redis.yaml"
		done
	fi
fi

ensure_tool jq jq
if want_target nginx; then
	# Same as: command -v nginx || (apt-get update && apt-get install -y nginx-light || apt-get install -y nginx)
	PATH=$PATH:/usr/sbin ensure_tool nginx nginx-light nginx
	NGINX=$(PATH=$PATH:/usr/sbin command -v nginx)
fi

# ---------------------------------------------------------------- mocks
MOCK_PORT=$(free_port)       # non-streaming latency runs: no delays
SMOCK_PORT=$(free_port)      # streaming runs: realistic token timing
start mock "$BIN/mockllm" -listen "127.0.0.1:$MOCK_PORT" -tokens 20 -ttft 0 -inter-token 0
MOCK_PID=$!
wait_port "$MOCK_PORT" "$MOCK_PID" || die "mockllm did not start"
if [[ -n ${STREAM_LEVELS// /} ]]; then
	start mock-stream "$BIN/mockllm" -listen "127.0.0.1:$SMOCK_PORT" -tokens 20 -ttft 50ms -inter-token 5ms
	SMOCK_PID=$!
	wait_port "$SMOCK_PORT" "$SMOCK_PID" || die "streaming mockllm did not start"
fi

declare -A URL SURL
URL[direct]=http://127.0.0.1:$MOCK_PORT/v1/chat/completions
SURL[direct]=http://127.0.0.1:$SMOCK_PORT/v1/chat/completions

# ---------------------------------------------------------------- nginx
NGINX_VERSION=
if want_target nginx; then
	NGX=$WORK/nginx
	mkdir -p "$NGX"
	NGX_PORT=$(free_port)
	NGX_SPORT=$(free_port)
	location() { # location UPSTREAM
		cat <<-EOF
			        location / {
			            proxy_pass http://$1;
			            proxy_http_version 1.1;
			            proxy_set_header Connection "";
			            proxy_buffering off;
			        }
		EOF
	}
	cat >"$NGX/nginx.conf" <<-EOF
		# Generated by scripts/bench.sh.
		daemon off;
		master_process on;
		worker_processes 1;
		pid $NGX/nginx.pid;
		error_log $WORK/nginx-error.log warn;
		events { worker_connections 1024; }
		http {
		    access_log off;
		    client_body_temp_path $NGX/client_body;
		    proxy_temp_path $NGX/proxy;
		    fastcgi_temp_path $NGX/fastcgi;
		    uwsgi_temp_path $NGX/uwsgi;
		    scgi_temp_path $NGX/scgi;
		    # Never recycle the load generator's keep-alive connections
		    # mid-run (the default is every 1000 requests).
		    keepalive_requests 100000000;
		    keepalive_timeout 300s;
		    upstream mock {
		        server 127.0.0.1:$MOCK_PORT;
		        keepalive 64;
		        keepalive_requests 100000000;
		    }
		    upstream mockstream {
		        server 127.0.0.1:$SMOCK_PORT;
		        keepalive 64;
		        keepalive_requests 100000000;
		    }
		    server {
		        listen 127.0.0.1:$NGX_PORT;
		$(location mock)
		    }
		    server {
		        listen 127.0.0.1:$NGX_SPORT;
		$(location mockstream)
		    }
		}
	EOF
	"$NGINX" -t -q -p "$NGX" -e "$WORK/nginx-error.log" -c "$NGX/nginx.conf" >&2 ||
		die "generated nginx config is invalid ($NGX/nginx.conf)"
	start nginx "$NGINX" -p "$NGX" -e "$WORK/nginx-error.log" -c "$NGX/nginx.conf"
	wait_port "$NGX_PORT" "$!" || die "nginx did not start"
	NGINX_VERSION=$("$NGINX" -v 2>&1 | sed 's|.*/||')
	URL[nginx]=http://127.0.0.1:$NGX_PORT/v1/chat/completions
	SURL[nginx]=http://127.0.0.1:$NGX_SPORT/v1/chat/completions
fi

# ---------------------------------------------------------------- tollgate
if want_target tollgate; then
	[[ -f $POLICY ]] || die "policy $POLICY not found"
	# One gateway per mock: the CLI contract routes model mock-1 to
	# $TOLLGATE_MOCK_URL.
	start_gateway() { # start_gateway NAME MOCKPORT GWPORT POLICY
		start "$1" env TOLLGATE_MOCK_URL="http://127.0.0.1:$2/v1" TOLLGATE_SPOOL_DIR="$WORK/spool-$1" \
			"$BIN/tollgate" serve -policy "$4" -listen "127.0.0.1:$3" -watch 0
		wait_ready "$3" /readyz "$!" || die "$1 did not become ready (GET /readyz)"
	}
	# gateway_target NAME POLICY starts the gateways of one target.
	gateway_target() {
		local port
		port=$(free_port)
		start_gateway "$1" "$MOCK_PORT" "$port" "$2"
		URL[$1]=http://127.0.0.1:$port/v1/chat/completions
		if [[ -n ${STREAM_LEVELS// /} ]]; then
			port=$(free_port)
			start_gateway "$1-stream" "$SMOCK_PORT" "$port" "$2"
			SURL[$1]=http://127.0.0.1:$port/v1/chat/completions
		fi
	}
	gateway_target tollgate "$POLICY"
	for extra in $EXTRA; do
		[[ -f ${extra#*=} ]] || die "policy ${extra#*=} not found"
		gateway_target "tollgate-${extra%%=*}" "${extra#*=}"
	done
fi

order=(direct)
for t in nginx tollgate; do
	want_target "$t" && order+=("$t")
done
if want_target tollgate; then
	for extra in $EXTRA; do order+=("tollgate-${extra%%=*}"); done
fi

LG_HEADERS=()
[[ -n $BENCH_HEADER ]] && LG_HEADERS=(-H "$BENCH_HEADER")

# loadgen ARGS... runs the load generator with the chosen GOMAXPROCS.
loadgen() {
	GOMAXPROCS=$LOADGEN_GOMAXPROCS "$BIN/loadgen" -model "$BENCH_MODEL" \
		${LG_HEADERS[@]+"${LG_HEADERS[@]}"} "$@"
}

# Smoke test: every target answers, before any time is spent measuring.
for t in "${order[@]}"; do
	modes=(latency)
	[[ -n ${STREAM_LEVELS// /} ]] && modes+=(stream)
	for m in "${modes[@]}"; do
		if [[ $m == stream ]]; then
			out=$(loadgen -url "${SURL[$t]}" -stream -n 2 -warmup 0 -json) || die "loadgen failed against $t"
		else
			out=$(loadgen -url "${URL[$t]}" -n 5 -warmup 0 -json) || die "loadgen failed against $t"
		fi
		[[ $(jq .failures <<<"$out") == 0 ]] ||
			die "smoke test ($m) against $t failed: $(jq -c .errors <<<"$out")"
	done
done
log "all targets answer: ${order[*]}"

# run_one MODE LEVEL ROUND TARGET appends one JSON line to $RESULTS.
run_one() {
	local mode=$1 level=$2 round=$3 target=$4 out
	if [[ $mode == stream ]]; then
		out=$(loadgen -url "${SURL[$target]}" -stream -c "$level" -d "$STREAM_DURATION" \
			-warmup "$STREAM_WARMUP" -label "$mode/$target/c$level/r$round" -json) ||
			die "loadgen failed ($mode $target c=$level)"
	else
		out=$(loadgen -url "${URL[$target]}" -c "$level" -d "$DURATION" \
			-warmup "$WARMUP" -label "$mode/$target/c$level/r$round" -json) ||
			die "loadgen failed ($mode $target c=$level)"
	fi
	jq -c --arg mode "$mode" --arg target "$target" --argjson level "$level" --argjson round "$round" \
		'. + {mode: $mode, target: $target, level: $level, round: $round}' <<<"$out" >>"$RESULTS"
	log "$(tail -n 1 "$RESULTS" | jq -r '"\(.mode) c=\(.level) r=\(.round) \(.target): "
		+ "\(.rps) req/s, p50 \(.latency_us.p50)µs, p99 \(.latency_us.p99)µs"
		+ (if .ttft_us then ", ttft p50 \(.ttft_us.p50)µs" else "" end)
		+ (if .failures > 0 then ", FAILURES \(.failures): \(.errors[0].message)" else "" end)')"
}

# measure MODE ROUNDS LEVELS...: interleaved rounds; the target order is
# rotated each round so no target always runs first (or right after another).
measure() {
	local mode=$1 rounds=$2 level r i n=${#order[@]}
	shift 2
	for level in "$@"; do
		for ((r = 1; r <= rounds; r++)); do
			for ((i = 0; i < n; i++)); do
				run_one "$mode" "$level" "$r" "${order[$(((i + r - 1) % n))]}"
			done
		done
	done
}

started=$(date +%s)
# Other work on the machine skews everything; the report records the load.
loadavg=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')
# shellcheck disable=SC2086 # word splitting of the level lists is intended
measure latency "$REPEATS" $LEVELS
# shellcheck disable=SC2086
measure stream "$STREAM_REPEATS" $STREAM_LEVELS
log "measured in $(($(date +%s) - started))s"

# ---------------------------------------------------------------- report
commit=$(git rev-parse --short HEAD 2>/dev/null || echo uncommitted)
header="Measured $(date -u '+%Y-%m-%d %H:%M UTC') · nproc $(nproc) · $(go env GOVERSION) · commit $commit"
[[ -n $NGINX_VERSION ]] && header+=" · nginx $NGINX_VERSION"
header+=" · loadgen GOMAXPROCS=$LOADGEN_GOMAXPROCS · load average at start $loadavg"

report=$(jq -rs \
	--arg header "$header" --arg command "$COMMAND" \
	--arg duration "$DURATION" --arg repeats "$REPEATS" --arg warmup "$WARMUP" \
	--arg sduration "$STREAM_DURATION" --arg srepeats "$STREAM_REPEATS" --arg swarmup "$STREAM_WARMUP" '
	def median: map(select(. != null)) | sort |
		if length == 0 then null
		elif length % 2 == 1 then .[(length - 1) / 2]
		else (.[length / 2 - 1] + .[length / 2]) / 2 end;
	def fmt(d): if . == null then "–" else (. * pow(10; d) | round / pow(10; d) | tostring) end;
	def signed(d): if . == null then "–" elif . > 0 then "+" + fmt(d) else fmt(d) end;
	def ms: if . == null then null else . / 1000 end;

	. as $all
	| (map(select(.target == "direct") | {key: "\(.mode)/\(.level)/\(.round)", value: .}) | from_entries) as $direct
	| map(. + {base: $direct["\(.mode)/\(.level)/\(.round)"]})
	| map(. as $r | . + {
		d50: (if $r.target == "direct" or $r.base == null then null else $r.latency_us.p50 - $r.base.latency_us.p50 end),
		d99: (if $r.target == "direct" or $r.base == null then null else $r.latency_us.p99 - $r.base.latency_us.p99 end),
		dt50: (if $r.target == "direct" or $r.base == null or $r.ttft_us == null then null else $r.ttft_us.p50 - $r.base.ttft_us.p50 end),
		dt99: (if $r.target == "direct" or $r.base == null or $r.ttft_us == null then null else $r.ttft_us.p99 - $r.base.ttft_us.p99 end)
	})
	| def rank: {"direct": 0, "nginx": 1, "tollgate": 2}[.] // 9;
	  group_by([.mode, .level, (.target | rank), .target])
	| map({
		mode: .[0].mode, level: .[0].level, target: .[0].target, runs: length,
		rps: (map(.rps) | median),
		p50: (map(.latency_us.p50) | median), p99: (map(.latency_us.p99) | median),
		d50: (map(.d50) | median), d99: (map(.d99) | median),
		t50: (map(.ttft_us.p50) | median), t99: (map(.ttft_us.p99) | median),
		dt50: (map(.dt50) | median), dt99: (map(.dt99) | median),
		tot50: (map(.total_us.p50) | median), tot99: (map(.total_us.p99) | median),
		failures: (map(.failures) | add), count: (map(.count) | add)
	}) as $rows
	| [
		"_\($header)_ · command: `\($command)`",
		"",
		"All figures are medians across interleaved repeats; **added** is the median over repeats of (target − direct) measured in the same repeat. Closed loop: each of `conc` workers keeps one keep-alive connection and sends requests back to back.",
		""
	  ]
	+ (if any($rows[]; .mode == "latency") then [
		"#### Non-streaming (mock: 20 tokens, no delays; \($duration) × \($repeats) repeats, \($warmup) warmup requests/worker)",
		"",
		"| conc | target | req/s | p50 µs | p99 µs | added p50 µs | added p99 µs | failed/total |",
		"|---:|---|---:|---:|---:|---:|---:|---:|"
	  ] + [ $rows[] | select(.mode == "latency") |
		"| \(.level) | \(.target) | \(.rps | fmt(0)) | \(.p50 | fmt(1)) | \(.p99 | fmt(1)) | \(.d50 | signed(1)) | \(.d99 | signed(1)) | \(.failures)/\(.count) |"
	  ] + [""] else [] end)
	+ (if any($rows[]; .mode == "stream") then [
		"#### Streaming (mock: TTFT 50 ms, 20 tokens, 5 ms apart; \($sduration) × \($srepeats) repeats, \($swarmup) warmup streams/worker)",
		"",
		"| conc | target | streams/s | TTFT p50 ms | TTFT p99 ms | added TTFT p50 µs | added TTFT p99 µs | total p50 ms | total p99 ms | failed/total |",
		"|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
	  ] + [ $rows[] | select(.mode == "stream") |
		"| \(.level) | \(.target) | \(.rps | fmt(1)) | \(.t50 | ms | fmt(2)) | \(.t99 | ms | fmt(2)) | \(.dt50 | signed(0)) | \(.dt99 | signed(0)) | \(.tot50 | ms | fmt(2)) | \(.tot99 | ms | fmt(2)) | \(.failures)/\(.count) |"
	  ] + [""] else [] end)
	| .[]
' "$RESULTS")

printf '%s\n' "$report"
if [[ -n ${BENCH_OUT:-} ]]; then
	printf '%s\n' "$report" >"$BENCH_OUT"
	log "report written to $BENCH_OUT"
fi
if [[ -n ${BENCH_RAW:-} ]]; then
	cp "$RESULTS" "$BENCH_RAW"
	log "raw results written to $BENCH_RAW"
fi
if jq -se 'map(.failures) | add > 0' "$RESULTS" >/dev/null; then
	log "WARNING: some requests failed; see the failed/total column"
fi
