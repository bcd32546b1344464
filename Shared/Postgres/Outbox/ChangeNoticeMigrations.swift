public import HabitFlowPostgres

/// The change-notice function, in every service's schema: habits', goals' and social's own migration
/// (`NNNN_change_notices.sql`) puts a trigger on `users.change_seq` that calls it, auth's
/// (`0003_session_end_notices.sql`, `0004_session_end_notices_for_every_user.sql`) triggers on the end of a session,
/// and `ChangeNoticesService` (HabitFlowServiceKit) listens on ``channel(schema:)``. One definition here rather than a
/// copy per service, as for the outbox's tables.
///
/// Since `changes/0003` a write notifies only while a subscriber leases its user in `change_watches`
/// (`ChangeNotices/WatchUsers`), unless the trigger passes `'every_user'` (auth's, which the gateway's session checks
/// follow for everyone).
public enum ChangeNoticeMigrations {
    public static let namespace = "changes"

    public static var all: [PostgresMigration] { [function, deletions, watchedUsersOnly] }

    /// The channel `notify_user_changed()` notifies in `schema`.
    public static func channel(schema: String) -> String { "habitflow_changes_\(schema)" }

    static let function = PostgresMigration(
        namespace: namespace, version: 1, name: "notify_user_changed",
        sql: """
        -- "This user's data changed" for the gateway's WatchChanges: NOTIFY habitflow_changes_<schema> with the user id.
        -- Postgres sends it at commit (never for a rolled-back write) and folds a transaction's duplicates into one.
        CREATE FUNCTION notify_user_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('habitflow_changes_' || TG_TABLE_SCHEMA, NEW.user_id::text);
            RETURN NULL;
        END
        $$;

        """)

    static let deletions = PostgresMigration(
        namespace: namespace, version: 2, name: "notify_user_changed_on_delete",
        sql: """
        -- The same, from a DELETE trigger too (where NEW is NULL): auth notifies when a session row goes.
        CREATE OR REPLACE FUNCTION notify_user_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('habitflow_changes_' || TG_TABLE_SCHEMA, COALESCE(NEW.user_id, OLD.user_id)::text);
            RETURN NULL;
        END
        $$;

        """)

    static let watchedUsersOnly = PostgresMigration(
        namespace: namespace, version: 3, name: "watched_users_only",
        sql: """
        -- Leases on users' change notices (ChangeNotices/WatchUsers): a write notifies only while a subscriber (the
        -- gateway, for its WatchChanges streams) leases its user. Postgres 15 wakes every listening connection of the
        -- database for every notification, whatever its channel, so a notice nobody waits for costs every service.
        CREATE TABLE change_watches (
            user_id uuid PRIMARY KEY,
            expires_at timestamptz NOT NULL
        );
        CREATE INDEX change_watches_expires_at ON change_watches (expires_at);

        -- The lease is looked up when the trigger runs, while the write holds the user's row lock: WatchUsers waits
        -- for that lock before it answers for a lease that starts, so a write either sees the lease or commits before
        -- the subscriber reads. A trigger created with the argument 'every_user' notifies whatever the leases.
        CREATE OR REPLACE FUNCTION notify_user_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            changed uuid := COALESCE(NEW.user_id, OLD.user_id);
        BEGIN
            IF (TG_NARGS > 0 AND TG_ARGV[0] = 'every_user')
                OR EXISTS (SELECT 1 FROM change_watches WHERE user_id = changed AND expires_at > clock_timestamp()) THEN
                PERFORM pg_notify('habitflow_changes_' || TG_TABLE_SCHEMA, changed::text);
            END IF;
            RETURN NULL;
        END
        $$;

        """)
}

/// Every library migration a service schema gets, in order (before the service's own files): the outbox's tables,
/// then the change-notice function. What `ServiceHost` and `habitflow-migrate` apply.
public enum LibraryMigrations {
    public static var all: [PostgresMigration] { OutboxMigrations.all + ChangeNoticeMigrations.all }
}
