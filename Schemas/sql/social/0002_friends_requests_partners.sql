-- Friends, the requests that make friends and partners, blocks and partnerships (seed 004 §3.10, DESIGN.md
-- sections 3 "Social" and 3a "Partners", "Friends and privacy").
--
-- Relations between two users are kept once per side where each side lists them (friendships, partners: a row
-- for each user, leading with that user's id), so every user-owned table leads with user_id (or indexes it) and
-- the schema can be distributed by user. A request is one row, indexed by both its sender and its recipient.
--
-- Sync: every write stamps the rows it touches with the next value of each touched user's change sequence
-- (users.change_seq; a write that touches two users takes both, the smaller user id first, so two writes never
-- wait on each other crosswise). Taking it locks the user's row until commit, which makes the limits of 100
-- friends and 100 pending requests and "one partner at a time" race-free.

-- Users the service knows: created by UserCreated, lazily on a user's first call, or when a request names them.
CREATE TABLE users (
    user_id uuid PRIMARY KEY,
    -- IANA name; decides the user's current week on their leaderboard.
    time_zone text NOT NULL DEFAULT 'UTC' CHECK (time_zone <> '' AND char_length(time_zone) <= 64),
    time_zone_changed_at timestamptz,
    change_seq bigint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    -- What friends see (auth's UserCreated/UserUpdated, or auth's lookup when a request names the user); empty
    -- until known.
    username text NOT NULL DEFAULT '',
    display_name text NOT NULL DEFAULT '',
    -- The event time of the last names applied (last write wins).
    names_changed_at timestamptz
);

-- Users removed by UserDeleted (or PurgeUser): their calls are refused and nothing of them is re-created.
CREATE TABLE deleted_users (
    user_id uuid PRIMARY KEY,
    deleted_at timestamptz NOT NULL DEFAULT now()
);

-- One row per side of a friendship: (A, B) and (B, A). Removing a friend tombstones both rows.
CREATE TABLE friendships (
    user_id uuid NOT NULL REFERENCES users ON DELETE CASCADE,
    friend_id uuid NOT NULL REFERENCES users ON DELETE CASCADE,
    since timestamptz NOT NULL,
    deleted_at timestamptz,
    change_seq bigint NOT NULL,
    PRIMARY KEY (user_id, friend_id),
    CHECK (user_id <> friend_id)
);

CREATE INDEX friendships_changes ON friendships (user_id, change_seq);

-- Friend and partner requests. A friend request addressed to an email or username no account has keeps
-- recipient_id NULL and stays pending for its sender until canceled.
CREATE TABLE requests (
    id uuid PRIMARY KEY,
    kind text NOT NULL CHECK (kind IN ('friend', 'partner')),
    sender_id uuid NOT NULL REFERENCES users ON DELETE CASCADE,
    recipient_id uuid REFERENCES users ON DELETE CASCADE,
    -- Friend requests: the address as the sender typed it (trimmed); its lowercase form finds a pending duplicate.
    addressed_to text NOT NULL DEFAULT '' CHECK (char_length(addressed_to) <= 254),
    state text NOT NULL CHECK (state IN ('pending', 'accepted', 'declined', 'canceled')),
    -- Sent while the recipient had blocked the sender: stored like any request (the sender sees it pending), never
    -- shown to the recipient, also after an unblock.
    hidden boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    -- Each side's change-sequence value when it last changed for that side.
    sender_seq bigint NOT NULL,
    recipient_seq bigint,
    CHECK (kind = 'friend' OR recipient_id IS NOT NULL),
    CHECK (sender_id <> recipient_id)
);

CREATE INDEX requests_by_sender ON requests (sender_id, created_at DESC) WHERE state = 'pending';
CREATE INDEX requests_by_recipient ON requests (recipient_id, created_at DESC) WHERE state = 'pending';
-- At most one pending request per sender and address (friend) or per sender and recipient (partner).
CREATE UNIQUE INDEX requests_pending_address ON requests (sender_id, lower(addressed_to))
    WHERE state = 'pending' AND kind = 'friend';
CREATE UNIQUE INDEX requests_pending_partner ON requests (sender_id) WHERE state = 'pending' AND kind = 'partner';
CREATE INDEX requests_sender_changes ON requests (sender_id, sender_seq);
CREATE INDEX requests_recipient_changes ON requests (recipient_id, recipient_seq);

-- Users a user blocked, as they were when blocked. Unblocking tombstones the row.
CREATE TABLE blocks (
    user_id uuid NOT NULL REFERENCES users ON DELETE CASCADE,
    blocked_id uuid NOT NULL REFERENCES users ON DELETE CASCADE,
    username text NOT NULL DEFAULT '',
    display_name text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL,
    deleted_at timestamptz,
    change_seq bigint NOT NULL,
    PRIMARY KEY (user_id, blocked_id),
    CHECK (user_id <> blocked_id)
);

CREATE INDEX blocks_changes ON blocks (user_id, change_seq);
CREATE INDEX blocks_by_blocked ON blocks (blocked_id) WHERE deleted_at IS NULL;

-- One row per side of a partnership, with the partnership's id on both. An ended partnership keeps its rows
-- (ended_at set) until an account is deleted.
CREATE TABLE partners (
    user_id uuid NOT NULL REFERENCES users ON DELETE CASCADE,
    partnership_id uuid NOT NULL,
    partner_id uuid NOT NULL REFERENCES users ON DELETE CASCADE,
    started_at timestamptz NOT NULL,
    ended_at timestamptz,
    change_seq bigint NOT NULL,
    PRIMARY KEY (user_id, partnership_id),
    CHECK (user_id <> partner_id)
);

-- One partner at a time.
CREATE UNIQUE INDEX partners_current ON partners (user_id) WHERE ended_at IS NULL;
CREATE INDEX partners_changes ON partners (user_id, change_seq);

-- The rows above with the names of the other user in them, as the store reads them (names come from `users`,
-- kept current from auth's events).
CREATE VIEW request_details AS
SELECT r.*, s.username AS sender_username, s.display_name AS sender_display_name,
    t.username AS recipient_username, t.display_name AS recipient_display_name
FROM requests r
JOIN users s ON s.user_id = r.sender_id
LEFT JOIN users t ON t.user_id = r.recipient_id;

CREATE VIEW friend_details AS
SELECT f.*, u.username, u.display_name,
    EXISTS (
        SELECT 1 FROM partners p WHERE p.user_id = f.user_id AND p.partner_id = f.friend_id AND p.ended_at IS NULL
    ) AS partner
FROM friendships f
JOIN users u ON u.user_id = f.friend_id;

CREATE VIEW partner_details AS
SELECT p.*, u.username, u.display_name
FROM partners p
JOIN users u ON u.user_id = p.partner_id;
