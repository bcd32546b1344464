-- Goals, their dated targets and links, and the assessments of level and rating goals (DESIGN.md sections 3 and 3a).
--
-- Every table leads with user_id (keys and indexes), so the schema can be distributed by user; on goal tables it is
-- the goal's owner (its creator).
-- Nothing of progress is stored: every figure is derived at read from the linked habits' entries (habits service),
-- the dated links and targets below and the assessments. Status is stored only as the user set it (state); completed
-- and expired are derived.
--
-- Sync: user content is soft-deleted (deleted_at, a tombstone) and every write stamps the rows it touches with the
-- next value of the user's change sequence (users.change_seq), which ListChanges pages through and which tells a
-- cached progress whether it is current. Taking that value locks the user's row until commit, which also makes the
-- limit of 10 active goals race-free.

-- Users the service knows: created by UserCreated, or lazily on a user's first call (zone UTC until an event says
-- otherwise).
CREATE TABLE users (
    user_id uuid PRIMARY KEY,
    -- IANA name; decides the user's today, current week and their goals' weeks.
    time_zone text NOT NULL DEFAULT 'UTC' CHECK (time_zone <> '' AND char_length(time_zone) <= 64),
    -- The event time of the last time zone change applied (last write wins among UserCreated/UserUpdated).
    time_zone_changed_at timestamptz,
    change_seq bigint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Users removed by UserDeleted (or PurgeUser): their calls are refused so nothing is re-created lazily.
CREATE TABLE deleted_users (
    user_id uuid PRIMARY KEY,
    deleted_at timestamptz NOT NULL DEFAULT now()
);

-- Categories habits deleted (CategoryDeleted): a goal never points at one, even if it was created with it while the
-- event was on its way.
CREATE TABLE deleted_categories (
    user_id uuid NOT NULL REFERENCES users ON DELETE CASCADE,
    category_id uuid NOT NULL,
    PRIMARY KEY (user_id, category_id)
);

CREATE TABLE goals (
    user_id uuid NOT NULL REFERENCES users ON DELETE CASCADE,
    id uuid NOT NULL,
    title text NOT NULL CHECK (char_length(title) BETWEEN 1 AND 100),
    description text NOT NULL DEFAULT '' CHECK (char_length(description) <= 500),
    icon text NOT NULL DEFAULT '' CHECK (char_length(icon) <= 16),
    -- A category in habits; NULL: Uncategorized.
    category_id uuid,
    type text NOT NULL CHECK (type IN ('weekly_habit', 'recurring_task', 'count', 'quantity', 'level', 'rating')),
    horizon text NOT NULL CHECK (horizon IN ('1w', '4w', '8w', '12w', '5y', '10y', 'ongoing')),
    -- quantity goals only.
    unit text CHECK (char_length(unit) BETWEEN 1 AND 20),
    -- level goals only: the level names, lowest first.
    levels text[],
    -- rating goals only.
    rating_scale smallint CHECK (rating_scale IN (5, 10)),
    parent_goal_id uuid,
    -- The Monday of the first week and the Sunday of the last (NULL: ongoing), in the owner's zone.
    start_date date NOT NULL CHECK (extract(isodow FROM start_date) = 1),
    end_date date CHECK (end_date IS NULL OR (extract(isodow FROM end_date) = 7 AND end_date > start_date)),
    target_date date,
    conversation_id text NOT NULL DEFAULT '' CHECK (char_length(conversation_id) <= 200),
    shared boolean NOT NULL DEFAULT false,
    -- As the user set it; 'completed' is "completed by hand".
    state text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'paused', 'archived', 'completed')),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    deleted_at timestamptz,
    change_seq bigint NOT NULL,
    -- The change sequence value of the goal's creation: the user's goals in the order they were created.
    created_seq bigint NOT NULL,
    PRIMARY KEY (user_id, id),
    UNIQUE (user_id, created_seq),
    FOREIGN KEY (user_id, parent_goal_id) REFERENCES goals (user_id, id),
    CHECK ((type = 'quantity') = (unit IS NOT NULL)),
    CHECK ((type = 'level') = (levels IS NOT NULL)),
    CHECK ((type = 'rating') = (rating_scale IS NOT NULL))
);

CREATE INDEX goals_changes ON goals (user_id, change_seq);
CREATE INDEX goals_children ON goals (user_id, parent_goal_id) WHERE parent_goal_id IS NOT NULL;

-- Dated targets: a goal's target in a week is the row with the latest week_start on or before that week's Monday.
-- Creating a goal adds the row of its first week; a change adds (or, within one week, replaces) the row of the
-- current week, so earlier weeks keep the target they had.
CREATE TABLE goal_targets (
    user_id uuid NOT NULL,
    goal_id uuid NOT NULL,
    week_start date NOT NULL CHECK (extract(isodow FROM week_start) = 1),
    value numeric(16, 6) NOT NULL CHECK (value >= 0 AND value <= 1000000000),
    PRIMARY KEY (user_id, goal_id, week_start),
    FOREIGN KEY (user_id, goal_id) REFERENCES goals (user_id, id) ON DELETE CASCADE
);

-- Dated links: entries of the habit dated from linked_from (a Monday) through linked_until (a Sunday; NULL while
-- linked) count for the goal. Unlinking sets linked_until to the current week's Sunday, so what the habit gave stays;
-- linking again in a later week adds a row.
CREATE TABLE goal_links (
    user_id uuid NOT NULL,
    goal_id uuid NOT NULL,
    habit_id uuid NOT NULL,
    -- The habit's owner: the goal's owner, or (shared goals) their partner.
    habit_user_id uuid NOT NULL,
    linked_from date NOT NULL CHECK (extract(isodow FROM linked_from) = 1),
    linked_until date CHECK (linked_until IS NULL OR (extract(isodow FROM linked_until) = 7 AND linked_until > linked_from)),
    -- HabitDeleted arrived: the habit counts no more from its deletion on (habits keeps its entries).
    habit_deleted boolean NOT NULL DEFAULT false,
    PRIMARY KEY (user_id, goal_id, habit_id, linked_from),
    FOREIGN KEY (user_id, goal_id) REFERENCES goals (user_id, id) ON DELETE CASCADE
);

-- At most one open link per goal and habit.
CREATE UNIQUE INDEX goal_links_open ON goal_links (user_id, goal_id, habit_id) WHERE linked_until IS NULL;
-- A habit's links, for HabitDeleted.
CREATE INDEX goal_links_by_habit ON goal_links (habit_user_id, habit_id);

CREATE TABLE assessments (
    user_id uuid NOT NULL,
    id uuid NOT NULL,
    goal_id uuid NOT NULL,
    local_date date NOT NULL,
    value smallint NOT NULL CHECK (value BETWEEN 1 AND 20),
    note text NOT NULL DEFAULT '' CHECK (char_length(note) <= 500),
    created_at timestamptz NOT NULL,
    deleted_at timestamptz,
    change_seq bigint NOT NULL,
    PRIMARY KEY (user_id, id),
    FOREIGN KEY (user_id, goal_id) REFERENCES goals (user_id, id) ON DELETE CASCADE
);

CREATE INDEX assessments_by_goal ON assessments (user_id, goal_id, local_date) WHERE deleted_at IS NULL;
CREATE INDEX assessments_changes ON assessments (user_id, change_seq);

-- Goals with their target periods (oldest first; weeks as days since 1970-01-01, values as text for exact
-- decimals), the shape every goal read uses.
CREATE VIEW goal_details AS
SELECT g.*, t.target_weeks, t.target_values
FROM goals g
CROSS JOIN LATERAL (
    SELECT array_agg((gt.week_start - DATE '1970-01-01') ORDER BY gt.week_start) AS target_weeks,
           array_agg(gt.value::text ORDER BY gt.week_start) AS target_values
    FROM goal_targets gt
    WHERE gt.user_id = g.user_id AND gt.goal_id = g.id
) t;
