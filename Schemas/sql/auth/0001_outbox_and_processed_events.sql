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

-- Wakes the relay (LISTEN habitflow_outbox_<schema>) when the appending transaction commits, so delivery is prompt
-- without polling. Once per statement; Postgres folds identical notifications of one transaction into one.
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
