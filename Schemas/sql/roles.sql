-- One login role and one schema per service; each role can use only its own schema.
-- Run by scripts/stack (and the compose Postgres init) as the superuser, connected to the habitflow database,
-- with psql variables auth_password, habits_password, goals_password and social_password. Idempotent.

\set ON_ERROR_STOP on
SET client_min_messages = warning;

SELECT format('CREATE ROLE %I LOGIN', name)
FROM unnest(ARRAY['auth', 'habits', 'goals', 'social']) AS name
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = name)
\gexec

ALTER ROLE auth PASSWORD :'auth_password';
ALTER ROLE habits PASSWORD :'habits_password';
ALTER ROLE goals PASSWORD :'goals_password';
ALTER ROLE social PASSWORD :'social_password';

-- Nobody but the service roles connects, and nothing is created in public.
SELECT format('REVOKE ALL ON DATABASE %I FROM PUBLIC', current_database())
\gexec
SELECT format('GRANT CONNECT, TEMPORARY ON DATABASE %I TO auth, habits, goals, social', current_database())
\gexec
REVOKE ALL ON SCHEMA public FROM PUBLIC;

CREATE SCHEMA IF NOT EXISTS auth AUTHORIZATION auth;
CREATE SCHEMA IF NOT EXISTS habits AUTHORIZATION habits;
CREATE SCHEMA IF NOT EXISTS goals AUTHORIZATION goals;
CREATE SCHEMA IF NOT EXISTS social AUTHORIZATION social;

REVOKE ALL ON SCHEMA auth, habits, goals, social FROM PUBLIC;

-- A service's objects resolve in its own schema without qualification.
ALTER ROLE auth SET search_path = auth;
ALTER ROLE habits SET search_path = habits;
ALTER ROLE goals SET search_path = goals;
ALTER ROLE social SET search_path = social;
