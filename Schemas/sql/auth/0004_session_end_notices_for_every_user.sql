-- Since changes/0003 notify_user_changed() notifies only users that a subscriber leases (ChangeNotices/WatchUsers);
-- the gateway's session checks follow every user's session ends, so auth's triggers ask for every user.
DROP TRIGGER sessions_notify_revoked ON sessions;
CREATE TRIGGER sessions_notify_revoked AFTER UPDATE OF revoked_at ON sessions FOR EACH ROW
    WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL) EXECUTE FUNCTION notify_user_changed('every_user');

DROP TRIGGER sessions_notify_deleted ON sessions;
CREATE TRIGGER sessions_notify_deleted AFTER DELETE ON sessions FOR EACH ROW
    WHEN (OLD.revoked_at IS NULL) EXECUTE FUNCTION notify_user_changed('every_user');
