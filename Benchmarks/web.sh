#!/usr/bin/env bash
# Web call overhead at the gateway: the same habits RPC (HabitsService/GetHabit) through habitflow-gateway as a
# native gRPC call and as a Connect unary call with a JSON body (the gateway transcodes JSON to protobuf and back),
# both sent by h2load over h2c at concurrency 32 (one connection, 32 streams); for scale also as a Connect call with
# a protobuf body (the web path without JSON). Prints the gateway's CPU µs per call for each and the JSON/native
# ratio, per round and as the median of paired rounds (goal: JSON ≤ 1.5× native). Builds the
# executables (release), starts a throwaway Postgres, auth, habits and the gateway on free ports (scripts/lib/habitflow_stack.py, as
# gateway.sh does), signs up and creates a habit with curl (Connect JSON), measures, stops everything.
#
# Usage: Benchmarks/web.sh     (BENCH_REQUESTS=30000 per round and kind, BENCH_ROUNDS=5, BENCH_CONCURRENCY=32;
#                               HABITFLOW_SCRATCH_PATH = the services' build folder; BENCH_LOG_LEVEL=warning)
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"
source "$HABITFLOW_ROOT/scripts/lib/postgres.sh"
source "$HABITFLOW_ROOT/Benchmarks/lib/stack.sh"
cd "$HABITFLOW_ROOT"

"$HABITFLOW_ROOT/scripts/bootstrap"  # h2load (nghttp2-client) and curl are in the base list
bench_build_release
bin=$BENCH_BIN
requests=${BENCH_REQUESTS:-30000}
rounds=${BENCH_ROUNDS:-5}
concurrency=${BENCH_CONCURRENCY:-32}

before_cleanup() { bench_stop_stack; }
pg_workdir habitflow-webbench
workdir=$PG_WORKDIR
export HABITFLOW_LOG_LEVEL=${BENCH_LOG_LEVEL:-warning}
bench_start_stack "$bin" auth habits gateway
gateway="127.0.0.1:$HABITFLOW_GATEWAY_PORT"
gateway_pid=$(pgrep -n -f -x "$bin/habitflow-gateway")
habits_pid=$(pgrep -n -f -x "$bin/habitflow-habits")
url="http://$gateway/habitflow.habits.v1.HabitsService/GetHabit"

# A user and a habit, through Connect JSON; the request bodies for both kinds of call.
suffix=$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')
connect() { curl --silent --show-error --fail-with-body -H 'content-type: application/json' "$@"; }
token=$(connect -d "{\"email\": \"bench-$suffix@example.com\", \"username\": \"bench_$suffix\",
    \"password\": \"correct horse $suffix\"}" "http://$gateway/habitflow.auth.v1.AuthService/Register" |
    "$HABITFLOW_PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["tokens"]["accessToken"])')
habit_id=$(connect -H "authorization: Bearer $token" -d '{"name": "Read"}' \
    "http://$gateway/habitflow.habits.v1.HabitsService/CreateHabit" |
    "$HABITFLOW_PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["id"])')
printf '{"habitId": "%s"}' "$habit_id" >"$workdir/request.json"
# GetHabitRequest { habit_id = 1 } in protobuf: bare for Connect, length-prefixed for gRPC.
"$HABITFLOW_PYTHON" - "$habit_id" "$workdir" <<'PYTHON'
import struct, sys
habit_id = sys.argv[1].encode()
message = b"\x0a" + bytes([len(habit_id)]) + habit_id
open(sys.argv[2] + "/request.proto", "wb").write(message)
open(sys.argv[2] + "/request.grpc", "wb").write(b"\x00" + struct.pack(">I", len(message)) + message)
PYTHON
# Each kind answered at all before it is measured (h2load counts HTTP statuses only).
connect -H "authorization: Bearer $token" -d @"$workdir/request.json" "$url" >/dev/null

clock_ticks=$(getconf CLK_TCK)
process_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# run KIND COUNT: COUNT calls of one kind with h2load; prints the gateway's CPU µs per call and that of gateway and
# habits together (the whole call but Postgres, whose work is the same for every kind). Fails unless every call
# got a 2xx (a gRPC error would still be a 200: the curl above and the E2E tests check the answers themselves).
run() {
    local kind=$1 count=$2 before after output
    local headers=(-H "authorization: Bearer $token")
    case $kind in
        native) headers+=(-H 'content-type: application/grpc' -H 'te: trailers' -d "$workdir/request.grpc") ;;
        json) headers+=(-H 'content-type: application/json' -H 'connect-protocol-version: 1' -d "$workdir/request.json") ;;
        proto) headers+=(-H 'content-type: application/proto' -H 'connect-protocol-version: 1' -d "$workdir/request.proto") ;;
    esac
    local gateway_before habits_before
    gateway_before=$(process_ticks "$gateway_pid")
    habits_before=$(process_ticks "$habits_pid")
    output=$(h2load -n "$count" -c 1 -m "$concurrency" "${headers[@]}" "$url" 2>&1) || true
    local gateway_used=$(($(process_ticks "$gateway_pid") - gateway_before))
    local habits_used=$(($(process_ticks "$habits_pid") - habits_before))
    if ! grep -q "status codes: $count 2xx" <<<"$output"; then
        echo "web.sh: not every $kind call succeeded:" >&2
        echo "$output" >&2
        exit 1
    fi
    echo "$((gateway_used * 1000000 / clock_ticks / count)) $(((gateway_used + habits_used) * 1000000 / clock_ticks / count))"
}

log "warming up"
run native 2000 >/dev/null
run json 2000 >/dev/null
run proto 2000 >/dev/null
log "measuring: $rounds rounds of $requests calls per kind, concurrency $concurrency (gateway CPU µs per call)"
# measure KIND: sets $KIND (gateway µs per call) and $KIND_call (gateway + habits).
measure() {
    local result
    result=$(run "$1" "$requests")
    read -r "$1" "$1_call" <<<"$result"
}
ratios=()
call_ratios=()
for round in $(seq 1 "$rounds"); do
    # Paired: both kinds in the same round, in alternating order (this machine's speed drifts between minutes).
    if ((round % 2)); then
        measure native
        measure json
        measure proto
    else
        measure proto
        measure json
        measure native
    fi
    ratio=$(awk -v j="$json" -v n="$native" 'BEGIN { printf "%.2f", (n > 0 ? j / n : 0) }')
    call_ratio=$(awk -v j="$json_call" -v n="$native_call" 'BEGIN { printf "%.2f", (n > 0 ? j / n : 0) }')
    ratios+=("$ratio")
    call_ratios+=("$call_ratio")
    printf 'round %d: gateway µs/call native %d, connect json %d, connect proto %d, json/native %s;' \
        "$round" "$native" "$json" "$proto" "$ratio"
    printf ' gateway+habits native %d, json %d, proto %d, json/native %s\n' \
        "$native_call" "$json_call" "$proto_call" "$call_ratio"
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
gateway_median=$(median "${ratios[@]}")
call_median=$(median "${call_ratios[@]}")
verdict=$(awk -v m="$gateway_median" 'BEGIN { print (m <= 1.5 ? "met" : "NOT met") }')
printf 'median ratio, connect json / native, gateway CPU per call: %s (goal <= 1.5: %s)\n' "$gateway_median" "$verdict"
printf 'median ratio, connect json / native, gateway + habits CPU per call: %s\n' "$call_median"
