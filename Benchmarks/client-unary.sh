#!/usr/bin/env bash
# Client benchmark: our RPC client (interop-client, release) driving our interop-server (release) with unary
# grpc.testing.TestService/UnaryCall (response_size 16), 64 calls in flight over one and over four connections, next to
# h2load driving the same server with the same shape (-c 1 -m 64, -c 4 -m 16). Prints requests/s and p50/p99 per load
# point, medians over the rounds, and our share of h2load's rate (the issue's goal: at least 70%).
#
# Usage: Benchmarks/client-unary.sh [--rounds 3] [--duration 8] [--warm-up 2] [--no-build] [--scratch-path DIR]
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"

BENCH_DIR="$HABITFLOW_ROOT/Benchmarks"
SCRATCH="$HABITFLOW_ROOT/.build-release"
METHOD_PATH=/grpc.testing.TestService/UnaryCall
# concurrency connections
POINTS=("64 1" "64 4")

rounds=3
duration=8
warm_up=2
build=1
while (($#)); do
    case "$1" in
        --rounds) rounds=${2:?}; shift 2 ;;
        --duration) duration=${2:?}; shift 2 ;;
        --warm-up) warm_up=${2:?}; shift 2 ;;
        --no-build) build=0; shift ;;
        --scratch-path) SCRATCH=$(realpath -m "${2:?}"); shift 2 ;;
        -h | --help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "client-unary: unknown option $1 (see --help)" >&2; exit 64 ;;
    esac
done

command -v h2load >/dev/null || { echo "client-unary: h2load is missing (nghttp2-client)" >&2; exit 1; }
if ((build)); then
    # One build at a time: the machine has 2 cores.
    for product in interop-server interop-client; do
        log "building $product (release)"
        swift build -c release --product "$product" --package-path "$HABITFLOW_ROOT" --scratch-path "$SCRATCH" >&2
    done
fi
bin=$(swift build -c release --package-path "$HABITFLOW_ROOT" --scratch-path "$SCRATCH" --show-bin-path)

work=$(mktemp -d "${TMPDIR:-/tmp}/client-unary.XXXXXX")
server_pid=""
cleanup() {
    if [[ -n "$server_pid" ]]; then kill -TERM "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

# gRPC length prefix (flag 0, big-endian length 2) + SimpleRequest{response_size: 16}: what interop-client sends.
body="$work/request.bin"
printf '\x00\x00\x00\x00\x02\x10\x10' >"$body"

# A fresh server per measurement, so one run's state (connections, heap) does not carry into the next.
start_server() {
    "$bin/interop-server" --host 127.0.0.1 --port 0 >"$work/server.out" 2>>"$work/server.err" &
    server_pid=$!
    local deadline=$((SECONDS + 30))
    server_port=""
    # Until the whole line is there (a read may see it half written).
    until [[ -n "$server_port" ]]; do
        kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.err" >&2; exit 1; }
        ((SECONDS < deadline)) || { echo "client-unary: the server did not start" >&2; exit 1; }
        sleep 0.05
        server_port=$(sed -n 's/^listening on .*:\([0-9][0-9]*\)$/\1/p' "$work/server.out" | head -1)
    done
}

stop_server() {
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
}

results="$work/results.jsonl"
for ((round = 1; round <= rounds; round++)); do
    for point in "${POINTS[@]}"; do
        read -r concurrency connections <<<"$point"
        start_server
        figures=$("$bin/interop-client" --port "$server_port" --concurrency "$concurrency" \
            --connections "$connections" --duration "$duration" --warm-up "$warm_up")
        stop_server
        printf '{"round": %d, "client": "ours", "connections": %d, "figures": %s}\n' \
            "$round" "$connections" "$figures" >>"$results"
        log "round $round, $connections connection(s), ours: $figures"

        start_server
        figures=$("$HABITFLOW_PYTHON" "$BENCH_DIR/tools/h2load_point.py" --pid "$server_pid" \
            --url "http://127.0.0.1:$server_port$METHOD_PATH" --body "$body" --clients "$connections" \
            --streams $((concurrency / connections)) --duration "$duration" --warm-up "$warm_up" \
            --log "$work/h2load.log" --grpc)
        rm -f "$work/h2load.log"
        stop_server
        printf '{"round": %d, "client": "h2load", "connections": %d, "figures": %s}\n' \
            "$round" "$connections" "$figures" >>"$results"
        log "round $round, $connections connection(s), h2load: $figures"
    done
done

"$HABITFLOW_PYTHON" - "$results" <<'PY'
import json
import statistics
import sys

rows = [json.loads(line) for line in open(sys.argv[1])]
def median(client, connections, key):
    values = [r["figures"][key] for r in rows if r["client"] == client and r["connections"] == connections
              and r["figures"].get(key) is not None]
    return statistics.median(values) if values else float("nan")

print()
print("unary UnaryCall(response_size 16), 64 calls in flight, medians of %d round(s)" % len({r["round"] for r in rows}))
print("%-14s %-8s %12s %10s %10s" % ("connections", "client", "requests/s", "p50 ms", "p99 ms"))
for connections in sorted({r["connections"] for r in rows}):
    ours = median("ours", connections, "requests_per_second")
    h2load = median("h2load", connections, "requests_per_second")
    print("%-14d %-8s %12.0f %10.3f %10.3f" % (connections, "ours", ours, median("ours", connections, "p50_ms"),
                                              median("ours", connections, "p99_ms")))
    print("%-14d %-8s %12.0f %10.3f %10.3f" % (connections, "h2load", h2load,
                                              median("h2load", connections, "p50_us") / 1000,
                                              median("h2load", connections, "p99_us") / 1000))
    # Each round runs ours and h2load back to back on a fresh server, so the per-round ratio cancels what drifts
    # between rounds (other work on the machine, frequency); its median is the goal's figure.
    paired = []
    for round_number in sorted({r["round"] for r in rows}):
        pair = {r["client"]: r["figures"]["requests_per_second"] for r in rows
                if r["round"] == round_number and r["connections"] == connections}
        if pair.get("h2load"):
            paired.append(pair["ours"] / pair["h2load"])
    share = statistics.median(paired) if paired else float("nan")
    print("%-14s ours / h2load per round: %s; median %.0f%% (goal: at least 70%%) %s; ratio of the medians %.0f%%" % (
        "", " ".join("%.0f%%" % (ratio * 100) for ratio in paired), share * 100,
        "met" if share >= 0.7 else "NOT met", ours / h2load * 100 if h2load else float("nan")))
PY
