#!/usr/bin/env bash
# Starts Postgres the way the official postgres image does, for the images scripts/compose-check makes without a
# registry. On the first start (no PG_VERSION in PGDATA): initdb as POSTGRES_USER (default postgres) with
# POSTGRES_PASSWORD (or POSTGRES_HOST_AUTH_METHOD=trust), POSTGRES_INITDB_ARGS and POSTGRES_INITDB_WALDIR; network
# logins with POSTGRES_HOST_AUTH_METHOD (default scram-sha-256); POSTGRES_DB created (default: POSTGRES_USER); then
# /docker-entrypoint-initdb.d/* in name order (*.sh run, or sourced when not executable; *.sql, *.sql.gz, *.sql.xz,
# *.sql.zst through psql) against a server that listens on its socket only. Each POSTGRES_* variable may instead be
# given as POSTGRES_*_FILE. Then Postgres runs in the foreground (PGPORT and PGDATA as usual) as user postgres.
set -Eeuo pipefail

# file_env VAR [DEFAULT]: VAR from $VAR, or from the file named by $VAR_FILE.
file_env() {
    local variable=$1 default=${2:-} file_variable="${1}_FILE" value
    if [[ -n "${!variable:-}" && -n "${!file_variable:-}" ]]; then
        echo "docker-entrypoint.sh: both $variable and $file_variable are set; choose one" >&2
        exit 1
    fi
    value=$default
    if [[ -n "${!variable:-}" ]]; then
        value=${!variable}
    elif [[ -n "${!file_variable:-}" ]]; then
        value=$(<"${!file_variable}")
    fi
    export "$variable=$value"
    unset "$file_variable"
}

# process_sql [psql args...]: psql as the superuser over the socket, stopping at the first error.
process_sql() {
    psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --no-password --no-psqlrc "$@"
}

# decompress FILE: FILE's SQL on standard output (.gz, .xz, .zst as the official image reads them).
decompress() {
    case "$1" in
        *.gz) gunzip -c "$1" ;;
        *.xz) xzcat "$1" ;;
        *.zst) zstd -dc "$1" ;;
        *) cat "$1" ;;
    esac
}

init_database() {
    file_env POSTGRES_PASSWORD
    file_env POSTGRES_USER postgres
    file_env POSTGRES_DB "$POSTGRES_USER"
    file_env POSTGRES_INITDB_ARGS
    local method=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
    if [[ -z "$POSTGRES_PASSWORD" && "$method" != trust ]]; then
        echo "docker-entrypoint.sh: the database is not initialized and POSTGRES_PASSWORD is not set" >&2
        echo "  (set POSTGRES_PASSWORD, or POSTGRES_HOST_AUTH_METHOD=trust to allow every connection without one)" >&2
        exit 1
    fi

    local arguments=(--username="$POSTGRES_USER")
    [[ -n "${POSTGRES_INITDB_WALDIR:-}" ]] && arguments+=(--waldir="$POSTGRES_INITDB_WALDIR")
    # shellcheck disable=SC2206 # the official image splits POSTGRES_INITDB_ARGS on spaces too
    arguments+=($POSTGRES_INITDB_ARGS)
    if [[ -n "$POSTGRES_PASSWORD" ]]; then
        initdb "${arguments[@]}" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD")
    else
        initdb "${arguments[@]}"
    fi
    printf '\nhost all all all %s\n' "$method" >>"$PGDATA/pg_hba.conf"

    # A server only this script reaches (no TCP), for the database and the init scripts.
    PGUSER=$POSTGRES_USER pg_ctl --pgdata="$PGDATA" --wait --silent \
        -o "-c listen_addresses='' -p ${PGPORT:-5432}" start
    if [[ "$POSTGRES_DB" != postgres ]]; then
        process_sql --dbname postgres --set db="$POSTGRES_DB" <<'SQL'
CREATE DATABASE :"db";
SQL
    fi
    local file
    for file in /docker-entrypoint-initdb.d/*; do
        [[ -e "$file" ]] || continue
        case "$file" in
            *.sh)
                if [[ -x "$file" ]]; then
                    echo "docker-entrypoint.sh: running $file"
                    "$file"
                else
                    echo "docker-entrypoint.sh: sourcing $file"
                    # shellcheck disable=SC1090
                    . "$file"
                fi
                ;;
            *.sql | *.sql.gz | *.sql.xz | *.sql.zst)
                echo "docker-entrypoint.sh: running $file"
                decompress "$file" | process_sql --dbname "$POSTGRES_DB"
                ;;
            *) echo "docker-entrypoint.sh: ignoring $file" ;;
        esac
    done
    PGUSER=$POSTGRES_USER pg_ctl --pgdata="$PGDATA" --mode=fast --wait --silent stop
    unset PGPASSWORD
    echo "docker-entrypoint.sh: PostgreSQL init process complete; ready for start up."
}

# `docker run IMAGE -c fsync=off` means postgres with those options.
if [[ "${1:-}" == -* ]]; then
    set -- postgres "$@"
fi

if [[ "${1:-}" == postgres ]]; then
    if [[ $(id -u) -eq 0 ]]; then
        # As root: the folders belong to postgres, and the rest runs as postgres.
        mkdir -p "$PGDATA" /var/run/postgresql
        chown postgres:postgres "$PGDATA" /var/run/postgresql
        chmod 700 "$PGDATA"
        chmod 3777 /var/run/postgresql
        exec setpriv --reuid=postgres --regid=postgres --init-groups "${BASH_SOURCE[0]}" "$@"
    fi
    if [[ ! -s "$PGDATA/PG_VERSION" ]]; then
        init_database
    fi
fi

exec "$@"
