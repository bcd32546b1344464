#!/usr/bin/env bash
# Token benchmark: access token issue/verify and ID token verification (Benchmarks/TokensBenchmark, release build),
# next to `openssl speed` for the same signature algorithms on this machine. Prints figures.
#
# Usage: Benchmarks/tokens.sh [seconds per row, default 3]   (HABITFLOW_SCRATCH_PATH = build folder)
set -euo pipefail
source "$(dirname "$0")/../scripts/lib/common.sh"
cd "$HABITFLOW_ROOT"

seconds=${1:-3}

scratch=${HABITFLOW_SCRATCH_PATH:-$HABITFLOW_ROOT/.build-release}
log "building tokens-benchmark (release)"
swift build -c release --product tokens-benchmark --scratch-path "$scratch" >&2
"$scratch/release/tokens-benchmark" "$seconds"

echo
echo "openssl speed (one thread, the raw primitives):"
openssl speed -seconds "$seconds" ed25519 rsa2048 ecdsap256 2>/dev/null | grep -E "bits|sign/s" | awk '!seen[$0]++' || true
