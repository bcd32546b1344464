#!/usr/bin/env bash
# Goals service benchmark: ListGoals of habitflow-goals (release, calling habitflow-habits, release) for a user with
# 10 active goals each linked to 3 habits with five years of daily entries, at concurrency 1 and 32, against a
# throwaway Postgres 15 (fsync on, as the stack runs it). The client (goals-benchmark) and both services are separate
# processes on loopback. Prints requests/s, p50/p99 latency as the client saw it, p50/p99 server latency from goals'
# own handling-time histogram (/metrics) with the share of calls within issue #23's goal (p99 under 5 ms at
# concurrency 32), the calls to habits per list (habits' own AggregateEntries count; the goal is at most one), and the
# CPU time per request of goals, habits, Postgres and the client. A last run lists after a check-in each time: every
# list then derives all progress from five years of entries (habits' version changed), the cost without the cache.
#
# Usage: Benchmarks/goals.sh   (BENCH_SECONDS=10 per run; HABITFLOW_SCRATCH_PATH = the build folder;
#                              GOALS_BINARY = a habitflow-goals built earlier, to compare it with the same client)
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"
source "$HABITFLOW_ROOT/scripts/lib/postgres.sh"
cd "$HABITFLOW_ROOT"

seconds=${BENCH_SECONDS:-10}
scratch=${HABITFLOW_SCRATCH_PATH:-$HABITFLOW_ROOT/.build-release}

"$HABITFLOW_ROOT/scripts/bootstrap"
log "building habitflow-habits and habitflow-goals (release)"
for product in habitflow-habits habitflow-goals; do
    swift build -c release --product "$product" --scratch-path "$scratch" >&2
done
log "building goals-benchmark (release)"
swift build -c release --product goals-benchmark --scratch-path "$scratch" >&2
benchmark="$scratch/release/goals-benchmark"

pids=()
before_cleanup() {
    local pid
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
    return 0
}
pg_workdir habitflow-goals-bench
workdir=$PG_WORKDIR

pg_start_throwaway "$workdir/postgres" "$workdir/postgres.log"
port=$PG_PORT
log "Postgres on 127.0.0.1:$port (fsync ${PG_FSYNC:-on})"
secret=$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
habits_port=$(pg_free_port) habits_metrics=$(pg_free_port)
goals_port=$(pg_free_port) goals_metrics=$(pg_free_port)
habits_url="postgresql://habits:$(service_db_password habits)@127.0.0.1:$port/habitflow"
common=(HABITFLOW_SQL_DIR="$HABITFLOW_ROOT/Schemas/sql" HABITFLOW_INTERNAL_SECRET="$secret" HABITFLOW_LOG_LEVEL=warning
    HABITFLOW_HABITS_ADDRESSES="127.0.0.1:$habits_port" HABITFLOW_GOALS_ADDRESSES="127.0.0.1:$goals_port")

wait_for_port() {  # wait_for_port PORT PID LOG
    for _ in $(seq 100); do
        if (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        kill -0 "$2" 2>/dev/null || { cat "$3" >&2; exit 1; }
        sleep 0.2
    done
}
env "${common[@]}" HABITFLOW_HABITS_PORT="$habits_port" HABITFLOW_HABITS_METRICS_PORT="$habits_metrics" \
    HABITFLOW_HABITS_DATABASE_URL="$habits_url" "$scratch/release/habitflow-habits" 2>"$workdir/habits.log" &
habits_pid=$!
pids+=("$habits_pid")
wait_for_port "$habits_port" "$habits_pid" "$workdir/habits.log"
env "${common[@]}" HABITFLOW_GOALS_PORT="$goals_port" HABITFLOW_GOALS_METRICS_PORT="$goals_metrics" \
    HABITFLOW_GOALS_DATABASE_URL="postgresql://goals:$(service_db_password goals)@127.0.0.1:$port/habitflow" \
    "${GOALS_BINARY:-$scratch/release/habitflow-goals}" 2>"$workdir/goals.log" &
goals_pid=$!
pids+=("$goals_pid")
wait_for_port "$goals_port" "$goals_pid" "$workdir/goals.log"
log "habitflow-goals (${GOALS_BINARY:-this build}) on 127.0.0.1:$goals_port, habits on $habits_port; $seconds s per run after a 2 s warm-up; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

"$benchmark" --goals-port "$goals_port" --habits-port "$habits_port" --habits-database-url "$habits_url" \
    --secret "$secret" --seconds "$seconds" --concurrency 1,32 --goals-pid "$goals_pid" --habits-pid "$habits_pid" \
    --postgres-pid "$(head -n 1 "$workdir/postgres/postmaster.pid")" --goals-metrics-port "$goals_metrics" \
    --habits-metrics-port "$habits_metrics"
log "load average afterwards: $(cut -d' ' -f1-3 /proc/loadavg)"
