-- Shared goals (DESIGN.md sections 3 "Social" and 3a "Partners"): a goal its creator shares with their partner. The
-- goal stays the creator's (goals.user_id); partner_id names the partner while it is shared (NULL otherwise), and
-- the partner's links are goal_links rows of that goal with habit_user_id = the partner.

-- What goals knows of partnerships: rows come from SocialInternal.GetPartnership answers (when a goal is shared) and
-- from social's PartnershipStarted/PartnershipEnded events, in any order. An ended partnership never comes back
-- (ended_at is set once and never cleared); a later partnership of the same two users has another id.
-- Sharing a goal locks the partnership row (FOR UPDATE) before the user's row and refuses an ended one;
-- PartnershipEnded locks the same row before it converts the goals, so the two never cross.
CREATE TABLE partnerships (
    partnership_id uuid PRIMARY KEY,
    -- The two users, the lower id first.
    user_a uuid NOT NULL,
    user_b uuid NOT NULL,
    started_at timestamptz,
    ended_at timestamptz,
    CHECK (user_a < user_b)
);

CREATE INDEX partnerships_user_a ON partnerships (user_a);
CREATE INDEX partnerships_user_b ON partnerships (user_b);

ALTER TABLE goals ADD COLUMN partner_id uuid;
-- The partnership the goal is shared under: PartnershipEnded converts exactly its goals (a late event of an older
-- partnership of the same two users leaves a newer one's goals shared).
ALTER TABLE goals ADD COLUMN partnership_id uuid;
ALTER TABLE goals ADD CONSTRAINT goals_shared_partner
    CHECK (shared = (partner_id IS NOT NULL) AND (partner_id IS NULL) = (partnership_id IS NULL));

-- goal_details expanded goals' columns when it was made: made again so it has the new ones.
DROP VIEW goal_details;
CREATE VIEW goal_details AS
SELECT g.*, t.target_weeks, t.target_values
FROM goals g
CROSS JOIN LATERAL (
    SELECT array_agg((gt.week_start - DATE '1970-01-01') ORDER BY gt.week_start) AS target_weeks,
           array_agg(gt.value::text ORDER BY gt.week_start) AS target_values
    FROM goal_targets gt
    WHERE gt.user_id = g.user_id AND gt.goal_id = g.id
) t;

-- The goals shared with a user.
CREATE INDEX goals_shared_with ON goals (partner_id, id) WHERE partner_id IS NOT NULL;

-- The change feed of the partner. The goals change feed is per user (users.change_seq); a shared goal lives in its
-- creator's rows, stamped with the creator's values. So every change of a shared goal also takes the partner's next
-- change value, kept here per (partner, goal): the partner's ListChanges pages through these rows with their own
-- goals (same sequence, same cursor), and the partner's cached progress (keyed by their users.change_seq) sees the
-- change at once. When the partner loses access (the partnership ends, the creator unshares it, the creator's
-- account is deleted), the row is stamped once more with removed = true: a tombstone in the partner's feed.
-- Kept by the trigger below, so no write path of goals can forget it; it locks the partner's users row too, so
-- writes take their partners' rows in id order first (GoalsStore.lockLowerPartners) and never deadlock.
CREATE TABLE shared_goal_views (
    user_id uuid NOT NULL REFERENCES users ON DELETE CASCADE,
    owner_id uuid NOT NULL,
    goal_id uuid NOT NULL,
    change_seq bigint NOT NULL,
    removed boolean NOT NULL DEFAULT false,
    PRIMARY KEY (user_id, owner_id, goal_id)
);

CREATE INDEX shared_goal_views_changes ON shared_goal_views (user_id, change_seq);

CREATE FUNCTION stamp_shared_goal_views() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    next_seq bigint;
BEGIN
    IF NEW.partner_id IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.change_seq IS DISTINCT FROM OLD.change_seq
        OR NEW.partner_id IS DISTINCT FROM OLD.partner_id) THEN
        UPDATE users SET change_seq = change_seq + 1 WHERE user_id = NEW.partner_id RETURNING change_seq INTO next_seq;
        IF next_seq IS NOT NULL THEN
            INSERT INTO shared_goal_views (user_id, owner_id, goal_id, change_seq, removed)
            VALUES (NEW.partner_id, NEW.user_id, NEW.id, next_seq, false)
            ON CONFLICT (user_id, owner_id, goal_id) DO UPDATE SET change_seq = EXCLUDED.change_seq, removed = false;
        END IF;
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.partner_id IS NOT NULL AND NEW.partner_id IS DISTINCT FROM OLD.partner_id THEN
        UPDATE users SET change_seq = change_seq + 1 WHERE user_id = OLD.partner_id RETURNING change_seq INTO next_seq;
        IF next_seq IS NOT NULL THEN
            UPDATE shared_goal_views SET change_seq = next_seq, removed = true
            WHERE user_id = OLD.partner_id AND owner_id = OLD.user_id AND goal_id = OLD.id;
        END IF;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER goals_shared_goal_views AFTER INSERT OR UPDATE ON goals
    FOR EACH ROW EXECUTE FUNCTION stamp_shared_goal_views();

-- A planning task of the creator's moves a shared goal without touching the goal row: the partner's change value is
-- taken too, so the partner's cached progress (keyed by it) sees the completion at once.
CREATE FUNCTION stamp_shared_goal_task() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE users SET change_seq = change_seq + 1 WHERE user_id IN (
        SELECT g.partner_id FROM goals g WHERE g.user_id = NEW.user_id AND g.partner_id IS NOT NULL
        AND (g.id = NEW.goal_id OR (TG_OP = 'UPDATE' AND g.id = OLD.goal_id)));
    RETURN NEW;
END
$$;

CREATE TRIGGER tasks_shared_goal AFTER INSERT OR UPDATE ON tasks
    FOR EACH ROW EXECUTE FUNCTION stamp_shared_goal_task();
