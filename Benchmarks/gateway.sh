#!/usr/bin/env bash
# Gateway overhead: the same habits RPC (HabitsService/GetHabit) called directly on habitflow-habits, through
# habitflow-gateway and through nghttpx (a plain HTTP/2 reverse proxy in front of habits: what one proxy hop costs
# here when it does nothing else), at concurrency 32; prints p50/p99, the ratio and what each adds, per round and
# as the median of the rounds (goal: the gateway adds under 1 ms at p50). Builds the executables (release), starts
# a throwaway Postgres and auth, habits and the gateway on free ports (scripts/lib/habitflow_stack.py, as
# scripts/stack does) and nghttpx, runs `gateway-benchmark`, stops everything.
#
# Usage: Benchmarks/gateway.sh     (BENCH_SECONDS=8 per round and path, BENCH_ROUNDS=5, BENCH_CONCURRENCY=32;
#                                   HABITFLOW_SCRATCH_PATH = the build folder; BENCH_LOG_LEVEL=info for the services)
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"
source "$HABITFLOW_ROOT/scripts/lib/postgres.sh"
source "$HABITFLOW_ROOT/Benchmarks/lib/stack.sh"
cd "$HABITFLOW_ROOT"

"$HABITFLOW_ROOT/scripts/bootstrap" nghttp2-proxy  # nghttpx
bench_build_release gateway-benchmark
bin=$BENCH_BIN
benchmark="$bin/gateway-benchmark"

proxy_pid=
# Runs before the throwaway cluster stops (pg_workdir): the proxy and the services go first.
before_cleanup() {
    if [[ -n "$proxy_pid" ]]; then
        kill -TERM "$proxy_pid" 2>/dev/null || true
        wait "$proxy_pid" 2>/dev/null || true
    fi
    bench_stop_stack
}
pg_workdir habitflow-gatewaybench
workdir=$PG_WORKDIR
export HABITFLOW_LOG_LEVEL=${BENCH_LOG_LEVEL:-info}
bench_start_stack "$bin" auth habits gateway

# nghttpx with its defaults: h2c in front, h2 to habits, one worker (the benchmark client opens one connection),
# no access log.
proxy_port=$(pg_free_port)
nghttpx --frontend="127.0.0.1,$proxy_port;no-tls" --backend="127.0.0.1,$HABITFLOW_HABITS_PORT;;proto=h2" \
    --workers=1 --no-ocsp --conf=/dev/null --errorlog-file="$workdir/nghttpx.log" &
proxy_pid=$!
proxy_worker=
for _ in $(seq 1 50); do
    # The worker process does the forwarding (its CPU is what gets measured); habits' health through it says it works.
    proxy_worker=$(pgrep -P "$proxy_pid" nghttpx || true)
    if [[ -n "$proxy_worker" ]] && "$bin/habitflow-healthcheck" "127.0.0.1:$proxy_port" >/dev/null 2>&1; then break; fi
    proxy_worker=
    sleep 0.2
done
[[ -n "$proxy_worker" ]] || { echo "gateway.sh: nghttpx did not forward to habits" >&2; cat "$workdir/nghttpx.log" >&2; exit 1; }

log "measuring (log level $HABITFLOW_LOG_LEVEL)"
"$benchmark" --gateway "127.0.0.1:$HABITFLOW_GATEWAY_PORT" --habits "127.0.0.1:$HABITFLOW_HABITS_PORT" \
    --proxy "127.0.0.1:$proxy_port" --secret "$HABITFLOW_INTERNAL_SECRET" --concurrency "${BENCH_CONCURRENCY:-32}" \
    --seconds "${BENCH_SECONDS:-8}" --rounds "${BENCH_ROUNDS:-5}" \
    --gateway-pid "$(pgrep -n -f -x "$bin/habitflow-gateway")" --habits-pid "$(pgrep -n -f -x "$bin/habitflow-habits")" \
    --proxy-pid "$proxy_worker"
