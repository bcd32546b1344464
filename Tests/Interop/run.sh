#!/usr/bin/env bash
# Runs the interop tests (grpcio and raw HTTP/2 clients against interop-server) with Debian's interpreter, which
# sees python3-grpcio and python3-grpc-tools (a pyenv python3 first on PATH does not).
#
#   Tests/Interop/run.sh                      # the test files against interop-server
#   Tests/Interop/run.sh bad_input_test       # or any unittest names (modules, Class, Class.test)
#   Tests/Interop/run.sh h2raw_selftest       # the raw HTTP/2 helper against nghttpd (needs nghttp2-server)
#
# Server binary: $HABITFLOW_INTEROP_SERVER (default .build/debug/interop-server under the repo root).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

PYTHON=/usr/bin/python3
if ! "$PYTHON" -c 'import grpc, grpc_tools.protoc' 2>/dev/null; then
    echo "run.sh: $PYTHON cannot import grpc and grpc_tools (Debian packages python3-grpcio, python3-grpc-tools)" >&2
    exit 2
fi

if [ "$#" -eq 0 ]; then
    set -- interop_client_test side_services_test bad_input_test unprivileged_test abuse_test
fi

export PYTHONDONTWRITEBYTECODE=1
exec "$PYTHON" ../../scripts/lib/run_unittests.py interop "$@"
