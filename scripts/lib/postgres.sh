# Starting and stopping a private Postgres 15 cluster, shared by scripts/test and scripts/stack. Source it.
#
# Postgres refuses to run as root, so as root the cluster belongs to an unprivileged system user
# (HABITFLOW_PG_USER, default "habitflow"); as any other user it simply runs as that user.

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
HABITFLOW_PG_USER=${HABITFLOW_PG_USER:-habitflow}

# Runs a command as the cluster's owner. As root it runs from / : the owner may not be allowed into the folder the
# script was started from (a checkout in root's home), and Postgres' tools complain when they cannot enter it.
pg_as_owner() {
    if [[ $(id -u) -eq 0 ]]; then
        (cd / && runuser -u "$HABITFLOW_PG_USER" -- "$@")
    else
        "$@"
    fi
}

# As root, creates the unprivileged system user that owns clusters, unless it exists.
pg_ensure_owner() {
    if [[ $(id -u) -eq 0 ]] && ! id -u "$HABITFLOW_PG_USER" >/dev/null 2>&1; then
        useradd --system --no-create-home --shell /usr/sbin/nologin "$HABITFLOW_PG_USER"
    fi
}

# pg_owner_can_reach DIR: whether the cluster's owner can enter DIR (always true when not root).
pg_owner_can_reach() {
    [[ $(id -u) -ne 0 ]] || (cd / && runuser -u "$HABITFLOW_PG_USER" -- test -x "$1")
}

# Prints a free TCP port on 127.0.0.1.
pg_free_port() {
    /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# pg_init DATA_DIR SUPERUSER_PASSWORD: creates a cluster in DATA_DIR (which must not exist or be empty).
# Local socket connections trust the owner; TCP connections need a password (scram-sha-256).
pg_init() {
    local data_dir=$1 password=$2
    pg_ensure_owner
    mkdir -p "$data_dir"
    [[ $(id -u) -eq 0 ]] && chown "$HABITFLOW_PG_USER" "$data_dir"
    chmod 700 "$data_dir"
    local pwfile
    pwfile=$(mktemp)
    printf '%s\n' "$password" >"$pwfile"
    [[ $(id -u) -eq 0 ]] && chown "$HABITFLOW_PG_USER" "$pwfile"
    pg_as_owner "$PG_BIN/initdb" --pgdata="$data_dir" --username=postgres --pwfile="$pwfile" \
        --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
    rm -f "$pwfile"
}

# pg_start DATA_DIR PORT LOG_FILE: starts the cluster in the background on 127.0.0.1:PORT and waits until it
# accepts connections. The socket lives inside the data folder. PG_MAX_CONNECTIONS (default 400): the gateway and SDK
# suites run their whole stacks side by side and peaked at 232 backends, over a limit of 200.
pg_start() {
    local data_dir=$1 port=$2 log_file=$3
    touch "$log_file"
    [[ $(id -u) -eq 0 ]] && chown "$HABITFLOW_PG_USER" "$log_file"
    pg_as_owner "$PG_BIN/pg_ctl" --pgdata="$data_dir" --log="$log_file" --wait --timeout=60 \
        -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$data_dir -c fsync=${PG_FSYNC:-on} -c max_connections=${PG_MAX_CONNECTIONS:-400} ${PG_EXTRA_OPTIONS:-}" \
        start >/dev/null
}

# pg_workdir PREFIX: makes a temporary folder, in PG_WORKDIR, for a throwaway cluster (PG_WORKDIR/postgres). When the
# script exits, also on failure or Ctrl-C, the function `before_cleanup` runs if the script defines one, the cluster
# stops and the folder goes.
pg_workdir() {
    PG_WORKDIR=$(mktemp -d "/tmp/$1.XXXXXX")
    chmod 755 "$PG_WORKDIR"
    trap _pg_workdir_cleanup EXIT
    trap 'exit 130' INT TERM
}

_pg_workdir_cleanup() {
    if declare -F before_cleanup >/dev/null; then before_cleanup || true; fi
    pg_stop "$PG_WORKDIR/postgres"
    rm -rf "$PG_WORKDIR"
}

# pg_start_throwaway DATA_DIR LOG_FILE: creates a cluster in DATA_DIR with a random superuser password (PG_PASSWORD),
# starts it on a free loopback port (PG_PORT) and creates the habitflow database with the service roles and schemas.
# A free port can be taken between choosing and binding it, so it tries a few.
pg_start_throwaway() {
    local data_dir=$1 log_file=$2 attempt
    PG_PASSWORD=$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
    pg_init "$data_dir" "$PG_PASSWORD"
    for attempt in 1 2 3; do
        PG_PORT=$(pg_free_port)
        if pg_start "$data_dir" "$PG_PORT" "$log_file"; then
            pg_create_database "$data_dir" "$PG_PORT" habitflow
            return 0
        fi
    done
    cat "$log_file" >&2
    return 1
}

# pg_cpu_ticks POSTMASTER_PID: Postgres's CPU so far in clock ticks: the postmaster with the backends it reaped
# (a benchmark client's end with its run: give the postmaster a moment to reap them) and its live children.
pg_cpu_ticks() {
    local postmaster=$1 total=0 pid ticks
    for pid in "$postmaster" $(cat "/proc/$postmaster/task/$postmaster/children"); do
        ticks=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null |
            awk -v reaped=$((pid == postmaster)) '{ print $12 + $13 + (reaped ? $14 + $15 : 0) }') || ticks=0
        total=$((total + ${ticks:-0}))
    done
    echo "$total"
}

# pg_stop DATA_DIR: fast shutdown (rolls back open transactions); quiet when nothing runs.
pg_stop() {
    local data_dir=$1
    [[ -f "$data_dir/postmaster.pid" ]] || return 0
    pg_as_owner "$PG_BIN/pg_ctl" --pgdata="$data_dir" --mode=fast --wait --timeout=60 stop >/dev/null 2>&1 || true
}

# pg_psql DATA_DIR PORT [psql args...]: psql as the superuser over the cluster's own socket.
pg_psql() {
    local data_dir=$1 port=$2
    shift 2
    pg_as_owner "$PG_BIN/psql" --quiet --no-psqlrc --set=ON_ERROR_STOP=1 \
        --host="$data_dir" --port="$port" --username=postgres --dbname=postgres "$@"
}

# pg_start_for_swift_tests PREFIX: a throwaway cluster (pg_workdir PREFIX, fsync off) and the environment the Swift
# test suites read: HABITFLOW_TEST_POSTGRES_* (superuser URL, port, data folder, log, and HABITFLOW_TEST_PG_CTL for the
# test that restarts the server), HABITFLOW_TEST_<SERVICE>_DATABASE_URL per service role, HABITFLOW_SQL_DIR.
pg_start_for_swift_tests() {
    pg_workdir "$1"
    PG_FSYNC=off pg_start_throwaway "$PG_WORKDIR/postgres" "$PG_WORKDIR/postgres.log"
    log "test Postgres on 127.0.0.1:$PG_PORT"
    export HABITFLOW_TEST_POSTGRES_URL="postgresql://postgres:$PG_PASSWORD@127.0.0.1:$PG_PORT/habitflow"
    export HABITFLOW_TEST_POSTGRES_PORT=$PG_PORT
    # For tests that restart the server (pool recovery): `$HABITFLOW_TEST_PG_CTL restart --pgdata=... --log=...`.
    export HABITFLOW_TEST_POSTGRES_DATA_DIR="$PG_WORKDIR/postgres"
    export HABITFLOW_TEST_POSTGRES_LOG="$PG_WORKDIR/postgres.log"
    if [[ $(id -u) -eq 0 ]]; then
        export HABITFLOW_TEST_PG_CTL="runuser -u $HABITFLOW_PG_USER -- $PG_BIN/pg_ctl"
    else
        export HABITFLOW_TEST_PG_CTL="$PG_BIN/pg_ctl"
    fi
    export HABITFLOW_SQL_DIR="$HABITFLOW_ROOT/Schemas/sql"
    local service
    for service in "${HABITFLOW_SERVICES[@]}"; do
        export "HABITFLOW_TEST_${service^^}_DATABASE_URL=postgresql://$service:$(service_db_password "$service")@127.0.0.1:$PG_PORT/habitflow"
    done
}
