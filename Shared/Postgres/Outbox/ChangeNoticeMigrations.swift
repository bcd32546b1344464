public import HabitFlowPostgres

/// The change-notice function, in every service's schema: habits', goals' and social's own migration
/// (`NNNN_change_notices.sql`) puts a trigger on `users.change_seq` that calls it, auth's
/// (`0003_session_end_notices.sql`) triggers on the end of a session, and `ChangeNoticesService` (HabitFlowServiceKit)
/// listens on ``channel(schema:)``. One definition here rather than a copy per service, as for the outbox's tables.
public enum ChangeNoticeMigrations {
    public static let namespace = "changes"

    public static var all: [PostgresMigration] { [function, deletions] }

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
}

/// Every library migration a service schema gets, in order (before the service's own files): the outbox's tables,
/// then the change-notice function. What `ServiceHost` and `habitflow-migrate` apply.
public enum LibraryMigrations {
    public static var all: [PostgresMigration] { OutboxMigrations.all + ChangeNoticeMigrations.all }
}
