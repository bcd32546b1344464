# Sourced by the benchmarks that run HabitFlow services (gateway.sh, web.sh), after scripts/lib/common.sh and
# scripts/lib/postgres.sh: a throwaway Postgres and the services on free ports, as scripts/stack runs them
# (scripts/lib/habitflow_stack.py), with the rate limits out of the way (one client address, one account).

BENCH_LAUNCHER_PID=

# bench_build_release [PRODUCT...]: builds the five services, habitflow-healthcheck and any PRODUCT in release
# (HABITFLOW_SCRATCH_PATH, default .build-release) and sets BENCH_BIN to the folder that holds them. All five, because
# the stack script starts all five: a stale executable would meet migrations newer than its code.
bench_build_release() {
    local scratch=${HABITFLOW_SCRATCH_PATH:-$HABITFLOW_ROOT/.build-release} product
    for product in habitflow-auth habitflow-habits habitflow-goals habitflow-social habitflow-gateway \
        habitflow-healthcheck "$@"; do
        log "building $product (release)"
        swift build -c release --product "$product" --scratch-path "$scratch" >&2
    done
    BENCH_BIN="$scratch/release"
}

# bench_start_stack BIN_DIR SERVICE...: starts a throwaway Postgres in PG_WORKDIR (the caller ran pg_workdir) and the
# services (their executables in BIN_DIR, habitflow-healthcheck too), exports HABITFLOW_<SERVICE>_PORT for each, and
# returns once each answers SERVING. The services' output goes to PG_WORKDIR/services.log.
bench_start_stack() {
    local bin=$1 service port_variable
    shift
    pg_start_throwaway "$PG_WORKDIR/postgres" "$PG_WORKDIR/postgres.log"
    export HABITFLOW_POSTGRES_PORT=$PG_PORT
    export HABITFLOW_SQL_DIR="$HABITFLOW_ROOT/Schemas/sql"
    HABITFLOW_INTERNAL_SECRET=$(head -c 32 /dev/urandom | base64)
    HABITFLOW_AUTH_KEY_ENCRYPTION_KEY=$(head -c 32 /dev/urandom | base64)
    export HABITFLOW_INTERNAL_SECRET HABITFLOW_AUTH_KEY_ENCRYPTION_KEY
    export HABITFLOW_GATEWAY_ADDRESS_RATE_LIMIT=1000000 HABITFLOW_GATEWAY_ADDRESS_RATE_BURST=1000000
    export HABITFLOW_GATEWAY_ACCOUNT_RATE_LIMIT=1000000 HABITFLOW_GATEWAY_ACCOUNT_RATE_BURST=1000000
    for service in "$@"; do
        export "HABITFLOW_${service^^}_PORT=$(pg_free_port)" "HABITFLOW_${service^^}_METRICS_PORT=$(pg_free_port)"
    done

    log "starting $* (logs in $PG_WORKDIR/services.log)"
    "$HABITFLOW_PYTHON" "$HABITFLOW_ROOT/scripts/lib/habitflow_stack.py" --bin-dir "$bin" \
        >"$PG_WORKDIR/services.log" 2>&1 &
    BENCH_LAUNCHER_PID=$!
    for service in "$@"; do
        port_variable="HABITFLOW_${service^^}_PORT"
        for _ in $(seq 1 300); do
            if "$bin/habitflow-healthcheck" "127.0.0.1:${!port_variable}" >/dev/null 2>&1; then continue 2; fi
            kill -0 "$BENCH_LAUNCHER_PID" 2>/dev/null || { cat "$PG_WORKDIR/services.log" >&2; exit 1; }
            sleep 0.2
        done
        echo "$(basename "$0"): $service did not become SERVING" >&2
        cat "$PG_WORKDIR/services.log" >&2
        exit 1
    done
}

# bench_stop_stack: stops the services (before the throwaway Postgres stops; call it from before_cleanup).
bench_stop_stack() {
    if [[ -n "$BENCH_LAUNCHER_PID" ]]; then
        kill -TERM "$BENCH_LAUNCHER_PID" 2>/dev/null || true
        wait "$BENCH_LAUNCHER_PID" 2>/dev/null || true
    fi
}
