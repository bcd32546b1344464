#!/usr/bin/env bash
# Auth service benchmark: logins per second per core with bcrypt at cost 12, and the p99 of a cheap RPC
# (AuthInternal/CheckSession) alone and while logins saturate the hashing threads, which shows that bcrypt never
# blocks an event loop. Runs `auth-benchmark` (Benchmarks/AuthBenchmark, release) in front of a throwaway
# Postgres 15 and prints its figures.
#
# Usage: Benchmarks/auth.sh      (BENCH_SECONDS=10 per phase, BENCH_LOGIN_CONCURRENCY=8;
#                                 HABITFLOW_SCRATCH_PATH = build folder, default .build-release)
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"
source "$HABITFLOW_ROOT/scripts/lib/postgres.sh"
cd "$HABITFLOW_ROOT"

seconds=${BENCH_SECONDS:-10}
concurrency=${BENCH_LOGIN_CONCURRENCY:-8}

scratch=${HABITFLOW_SCRATCH_PATH:-$HABITFLOW_ROOT/.build-release}
log "building auth-benchmark (release)"
swift build -c release --product auth-benchmark --scratch-path "$scratch" >&2
benchmark="$scratch/release/auth-benchmark"

pg_workdir habitflow-authbench
workdir=$PG_WORKDIR
pg_start_throwaway "$workdir/postgres" "$workdir/postgres.log"
port=$PG_PORT
log "Postgres on 127.0.0.1:$port; $seconds s per phase, $concurrency concurrent logins"

"$benchmark" --url "postgresql://auth:$(service_db_password auth)@127.0.0.1:$port/habitflow" \
    --sql-dir "$HABITFLOW_ROOT/Schemas/sql" --seconds "$seconds" --login-concurrency "$concurrency"
