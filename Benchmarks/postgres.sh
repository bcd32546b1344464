#!/usr/bin/env bash
# Postgres layer benchmark: single-row parameterized SELECT and INSERT round trips per second through PostgresPool
# (Benchmarks/PostgresBenchmark, release build) next to pgbench running the equivalent custom scripts
# (-M prepared, -j 2) against the same throwaway Postgres 15, at concurrency 1 and 32. Prints a table.
#
# Usage: Benchmarks/postgres.sh            (BENCH_SECONDS=10 per run; HABITFLOW_SCRATCH_PATH = build folder)
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"
source "$HABITFLOW_ROOT/scripts/lib/postgres.sh"
cd "$HABITFLOW_ROOT"

seconds=${BENCH_SECONDS:-10}
concurrencies=(1 32)
rows=100000
scratch=${HABITFLOW_SCRATCH_PATH:-$HABITFLOW_ROOT/.build}
pgbench=$(command -v pgbench || echo "$PG_BIN/pgbench")
[[ -x "$pgbench" ]] || { echo "pgbench not found (Debian postgresql-contrib / postgresql-15)" >&2; exit 1; }

log "building postgres-benchmark (release)"
swift build -c release --product postgres-benchmark --scratch-path "$scratch" >&2
benchmark="$scratch/release/postgres-benchmark"

pg_workdir habitflow-pgbench
workdir=$PG_WORKDIR

pg_start_throwaway "$workdir/postgres" "$workdir/postgres.log"
port=$PG_PORT password=$PG_PASSWORD
pg_psql "$workdir/postgres" "$port" --dbname=habitflow --set=rows="$rows" <<'SQL'
CREATE TABLE bench_select (id int8 PRIMARY KEY, value text NOT NULL);
INSERT INTO bench_select SELECT n, 'value ' || n FROM generate_series(1, :rows) AS n;
CREATE TABLE bench_insert (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, worker int8 NOT NULL, value text NOT NULL);
VACUUM ANALYZE;
SQL
url="postgresql://postgres:$password@127.0.0.1:$port/habitflow"
log "Postgres on 127.0.0.1:$port (fsync on, synchronous_commit on); $seconds s per run"

# The same statements the Swift side prepares: one parameterized single-row SELECT by primary key, one INSERT.
cat >"$workdir/select.sql" <<SQL
\set id random(1, $rows)
SELECT value FROM bench_select WHERE id = :id;
SQL
cat >"$workdir/insert.sql" <<'SQL'
\set worker random(0, 31)
INSERT INTO bench_insert (worker, value) VALUES (:worker, 'value');
SQL

# Runs alternate (pgbench, then ours, per workload and concurrency) so both see the same background load.
declare -A pgbench_rate swift_rate
for workload in select insert; do
    for clients in "${concurrencies[@]}"; do
        threads=$((clients < 2 ? 1 : 2))
        output=$(PGPASSWORD=$password "$pgbench" -h 127.0.0.1 -p "$port" -U postgres -n -M prepared \
            -f "$workdir/$workload.sql" -c "$clients" -j "$threads" -T "$seconds" habitflow)
        pgbench_rate[$workload.$clients]=$(awk '/^tps = / { printf "%d", $3 }' <<<"$output")
        read -r _ _ _ rate < <("$benchmark" --url "$url" --seconds "$seconds" --concurrency "$clients" \
            --rows "$rows" --workload "$workload")
        swift_rate[$workload.$clients]=$rate
        log "$workload c=$clients: pgbench ${pgbench_rate[$workload.$clients]}/s, PostgresPool $rate/s"
    done
done
printf '\n%-8s %11s %14s %14s %7s\n' workload concurrency "PostgresPool/s" "pgbench tps" ratio
for workload in select insert; do
    for clients in "${concurrencies[@]}"; do
        swift=${swift_rate[$workload.$clients]} reference=${pgbench_rate[$workload.$clients]}
        printf '%-8s %11d %14d %14d %7.2f\n' "$workload" "$clients" "$swift" "$reference" \
            "$(awk -v a="$swift" -v b="$reference" 'BEGIN { print (b > 0 ? a / b : 0) }')"
    done
done
