-- Change notices for the gateway's WatchChanges: every write takes the user's next change-sequence value
-- (users.change_seq), so a notice per changed users row says "this user's ListChanges has news" (a write that touches
-- two users bumps both rows, so both hear of it). notify_user_changed() is the libraries' (changes/0001, in
-- Shared/Postgres/Outbox/ChangeNoticeMigrations.swift): NOTIFY habitflow_changes_<schema> at commit.
CREATE TRIGGER users_notify_changed AFTER UPDATE OF change_seq ON users FOR EACH ROW
    WHEN (NEW.change_seq IS DISTINCT FROM OLD.change_seq) EXECUTE FUNCTION notify_user_changed();
