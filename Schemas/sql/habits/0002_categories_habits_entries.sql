-- Categories, habits with dated weekly targets, and entries (DESIGN.md section 3).
--
-- Every table leads with user_id (keys and indexes), so the schema can be distributed by user.
-- Nothing derived is stored: weekly "X/Y", scores and their history are computed from entries, targets and the
-- habits' live weeks on every read.
--
-- Sync: user content is soft-deleted (deleted_at, a tombstone) and every write stamps the rows it touches with the
-- next value of the user's change sequence (users.change_seq), which ListChanges pages through. Taking that value
-- locks the user's row until commit, so a user's writes commit in sequence order and a reader can never see a later
-- value before an earlier one commits (a global sequence would let the feed skip rows). The same lock makes the
-- per-user limits (10 categories, 15 habits) race-free.

-- Users the service knows: created by UserCreated, or lazily on a user's first call (time zone UTC until an event
-- says otherwise).
CREATE TABLE users (
    user_id uuid PRIMARY KEY,
    -- IANA name, for example Europe/Berlin; decides the user's "today" and current week.
    time_zone text NOT NULL DEFAULT 'UTC' CHECK (time_zone <> '' AND char_length(time_zone) <= 64),
    -- The event time of the last time zone change applied (last write wins among UserCreated/UserUpdated).
    time_zone_changed_at timestamptz,
    -- The user's change sequence: the last value stamped on a row (see above).
    change_seq bigint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Users removed by UserDeleted (or PurgeUser): their calls are refused so nothing is re-created lazily.
CREATE TABLE deleted_users (
    user_id uuid PRIMARY KEY,
    deleted_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE categories (
    user_id uuid NOT NULL REFERENCES users ON DELETE CASCADE,
    id uuid NOT NULL,
    name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 50),
    position integer NOT NULL CHECK (position >= 0),
    is_default boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    deleted_at timestamptz,
    change_seq bigint NOT NULL,
    PRIMARY KEY (user_id, id)
);

-- Names are unique per user among live categories, ignoring case.
CREATE UNIQUE INDEX categories_live_name ON categories (user_id, lower(name)) WHERE deleted_at IS NULL;
CREATE INDEX categories_changes ON categories (user_id, change_seq);

CREATE TABLE habits (
    user_id uuid NOT NULL REFERENCES users ON DELETE CASCADE,
    id uuid NOT NULL,
    -- NULL: Uncategorized.
    category_id uuid,
    name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
    -- A numeric habit's unit; NULL for a plain done/not-done habit.
    unit text CHECK (char_length(unit) BETWEEN 1 AND 20),
    -- The user's local day of creation: the habit counts in weekly scores from that ISO week on.
    live_from date NOT NULL,
    -- The user's local day of deletion: the habit counts up to the ISO week before it (set with deleted_at).
    deleted_on date,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    deleted_at timestamptz,
    change_seq bigint NOT NULL,
    -- The change sequence value of the habit's creation: the user's habits in the order they were created.
    created_seq bigint NOT NULL,
    PRIMARY KEY (user_id, id),
    UNIQUE (user_id, created_seq),
    FOREIGN KEY (user_id, category_id) REFERENCES categories (user_id, id),
    CHECK ((deleted_at IS NULL) = (deleted_on IS NULL)),
    CHECK (deleted_on IS NULL OR deleted_on >= live_from)
);

-- Names are unique per user among live habits, ignoring case.
CREATE UNIQUE INDEX habits_live_name ON habits (user_id, lower(name)) WHERE deleted_at IS NULL;
CREATE INDEX habits_changes ON habits (user_id, change_seq);

-- Dated weekly targets: a habit's target in a week is the row with the latest week_start on or before that week's
-- Monday. Creating a habit adds the row of its first week; a change adds (or, within one week, replaces) the row
-- of the current week, so earlier weeks keep the target they had.
CREATE TABLE habit_targets (
    user_id uuid NOT NULL,
    habit_id uuid NOT NULL,
    -- A Monday.
    week_start date NOT NULL CHECK (extract(isodow FROM week_start) = 1),
    weekly_target smallint NOT NULL CHECK (weekly_target BETWEEN 1 AND 21),
    PRIMARY KEY (user_id, habit_id, week_start),
    FOREIGN KEY (user_id, habit_id) REFERENCES habits (user_id, id) ON DELETE CASCADE
);

-- One completion of a habit on a user-local day; a day may hold several ("8/7", targets up to 21).
CREATE TABLE entries (
    user_id uuid NOT NULL,
    id uuid NOT NULL,
    habit_id uuid NOT NULL,
    local_date date NOT NULL,
    -- Six decimals are plenty for amounts, and keep sums exact within numeric precision.
    value numeric(16, 6) NOT NULL DEFAULT 1 CHECK (value >= 0 AND value <= 1000000000),
    created_at timestamptz NOT NULL,
    deleted_at timestamptz,
    change_seq bigint NOT NULL,
    PRIMARY KEY (user_id, id),
    FOREIGN KEY (user_id, habit_id) REFERENCES habits (user_id, id) ON DELETE CASCADE
);

-- A week of a user's live entries (the week view): a range scan whose cost does not grow with the user's history.
CREATE INDEX entries_by_day ON entries (user_id, local_date) INCLUDE (habit_id) WHERE deleted_at IS NULL;
-- One habit's live entries by day (marking a day not done, goal aggregates, score history).
CREATE INDEX entries_by_habit_day ON entries (user_id, habit_id, local_date) INCLUDE (value) WHERE deleted_at IS NULL;
CREATE INDEX entries_changes ON entries (user_id, change_seq);

-- Habits with their target periods (oldest first; weeks as days since 1970-01-01), the shape every habit read uses.
CREATE VIEW habit_details AS
SELECT h.*, t.target_weeks, t.weekly_targets
FROM habits h
CROSS JOIN LATERAL (
    SELECT array_agg((ht.week_start - DATE '1970-01-01') ORDER BY ht.week_start) AS target_weeks,
           array_agg(ht.weekly_target::integer ORDER BY ht.week_start) AS weekly_targets
    FROM habit_targets ht
    WHERE ht.user_id = h.user_id AND ht.habit_id = h.id
) t;
