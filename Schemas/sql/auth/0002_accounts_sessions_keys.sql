-- Accounts, sessions and refresh tokens, signing keys, login throttling, one-time tokens, the mail outbox and social
-- identities (DESIGN.md section 3, Auth). Emails and usernames are unique ignoring case; every secret the service
-- hands out (refresh tokens, reset and email-change tokens) is stored only as its SHA-256.

CREATE TABLE users (
    id uuid PRIMARY KEY,
    email text NOT NULL CHECK (length(email) BETWEEN 3 AND 254 AND position('@' IN email) > 1),
    email_verified boolean NOT NULL DEFAULT false,
    username text NOT NULL CHECK (username ~ '^[A-Za-z0-9_.]{3,30}$'),
    display_name text NOT NULL CHECK (length(display_name) BETWEEN 1 AND 100),
    time_zone text NOT NULL DEFAULT 'UTC' CHECK (length(time_zone) BETWEEN 1 AND 64),
    -- bcrypt ($2b$, cost 12); NULL for accounts created by social login that never set a password.
    password_hash text CHECK (password_hash LIKE '$2%'),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE UNIQUE INDEX users_email_key ON users (lower(email));
CREATE UNIQUE INDEX users_username_key ON users (lower(username));

-- One row per signed-in device. A session ends when revoked or when it is not refreshed before expires_at.
CREATE TABLE sessions (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- Client-generated and stable per device; a new sign-in on the same device replaces the previous session.
    device_id uuid,
    device_name text NOT NULL DEFAULT '' CHECK (length(device_name) <= 100),
    client_address text NOT NULL DEFAULT '' CHECK (length(client_address) <= 100),
    created_at timestamptz NOT NULL,
    last_used_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz,
    revoke_reason text CHECK (revoke_reason IN (
        'logout', 'logout_everywhere', 'revoked', 'replaced', 'refresh_token_reuse', 'password_changed',
        'password_reset', 'social_link')),
    CHECK ((revoked_at IS NULL) = (revoke_reason IS NULL))
);

CREATE INDEX sessions_user_id_idx ON sessions (user_id, last_used_at DESC, id);
CREATE UNIQUE INDEX sessions_one_live_per_device_key ON sessions (user_id, device_id)
    WHERE revoked_at IS NULL AND device_id IS NOT NULL;

-- Refresh tokens: the session is the token family. Each refresh marks the presented token used and adds its
-- successor; presenting a used one again revokes the session.
CREATE TABLE refresh_tokens (
    token_hash bytea PRIMARY KEY CHECK (length(token_hash) = 32),
    session_id uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    used_at timestamptz,
    CHECK (expires_at > created_at)
);

CREATE INDEX refresh_tokens_session_id_idx ON refresh_tokens (session_id);
CREATE INDEX refresh_tokens_user_id_idx ON refresh_tokens (user_id);

-- Ed25519 keys that sign access tokens. A new key is published (GetVerificationKeys) before it starts signing at
-- activate_at; the key it replaces stops signing then (retire_at) and keeps verifying until not_after, when the last
-- token it signed has expired. The private key is sealed with AES-256-GCM under a key-encryption key from the
-- environment (never stored here), with the key id as additional data.
CREATE TABLE signing_keys (
    key_id text PRIMARY KEY CHECK (length(key_id) BETWEEN 1 AND 64),
    algorithm text NOT NULL DEFAULT 'EdDSA' CHECK (algorithm = 'EdDSA'),
    public_key bytea NOT NULL CHECK (length(public_key) = 32),
    sealed_private_key bytea NOT NULL,
    created_at timestamptz NOT NULL,
    activate_at timestamptz NOT NULL,
    retire_at timestamptz,
    not_after timestamptz,
    CHECK ((retire_at IS NULL) = (not_after IS NULL)),
    CHECK (retire_at IS NULL OR (retire_at >= activate_at AND not_after >= retire_at))
);

CREATE UNIQUE INDEX signing_keys_activate_at_key ON signing_keys (activate_at);

-- Failed-attempt counters shared by all replicas: per account and per client address for logins, per email and
-- per client address for reset requests. The subject is hashed (it may be an email or an address).
CREATE TABLE throttle_state (
    scope text NOT NULL CHECK (scope IN ('login_account', 'login_address', 'reset_email', 'reset_address')),
    subject_hash bytea NOT NULL CHECK (length(subject_hash) = 32),
    failures integer NOT NULL CHECK (failures >= 0),
    window_started_at timestamptz NOT NULL,
    blocked_until timestamptz,
    PRIMARY KEY (scope, subject_hash)
);

CREATE INDEX throttle_state_window_started_at_idx ON throttle_state (window_started_at);

-- Password reset and email change tokens: single use, expiring, stored hashed.
CREATE TABLE one_time_tokens (
    token_hash bytea PRIMARY KEY CHECK (length(token_hash) = 32),
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    purpose text NOT NULL CHECK (purpose IN ('password_reset', 'email_change')),
    -- The address being confirmed, for email changes.
    new_email text CHECK ((purpose = 'email_change') = (new_email IS NOT NULL)),
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    used_at timestamptz,
    CHECK (expires_at > created_at)
);

CREATE INDEX one_time_tokens_user_id_idx ON one_time_tokens (user_id, purpose);
CREATE INDEX one_time_tokens_expires_at_idx ON one_time_tokens (expires_at);

-- Mail waiting to be sent (reset and confirmation links). Rows are deleted once sent: they hold live tokens.
CREATE TABLE mail_outbox (
    id uuid PRIMARY KEY,
    user_id uuid REFERENCES users (id) ON DELETE CASCADE,
    recipient text NOT NULL CHECK (length(recipient) BETWEEN 3 AND 254),
    subject text NOT NULL CHECK (length(subject) BETWEEN 1 AND 200),
    body text NOT NULL,
    created_at timestamptz NOT NULL,
    attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at timestamptz NOT NULL,
    last_error text
);

CREATE INDEX mail_outbox_next_attempt_at_idx ON mail_outbox (next_attempt_at);

-- Which account a social identity (provider + the provider's stable subject id) signs in to.
CREATE TABLE social_identities (
    provider text NOT NULL CHECK (provider IN ('google', 'apple')),
    subject text NOT NULL CHECK (length(subject) BETWEEN 1 AND 255),
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    email text,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (provider, subject)
);

CREATE INDEX social_identities_user_id_idx ON social_identities (user_id);

-- An account with the providers linked to it, as the API shows it.
CREATE VIEW user_accounts AS
SELECT u.*,
    coalesce(
        (SELECT array_agg(s.provider ORDER BY s.provider) FROM social_identities s WHERE s.user_id = u.id),
        '{}'::text[]) AS linked_providers
FROM users u;
