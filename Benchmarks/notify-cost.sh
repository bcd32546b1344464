#!/usr/bin/env bash
# What a NOTIFY costs Postgres for each idle listening connection in the same database (prints figures; not a test).
# Postgres 15 wakes every listening connection of the database for every notification, whatever its channel; all
# HabitFlow services share one database, so every listening connection of every service costs every write that
# notifies (change notices, outbox). pgbench notifies at a fixed rate on a channel nobody listens to, with 0, 4 and 7
# connections listening on other channels (7: one per consumer, as before ServiceNotifications; 4: one per service
# process), and the Postgres CPU (postmaster and backends, from /proc) per notification is printed for each.
#
# Usage: Benchmarks/notify-cost.sh   (BENCH_SECONDS=10 per step, BENCH_RATE=500 notifications/s)
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"
source "$HABITFLOW_ROOT/scripts/lib/postgres.sh"
cd "$HABITFLOW_ROOT"

seconds=${BENCH_SECONDS:-10}
rate=${BENCH_RATE:-500}
"$HABITFLOW_ROOT/scripts/bootstrap"
pg_ensure_owner
pg_workdir habitflow-notify
pg_start_throwaway "$PG_WORKDIR/postgres" "$PG_WORKDIR/postgres.log"
export PGPASSWORD=$PG_PASSWORD
listeners=()
before_cleanup() { kill "${listeners[@]}" 2>/dev/null || true; }
script="$PG_WORKDIR/notify.sql"
echo "SELECT pg_notify('nobody_listens', '12345678-1234-1234-1234-123456789012');" >"$script"
chmod 644 "$script"
postmaster=$(head -1 "$PG_WORKDIR/postgres/postmaster.pid")
ticks_per_second=$(getconf CLK_TCK)

printf '%-22s %12s %18s\n' "listening connections" "notifies/s" "Postgres µs/notify"
for count in 0 4 7; do
    while ((${#listeners[@]} < count)); do
        # An idle session listening on a channel of its own, as a service's listener waits between notifications.
        (echo "LISTEN other_${#listeners[@]};"; sleep $((seconds + 30))) |
            "$PG_BIN/psql" --quiet --host=127.0.0.1 --port="$PG_PORT" --username=postgres --dbname=habitflow >/dev/null &
        listeners+=($!)
    done
    sleep 1
    start=$(pg_cpu_ticks "$postmaster")
    done_count=$("$PG_BIN/pgbench" --host=127.0.0.1 --port="$PG_PORT" --username=postgres --no-vacuum \
        --file="$script" --client=4 --rate="$rate" --time="$seconds" habitflow 2>/dev/null |
        awk '/number of transactions actually processed/ { print $NF }')
    end=$(pg_cpu_ticks "$postmaster")
    awk -v n="$count" -v done="$done_count" -v t="$((end - start))" -v hz="$ticks_per_second" -v s="$seconds" \
        'BEGIN { printf "%-22d %12.0f %18.0f\n", n, done / s, 1e6 * t / hz / done }'
done
