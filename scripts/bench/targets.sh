# shellcheck shell=bash
# shellcheck disable=SC2004,SC2034,SC2153 # globals shared with scripts/bench.sh; associative keys
# scripts/bench/targets.sh — builds and starts what scripts/bench.sh
# measures: the mocks, the plain fasthttp proxy, nginx, the gateways and,
# for the -pg targets, Postgres and Redis (sourced).

declare -A URL    # "target:fast|slow" → endpoint URL
declare -A ADMINS # "target:fast|slow" → a gateway's admin port (for /metrics)
declare -A GW_PIDS # "target:fast|slow" → a gateway's (or proxy's) pid, for pinning and CPU accounting
declare -A PPROFS  # "target:fast|slow" → a gateway's net/http/pprof port (GATEWAY_PPROF=1)
FIXTURE_PIDS=()    # the mocks, Redis and Postgres: the processes serving the targets

# variant_of TARGET prints "STORE:PLUGIN..." for a built-in gateway variant
# (policies/bench-all4*.yaml cut down to those plugins), nothing otherwise.
# A -pg suffix means the Postgres store, Redis counters and the Postgres
# call log.
variant_of() {
	[[ $1 == tollgate-* && " $EXTRA " != *" ${1#tollgate-}="* ]] || return 0
	local t=${1#tollgate-} store=memory
	if [[ $t == *-pg ]]; then
		store=pg t=${t%-pg}
	fi
	case $t in
	all4) echo "$store:preflight ratelimit budget holdback" ;;
	preflight) echo "$store:preflight" ;;
	limits) echo "$store:preflight ratelimit budget" ;;
	ratelimit) echo "$store:preflight ratelimit" ;;
	budget) echo "$store:preflight budget" ;;
	holdback) echo "$store:holdback" ;;
	# The response cache (plugins/cache, every request cacheable): cachehit
	# sends one body over and over (all hits after the first), cachemiss a
	# new body each time (loadgen -unique: every request a miss, stored).
	cachehit | cachemiss) echo "$store:preflight cache" ;;
	# MCP tool calls through the gateway (policies/bench-mcp.yaml),
	# the key checked by preflight; memory stores only.
	mcp) [[ $store == memory ]] && echo "$store:preflight" ;;
	esac
}

# find_nginx sets NGINX, installing Debian's nginx if it is missing.
find_nginx() {
	NGINX=$(PATH=$PATH:/usr/sbin command -v nginx || true)
	if [[ -z $NGINX ]]; then
		log "nginx not found; installing nginx-light (or nginx)"
		apt_install nginx-light nginx || true
		NGINX=$(PATH=$PATH:/usr/sbin command -v nginx || true)
	fi
	[[ -n $NGINX ]]
}

# build_plugins builds the plugins the gateway targets use into
# $BIN/plugins, as `make plugins` does into bin/plugins.
build_plugins() {
	local t v p want=" "
	for t in "${ORDER[@]}"; do
		v=$(variant_of "$t")
		for p in ${v#*:}; do
			[[ $want == *" $p "* ]] || want+="$p "
		done
	done
	for p in $want; do
		log "building plugin $p"
		"$BIN/tollgate" plugin build "plugins/$p" -o "$BIN/plugins/$p.wasm" >/dev/null ||
			die "building plugins/$p failed"
	done
	if has_target tollgate-noop4 || has_target tollgate-noop4t; then
		log "building the no-op test plugin"
		"$BIN/tollgate" plugin build sdk/wasmhost/testdata/testplugin -o "$BIN/plugins/noop.wasm" >/dev/null ||
			die "building sdk/wasmhost/testdata/testplugin failed"
	fi
}

# admin_block prints the admin listener the harness reads /metrics from
# (the policy expands the variable, not the shell).
# shellcheck disable=SC2016
admin_block() { printf '\nadmin:\n  listen: ${TOLLGATE_ADMIN_LISTEN:-127.0.0.1:8081}\n'; }

# policy_for TARGET writes (when generated) and prints TARGET's policy.
policy_for() {
	local t=$1 v out=$WORK/policies/$1.yaml
	if [[ $t == tollgate ]]; then
		if [[ $POLICY == policies/passthrough.yaml ]]; then
			# The proxy alone, plus an admin listener for /metrics.
			{ cat policies/passthrough.yaml && admin_block; } >"$out"
			echo "$out"
		else
			echo "$POLICY"
		fi
		return
	fi
	local extra
	for extra in $EXTRA; do
		extra=${extra%%@*}
		[[ $t == "tollgate-${extra%%=*}" ]] && echo "${extra#*=}" && return
	done
	if [[ $t == tollgate-noop4 || $t == tollgate-noop4t ]]; then
		# Four no-op plugins, one per phase; noop4t without the per-call
		# termination watch (interruptible: false).
		local ph interruptible=true
		[[ $t == tollgate-noop4t ]] && interruptible=false
		{
			cat policies/passthrough.yaml
			admin_block
			echo "plugins:"
			for ph in request response_headers chunk end; do
				printf '  - name: noop-%s\n    path: ../bin/plugins/noop.wasm\n    limits: {interruptible: %s}\n    config: {%s: continue, phases: [%s]}\n' \
					"$ph" "$interruptible" "$ph" "$ph"
			done
		} >"$out"
		echo "$out"
		return
	fi
	if [[ $t == tollgate-mcp || $t == tollgate-pii-mcp ]]; then
		cat policies/bench-mcp.yaml >"$out"
		# plugins: is the file's last section.
		[[ $t == tollgate-pii-mcp ]] && printf '  - name: pii\n    builtin: pii\n    on_error: fail_closed\n    config: {mode: redact, reply: redact}\n' >>"$out"
		echo "$out"
		return
	fi
	v=$(variant_of "$t")
	local src=policies/bench-all4.yaml
	[[ ${v%%:*} == pg ]] && src=policies/bench-all4-pg.yaml
	# Keep the named plugins' entries of the plugins: list (the last
	# section of the file); drop the others.
	awk -v keep=" ${v#*:} " '
		/^plugins:/ { inlist = 1; print; next }
		inlist && /^  - name: / { sel = index(keep, " " $3 " ") > 0 }
		!inlist || sel { print }
	' "$src" >"$out"
	if [[ " ${v#*:} " == *" cache "* ]]; then
		printf '  - name: cache\n    path: ../bin/plugins/cache.wasm\n    config: {when: always, ttl: 1h}\n' >>"$out"
	fi
	echo "$out"
}

start_mocks() {
	MOCK_PORT=$(free_port)
	if need_mock fast; then
		start mock "$BIN/mockllm" -listen "127.0.0.1:$MOCK_PORT" -tokens 20 -ttft 0 -inter-token 0
		MOCK_PID=$STARTED
		FIXTURE_PIDS+=("$STARTED")
		wait_port "$MOCK_PORT" "$STARTED" || die "mockllm did not start"
	fi
	SMOCK_PORT=$(free_port)
	if need_mock slow; then
		start mock-slow "$BIN/mockllm" -listen "127.0.0.1:$SMOCK_PORT" -tokens 20 -ttft 50ms -inter-token 5ms
		FIXTURE_PIDS+=("$STARTED")
		wait_port "$SMOCK_PORT" "$STARTED" || die "mockllm (50 ms) did not start"
	fi
	URL[direct:fast]=http://127.0.0.1:$MOCK_PORT/v1/chat/completions
	URL[direct:slow]=http://127.0.0.1:$SMOCK_PORT/v1/chat/completions
	URL[direct-mcp:fast]=http://127.0.0.1:$MOCK_PORT$(target_path direct-mcp)
	URL[direct-mcp:slow]=http://127.0.0.1:$SMOCK_PORT$(target_path direct-mcp)
}

# target_path TARGET prints the path TARGET is measured at: the mock's MCP
# endpoint, the gateway's route to the MCP server "mock" of
# policies/bench-mcp.yaml, or chat completions.
target_path() {
	case $1 in
	direct-mcp) echo /mcp ;;
	*-mcp) echo /mcp/mock ;;
	*) echo /v1/chat/completions ;;
	esac
}

# for_kinds FUNC calls FUNC fast MOCKPORT and/or FUNC slow MOCKPORT for
# the mocks in use.
for_kinds() {
	need_mock fast && "$1" fast "$MOCK_PORT"
	need_mock slow && "$1" slow "$SMOCK_PORT"
	return 0
}

start_baseproxy() { # start_baseproxy KIND MOCKPORT
	local port
	port=$(free_port)
	start "fasthttp-$1" "$BIN/baseproxy" -listen "127.0.0.1:$port" -upstream "http://127.0.0.1:$2"
	GW_PIDS[fasthttp:$1]=$STARTED
	wait_port "$port" "$STARTED" || die "baseproxy did not start"
	URL[fasthttp:$1]=http://127.0.0.1:$port/v1/chat/completions
}
start_baseproxies() { for_kinds start_baseproxy; }

start_nginx() {
	local ngx=$WORK/nginx port sport
	mkdir -p "$ngx"
	port=$(free_port) sport=$(free_port)
	server() { # server PORT MOCKPORT
		cat <<-EOF
			    upstream up$1 {
			        server 127.0.0.1:$2;
			        keepalive 64;
			        keepalive_requests 100000000;
			    }
			    server {
			        listen 127.0.0.1:$1;
			        location / {
			            proxy_pass http://up$1;
			            proxy_http_version 1.1;
			            proxy_set_header Connection "";
			            proxy_buffering off;
			        }
			    }
		EOF
	}
	{
		cat <<-EOF
			# Generated by scripts/bench.sh.
			daemon off;
			master_process on;
			worker_processes 1;
			pid $ngx/nginx.pid;
			error_log $WORK/nginx-error.log warn;
			events { worker_connections 4096; }
			http {
			    access_log off;
			    client_body_temp_path $ngx/client_body;
			    proxy_temp_path $ngx/proxy;
			    fastcgi_temp_path $ngx/fastcgi;
			    uwsgi_temp_path $ngx/uwsgi;
			    scgi_temp_path $ngx/scgi;
			    # Never recycle the load generator's keep-alive connections
			    # mid-run (the default is every 1000 requests).
			    keepalive_requests 100000000;
			    keepalive_timeout 300s;
		EOF
		need_mock fast && server "$port" "$MOCK_PORT"
		need_mock slow && server "$sport" "$SMOCK_PORT"
		echo "}"
	} >"$ngx/nginx.conf"
	"$NGINX" -t -q -p "$ngx" -e "$WORK/nginx-error.log" -c "$ngx/nginx.conf" >&2 ||
		die "generated nginx config is invalid ($ngx/nginx.conf)"
	start nginx "$NGINX" -p "$ngx" -e "$WORK/nginx-error.log" -c "$ngx/nginx.conf"
	STOPSIG[$STARTED]=QUIT
	GW_PIDS[nginx:fast]=$STARTED GW_PIDS[nginx:slow]=$STARTED # one master, its worker a child
	local p=$port
	need_mock fast || p=$sport
	wait_port "$p" "$STARTED" || die "nginx did not start"
	NGINX_VERSION=$("$NGINX" -v 2>&1 | sed 's|.*/||')
	URL[nginx:fast]=http://127.0.0.1:$port/v1/chat/completions
	URL[nginx:slow]=http://127.0.0.1:$sport/v1/chat/completions
}

# binary_for TARGET prints the tollgate binary of a gateway target: an
# EXTRA entry's @BINARY, else the one built for the run.
binary_for() {
	local extra
	for extra in $EXTRA; do
		if [[ $1 == "tollgate-${extra%%=*}" && $extra == *@* ]]; then
			echo "${extra#*@}"
			return
		fi
	done
	echo "$BIN/tollgate"
}

# start_gateway TARGET KIND MOCKPORT POLICY
start_gateway() {
	local port admin flags=()
	port=$(free_port) admin=$(free_port)
	if [[ ${GATEWAY_PPROF:-0} == 1 ]]; then
		PPROFS[$1:$2]=$(free_port)
		flags=(-pprof "127.0.0.1:${PPROFS[$1:$2]}")
	fi
	start "$1-$2" env TOLLGATE_MOCK_URL="http://127.0.0.1:$3/v1" TOLLGATE_MOCK_ROOT="http://127.0.0.1:$3" TOLLGATE_SPOOL_DIR="$WORK/spool-$1-$2" \
		TOLLGATE_ADMIN_LISTEN="127.0.0.1:$admin" TOLLGATE_ADMIN_TOKEN="$ADMIN_TOKEN" \
		"$(binary_for "$1")" serve -policy "$4" -listen "127.0.0.1:$port" -watch 0 ${flags[@]+"${flags[@]}"}
	GW_PIDS[$1:$2]=$STARTED
	wait_ready "$port" /readyz "$STARTED" || die "$1 ($2 mock) did not become ready (GET /readyz); see $WORK/$1-$2.log"
	URL[$1:$2]=http://127.0.0.1:$port$(target_path "$1")
	# Policies without the admin listener (EXTRA, POLICY) get no in-flight
	# wait. A busy machine may be slow to answer: a few tries.
	local i
	for ((i = 0; i < 5; i++)); do
		if [[ $(http_get "$admin" /metrics | head -n 1) == 200 ]]; then
			ADMINS[$1:$2]=$admin
			break
		fi
		(exec 3<>"/dev/tcp/127.0.0.1/$admin") 2>/dev/null || break # nothing listens: no admin listener
		sleep 0.2
	done
	return 0
}

start_gateways() {
	local t policy
	for t in "${ORDER[@]}"; do
		[[ $t == tollgate* ]] || continue
		policy=$(policy_for "$t")
		[[ -f $policy ]] || die "policy $policy of $t not found"
		# shellcheck disable=SC2317 # called by for_kinds
		gw_kind() { start_gateway "$t" "$1" "$2" "$policy"; }
		for_kinds gw_kind
	done
}

# pg_bindir prints the directory of PostgreSQL's initdb and postgres (the
# newest installed), or nothing.
pg_bindir() {
	local f
	if f=$(command -v initdb 2>/dev/null); then
		dirname "$(readlink -f "$f")"
		return
	fi
	f=$(printf '%s\n' /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n 1)
	[[ -x $f ]] && dirname "$f"
	return 0
}

# start_pg_redis starts Postgres (fsync off, on a free port, data in WORK)
# and Redis, migrates, and seeds the bench tenant, plan, key and price.
start_pg_redis() {
	local pgbin as_pg=()
	pgbin=$(pg_bindir)
	if [[ -z $pgbin ]]; then
		log "PostgreSQL not found; installing postgresql"
		apt_install postgresql || die "the -pg targets need PostgreSQL (apt-get install postgresql)"
		pgbin=$(pg_bindir)
		[[ -n $pgbin ]] || die "PostgreSQL installed, but initdb is nowhere to be found"
	fi
	ensure_tool redis-server redis-server
	ensure_tool psql postgresql-client
	if ((EUID == 0)); then
		id postgres >/dev/null 2>&1 || die "Postgres cannot run as root and there is no postgres user"
		as_pg=(setpriv --reuid postgres --regid postgres --init-groups)
	fi
	mkdir -p "$WORK/pg"
	((EUID == 0)) && chown postgres "$WORK/pg"
	${as_pg[@]+"${as_pg[@]}"} "$pgbin/initdb" -D "$WORK/pg/data" -U postgres --auth=trust >"$WORK/initdb.log" 2>&1 || die "initdb failed"
	PG_PORT=$(free_port)
	start postgres ${as_pg[@]+"${as_pg[@]}"} "$pgbin/postgres" -D "$WORK/pg/data" -p "$PG_PORT" -k "$WORK/pg" \
		-c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off
	STOPSIG[$STARTED]=INT # fast shutdown
	local pg_pid=$STARTED
	PG_PID=$STARTED
	FIXTURE_PIDS+=("$STARTED")
	wait_port "$PG_PORT" "$pg_pid" || die "postgres did not start"
	PG_VERSION=$("$pgbin/postgres" --version | awk '{ print $3 }')
	export TOLLGATE_DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/postgres?sslmode=disable"
	local i
	for ((i = 0; i < 100; i++)); do
		psql -q "$TOLLGATE_DATABASE_URL" -c 'SELECT 1' >/dev/null 2>&1 && break
		sleep 0.1
	done
	"$BIN/tollgate" migrate >"$WORK/migrate.log" 2>&1 || die "tollgate migrate failed (see $WORK/migrate.log)"
	local key_sha
	key_sha=$(printf '%s' "$BENCH_KEY" | sha256sum | cut -d' ' -f1)
	psql -q -v ON_ERROR_STOP=1 "$TOLLGATE_DATABASE_URL" >"$WORK/seed.log" 2>&1 <<-EOF || die "seeding Postgres failed (see $WORK/seed.log)"
		INSERT INTO plans (id, rpm, tpm, monthly_budget_micros, max_tokens, allowed_models)
		  VALUES ('bench', 50000000, 10000000000, 1000000000000000, 4096, '{mock-*}');
		INSERT INTO tenants (id, plan_id) VALUES ('bench', 'bench');
		INSERT INTO api_keys (id, tenant_id, key_hash, prefix) VALUES ('bench-1', 'bench', decode('$key_sha', 'hex'), 'tg_bench');
		INSERT INTO model_prices (model, input_micros_per_mtok, output_micros_per_mtok, effective_from)
		  VALUES ('mock-1', 150000, 600000, '2000-01-01');
	EOF
	local rport
	rport=$(free_port)
	start redis redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK"
	REDIS_PID=$STARTED
	FIXTURE_PIDS+=("$STARTED")
	wait_port "$rport" "$STARTED" || die "redis-server did not start"
	REDIS_VERSION=$(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')
	export TOLLGATE_REDIS_ADDR=127.0.0.1:$rport
}
