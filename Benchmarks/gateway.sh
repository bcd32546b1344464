#!/usr/bin/env bash
# Gateway overhead: the same habits RPC (HabitsService/GetHabit) called directly on habitflow-habits and through
# habitflow-gateway, at concurrency 32; prints p50/p99 of both, their ratio and what the gateway adds (goal: under
# 1 ms at p50). Builds the executables (release), starts a throwaway Postgres and auth, habits and the gateway on
# free ports (scripts/lib/habitflow_stack.py, as scripts/stack does), runs `gateway-benchmark`, stops everything.
#
# Usage: Benchmarks/gateway.sh     (BENCH_SECONDS=10 per round, BENCH_ROUNDS=3, BENCH_CONCURRENCY=32;
#                                   HABITFLOW_SCRATCH_PATH = build folder; BENCH_LOG_LEVEL=info for the services)
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"
source "$HABITFLOW_ROOT/scripts/lib/postgres.sh"
cd "$HABITFLOW_ROOT"

scratch=${HABITFLOW_SCRATCH_PATH:-$HABITFLOW_ROOT/.build-release}
for product in habitflow-auth habitflow-habits habitflow-gateway habitflow-healthcheck gateway-benchmark; do
    log "building $product (release)"
    swift build -c release --product "$product" --scratch-path "$scratch" >&2
done
bin="$scratch/release"

launcher_pid=
# Runs before the throwaway cluster stops (pg_workdir): the services go first.
before_cleanup() {
    if [[ -n "$launcher_pid" ]]; then
        kill -TERM "$launcher_pid" 2>/dev/null || true
        wait "$launcher_pid" 2>/dev/null || true
    fi
}
pg_workdir habitflow-gatewaybench
workdir=$PG_WORKDIR
pg_start_throwaway "$workdir/postgres" "$workdir/postgres.log"
export HABITFLOW_POSTGRES_PORT=$PG_PORT
export HABITFLOW_SQL_DIR="$HABITFLOW_ROOT/Schemas/sql"
HABITFLOW_INTERNAL_SECRET=$(head -c 32 /dev/urandom | base64)
HABITFLOW_AUTH_KEY_ENCRYPTION_KEY=$(head -c 32 /dev/urandom | base64)
export HABITFLOW_INTERNAL_SECRET HABITFLOW_AUTH_KEY_ENCRYPTION_KEY
export HABITFLOW_LOG_LEVEL=${BENCH_LOG_LEVEL:-info}
# The benchmark is one client address and one account: no rate limit may get in the way.
export HABITFLOW_GATEWAY_ADDRESS_RATE_LIMIT=1000000 HABITFLOW_GATEWAY_ADDRESS_RATE_BURST=1000000
export HABITFLOW_GATEWAY_ACCOUNT_RATE_LIMIT=1000000 HABITFLOW_GATEWAY_ACCOUNT_RATE_BURST=1000000
for service in gateway auth habits; do
    export "HABITFLOW_${service^^}_PORT=$(pg_free_port)" "HABITFLOW_${service^^}_METRICS_PORT=$(pg_free_port)"
done

log "starting auth, habits and the gateway (logs in $workdir/services.log)"
"$HABITFLOW_PYTHON" "$HABITFLOW_ROOT/scripts/lib/habitflow_stack.py" --bin-dir "$bin" >"$workdir/services.log" 2>&1 &
launcher_pid=$!
for service in auth habits gateway; do
    port_variable="HABITFLOW_${service^^}_PORT"
    for _ in $(seq 1 300); do
        if "$bin/habitflow-healthcheck" "127.0.0.1:${!port_variable}" >/dev/null 2>&1; then continue 2; fi
        kill -0 "$launcher_pid" 2>/dev/null || { cat "$workdir/services.log" >&2; exit 1; }
        sleep 0.2
    done
    echo "gateway.sh: $service did not become SERVING" >&2
    cat "$workdir/services.log" >&2
    exit 1
done

log "measuring (log level $HABITFLOW_LOG_LEVEL)"
"$bin/gateway-benchmark" --gateway "127.0.0.1:$HABITFLOW_GATEWAY_PORT" --habits "127.0.0.1:$HABITFLOW_HABITS_PORT" \
    --secret "$HABITFLOW_INTERNAL_SECRET" --concurrency "${BENCH_CONCURRENCY:-32}" --seconds "${BENCH_SECONDS:-10}" \
    --rounds "${BENCH_ROUNDS:-3}" --gateway-pid "$(pgrep -n -f -x "$bin/habitflow-gateway")" \
    --habits-pid "$(pgrep -n -f -x "$bin/habitflow-habits")"
