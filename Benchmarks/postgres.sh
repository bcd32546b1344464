#!/usr/bin/env bash
# Postgres layer benchmark: single-row parameterized SELECT and INSERT round trips per second through PostgresPool
# (Benchmarks/PostgresBenchmark, release build) next to pgbench running the equivalent custom scripts
# (-M prepared, -j 2) against the same throwaway Postgres 15, at concurrency 1 and 32. PostgresPool runs twice: with
# its workers preferring the pool's task executor ("pool") and with no executor preference ("global"). Prints a table
# with the rates and the CPU µs per statement of the client (pgbench or the Swift process) and of Postgres (the
# postmaster and its backends), from /proc over the measured window: the figures that transfer between a quiet and a
# busy machine.
#
# Usage: Benchmarks/postgres.sh   (BENCH_SECONDS=10 per run, BENCH_ROUNDS=3; HABITFLOW_SCRATCH_PATH =
#                                  build folder)
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"
source "$HABITFLOW_ROOT/scripts/lib/postgres.sh"
cd "$HABITFLOW_ROOT"

seconds=${BENCH_SECONDS:-10}
rounds=${BENCH_ROUNDS:-3}
concurrencies=(1 32)
rows=100000
pgbench=$(command -v pgbench || echo "$PG_BIN/pgbench")
[[ -x "$pgbench" ]] || { echo "pgbench not found (Debian postgresql-contrib / postgresql-15)" >&2; exit 1; }

scratch=${HABITFLOW_SCRATCH_PATH:-$HABITFLOW_ROOT/.build-release}
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
log "Postgres on 127.0.0.1:$port (fsync on, synchronous_commit on); $seconds s per run; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

# The same statements the Swift side prepares: one parameterized single-row SELECT by primary key, one INSERT.
cat >"$workdir/select.sql" <<SQL
\set id random(1, $rows)
SELECT value FROM bench_select WHERE id = :id;
SQL
cat >"$workdir/insert.sql" <<'SQL'
\set worker random(0, 31)
INSERT INTO bench_insert (worker, value) VALUES (:worker, 'value');
SQL

postmaster=$(head -n 1 "$workdir/postgres/postmaster.pid")
clock_ticks=$(getconf CLK_TCK)

# CPU µs per statement from ticks used and statements run.
per_statement() { awk -v t="$1" -v n="$2" -v hz="$clock_ticks" 'BEGIN { printf "%d", (n > 0 ? t * 1e6 / hz / n : 0) }'; }

# Runs alternate (pgbench, then ours, per workload and concurrency) so all see the same background load; rounds
# repeat the whole sequence, and each round's rates are compared with pgbench's in the same round.
declare -A rate client_cpu postgres_cpu
for round in $(seq 1 "$rounds"); do
    for workload in select insert; do
        for clients in "${concurrencies[@]}"; do
            threads=$((clients < 2 ? 1 : 2))
            postgres_before=$(pg_cpu_ticks "$postmaster")
            # pgbench's own CPU (user + system, in ticks) from bash's `time`, around the whole run.
            output=$( { TIMEFORMAT="cpu %3U %3S"; time PGPASSWORD=$password "$pgbench" -h 127.0.0.1 -p "$port" \
                -U postgres -n -M prepared -f "$workdir/$workload.sql" -c "$clients" -j "$threads" -T "$seconds" \
                habitflow; } 2>&1)
            sleep 0.2  # lets the postmaster reap pgbench's backends, so their CPU is in its children's sum
            postgres_ticks=$(($(pg_cpu_ticks "$postmaster") - postgres_before))
            key=$workload.pgbench.$clients.$round
            rate[$key]=$(awk '/^tps = / { printf "%d", $3 }' <<<"$output")
            statements=$(awk '/^number of transactions actually processed: / { split($6, n, "/"); print n[1] }' <<<"$output")
            client_cpu[$key]=$(awk -v hz="$clock_ticks" '/^cpu / { printf "%d", ($2 + $3) * hz }' <<<"$output")
            client_cpu[$key]=$(per_statement "${client_cpu[$key]}" "$statements")
            postgres_cpu[$key]=$(per_statement "$postgres_ticks" "$statements")
            log "round $round, $workload c=$clients: pgbench ${rate[$key]}/s"
            for executor in pool global; do
                key=$workload.$executor.$clients.$round
                read -r _ _ _ _ "rate[$key]" "client_cpu[$key]" "postgres_cpu[$key]" < <("$benchmark" --url "$url" \
                    --seconds "$seconds" --concurrency "$clients" --rows "$rows" --workload "$workload" \
                    --executor "$executor" --postgres-pid "$postmaster")
                log "round $round, $workload c=$clients: PostgresPool ($executor executor) ${rate[$key]}/s"
            done
        done
    done
done
log "load average afterwards: $(cut -d' ' -f1-3 /proc/loadavg)"

# The median of the numbers given as arguments (the lower middle one for an even count).
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# Per row: medians over the rounds, and the ratio to pgbench as the median of each round's own ratio (the figure the
# goal is read from), with the rounds' ratios after it.
printf '\n%-8s %11s %-22s %12s %11s %-20s %15s %17s\n' workload concurrency client statements/s "vs pgbench" \
    "(per round)" "client µs/stmt" "Postgres µs/stmt"
for workload in select insert; do
    for clients in "${concurrencies[@]}"; do
        for client in pgbench pool global; do
            case $client in
                pgbench) name="pgbench -M prepared" ;;
                *) name="PostgresPool ($client)" ;;
            esac
            rates=() ratios=() clients_cpu=() postgres_cpus=()
            for round in $(seq 1 "$rounds"); do
                key=$workload.$client.$clients.$round
                rates+=("${rate[$key]}")
                ratios+=("$(awk -v a="${rate[$key]}" -v b="${rate[$workload.pgbench.$clients.$round]}" \
                    'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')")
                clients_cpu+=("${client_cpu[$key]}")
                postgres_cpus+=("${postgres_cpu[$key]}")
            done
            per_round=$(IFS=' '; echo "${ratios[*]}")
            printf '%-8s %11d %-22s %12d %11.2f %-20s %15d %17d\n' "$workload" "$clients" "$name" \
                "$(median "${rates[@]}")" "$(median "${ratios[@]}")" "$per_round" "$(median "${clients_cpu[@]}")" \
                "$(median "${postgres_cpus[@]}")"
        done
    done
done
