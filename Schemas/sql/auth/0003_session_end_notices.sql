-- Session-end notices for the gateway, which then trusts its cached "active" answers for minutes rather than asking
-- CheckSession every two seconds: when a live session ends (revoked for any reason, or deleted, e.g. with its
-- account), NOTIFY habitflow_changes_auth with its user id at commit, through the libraries' notify_user_changed()
-- (changes/0001-0002, Shared/Postgres/Outbox/ChangeNoticeMigrations.swift). Auth serves these as ChangeNotices, like
-- the other services' change notices; here a notice means "a session of this user ended", and the gateway checks that
-- user's sessions again. Expiry needs none: a session expires no sooner than the access tokens issued for it.
CREATE TRIGGER sessions_notify_revoked AFTER UPDATE OF revoked_at ON sessions FOR EACH ROW
    WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL) EXECUTE FUNCTION notify_user_changed();

-- Account deletion removes sessions through the foreign key's cascade, which fires row triggers too.
CREATE TRIGGER sessions_notify_deleted AFTER DELETE ON sessions FOR EACH ROW
    WHEN (OLD.revoked_at IS NULL) EXECUTE FUNCTION notify_user_changed();
