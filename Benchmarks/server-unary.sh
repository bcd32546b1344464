#!/usr/bin/env bash
# Server benchmark: unary grpc.testing.TestService/UnaryCall (response_size 16) driven by h2load, on three servers
# side by side: ours (interop-server, release), a grpc-swift-2 reference (Benchmarks/GRPCSwiftReference, release) and
# nghttpd answering a same-sized POST with a static file (the raw HTTP/2 ceiling of the machine).
# Prints medians per server and load point, ratios and the issue's goals; see Benchmarks/README.md.
#
# Usage: Benchmarks/server-unary.sh [--json FILE] [--rounds 3] [--duration 8] [--warm-up 2] [--idle-connections 1000]
#                                   [--servers "ours reference nghttpd"] [--baseline BIN] [--no-build] [--keep]
# --baseline BIN adds a fourth server, "baseline": another build's interop-server (an earlier commit's, built with
# `swift build -c release --product interop-server` in a worktree), measured in the same rounds as ours.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"

BENCH_DIR="$HABITFLOW_ROOT/Benchmarks"
REFERENCE_PACKAGE="$BENCH_DIR/GRPCSwiftReference"
REFERENCE_GENERATED="$REFERENCE_PACKAGE/Sources/grpc-swift-reference-server/Generated"
CODEGEN_PACKAGE="$HABITFLOW_ROOT/Tools/Codegen"
OURS_SCRATCH="$HABITFLOW_ROOT/.build-release"
METHOD_PATH=/grpc.testing.TestService/UnaryCall
# -c CLIENTS -m STREAMS (max concurrent streams per connection), named cC-mM.
POINTS=("1 1" "16 16" "64 32")

json_out=""
rounds=3
duration=8
warm_up=2
idle_connections=1000
servers=(ours reference nghttpd)
build=1
keep=0
while (($#)); do
    case "$1" in
        --json) json_out=$(realpath -m "${2:?--json needs a file}"); shift 2 ;;
        --rounds) rounds=${2:?}; shift 2 ;;
        --duration) duration=${2:?}; shift 2 ;;
        --warm-up) warm_up=${2:?}; shift 2 ;;
        --idle-connections) idle_connections=${2:?}; shift 2 ;;
        --servers) read -r -a servers <<<"${2:?}"; shift 2 ;;
        --baseline) baseline_bin=${2:?}; shift 2 ;;
        --no-build) build=0; shift ;;
        --keep) keep=1; shift ;;
        -h | --help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "server-unary: unknown option $1 (see --help)" >&2; exit 64 ;;
    esac
done

"$HABITFLOW_ROOT/scripts/bootstrap"
for tool in h2load nghttp nghttpd protoc; do
    command -v "$tool" >/dev/null || { echo "server-unary: $tool is missing" >&2; exit 1; }
done

# 1,000 idle connections plus the load need file descriptors in the servers (which inherit this limit) and the client.
if (($(ulimit -n) < idle_connections + 1024)); then
    ulimit -n "$(ulimit -Hn)" || true
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/server-unary.XXXXXX")
server_pid=""
cleanup() {
    if declare -F stop_server >/dev/null; then stop_server; fi
    if ((keep)); then log "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

# MARK: Builds (one at a time: the machine has 2 cores)

build_times=()
timed_build() { # timed_build LABEL COMMAND...
    local label=$1 started=$SECONDS
    shift
    log "building $label"
    "$@" >&2
    build_times+=("\"$label\": $((SECONDS - started))")
    log "built $label in $((SECONDS - started)) s"
}

if ((build)); then
    for server in "${servers[@]}"; do
        case $server in
            ours)
                timed_build ours swift build -c release --product interop-server --package-path "$HABITFLOW_ROOT" \
                    --scratch-path "$OURS_SCRATCH"
                ;;
            reference)
                plugin_dir=$(swift build -c release --package-path "$CODEGEN_PACKAGE" --show-bin-path)
                if [[ ! -x "$plugin_dir/protoc-gen-swift" ]]; then
                    timed_build protoc-gen-swift swift build -c release --package-path "$CODEGEN_PACKAGE" \
                        --product protoc-gen-swift
                fi
                # The message types of grpc/testing/messages.proto, regenerated each run, copied only when changed
                # so an unchanged run does not rebuild the reference.
                protoc -I "$HABITFLOW_ROOT/Schemas/proto" --plugin="protoc-gen-swift=$plugin_dir/protoc-gen-swift" \
                    --swift_out="$work" --swift_opt=Visibility=Internal grpc/testing/messages.proto
                mkdir -p "$REFERENCE_GENERATED"
                if ! cmp -s "$work/grpc/testing/messages.pb.swift" "$REFERENCE_GENERATED/messages.pb.swift"; then
                    cp "$work/grpc/testing/messages.pb.swift" "$REFERENCE_GENERATED/messages.pb.swift"
                fi
                timed_build reference swift build -c release --package-path "$REFERENCE_PACKAGE" \
                    --product grpc-swift-reference-server
                ;;
        esac
    done
fi
ours_bin="" reference_bin=""
if [[ -n ${baseline_bin:-} ]]; then
    [[ -x $baseline_bin ]] || { echo "server-unary: --baseline $baseline_bin is not an executable" >&2; exit 64; }
    [[ " ${servers[*]} " == *" baseline "* ]] || servers+=(baseline)
fi
for server in "${servers[@]}"; do
    case $server in
        ours) ours_bin="$(swift build -c release --package-path "$HABITFLOW_ROOT" --scratch-path "$OURS_SCRATCH" \
            --show-bin-path)/interop-server" ;;
        reference) reference_bin="$(swift build -c release --package-path "$REFERENCE_PACKAGE" \
            --show-bin-path)/grpc-swift-reference-server" ;;
        nghttpd | baseline) ;;
        *) echo "server-unary: unknown server $server (ours, reference, nghttpd)" >&2; exit 64 ;;
    esac
done

# MARK: Request body and nghttpd's document root

# gRPC length prefix (flag 0, big-endian length 2) + SimpleRequest{response_size: 16} (field 2, varint 16).
body="$work/request.bin"
printf '\x00\x00\x00\x00\x02\x10\x10' >"$body"
# What our server answers: prefix (length 20) + SimpleResponse{payload{body: 16 zero bytes}}; checked below.
docroot="$work/docroot"
mkdir -p "$docroot${METHOD_PATH%/*}"
{ printf '\x00\x00\x00\x00\x14\x0a\x12\x12\x10'; head -c 16 /dev/zero; } >"$docroot$METHOD_PATH"
response_size=$(stat -c %s "$docroot$METHOD_PATH")

# MARK: Servers

free_port() {
    "$HABITFLOW_PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_server NAME: starts it on a free loopback port; sets server_pid and server_port.
start_server() {
    local name=$1 out="$work/$1.out"
    : >"$out"
    case $name in
        ours) "$ours_bin" --host 127.0.0.1 --port 0 >"$out" 2>>"$work/$name.err" & ;;
        reference) "$reference_bin" --host 127.0.0.1 --port 0 >"$out" 2>>"$work/$name.err" & ;;
        baseline) "$baseline_bin" --host 127.0.0.1 --port 0 >"$out" 2>>"$work/$name.err" & ;;
        nghttpd)
            server_port=$(free_port)
            nghttpd --no-tls -d "$docroot" "$server_port" >"$out" 2>>"$work/$name.err" &
            ;;
    esac
    server_pid=$!
    local deadline=$((SECONDS + 30))
    while ((SECONDS < deadline)); do
        kill -0 "$server_pid" 2>/dev/null || { echo "server-unary: $name exited at start" >&2; cat "$work/$name.err" >&2; exit 1; }
        if [[ $name == nghttpd ]]; then
            (exec 3<>"/dev/tcp/127.0.0.1/$server_port") 2>/dev/null && return 0
        elif grep -q '^listening on ' "$out"; then
            server_port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$out" | head -1)
            return 0
        fi
        sleep 0.05
    done
    echo "server-unary: $name did not start listening within 30 s" >&2
    exit 1
}

stop_server() {
    [[ -n "$server_pid" ]] || return 0
    kill -TERM "$server_pid" 2>/dev/null || true
    local deadline=$((SECONDS + 10))
    while kill -0 "$server_pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.05; done
    if kill -0 "$server_pid" 2>/dev/null; then
        log "WARNING: server $server_pid did not exit within 10 s of SIGTERM; killing it"
        kill -KILL "$server_pid" 2>/dev/null || true
    fi
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
}

# check_call NAME: one call with nghttp; a gRPC server must end it with grpc-status 0 (h2load counts any HTTP 200
# as a success) and send a response of the size nghttpd serves.
check_call() {
    local name=$1 trace="$work/$1.check"
    nghttp -v -d "$body" -H 'content-type: application/grpc' -H 'te: trailers' \
        "http://127.0.0.1:$server_port$METHOD_PATH" >"$trace" 2>&1 || true
    if ! grep -q ':status: 200' "$trace"; then
        echo "server-unary: $name did not answer 200:" >&2; cat "$trace" >&2; exit 1
    fi
    [[ $name == nghttpd ]] && return 0
    if ! grep -q 'grpc-status: 0' "$trace"; then
        echo "server-unary: $name did not end the call with grpc-status 0:" >&2; cat "$trace" >&2; exit 1
    fi
    local data
    data=$(sed -n 's/.*recv DATA frame <length=\([0-9]*\).*/\1/p' "$trace" | awk '{s += $1} END {print s + 0}')
    if [[ $data != "$response_size" ]]; then
        log "WARNING: $name answered $data bytes of DATA, nghttpd serves $response_size"
    fi
}

# MARK: Measurements

results="$work/results.jsonl"
started=$SECONDS
log "measuring: ${servers[*]}; ${#POINTS[@]} points x $rounds rounds, $warm_up s warm-up + $duration s each"
for ((round = 1; round <= rounds; round++)); do
    # Rotate the servers' order each round so no server always runs right after another.
    order=()
    for ((i = 0; i < ${#servers[@]}; i++)); do order+=("${servers[(i + round - 1) % ${#servers[@]}]}"); done
    for point in "${POINTS[@]}"; do
        read -r clients streams <<<"$point"
        for server in "${order[@]}"; do
            start_server "$server"
            check_call "$server"
            figures=$("$HABITFLOW_PYTHON" "$BENCH_DIR/tools/h2load_point.py" --pid "$server_pid" \
                --url "http://127.0.0.1:$server_port$METHOD_PATH" --body "$body" --clients "$clients" \
                --streams "$streams" --duration "$duration" --warm-up "$warm_up" --log "$work/h2load.log" \
                --grpc --label "round $round c$clients-m$streams $server")
            rm -f "$work/h2load.log"
            stop_server
            printf '{"round": %d, "server": "%s", "point": "c%d-m%d", %s\n' \
                "$round" "$server" "$clients" "$streams" "${figures#\{}" >>"$results"
        done
    done
    for server in "${order[@]}"; do
        start_server "$server"
        check_call "$server"
        # Read 6 s after the last connection's SETTINGS: ours gives a quiet connection's nghttp2 frame buffer back
        # after 5 s (RPCServerConfiguration.ConnectionManagement.idleMemoryReleaseDelay), and idle means longer.
        figures=$("$HABITFLOW_PYTHON" "$BENCH_DIR/tools/idle_connections.py" --pid "$server_pid" --host 127.0.0.1 \
            --port "$server_port" --count "$idle_connections" --settle 6)
        stop_server
        printf '{"round": %d, "server": "%s", "point": "idle", %s\n' "$round" "$server" "${figures#\{}" >>"$results"
        log "round $round idle $server: $figures"
    done
done
log "measured in $((SECONDS - started)) s"

# The commit measured, and how many files of the main package differed from it (a dirty tree measures those too).
commit=$(git -C "$HABITFLOW_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$HABITFLOW_ROOT" status --porcelain -- Package.swift Shared Tools 2>/dev/null | wc -l)
meta=$(printf '{"rounds": %d, "duration_s": %s, "warm_up_s": %s, "idle_connections": %d, "cores": %d, "h2load": "%s", "commit": "%s", "uncommitted_files": %d, "build_seconds": {%s}}' \
    "$rounds" "$duration" "$warm_up" "$idle_connections" "$(nproc)" "$(h2load --version | head -1)" \
    "$commit" "$dirty" "$(IFS=,; echo "${build_times[*]}")")
report=("$HABITFLOW_PYTHON" "$BENCH_DIR/tools/report.py" "$results" --meta "$meta")
if [[ -n "$json_out" ]]; then report+=(--json "$json_out"); fi
"${report[@]}"
if [[ -n "$json_out" ]]; then log "wrote $json_out"; fi
