# Sourced by bench/run and bench/crash: installs what is missing, builds the release that
# deploy/Dockerfile ships, and defines:
#   bench_start  starts a stack of its own in a new temporary directory (logs at $BENCH_LOG_LEVEL,
#                `warn` unless set; every load comes from one address, so the gateway's limit of
#                connections per address is raised from 64 to 256: the 200 concurrent sign-ups
#                reach accounts) and sets $gateway, $admin, $db, $pg_port, $work and psql_;
#   bench_stop   stops it and removes the directory (also done on exit).
# Sourcing it starts one stack, unless BENCH_NO_START=1.
seconds=${BENCH_SECONDS:-10}
clients=${BENCH_CLIENTS:-64}
pg_bin=${REDEEM_PG_BIN:-/usr/lib/postgresql/15/bin}

scripts/setup
# wrk drives HTTP; libcurl4-openssl-dev lets FoundationNetworking link statically.
for p in wrk libcurl4-openssl-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" \
    || { sudo=""; [[ $(id -u) -eq 0 ]] || sudo=sudo; $sudo apt-get install -y -qq "$p" >/dev/null; }
done
# The build deploy/Dockerfile ships: release, Swift runtime and Foundation linked statically.
echo "bench: building (release, static Swift runtime)" >&2
swift build -c release --static-swift-stdlib >&2
bin=$(swift build -c release --static-swift-stdlib --show-bin-path)

work=""
runner_pid=""
bench_stop() {  # always returns 0: it runs under `set -e`, and the stack's status on SIGTERM is not 0
  if [[ -n $runner_pid ]]; then
    kill -TERM "$runner_pid" 2>/dev/null || true
    wait "$runner_pid" 2>/dev/null || true
  fi
  runner_pid=""
  # The stack's settings were exported from its env file: the next stack must not inherit them.
  for name in ${bench_env_names:-}; do unset "$name"; done
  bench_env_names=""
  if [[ -n $work ]]; then rm -rf "$work"; fi
  work=""
}
trap bench_stop EXIT INT TERM

bench_start() {
  work=$(mktemp -d /tmp/redeem-bench-XXXXXX)
  chmod 755 "$work"
  admin="sk_live_bench_$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  REDEEM_SKIP_SETUP=1 REDEEM_SKIP_BUILD=1 REDEEM_BIN_DIR="$bin" REDEEM_FREE_PORTS=1 REDEEM_DATA_DIR="$work/data" \
    REDEEM_LOG_DIR="$work/logs" REDEEM_RATE_LIMITS=off REDEEM_LOG_LEVEL=${BENCH_LOG_LEVEL:-warn} \
    REDEEM_DB_POOL_SIZE=${REDEEM_DB_POOL_SIZE:-16} REDEEM_ADMIN_KEY="$admin" \
    REDEEM_HTTP_CONNECTIONS_PER_ADDRESS=${REDEEM_HTTP_CONNECTIONS_PER_ADDRESS:-256} \
    deploy/run-stack > "$work/runner.out" 2> "$work/runner.err" &
  runner_pid=$!
  for _ in $(seq 1 600); do grep -q REDEEM_GATEWAY_URL "$work/runner.out" 2>/dev/null && break; sleep 0.1; done
  gateway=$(grep REDEEM_GATEWAY_URL "$work/runner.out" | cut -d= -f2 || true)
  [[ -n $gateway ]] || { echo "bench: the stack did not start" >&2; cat "$work/runner.err" >&2; exit 1; }
  set -a; source "$work/data/run/env"; set +a
  bench_env_names=$(sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\)=.*/\1/p' "$work/data/run/env")
  db=$(cat "$work/data/run/database-admin-url")  # the superuser: no service gets it (run-stack)
  pg_port=${db##*127.0.0.1:}; pg_port=${pg_port%%/*}
}
psql_() { "$pg_bin/psql" -h 127.0.0.1 -p "$pg_port" -U postgres -qAt redeem "$@"; }

[[ ${BENCH_NO_START:-} == 1 ]] || bench_start
