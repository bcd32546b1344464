-- Unit holds (HabitsInternal/SetUnitHolds): which habits' units a holder relies on, for example a quantity goal
-- ("goal:<uuid>") that sums the entry values of its linked habits in one unit. While a habit has a hold, UpdateHabit
-- refuses to change its unit (HABIT_UNIT_IN_USE). A holder's whole set is replaced in one transaction under the
-- user's row lock, as UpdateHabit checks under the same lock, so neither can slip past the other.
--
-- Holds are not user content: they are not in the change feed, have no tombstones, and go with the habit (a purged
-- account removes its habits, and these with them).
CREATE TABLE unit_holds (
    user_id uuid NOT NULL,
    holder text NOT NULL CHECK (char_length(holder) BETWEEN 1 AND 100),
    habit_id uuid NOT NULL,
    PRIMARY KEY (user_id, holder, habit_id),
    FOREIGN KEY (user_id, habit_id) REFERENCES habits (user_id, id) ON DELETE CASCADE
);

-- Whether a habit is held (UpdateHabit's check), and the foreign key's cascade.
CREATE INDEX unit_holds_by_habit ON unit_holds (user_id, habit_id);
