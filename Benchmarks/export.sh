#!/usr/bin/env bash
# Data export benchmark: GatewayService/ExportMyData through the gateway (release executables of all five services,
# a throwaway Postgres 15) for a small user and for users with 1 to 10 years of daily check-ins on 5 to 15 habits
# (entries seeded with SQL; 15 habits is the most a user may have). Prints per user the entries, archive and CSV
# sizes, the export's time, and the gateway's and habits' resident memory before and at its peak during the export
# (sampled every 5 ms): the export streams, so the peak should not grow with the user's history
# (Benchmarks/tools/export_memory.py).
#
# Usage: Benchmarks/export.sh   (HABITFLOW_SCRATCH_PATH = the services' build folder; BENCH_NO_BUILD=1 to run what is
#                               built)
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"
source "$HABITFLOW_ROOT/scripts/lib/postgres.sh"
cd "$HABITFLOW_ROOT"

scratch=${HABITFLOW_SCRATCH_PATH:-$HABITFLOW_ROOT/.build-release}
"$HABITFLOW_ROOT/scripts/bootstrap"
if [[ -z "${BENCH_NO_BUILD:-}" ]]; then
    for service in "${HABITFLOW_SERVICES[@]}" gateway; do
        log "building habitflow-$service (release)"
        swift build -c release --product "habitflow-$service" --scratch-path "$scratch" >&2
    done
fi

pg_workdir habitflow-export-bench
pg_start_throwaway "$PG_WORKDIR/postgres" "$PG_WORKDIR/postgres.log"
log "Postgres on 127.0.0.1:$PG_PORT (fsync ${PG_FSYNC:-on})"
export HABITFLOW_SQL_DIR="$HABITFLOW_ROOT/Schemas/sql"
for service in "${HABITFLOW_SERVICES[@]}"; do
    export "HABITFLOW_TEST_${service^^}_DATABASE_URL=postgresql://$service:$(service_db_password "$service")@127.0.0.1:$PG_PORT/habitflow"
done
HABITFLOW_E2E_BIN_DIR="$scratch/release" "$HABITFLOW_PYTHON" "$HABITFLOW_ROOT/Benchmarks/tools/export_memory.py"
