-- What each user shares with their friends (seed 004 SOC-004..007, SOC-010). A user without a row shares their
-- weekly score and no category scores, and is not in private mode.
CREATE TABLE sharing_settings (
    user_id uuid PRIMARY KEY REFERENCES users ON DELETE CASCADE,
    share_weekly_score boolean NOT NULL DEFAULT true,
    -- Shares nothing with anyone while true; the other settings are kept for when it is turned off.
    private_mode boolean NOT NULL DEFAULT false,
    -- Categories (habits service) whose weekly scores friends see, in the order chosen; at most 10.
    shared_category_ids uuid[] NOT NULL DEFAULT '{}' CHECK (cardinality(shared_category_ids) <= 10),
    updated_at timestamptz NOT NULL,
    change_seq bigint NOT NULL
);

CREATE INDEX sharing_settings_changes ON sharing_settings (user_id, change_seq);

-- Categories habits deleted (CategoryDeleted): they drop out of the shared categories, also when a settings update
-- naming one raced with the event.
CREATE TABLE deleted_categories (
    user_id uuid NOT NULL REFERENCES users ON DELETE CASCADE,
    category_id uuid NOT NULL,
    PRIMARY KEY (user_id, category_id)
);
