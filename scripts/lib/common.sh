# Helpers shared by the scripts. Source it.

HABITFLOW_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HABITFLOW_SERVICES=(auth habits goals social)

# The Python that sees Debian's python3-grpcio (the pyenv python3 first on PATH does not).
HABITFLOW_PYTHON=${HABITFLOW_PYTHON:-/usr/bin/python3}

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# pg_create_database DATA_DIR PORT DATABASE: creates the database (if missing) with the service roles and
# schemas of Schemas/sql/roles.sql. Role passwords come from HABITFLOW_<SERVICE>_DB_PASSWORD.
pg_create_database() {
    local data_dir=$1 port=$2 database=$3
    pg_psql "$data_dir" "$port" --set=name="$database" <<'SQL'
SELECT format('CREATE DATABASE %I', :'name') WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'name')
\gexec
SQL
    pg_psql "$data_dir" "$port" --dbname="$database" \
        --set=auth_password="$(service_db_password auth)" \
        --set=habits_password="$(service_db_password habits)" \
        --set=goals_password="$(service_db_password goals)" \
        --set=social_password="$(service_db_password social)" \
        <"$HABITFLOW_ROOT/Schemas/sql/roles.sql"
}

# service_db_password SERVICE: the service role's password (local default "SERVICE-local").
service_db_password() {
    local variable="HABITFLOW_${1^^}_DB_PASSWORD"
    printf '%s' "${!variable:-$1-local}"
}
