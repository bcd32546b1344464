#!/usr/bin/env bash
# Habits service benchmark: the week view and mark-done of habitflow-habits (release) for a user with 15 habits and
# five years of daily entries, at concurrency 1 and 32, against a throwaway Postgres 15 (fsync on, as the stack runs
# it; PG_FSYNC=off to compare). The client (habits-benchmark) and the service are separate processes on loopback.
# Prints requests/s, p50/p99 latency as the client saw it (server time plus loopback and the client itself, which
# shares the two cores), p50/p99 server latency from the service's own handling-time histogram (/metrics) with the
# exact share of calls within the issue's p99 goal, and the CPU time per request of the service, Postgres and client.
# The week view runs twice per concurrency: with our RPC client and with h2load (nghttp2-client, a C load generator
# that leaves the cores to the service and Postgres). Last, pgbench runs mark-done's statement straight against
# Postgres: the ceiling no service can beat. Mark-done runs twice at concurrency 32: all calls
# as one user (they queue on that user's row lock by design) and spread over 32 users (the realistic case).
#
# Usage: Benchmarks/habits.sh   (BENCH_SECONDS=10 per run; HABITFLOW_SCRATCH_PATH = the build folder; POOL_SIZE=10;
#                               SERVICE_BINARY = a habitflow-habits built earlier, to compare it with the same client;
#                               PG_URL_SUFFIX = appended to the service's database URL, e.g. '?options=-c%20...')
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"
source "$HABITFLOW_ROOT/scripts/lib/postgres.sh"
cd "$HABITFLOW_ROOT"

seconds=${BENCH_SECONDS:-10}
scratch=${HABITFLOW_SCRATCH_PATH:-$HABITFLOW_ROOT/.build-release}

"$HABITFLOW_ROOT/scripts/bootstrap"
log "building habitflow-habits (release)"
swift build -c release --product habitflow-habits --scratch-path "$scratch" >&2
log "building habits-benchmark (release)"
swift build -c release --product habits-benchmark --scratch-path "$scratch" >&2
benchmark="$scratch/release/habits-benchmark"

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

"$benchmark" --port "$service_port" --database-url "$database_url" --secret "$secret" \
    --seconds "$seconds" --concurrency 1,32 --service-pid "$service_pid" --metrics-port "$metrics_port" \
    --postgres-pid "$(head -n 1 "$workdir/postgres/postmaster.pid")"

# Postgres's own ceiling for check-ins: pgbench (a C client that costs almost nothing itself) runs mark-done's
# statement (HabitsStore.markDone's text; the user id is made from pgbench's integer variable) for 32 users of its own
# at concurrency 32, straight against the same Postgres. No service can answer check-ins faster than this.
pgbench=$(command -v pgbench || echo "$PG_BIN/pgbench")
pg_psql "$workdir/postgres" "$port" --dbname=habitflow <<'SQL'
SET search_path TO habits;
INSERT INTO users (user_id) SELECT ('00000000-0000-4000-8000-' || lpad(n::text, 12, '0'))::uuid FROM generate_series(1, 32) n;
INSERT INTO habits (user_id, id, name, live_from, created_at, updated_at, change_seq, created_seq)
SELECT user_id, user_id, 'pgbench', current_date - 7, now(), now(), 1, 1 FROM users
WHERE user_id::text LIKE '00000000-0000-4000-8000-%';
SQL
cat >"$workdir/mark-done.sql" <<'SQL'
\set n random(1, 32)
WITH habit AS (SELECT id FROM habits.habits WHERE user_id = ('00000000-0000-4000-8000-' || lpad(:n::text, 12, '0'))::uuid AND id = ('00000000-0000-4000-8000-' || lpad(:n::text, 12, '0'))::uuid AND deleted_at IS NULL), sequence AS (UPDATE habits.users SET change_seq = change_seq + 1 WHERE user_id = ('00000000-0000-4000-8000-' || lpad(:n::text, 12, '0'))::uuid AND time_zone = 'UTC' AND EXISTS (SELECT FROM habit) RETURNING change_seq) INSERT INTO habits.entries (user_id, id, habit_id, local_date, value, created_at, change_seq) SELECT ('00000000-0000-4000-8000-' || lpad(:n::text, 12, '0'))::uuid, coalesce(NULL::uuid, gen_random_uuid()), habit.id, current_date, 1, now(), sequence.change_seq FROM habit, sequence ON CONFLICT (user_id, id) DO NOTHING RETURNING *;
SQL
postmaster=$(head -n 1 "$workdir/postgres/postmaster.pid")
before=$(pg_cpu_ticks "$postmaster")
(cd "$workdir" && PGPASSWORD=$PG_PASSWORD "$pgbench" --no-vacuum --protocol=prepared --client=32 --jobs=2 \
    --time="$seconds" --file=mark-done.sql --log --log-prefix=pgbench --host=127.0.0.1 --port="$port" \
    --username=postgres habitflow >"$workdir/pgbench.out" 2>&1) || { cat "$workdir/pgbench.out" >&2; exit 1; }
sleep 0.2  # lets the postmaster reap pgbench's backends, so their CPU is in its children's sum
after=$(pg_cpu_ticks "$postmaster")
# Per-transaction log lines: client id, transaction number, latency in µs, ...
cat "$workdir"/pgbench.[0-9]* | awk '{ print $3 }' | sort -n |
    awk -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" -v seconds="$seconds" '
        { latency[NR] = $1 }
        END {
            p50 = latency[int(NR * 0.50 + 0.999)]; p99 = latency[int(NR * 0.99 + 0.999)]
            printf "%-22s %11d %9d %7d %8.2f %8.2f   (no service; Postgres %d µs/req)\n", "mark done, pgbench", 32, NR,
                NR / seconds, p50 / 1000, p99 / 1000, ticks / hz * 1e6 / NR
        }'
log "load average afterwards: $(cut -d' ' -f1-3 /proc/loadavg)"
