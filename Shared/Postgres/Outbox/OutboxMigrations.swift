public import HabitFlowPostgres

/// The outbox's tables, which every service with a database has in its schema: the outbox owns their SQL and each
/// service applies it with its own files (`PostgresMigrations.migrate(..., libraryMigrations: LibraryMigrations.all)`,
/// done by `ServiceHost` and `habitflow-migrate`). Recorded in the schema's `schema_migrations` as `outbox/NNNN_name`.
public enum OutboxMigrations {
    public static let namespace = "outbox"

    /// Every outbox migration, in order.
    public static var all: [PostgresMigration] { [tables, deliveries] }

    /// `outbox`, its `NOTIFY` trigger and `processed_events`: the SQL that each service had as
    /// `Schemas/sql/<service>/0001_outbox_and_processed_events.sql`, which it takes over in databases made before.
    static let tables = PostgresMigration(
        namespace: namespace, version: 1, name: "tables",
        sql: """
        -- Transactional outbox: events this service publishes, appended in the same transaction as the change they
        -- describe and delivered at least once, in order per aggregate, by the outbox relay (HabitFlowOutbox).
        CREATE TABLE outbox (
            sequence bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id uuid NOT NULL UNIQUE,
            aggregate_type text NOT NULL,
            aggregate_id text NOT NULL,
            event_type text NOT NULL,
            occurred_at timestamptz NOT NULL DEFAULT now(),
            payload bytea NOT NULL,
            -- Delivery bookkeeping: failed attempts so far and when to try again (exponential backoff).
            attempts integer NOT NULL DEFAULT 0,
            next_attempt_at timestamptz NOT NULL DEFAULT now(),
            last_error text
        );

        -- Wakes the relay (LISTEN habitflow_outbox_<schema>) when the appending transaction commits, so delivery is
        -- prompt without polling. Once per statement; Postgres folds identical notifications of one transaction into
        -- one.
        CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('habitflow_outbox_' || TG_TABLE_SCHEMA, '');
            RETURN NULL;
        END
        $$;

        CREATE TRIGGER outbox_notify AFTER INSERT ON outbox FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();

        -- Inbox: ids of events this service's consumers have processed, recorded in the transaction that applied the
        -- event, so a redelivered event is recognised and skipped.
        CREATE TABLE processed_events (
            consumer text NOT NULL,
            event_id uuid NOT NULL,
            processed_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (consumer, event_id)
        );

        """,
        predecessors: [
            // The checksum that file always had (identical for all four services).
            .init(
                version: 1, name: "outbox_and_processed_events",
                checksums: ["a00a476693cd4c878f759ffe0e91106ba8bf2043ba9ce5af3feabbca996c9b14"])
        ])

    /// Delivery per subscriber (``OutboxRelay``): each outbox row is fanned out to one `outbox_deliveries` row per
    /// subscriber of its type, which keeps that subscriber's retry state; the outbox row goes with its last delivery.
    static let deliveries = PostgresMigration(
        namespace: namespace, version: 2, name: "deliveries",
        sql: """
        -- Per-subscriber delivery: the relay copies each outbox row's sequence here once per subscriber of its event
        -- type (under an advisory lock) and sets fanned_out; each subscriber's rows are then delivered on their own,
        -- in order per aggregate, so a subscriber that is down delays only itself. A delivered row is deleted, and the
        -- outbox row with it once no subscriber's row is left.
        ALTER TABLE outbox ADD COLUMN fanned_out boolean NOT NULL DEFAULT false;
        -- The rows still to fan out, found without reading the ones waiting for a slow subscriber. A flag, not a
        -- "fanned out through sequence N" cursor: identity values can commit out of order.
        CREATE INDEX outbox_not_fanned_out ON outbox (sequence) WHERE NOT fanned_out;
        -- outbox.attempts, next_attempt_at and last_error are no longer written (a relay of the previous release,
        -- still running during a rolling upgrade, does): retry state is per subscriber below.

        CREATE TABLE outbox_deliveries (
            subscriber text NOT NULL,
            sequence bigint NOT NULL REFERENCES outbox (sequence) ON DELETE CASCADE,
            -- Failed attempts so far, when to try again (capped exponential backoff) and why the last one failed.
            attempts integer NOT NULL DEFAULT 0,
            next_attempt_at timestamptz NOT NULL DEFAULT now(),
            last_error text,
            PRIMARY KEY (subscriber, sequence)
        );
        -- "Is any delivery of this outbox row left?", and the foreign key's cascade.
        CREATE INDEX outbox_deliveries_sequence ON outbox_deliveries (sequence);

        """)
}
