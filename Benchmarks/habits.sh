#!/usr/bin/env bash
# Habits service benchmark: the week view and mark-done of habitflow-habits (release) for a user with 15 habits and
# five years of daily entries, at concurrency 1 and 32, against a throwaway Postgres 15 (fsync on, as the stack runs
# it; PG_FSYNC=off to compare). The client (habits-benchmark) and the service are separate processes on loopback.
# Prints requests/s, p50/p99 latency as the client saw it (server time plus loopback and the client itself, which
# shares the two cores), p50/p99 server latency from the service's own handling-time histogram (/metrics) with the
# exact share of calls within the issue's p99 goal, and the CPU time per request of the service, Postgres and client. Mark-done runs twice at concurrency 32: all calls
# as one user (they queue on that user's row lock by design) and spread over 32 users (the realistic case).
#
# Usage: Benchmarks/habits.sh   (BENCH_SECONDS=10 per run; HABITFLOW_SCRATCH_PATH = build folder; POOL_SIZE=10;
#                               SERVICE_BINARY = a habitflow-habits built earlier, to compare it with the same client)
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"
source "$HABITFLOW_ROOT/scripts/lib/postgres.sh"
cd "$HABITFLOW_ROOT"

seconds=${BENCH_SECONDS:-10}
scratch=${HABITFLOW_SCRATCH_PATH:-$HABITFLOW_ROOT/.build-release}

"$HABITFLOW_ROOT/scripts/bootstrap"
for product in habitflow-habits habits-benchmark; do
    log "building $product (release)"
    swift build -c release --product "$product" --scratch-path "$scratch" >&2
done

service_pid=
before_cleanup() {
    [[ -z "$service_pid" ]] || { kill "$service_pid" 2>/dev/null; wait "$service_pid" 2>/dev/null; }
}
pg_workdir habitflow-habits-bench
workdir=$PG_WORKDIR

pg_start_throwaway "$workdir/postgres" "$workdir/postgres.log"
port=$PG_PORT
database_url="postgresql://habits:$(service_db_password habits)@127.0.0.1:$port/habitflow${PG_URL_SUFFIX:-}"
log "Postgres on 127.0.0.1:$port (fsync ${PG_FSYNC:-on})"

service_port=$(pg_free_port)
metrics_port=$(pg_free_port)
secret=$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
HABITFLOW_HABITS_PORT=$service_port HABITFLOW_HABITS_METRICS_PORT=$metrics_port \
    HABITFLOW_HABITS_DATABASE_URL=$database_url HABITFLOW_HABITS_DB_POOL_SIZE=${POOL_SIZE:-10} \
    HABITFLOW_SQL_DIR="$HABITFLOW_ROOT/Schemas/sql" HABITFLOW_INTERNAL_SECRET=$secret HABITFLOW_LOG_LEVEL=warning \
    "${SERVICE_BINARY:-$scratch/release/habitflow-habits}" 2>"$workdir/service.log" &
service_pid=$!
for _ in $(seq 100); do
    if (echo >"/dev/tcp/127.0.0.1/$service_port") 2>/dev/null; then break; fi
    kill -0 "$service_pid" 2>/dev/null || { cat "$workdir/service.log" >&2; exit 1; }
    sleep 0.2
done
log "habitflow-habits (${SERVICE_BINARY:-this build}) on 127.0.0.1:$service_port; $seconds s per run after a 2 s warm-up; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

"$scratch/release/habits-benchmark" --port "$service_port" --database-url "$database_url" --secret "$secret" \
    --seconds "$seconds" --concurrency 1,32 --service-pid "$service_pid" --metrics-port "$metrics_port" \
    --postgres-pid "$(head -n 1 "$workdir/postgres/postmaster.pid")"
log "load average afterwards: $(cut -d' ' -f1-3 /proc/loadavg)"
