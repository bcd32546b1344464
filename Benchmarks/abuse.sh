#!/usr/bin/env bash
# Slow and abusive clients (issue #28): Tests/Interop/abuse_test.py against a release interop-server, with the issue's
# 10,000 idle connections (CI runs the same suite on the debug build with 2,000). Prints one line of figures per
# attack: what the server did (cut-off times, GOAWAY codes), the normal grpcio client's p50/p99 and failures during
# the attack, and the server's resident memory before, at the peak and after.
#
# Usage: Benchmarks/abuse.sh [unittest names, default abuse_test]
#        (HABITFLOW_SCRATCH_PATH = build folder, default .build-release; BENCH_NO_BUILD=1 to run what is built;
#        HABITFLOW_ABUSE_IDLE_CONNECTIONS to change the 10,000)
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"
cd "$HABITFLOW_ROOT"

scratch=${HABITFLOW_SCRATCH_PATH:-$HABITFLOW_ROOT/.build-release}
"$HABITFLOW_ROOT/scripts/bootstrap"
if [[ -z "${BENCH_NO_BUILD:-}" ]]; then
    log "building interop-server (release)"
    swift build -c release --product interop-server --scratch-path "$scratch" >&2
fi
log "open files: soft $(ulimit -Sn), hard $(ulimit -Hn) (the test raises the soft limit to the hard one)"
(($# == 0)) && set -- abuse_test
HABITFLOW_INTEROP_SERVER="$scratch/release/interop-server" \
    HABITFLOW_ABUSE_IDLE_CONNECTIONS=${HABITFLOW_ABUSE_IDLE_CONNECTIONS:-10000} \
    "$HABITFLOW_ROOT/Tests/Interop/run.sh" "$@"
