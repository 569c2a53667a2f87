# Sourced by bench/run and bench/crash: installs what is missing, builds the release that
# deploy/Dockerfile ships, and defines:
#   bench_start  starts a stack of its own in a new temporary directory (logs at $BENCH_LOG_LEVEL,
#                `warn` unless set; every load comes from one address, so the gateway's limit of
#                connections per address is raised from 64 to 256: the 200 concurrent sign-ups
#                reach accounts) and sets $gateway, $admin, $db, $pg_port, $work and psql_;
#   bench_stop   stops it and removes the directory (also done on exit);
#   cpu_ticks, per_op  CPU used by each service and PostgreSQL, and per operation between two readings;
#   hot_prepare, hot_load  row 1's coupon, tokens and load (bench/profile, bench/ab);
#   free_prepare, free_load, valid_prepare, valid_load  rows 2's and 3's (bench/profile, bench/pg-statements).
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
# BENCH_BIN=DIR runs the executables a build copied there instead (to compare two builds in turns,
# A B A B, as this machine's speed drifts within minutes).
if [[ -n ${BENCH_BIN:-} ]]; then
  bin=$BENCH_BIN
else
  echo "bench: building (release, static Swift runtime)" >&2
  swift build -c release --static-swift-stdlib >&2
  bin=$(swift build -c release --static-swift-stdlib --show-bin-path)
fi

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
# CPU ticks used so far by each service and by PostgreSQL (all its processes): CPU per operation
# moves with this machine's speed too, but less than rates; WAL per redemption does not move at all.
cpu_ticks() { # -> "accounts coupons grants gateway postgres" ticks
  local out="" s t pg_pid
  pg_pid=$(head -1 "$work/data/pg/postmaster.pid")
  for s in accounts coupons grants gateway; do out+="$(awk '{print $14+$15}' "/proc/$(cat "$work/data/run/$s.pid")/stat") "; done
  # The postmaster and its children (fields 4, 14 and 15 of /proc/PID/stat: parent, user and system ticks).
  t=$(cat /proc/[0-9]*/stat 2>/dev/null | awk -v pg="$pg_pid" '{ sub(/\(.*\)/, "x") } $1 == pg || $4 == pg { t += $14 + $15 } END { print t + 0 }')
  echo "$out$t"
}
per_op() { # ticks before, ticks after, operations -> "accounts A, coupons C, grants R, gateway G, PostgreSQL P (total T) µs"
  python3 - "$1" "$2" "$3" "$(getconf CLK_TCK)" <<'PY'
import sys
b, a, n, tick = sys.argv[1].split(), sys.argv[2].split(), float(sys.argv[3]), float(sys.argv[4])
us = [(float(y) - float(x)) / tick * 1e6 / max(n, 1) for x, y in zip(b, a)]
names = ["accounts", "coupons", "grants", "gateway", "PostgreSQL"]
print(", ".join(f"{k} {v:.0f}" for k, v in zip(names, us)) + f" (total {sum(us):.0f}) µs")
PY
}

# spend_tokens RESULT prints wrk's RESULT line and takes the tokens that run used (its `used=`) off
# the front of $work/tokens, so the next load on the same stack (a measured run after its warm-up)
# is new users again: a token used twice is a repeat, answered the account's existing redemption
# with no row written and its token found verified already. Warns when the run ran out of tokens.
spend_tokens() {
  echo "$1"
  local used left
  used=$(sed -n 's/.* used=\([0-9]*\).*/\1/p' <<<"$1")
  left=$(wc -l < "$work/tokens")
  (( ${used:-0} <= left )) || echo "bench: the load used $used tokens of $left: some requests were repeats" >&2
  tail -n +"$(( ${used:-0} + 1 ))" "$work/tokens" > "$work/tokens.left"
  mv "$work/tokens.left" "$work/tokens"
}

# Row 1's load, as bench/profile and bench/ab put it on a started stack: hot_prepare TOKENS makes the
# hot discount coupon (BENCH-HOT) and tokens of that many new users; hot_load SECONDS runs wrk and
# prints its RESULT line (every request a new user, also across loads: each takes tokens the
# loads before it left).
hot_prepare() {
  curl -fsS -X POST "$gateway/v1/coupons" -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
    -d '{"code":"BENCH-HOT","kind":"percentOff","percentOff":20,"productIds":["pro"],"duration":{"unit":"month","count":1},"periodCount":1,"platforms":["web","android"]}' >/dev/null
  "$bin/bench-tokens" "$db" "$1" "$work/tokens"
}
hot_load() {
  spend_tokens "$(env BENCH_TOKENS="$work/tokens" BENCH_CODE=BENCH-HOT BENCH_PRODUCT=pro wrk -t2 -c"$clients" -d"$1s" -s bench/redeem.lua "$gateway" | grep RESULT)"
}
# Row 2's, as bench/profile and bench/pg-statements put it: free_prepare TOKENS makes the free
# period coupon (BENCH-FREE, each redemption completed through grants) and tokens of that many new
# users; free_load SECONDS runs wrk and prints its RESULT line.
free_prepare() {
  curl -fsS -X POST "$gateway/v1/coupons" -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
    -d '{"code":"BENCH-FREE","kind":"freePeriod","duration":{"unit":"month","count":1}}' >/dev/null
  "$bin/bench-tokens" "$db" "$1" "$work/tokens"
}
free_load() {
  spend_tokens "$(env BENCH_TOKENS="$work/tokens" BENCH_CODE=BENCH-FREE wrk -t2 -c"$clients" -d"$1s" -s bench/redeem.lua "$gateway" | grep RESULT)"
}
# Row 3's: valid_prepare makes its coupon (BENCH-VALID) and one user's token; valid_load SECONDS
# validates it as that user from every connection and prints wrk's RESULT line.
valid_prepare() {
  curl -fsS -X POST "$gateway/v1/coupons" -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
    -d '{"code":"BENCH-VALID","kind":"freePeriod","duration":{"unit":"week","count":1}}' >/dev/null
  "$bin/bench-tokens" "$db" 1 "$work/tokens"
}
valid_load() { env BENCH_TOKEN="$(head -1 "$work/tokens")" BENCH_CODE=BENCH-VALID wrk -t2 -c"$clients" -d"$1s" -s bench/validate.lua "$gateway" | grep RESULT; }

[[ ${BENCH_NO_START:-} == 1 ]] || bench_start
