#!/usr/bin/env bash
# Runs once inside the compose Postgres container on first start (docker-entrypoint-initdb.d): the same roles
# and schemas as scripts/stack, from the same SQL file and the same password variables.
set -euo pipefail
psql --no-psqlrc --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    --set=auth_password="${HABITFLOW_AUTH_DB_PASSWORD:-auth-local}" \
    --set=habits_password="${HABITFLOW_HABITS_DB_PASSWORD:-habits-local}" \
    --set=goals_password="${HABITFLOW_GOALS_DB_PASSWORD:-goals-local}" \
    --set=social_password="${HABITFLOW_SOCIAL_DB_PASSWORD:-social-local}" \
    --file=/habitflow/roles.sql
