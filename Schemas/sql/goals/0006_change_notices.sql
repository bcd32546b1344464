-- Change notices for the gateway's WatchChanges: every write takes the user's next change-sequence value
-- (users.change_seq), so a notice per changed users row says "this user's ListChanges has news". NOTIFY is sent at
-- commit (never for a rolled-back write), and identical notices of one transaction fold into one. A write that
-- touches two users (a friend request, a shared goal) bumps both rows, so both hear of it. The service LISTENs on
-- habitflow_changes_<schema> and streams the user ids to the gateway (habitflow.events.v1.ChangeNotices). The same
-- file in habits, goals and social (Shared/Service/ChangeNotices.swift names the channel).
CREATE FUNCTION notify_user_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('habitflow_changes_' || TG_TABLE_SCHEMA, NEW.user_id::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER users_notify_changed AFTER UPDATE OF change_seq ON users FOR EACH ROW
    WHEN (NEW.change_seq IS DISTINCT FROM OLD.change_seq) EXECUTE FUNCTION notify_user_changed();
