-- Reviews (DESIGN.md section 3a "Reviews"): a dated 12-week or annual review rating 1..10 of the user's categories
-- (habits' categories) 1..10 each. The next review date is derived (date + 12 weeks or + 1 year), never stored.
--
-- The latest rating of a category is derived at read: from the latest live review (by review_date, then created_seq)
-- that rated it. A category habits deleted (deleted_categories) drops out of the latest figures; its ratings stay
-- here and in the history. Every write stamps the review with the user's change sequence (users.change_seq), like
-- goals and tasks: the change feed pages through it.
CREATE TABLE reviews (
    user_id uuid NOT NULL REFERENCES users ON DELETE CASCADE,
    id uuid NOT NULL,
    type text NOT NULL CHECK (type IN ('twelve_week', 'annual')),
    review_date date NOT NULL,
    note text NOT NULL DEFAULT '' CHECK (char_length(note) <= 500),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    deleted_at timestamptz,
    change_seq bigint NOT NULL,
    -- The change sequence value of the review's creation: reviews of one day in the order they were created.
    created_seq bigint NOT NULL,
    PRIMARY KEY (user_id, id)
);

CREATE INDEX reviews_by_date ON reviews (user_id, review_date, created_seq);
CREATE INDEX reviews_changes ON reviews (user_id, change_seq);

-- A review's ratings, in the order the client gave them (position). Replaced whole by an update of `ratings`.
CREATE TABLE review_ratings (
    user_id uuid NOT NULL,
    review_id uuid NOT NULL,
    category_id uuid NOT NULL,
    rating smallint NOT NULL CHECK (rating BETWEEN 1 AND 10),
    position smallint NOT NULL,
    PRIMARY KEY (user_id, review_id, category_id),
    FOREIGN KEY (user_id, review_id) REFERENCES reviews (user_id, id) ON DELETE CASCADE
);
