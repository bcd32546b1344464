#!/usr/bin/env bash
# WatchChanges fan-out benchmark (issue #30): 10,000 watchers for 1,000 users on one gateway (release executables of
# all five services on free ports, a throwaway Postgres 15). `habitflow-load watch` signs the users up, opens 10
# WatchChanges streams per user over 125 HTTP/2 connections, waits for every catch-up, then checks in once per user
# and prints the check-in-to-watcher latency (p50/p90/p99/max, from the start of MarkHabitDone, so the write's own
# time is in it; the goal is p99 < 50 ms), deliveries and duplicates, and the gateway's resident memory per watcher.
#
# Usage: Benchmarks/watch.sh [--users N] [--watchers-per-user N] [--rate CHECKINS_PER_S] [--no-build]
#        HABITFLOW_SCRATCH_PATH = the build folder (default .build-release); BENCH_DEBUG=1 runs debug executables.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"
source "$HABITFLOW_ROOT/scripts/lib/postgres.sh"
cd "$HABITFLOW_ROOT"

users=1000
per_user=10
rate=100
build=true
while (($#)); do
    case "$1" in
        --users) users=$2; shift 2 ;;
        --watchers-per-user) per_user=$2; shift 2 ;;
        --rate) rate=$2; shift 2 ;;
        --no-build) build=false; shift ;;
        -h | --help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "watch: unknown option $1 (try --help)" >&2; exit 2 ;;
    esac
done

"$HABITFLOW_ROOT/scripts/bootstrap"
configuration=release
[[ -n "${BENCH_DEBUG:-}" ]] && configuration=debug
scratch=${HABITFLOW_SCRATCH_PATH:-$HABITFLOW_ROOT/.build-$configuration}
[[ $configuration == debug && -z "${HABITFLOW_SCRATCH_PATH:-}" ]] && scratch="$HABITFLOW_ROOT/.build"
bin="$scratch/$configuration"
services=(auth habits goals social gateway)
if $build; then
    for product in "${services[@]/#/habitflow-}" habitflow-load; do
        log "building $product ($configuration)"
        swift build -c "$configuration" --product "$product" --scratch-path "$scratch" 2>&1 | grep -E "error|Build of product" || true
    done
fi
for product in "${services[@]/#/habitflow-}" habitflow-load; do
    [[ -x "$bin/$product" ]] || { echo "watch: $bin/$product is missing (run without --no-build)" >&2; exit 1; }
done

# Every watcher's stream shares 125 client connections, but the gateway also holds its connections to the services:
# take what the hard limit allows.
ulimit -n "$(ulimit -Hn)"
if (($(ulimit -n) < 4096)); then echo "watch: ulimit -n is $(ulimit -n); need 4096" >&2; exit 1; fi

pids=()
before_cleanup() { # the services, before the cluster stops
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
pg_workdir habitflow-watch-bench
workdir=$PG_WORKDIR
pg_start_throwaway "$workdir/postgres" "$workdir/postgres.log"
pg_port=$PG_PORT
log "Postgres on 127.0.0.1:$pg_port"

export HABITFLOW_SQL_DIR="$HABITFLOW_ROOT/Schemas/sql" HABITFLOW_LOG_LEVEL=warning
export HABITFLOW_INTERNAL_SECRET=${HABITFLOW_INTERNAL_SECRET:-$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')}
declare -A port
for service in "${services[@]}"; do
    port[$service]=$(pg_free_port)
    export "HABITFLOW_${service^^}_PORT=${port[$service]}" "HABITFLOW_${service^^}_ADDRESSES=127.0.0.1:${port[$service]}"
    export "HABITFLOW_${service^^}_METRICS_PORT=0"
    [[ $service == gateway ]] && continue
    export "HABITFLOW_${service^^}_DATABASE_URL=postgresql://$service:$(service_db_password "$service")@127.0.0.1:$pg_port/habitflow"
done
# One client address opens every stream and makes every call.
export HABITFLOW_GATEWAY_ADDRESS_RATE_LIMIT=1000000 HABITFLOW_GATEWAY_ADDRESS_RATE_BURST=1000000
export HABITFLOW_GATEWAY_WATCHERS_PER_USER=$per_user

wait_for_port() { # port, seconds
    local deadline=$((SECONDS + $2))
    until (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}
declare -A service_pid
for service in "${services[@]}"; do
    "$bin/habitflow-$service" >"$workdir/$service.log" 2>&1 &
    service_pid[$service]=$!
    pids+=($!)
    wait_for_port "${port[$service]}" 60 || { echo "watch: habitflow-$service did not start:" >&2; tail -20 "$workdir/$service.log" >&2; exit 1; }
done
log "stack up ($configuration): gateway pid ${service_pid[gateway]} on 127.0.0.1:${port[gateway]}"

"$bin/habitflow-load" watch --target "127.0.0.1:${port[gateway]}" --users "$users" --watchers-per-user "$per_user" \
    --connections $(((users * per_user + 79) / 80)) --rate "$rate" --gateway-pid "${service_pid[gateway]}"
