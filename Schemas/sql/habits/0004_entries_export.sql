-- The data export (HabitsInternal/ExportUser): every entry of a user, tombstones included, in the order the export
-- streams them (date, habit, creation, id). Each page of 1,000 continues after the previous page's last entry
-- (keyset pagination), one range scan of this index, so a page costs the same at the end of five years of entries
-- as at the start. The indexes of 0002 cannot serve it: they hold live entries only, or another order.
CREATE INDEX entries_export ON entries (user_id, local_date, habit_id, created_at, id);
