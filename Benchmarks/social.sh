#!/usr/bin/env bash
# Social service benchmark: GetLeaderboard of habitflow-social (release, calling habitflow-habits for the weekly
# scores and habitflow-auth for the names, both release) for a user with 100 friends who all share, each with 3
# habits and some check-ins this week, at concurrency 1 and 32, against a throwaway Postgres 15 (fsync on, as the
# stack runs it). The client (social-benchmark) and the three services are separate processes on loopback. Prints
# requests/s, p50/p99 latency as the client saw it, p50/p99 server latency from social's own handling-time histogram
# (/metrics) with the share of calls within the goal (p99 under 10 ms at concurrency 32), the calls to habits
# (GetWeeklyScores) and to auth (GetUsers) per leaderboard from their own metrics (goal: one each), and the CPU time
# per request of social, habits, auth, Postgres and the client; then the same board driven by h2load.
#
# Usage: Benchmarks/social.sh   (BENCH_SECONDS=10 per run; HABITFLOW_SCRATCH_PATH = the build folder;
#                               BENCH_NO_BUILD=1 to run what is built)
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"
source "$HABITFLOW_ROOT/scripts/lib/postgres.sh"
cd "$HABITFLOW_ROOT"

seconds=${BENCH_SECONDS:-10}
scratch=${HABITFLOW_SCRATCH_PATH:-$HABITFLOW_ROOT/.build-release}

"$HABITFLOW_ROOT/scripts/bootstrap"
if [[ -z "${BENCH_NO_BUILD:-}" ]]; then
    log "building habitflow-auth, habitflow-habits and habitflow-social (release)"
    for product in habitflow-auth habitflow-habits habitflow-social; do
        swift build -c release --product "$product" --scratch-path "$scratch" >&2
    done
    log "building social-benchmark (release)"
    swift build -c release --product social-benchmark --scratch-path "$scratch" >&2
fi
benchmark="$scratch/release/social-benchmark"

pids=()
before_cleanup() {
    local pid
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
    return 0
}
pg_workdir habitflow-social-bench
workdir=$PG_WORKDIR

pg_start_throwaway "$workdir/postgres" "$workdir/postgres.log"
port=$PG_PORT
log "Postgres on 127.0.0.1:$port (fsync ${PG_FSYNC:-on})"
secret=$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
auth_port=$(pg_free_port) auth_metrics=$(pg_free_port)
habits_port=$(pg_free_port) habits_metrics=$(pg_free_port)
social_port=$(pg_free_port) social_metrics=$(pg_free_port)
# Goals is not started: nothing here publishes to it, and what auth's outbox holds for it just waits.
goals_port=$(pg_free_port)
database_url() { echo "postgresql://$1:$(service_db_password "$1")@127.0.0.1:$port/habitflow"; }
common=(HABITFLOW_SQL_DIR="$HABITFLOW_ROOT/Schemas/sql" HABITFLOW_INTERNAL_SECRET="$secret" HABITFLOW_LOG_LEVEL=warning
    HABITFLOW_AUTH_ADDRESSES="127.0.0.1:$auth_port" HABITFLOW_HABITS_ADDRESSES="127.0.0.1:$habits_port"
    HABITFLOW_SOCIAL_ADDRESSES="127.0.0.1:$social_port" HABITFLOW_GOALS_ADDRESSES="127.0.0.1:$goals_port"
    HABITFLOW_AUTH_KEY_ENCRYPTION_KEY="$(head -c 32 /dev/urandom | base64)")

wait_for_port() {  # wait_for_port PORT PID LOG
    for _ in $(seq 100); do
        if (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        kill -0 "$2" 2>/dev/null || { cat "$3" >&2; exit 1; }
        sleep 0.2
    done
}
start_service() {  # start_service NAME PORT METRICS_PORT; sets started_pid
    local upper=${1^^}
    env "${common[@]}" "HABITFLOW_${upper}_PORT=$2" "HABITFLOW_${upper}_METRICS_PORT=$3" \
        "HABITFLOW_${upper}_DATABASE_URL=$(database_url "$1")" "$scratch/release/habitflow-$1" 2>"$workdir/$1.log" &
    started_pid=$!
    pids+=("$started_pid")
    wait_for_port "$2" "$started_pid" "$workdir/$1.log"
}
start_service auth "$auth_port" "$auth_metrics"
auth_pid=$started_pid
start_service habits "$habits_port" "$habits_metrics"
habits_pid=$started_pid
start_service social "$social_port" "$social_metrics"
social_pid=$started_pid
log "habitflow-social on 127.0.0.1:$social_port, habits on $habits_port, auth on $auth_port; $seconds s per run after a 2 s warm-up; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

"$benchmark" --social-port "$social_port" --habits-port "$habits_port" --auth-port "$auth_port" \
    --social-database-url "$(database_url social)" --secret "$secret" --seconds "$seconds" --concurrency 1,32 \
    --social-pid "$social_pid" --habits-pid "$habits_pid" --auth-pid "$auth_pid" \
    --postgres-pid "$(head -n 1 "$workdir/postgres/postmaster.pid")" --social-metrics-port "$social_metrics" \
    --habits-metrics-port "$habits_metrics" --auth-metrics-port "$auth_metrics"
log "load average afterwards: $(cut -d' ' -f1-3 /proc/loadavg)"
