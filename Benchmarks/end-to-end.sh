#!/usr/bin/env bash
# End-to-end benchmark (prints figures; not a test): the stack in release mode on a throwaway Postgres, seeded with
# five years of history through the RPCs, then habitflow-load's mixed scenario open-loop at several rates through the
# gateway, and a connection-scale step holding many HTTP/2 connections at a low rate. Per step: achieved rate,
# p50/p99/p99.9, errors, and each process's CPU (% of a core and µs per request) and peak RSS (from /proc), the
# driver's CPU too; with perf installed, each process's system calls and context switches per request. CPU, system
# calls and switches count the driver's measured window only (`habitflow-load run --window-file`), not its setup
# (connecting, every user refreshing its token) or warm-up.
#
#   Benchmarks/end-to-end.sh                       # the issue's plan (about 20 minutes after the build, half seeding)
#   Benchmarks/end-to-end.sh --no-build --rates "250 500" --duration 10 --seed-days 28 --scale-connections 2000
#
# Options (defaults in brackets): --rates "250 500 1000 2000"  --duration 30 (s per step)  --warm-up 5
#   --users 1000 (connected users, one connection each)  --seed-users 1000  --seed-habits 15  --seed-days 1825
#   --scale-connections 10000 (0: no scale step)  --scale-rate 200  --json FILE (every step's habitflow-load result)
#   --no-build (use what .build-release holds)
#   --services-from DIR (run the services' executables from DIR, another build such as a worktree's
#   .build-release/release at an older commit, with this build's driver: paired before/after runs)
#   --mixed-connections "1000" (the mixed steps run at each rate on each of these connection counts)
#   --kinds "mark-done week-view ..."  --kind-rate 500 (then one step per operation of the mix alone, at that rate on
#   --users connections: the CPU per request of each kind)
#   --profile DIR (perf record of every process during every step: DIR/<step>.<process>.txt, the top symbols, with
#   the kernel's share; DIR/<step>.<process>.data for `perf report -i`)
#   --pin-services CPUS --pin-driver CPUS (after seeding, `taskset` the services and Postgres, and the driver, to
#   these CPUs, such as "0" and "1": what wake-ups across CPUs cost, against a run without)
#   --statements (Postgres counts its statements with pg_stat_statements: per step, statements and transactions per
#   request over the measured window, and the statements that took the most of Postgres's time)
#   --unsettled (measure right after the seeding, without the VACUUM (ANALYZE) and CHECKPOINT that settle it first)
#
# The seed step signs the accounts up through auth and creates their habits through the public API, then imports
# their entries in batches through habits' internal ImportEntries (about 16.4 million for the defaults); it prints
# both rates.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"
source "$HABITFLOW_ROOT/scripts/lib/postgres.sh"
cd "$HABITFLOW_ROOT"

rates="250 500 1000 2000"
duration=30
warm_up=5
users=1000
seed_users=1000
seed_habits=15
seed_days=1825
scale_connections=10000
scale_rate=200
mixed_connections=""
kinds=""
kind_rate=500
json_out=""
profile_dir=""
statements=false
settle=true
pin_services=""
pin_driver=""
services_bin=""
build=true
while (($#)); do
    case "$1" in
        --rates) rates=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --warm-up) warm_up=$2; shift 2 ;;
        --users) users=$2; shift 2 ;;
        --seed-users) seed_users=$2; shift 2 ;;
        --seed-habits) seed_habits=$2; shift 2 ;;
        --seed-days) seed_days=$2; shift 2 ;;
        --scale-connections) scale_connections=$2; shift 2 ;;
        --scale-rate) scale_rate=$2; shift 2 ;;
        --mixed-connections) mixed_connections=$2; shift 2 ;;
        --kinds) kinds=$2; shift 2 ;;
        --kind-rate) kind_rate=$2; shift 2 ;;
        --json) json_out=$2; shift 2 ;;
        --profile) profile_dir=$(realpath -m "$2"); shift 2 ;;
        --statements) statements=true; shift ;;
        --unsettled) settle=false; shift ;;
        --pin-services) pin_services=$2; shift 2 ;;
        --pin-driver) pin_driver=$2; shift 2 ;;
        --no-build) build=false; shift ;;
        --services-from) services_bin=$(realpath "$2"); shift 2 ;;
        -h | --help) sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "end-to-end: unknown option $1 (try --help)" >&2; exit 2 ;;
    esac
done

"$HABITFLOW_ROOT/scripts/bootstrap"
scratch="$HABITFLOW_ROOT/.build-release"
bin="$scratch/release"
products=(habitflow-auth habitflow-habits habitflow-goals habitflow-social habitflow-gateway habitflow-load)
if $build; then
    for product in "${products[@]}"; do
        log "building $product (release)"
        swift build -c release --product "$product" --scratch-path "$scratch" 2>&1 | grep -E "error|Compiling|Build of product" | grep -v Compiling || true
        [[ -x "$bin/$product" ]] || { echo "end-to-end: $product did not build" >&2; exit 1; }
    done
fi
for product in "${products[@]}"; do
    [[ -x "$bin/$product" ]] || { echo "end-to-end: $bin/$product is missing (run without --no-build)" >&2; exit 1; }
done
services_bin=${services_bin:-$bin}
for product in "${products[@]}"; do
    [[ $product == habitflow-load || -x "$services_bin/$product" ]] ||
        { echo "end-to-end: $services_bin/$product is missing" >&2; exit 1; }
done

# Every connection is a file descriptor, in the driver and in the gateway.
ulimit -n "$(ulimit -Hn)"
if (($(ulimit -n) < scale_connections + 2000)); then
    echo "end-to-end: ulimit -n is $(ulimit -n); the connection-scale step needs $((scale_connections + 2000))" >&2
    exit 1
fi

for port in 7070 7071 7072 7073 7074; do
    if (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "end-to-end: port $port is in use (a stack is running?); stop it first" >&2
        exit 1
    fi
done

workdir=$(mktemp -d /tmp/habitflow-e2e.XXXXXX)
chmod 755 "$workdir"
[[ -z $profile_dir ]] || mkdir -p "$profile_dir"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    pg_stop "$workdir/postgres"
    rm -rf "$workdir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The stack's Postgres, as scripts/stack makes it (roles and schemas, the same passwords), started here rather than
# through scripts/stack, whose own release build into .build would compete with the seeding for the cores.
pg_port=$(pg_free_port)
log "starting Postgres on 127.0.0.1:$pg_port"
pg_init "$workdir/postgres" "${HABITFLOW_POSTGRES_PASSWORD:-habitflow-local}"
# What can stall a measured second, logged with its time: checkpoints, autovacuum and statements over 100 ms.
PG_EXTRA_OPTIONS="-c log_timezone=UTC -c log_checkpoints=on -c log_autovacuum_min_duration=0"
PG_EXTRA_OPTIONS+=" -c log_min_duration_statement=100"
! $statements || PG_EXTRA_OPTIONS+=" -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
export PG_EXTRA_OPTIONS
pg_start "$workdir/postgres" "$pg_port" "$workdir/postgres.log" || { cat "$workdir/postgres.log" >&2; exit 1; }
pg_create_database "$workdir/postgres" "$pg_port" habitflow
! $statements || pg_psql "$workdir/postgres" "$pg_port" --dbname=habitflow -c "CREATE EXTENSION pg_stat_statements"
wait_for_port() { # port, seconds
    local deadline=$((SECONDS + $2))
    until (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}

export HABITFLOW_SQL_DIR="$HABITFLOW_ROOT/Schemas/sql" HABITFLOW_LOG_LEVEL=warning
export HABITFLOW_INTERNAL_SECRET=${HABITFLOW_INTERNAL_SECRET:-$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')}
for service in "${HABITFLOW_SERVICES[@]}"; do
    export "HABITFLOW_${service^^}_DATABASE_URL=postgresql://$service:$(service_db_password "$service")@127.0.0.1:$pg_port/habitflow"
done
# Metrics on free ports: the local stack's 9070-9074 may be taken by a developer's stack.
export HABITFLOW_GATEWAY_METRICS_PORT=0 HABITFLOW_AUTH_METRICS_PORT=0 HABITFLOW_HABITS_METRICS_PORT=0 \
    HABITFLOW_GOALS_METRICS_PORT=0 HABITFLOW_SOCIAL_METRICS_PORT=0
# The driver is one client address with many accounts: lift the per-address limit, keep the per-account one.
export HABITFLOW_GATEWAY_ADDRESS_RATE_LIMIT=1000000 HABITFLOW_GATEWAY_ADDRESS_RATE_BURST=1000000
declare -A service_pid
start_service() { # name port [VARIABLE=value...]
    env "${@:3}" "$services_bin/habitflow-$1" >"$workdir/$1.log" 2>&1 &
    service_pid[$1]=$!
    pids+=($!)
    wait_for_port "$2" 60 || { echo "end-to-end: habitflow-$1 did not start:" >&2; tail -20 "$workdir/$1.log" >&2; exit 1; }
}
start_service habits 7072
start_service goals 7073
start_service social 7074
start_service auth 7071
start_service gateway 7070
pg_pid=$(head -n 1 "$workdir/postgres/postmaster.pid")
log "stack up: gateway ${service_pid[gateway]}, auth ${service_pid[auth]}, habits ${service_pid[habits]}, goals ${service_pid[goals]}, social ${service_pid[social]}, postgres $pg_pid"

# CPU seconds (utime + stime, all threads) of a process and its children (Postgres backends are children).
cpu_ticks() {
    local total=0 pid
    for pid in $1 $(pgrep -P "$1" || true); do
        [[ -r /proc/$pid/stat ]] || continue
        local fields
        read -r -a fields < <(sed 's/^.*) //' "/proc/$pid/stat")
        total=$((total + fields[11] + fields[12]))
    done
    echo "$total"
}
peak_rss_mib() { awk '/VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$1/status"; }
current_rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
reset_peak_rss() { echo 5 >"/proc/$1/clear_refs" 2>/dev/null || true; }
ticks_per_second=$(getconf CLK_TCK)
processes=(gateway auth habits goals social postgres)
pid_of() { if [[ $1 == postgres ]]; then echo "$pg_pid"; else echo "${service_pid[$1]}"; fi; }

log "seeding $seed_users accounts × $seed_habits habits × $seed_days days (straight to the services; load average $(cut -d' ' -f1-3 /proc/loadavg))"
# A 30 s deadline: on a busy machine a sign-up queues behind others' bcrypt hashes, and an import is 10,000 rows.
"$bin/habitflow-load" seed --direct-auth 127.0.0.1:7071 --direct-habits 127.0.0.1:7072 --timeout 30s \
    --users "$seed_users" --habits "$seed_habits" --days "$seed_days" --accounts "$workdir/accounts.jsonl" \
    --json "$workdir/seed.json" 2>"$workdir/seed.log" | sed 's/^/  /' || { tail -20 "$workdir/seed.log" >&2; exit 1; }

# What the seeding leaves behind is not what a database that has run for weeks holds: half a million new rows that
# no VACUUM has marked all-visible (index-only scans fetch every heap row), no ANALYZE has counted (plans for empty
# tables), and the import's WAL, whose checkpoint and autovacuum would otherwise fall into the first measured steps.
if $settle; then
    started=$SECONDS
    pg_psql "$workdir/postgres" "$pg_port" --dbname=habitflow -c "VACUUM (ANALYZE)" -c "CHECKPOINT" >/dev/null
    log "vacuumed, analyzed and checkpointed in $((SECONDS - started)) s"
fi

results=()
# The gateway before any client connected (seeding goes straight to the services): a baseline of its memory per
# connection.
gateway_rss_at_start=$(current_rss_kib "$(pid_of gateway)")
# The driver's measured window (after its setup and warm-up), watched from the background while a step runs: each
# process's CPU ticks at its start and end, and perf (system calls, context switches, the profile) over exactly it.
# Writes "$workdir/<step>.usage" ("process cpu-seconds" lines, the driver's last) and "$workdir/<step>.elapsed".
# Counting the whole step instead would charge the requests with the setup: 1,000 users each refreshing a token.
measure_window() { # name, the driver's pid
    local name=$1 driver=$2 window="$workdir/$1.window" done="$workdir/$1.done" process
    until grep -qs started "$window"; do
        [[ -e $done ]] && return
        sleep 0.02
    done
    local started_at start_ticks=() perf_pids=() machine_start
    started_at=$(date +%s.%N)
    machine_start=$(machine_ticks)
    for process in "${processes[@]}"; do start_ticks+=("$(cpu_ticks "$(pid_of "$process")")"); done
    start_ticks+=("$(cpu_ticks "$driver")")
    ! $statements || statement_counts reset "$name"
    if command -v perf >/dev/null; then
        for process in "${processes[@]}"; do
            local pid targets
            pid=$(pid_of "$process")
            targets=$(echo "$pid" $(pgrep -P "$pid" || true) | tr ' ' ',')
            perf stat -x, -e raw_syscalls:sys_enter,context-switches -p "$targets" -o "$workdir/$name.$process.perf" \
                2>/dev/null &
            perf_pids+=($!)
            if [[ -n $profile_dir ]]; then
                perf record -q -F 999 -g -p "$targets" -o "$profile_dir/$name.$process.data" 2>/dev/null &
                perf_pids+=($!)
            fi
        done
    fi
    until grep -qs ended "$window" || [[ -e $done ]]; do sleep 0.02; done
    local ended_at index=0 end_ticks
    ended_at=$(date +%s.%N)
    # The gateway's memory while the step's connections are still open (the driver closes them after its window).
    current_rss_kib "$(pid_of gateway)" >"$workdir/$name.gateway-rss"
    # The driver first: it exits soon after its window ends.
    local driver_end_ticks
    driver_end_ticks=$(cpu_ticks "$driver")
    ! $statements || statement_counts read "$name"
    : >"$workdir/$name.usage"
    for process in "${processes[@]}" driver; do
        if [[ $process == driver ]]; then end_ticks=$driver_end_ticks; else end_ticks=$(cpu_ticks "$(pid_of "$process")"); fi
        echo "$process $(awk -v t="$((end_ticks - start_ticks[index]))" -v hz="$ticks_per_second" 'BEGIN { print t / hz }')" \
            >>"$workdir/$name.usage"
        index=$((index + 1))
    done
    for pid in "${perf_pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
    for pid in "${perf_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    awk -v end="$ended_at" -v start="$started_at" 'BEGIN { print end - start }' >"$workdir/$name.elapsed"
    echo "$started_at $ended_at" >"$workdir/$name.span"
    echo "$machine_start $(machine_ticks)" >"$workdir/$name.machine"
}

# The machine's iowait and steal ticks (all CPUs, from /proc/stat): time the CPUs waited on the disk, and time the
# hypervisor gave them to someone else, which stalls every process of the stack at once.
machine_ticks() { awk '/^cpu / { print $6, $9; exit }' /proc/stat; }

# With --statements: "reset" clears Postgres's statement and transaction counts as a window starts; "read" writes
# them as it ends, to "$workdir/<step>.statements" (calls, ms, rows, query) and "$workdir/<step>.transactions".
statement_counts() { # reset|read, step name
    local query=(pg_psql "$workdir/postgres" "$pg_port" --dbname=habitflow --tuples-only --no-align -c)
    if [[ $1 == reset ]]; then
        "${query[@]}" "SELECT pg_stat_statements_reset(), pg_stat_reset()" >/dev/null 2>&1 || true
        return
    fi
    "${query[@]}" "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = 'habitflow'" \
        >"$workdir/$2.transactions" 2>/dev/null || true
    "${query[@]}" "COPY (SELECT calls, round(total_exec_time::numeric, 1), rows, regexp_replace(query, '\s+', ' ', 'g')
                         FROM pg_stat_statements WHERE calls > 0 ORDER BY total_exec_time DESC) TO STDOUT" \
        >"$workdir/$2.statements" 2>/dev/null || true
}

run_step() { # name, then habitflow-load run arguments
    local name=$1
    shift
    local process
    for process in "${processes[@]}"; do reset_peak_rss "$(pid_of "$process")"; done
    current_rss_kib "$(pid_of gateway)" >"$workdir/$name.gateway-rss-before"
    rm -f "$workdir/$name.window" "$workdir/$name.done" "$workdir/$name.usage"
    # The driver's progress line (each second's p50, p99 and slowest request) with the wall-clock time it arrived, to
    # set the slow seconds beside Postgres's log.
    "${driver_launcher[@]}" "$bin/habitflow-load" run --accounts "$workdir/accounts.jsonl" \
        --json "$workdir/$name.json" --window-file "$workdir/$name.window" "$@" >"$workdir/$name.txt" \
        2> >(while IFS= read -r line; do TZ=UTC printf '%(%H:%M:%S)T %s\n' -1 "$line"; done >"$workdir/$name.log") &
    local driver=$! status=0
    measure_window "$name" "$driver" &
    local sampler=$!
    wait "$driver" || status=$?
    touch "$workdir/$name.done"
    wait "$sampler" || true
    if [[ -n $profile_dir ]]; then
        for process in "${processes[@]}"; do
            local data="$profile_dir/$name.$process.data"
            [[ -s $data ]] || continue
            # `head` closes the pipe early: not a failure.
            { perf report -i "$data" --no-children --sort dso -g none --stdio 2>/dev/null | grep -v '^#' | sed '/^$/d' |
                  head -8 || true
              echo
              perf report -i "$data" --no-children --sort symbol -g none --percent-limit 0.7 --stdio 2>/dev/null |
                  grep -v '^#' | sed '/^$/d' | head -60 || true; } >"$profile_dir/$name.$process.txt"
        done
    fi
    if ((status >= 2)); then
        echo "  $name: habitflow-load failed (exit $status):" >&2
        tail -5 "$workdir/$name.log" >&2
        return
    fi
    if [[ ! -s "$workdir/$name.usage" ]]; then
        echo "  $name: the driver ended before its measured window started" >&2
        return
    fi
    local peaks="$workdir/$name.peaks"
    : >"$peaks"
    for process in "${processes[@]}"; do echo "$process $(peak_rss_mib "$(pid_of "$process")")" >>"$peaks"; done
    /usr/bin/python3 - "$workdir/$name.json" "$name" "$workdir/$name.usage" "$(cat "$workdir/$name.elapsed")" \
        "$workdir/$name" "$peaks" "$workdir/postgres.log" <<'EOF'
import json, os, sys
report = json.load(open(sys.argv[1]))
elapsed = float(sys.argv[4])
# Requests in the measured window at the achieved rate: CPU per request is each process's CPU over that window
# divided by them (the setup and the warm-up are left out).
requests = report["ratePerSecond"] * elapsed
peaks = dict(line.split() for line in open(sys.argv[6]))
columns = []
for line in open(sys.argv[3]):
    process, seconds = line.split()
    seconds = float(seconds)
    if seconds < 0:  # the process was gone when the window's end was sampled
        columns.append(f"{process} -")
        continue
    column = f"{process} {100 * seconds / elapsed:3.0f}% {1e6 * seconds / requests:5.0f}µs/req"
    if process in peaks:
        column += f" {peaks[process]}MiB"
    perf_file = f"{sys.argv[5]}.{process}.perf"
    if os.path.exists(perf_file):
        counts = {}
        for row in open(perf_file):
            fields = row.strip().split(",")
            if len(fields) > 2 and fields[0].replace(".", "").isdigit():
                counts[fields[2]] = float(fields[0])
        if counts:
            column += (f" {counts.get('raw_syscalls:sys_enter', 0) / requests:.1f}sys"
                       f" {counts.get('context-switches', 0) / requests:.2f}cs")
    columns.append(column)
usage = "\n  " + " " * 18 + ("\n  " + " " * 18).join(columns)
latency = report["latencyMs"]
errors = ", ".join(f"{code} {count}" for code, count in sorted(report["errorsByCode"].items())) or "0"
examples = {f"{op['name']} {code}: {text}" for op in report["operations"] for code, text in op["errorExamples"].items()}
mark = next((op for op in report["operations"] if op["name"] == "mark-done"), None)
mark_p99 = f"  mark-done p99 {mark['latencyMs']['p99']:.1f}ms" if mark else ""
print(f"  {sys.argv[2]:<18} {report['ratePerSecond']:8.1f} req/s  p50 {latency['p50']:7.2f}ms  p99 {latency['p99']:8.2f}ms"
      f"  p99.9 {latency['p999']:8.2f}ms  errors {errors}{mark_p99}{usage}")
for example in sorted(examples):
    print(f"  {'':<18} e.g. {example}")
statements_file = f"{sys.argv[5]}.statements"
if os.path.exists(statements_file):
    rows = [line.rstrip("\n").split("\t", 3) for line in open(statements_file) if line.count("\t") >= 3]
    calls = sum(int(row[0]) for row in rows)
    milliseconds = sum(float(row[1]) for row in rows)
    transactions = open(f"{sys.argv[5]}.transactions").read().strip() or "0"
    print(f"  {'':<18} Postgres: {calls / requests:.2f} statements and {int(transactions) / requests:.2f}"
          f" transactions per request, {1000 * milliseconds / requests:.0f}µs executing per request; the most:")
    for count, ms, _, query in rows[:12]:
        print(f"  {'':<20} {int(count) / requests:5.2f}/req {1000 * float(ms) / int(count):6.0f}µs  {query[:110]}")
machine = [int(value) for value in open(f"{sys.argv[5]}.machine").read().split()]
hz = os.sysconf("SC_CLK_TCK")
print(f"  {'':<18} machine over the window: iowait {1000 * (machine[2] - machine[0]) / hz:.0f} ms,"
      f" steal {1000 * (machine[3] - machine[1]) / hz:.0f} ms (all CPUs)")
# The three measured seconds with the slowest requests, and what Postgres logged during the window (checkpoints,
# autovacuum, statements over 100 ms): a stall that coincides with one of them shows here.
import datetime, re
progress = re.compile(r"^(\d\d:\d\d:\d\d) \[ *\d+s\] +([\d.]+) req/s  errors (\d+)  p50 (\S+)  p99 (\S+)  max (\S+)$")
def milliseconds(text):
    for unit, factor in (("ms", 1), ("µs", 0.001), ("s", 1000)):
        if text.endswith(unit):
            return float(text[:-len(unit)]) * factor
seconds = [match.groups() for match in map(progress.match, open(f"{sys.argv[5]}.log").read().splitlines()) if match]
if seconds:
    slowest = sorted(seconds, key=lambda second: -milliseconds(second[5]))[:3]
    print(f"  {'':<18} slowest seconds: " + "; ".join(f"{at} p50 {p50} p99 {p99} max {worst}"
                                                      for at, _, _, p50, p99, worst in slowest))
start, end = (float(value) for value in open(f"{sys.argv[5]}.span").read().split())
events = []
for line in open(sys.argv[7], errors="replace"):
    try:
        at = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        continue
    if start <= at.timestamp() <= end and re.search(r"checkpoint|automatic (vacuum|analyze)|duration:", line):
        events.append(line[11:23] + " " + line.split(": ", 1)[-1].strip()[:120])
if events:
    print(f"  {'':<18} Postgres logged {len(events)} checkpoint, autovacuum or slow-statement lines; the first:")
    for event in events[:6]:
        print(f"  {'':<20} {event}")
EOF
    results+=("$workdir/$name.json")
}

if [[ -n $pin_services ]]; then
    for process in "${processes[@]}"; do
        pid=$(pid_of "$process")
        for task in "$pid" $(pgrep -P "$pid" || true); do taskset -a -p -c "$pin_services" "$task" >/dev/null; done
    done
    log "services and Postgres pinned to CPUs $pin_services"
fi
driver_launcher=()
[[ -z $pin_driver ]] || driver_launcher=(taskset -c "$pin_driver")

log "mixed scenario, open loop, $users users on ${mixed_connections:-$users} connections," \
    "${duration}s per rate after ${warm_up}s warm-up"
for connections in ${mixed_connections:-$users}; do
    for rate in $rates; do
        name="mixed-$rate"
        [[ $connections == "$users" ]] || name+="-c$connections"
        run_step "$name" --scenario mixed --users "$users" --connections "$connections" --rate "$rate" \
            --duration "${duration}s" --warm-up "${warm_up}s"
    done
done

if [[ -n $kinds ]]; then
    log "each kind alone: $kind_rate req/s on $users connections"
    for kind in $kinds; do
        run_step "$kind" --scenario mixed --mix "$kind=1" --users "$users" --connections "$users" --rate "$kind_rate" \
            --duration "${duration}s" --warm-up "${warm_up}s"
    done
fi

if ((scale_connections > 0)); then
    log "connection scale: $scale_connections HTTP/2 connections at $scale_rate req/s"
    run_step "connections-$scale_connections" --scenario read-heavy --users "$users" \
        --connections "$scale_connections" --rate "$scale_rate" --duration "${duration}s" --warm-up "${warm_up}s" \
        --setup-concurrency 64
    # The gateway's memory per connection: its RSS at the window's end, the connections open, less a baseline, two
    # ways. Before any client connected, what the earlier steps left with the allocator counts against the
    # connections (too much); before the step, it counts for them, as the new connections reuse it (too little). The
    # peak above also holds the set-up, when every connection had just written its SETTINGS and still kept its frame
    # buffer (a quiet connection gives it back after 5 s).
    scale_step="$workdir/connections-$scale_connections"
    if [[ -s "$scale_step.gateway-rss" ]]; then
        awk -v start="$gateway_rss_at_start" -v before="$(cat "$scale_step.gateway-rss-before")" \
            -v end="$(cat "$scale_step.gateway-rss")" -v count="$scale_connections" 'BEGIN {
            printf "  gateway memory with the %d connections open: %.0f MiB; per connection %.1f KiB beyond its %.0f MiB before any client, %.1f KiB beyond its %.0f MiB before the step\n",
                count, end / 1024, (end - start) / count, start / 1024, (end - before) / count, before / 1024 }'
    fi
fi

[[ -z $profile_dir ]] || log "profiles: $profile_dir/<step>.<process>.txt"
if [[ -n "$json_out" ]]; then
    /usr/bin/python3 - "$json_out" "$workdir/seed.json" "${results[@]}" <<'EOF'
import json, sys
out, seed, *steps = sys.argv[1:]
json.dump({"seed": json.load(open(seed)), "steps": [json.load(open(path)) for path in steps]}, open(out, "w"), indent=2)
EOF
    log "wrote $json_out"
fi
