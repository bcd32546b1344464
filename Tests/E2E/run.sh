#!/usr/bin/env bash
# Runs the end-to-end tests (Python grpcio through the gateway to the services; the data export and the demo; the
# stack from a folder only root can enter; the authorization matrix, secrets in logs and the gateway's TLS) with
# Debian's interpreter, which sees python3-grpcio and python3-grpc-tools.
# scripts/test runs it with the test Postgres's URLs in the environment (HABITFLOW_TEST_<SERVICE>_DATABASE_URL) and
# HABITFLOW_E2E_BIN_DIR naming the built executables.
#
#   Tests/E2E/run.sh                                   # every test
#   Tests/E2E/run.sh gateway_e2e_test.ServiceOutage    # or any unittest names
#   HABITFLOW_E2E_GATEWAY=127.0.0.1:7070 Tests/E2E/run.sh gateway_e2e_test.GatewayEndToEnd.test_health
#                                                      # against a stack that runs already (scripts/compose-check)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

PYTHON=/usr/bin/python3
if ! "$PYTHON" -c 'import grpc, grpc_tools.protoc' 2>/dev/null; then
    echo "run.sh: $PYTHON cannot import grpc and grpc_tools (Debian packages python3-grpcio, python3-grpc-tools)" >&2
    exit 2
fi
if [ "$#" -eq 0 ]; then
    set -- gateway_e2e_test export_test stack_anywhere_test security_test watch_test web_test browser_test
fi

export PYTHONDONTWRITEBYTECODE=1
exec "$PYTHON" ../../scripts/lib/run_unittests.py e2e --no-skips "$@"
