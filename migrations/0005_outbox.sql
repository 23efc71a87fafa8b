-- outbox_events: the transactional outbox (docs/ARCHITECTURE.md#outbox).
--
-- Domain code inserts a row in the same transaction as its business write, so the event
-- exists exactly when the write committed, whether Kafka is up or not. A dispatcher claims
-- it (PENDING -> DISPATCHING), publishes it and marks it PUBLISHED; the consumer moves it on
-- to UNDER_PROCESSING and then SUCCESS or PUSHED_FAILURE. A service in any language enqueues
-- with one INSERT (id, status and the times have defaults):
--
--   INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, topic, partition_key,
--                              payload)
--   VALUES ('user', '42', 'mailbox.command', 'mailbox', '42', '{"command": "..."}');
--
-- Status changes follow the edges of sluice_core::outbox; the triggers below reject any
-- other edge, and an insert in any status but PENDING or PREQUEUED.
CREATE TABLE outbox_events (
    id                  UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    -- Creation order: claims go by seq, and one key's events are published in seq order.
    seq                 BIGSERIAL NOT NULL,
    aggregate_type      VARCHAR(255) NOT NULL,
    aggregate_id        VARCHAR(255) NOT NULL,
    event_type          VARCHAR(255) NOT NULL,
    topic               VARCHAR(249) NOT NULL,
    -- The Kafka record key (for user mailboxes the user id).
    partition_key       VARCHAR(255) NOT NULL,
    -- Explicit partition (S11); NULL lets the producer's partitioner choose from the key.
    partition           INTEGER CHECK (partition >= 0),
    payload             JSONB NOT NULL,
    -- Extra Kafka headers, name -> value; the dispatcher adds the event id, type and aggregate.
    headers             JSONB NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(headers) = 'object'),
    status              VARCHAR(20) NOT NULL DEFAULT 'PENDING'
        CONSTRAINT outbox_events_status_check CHECK (status IN (
            'PREQUEUED', 'PENDING', 'DISPATCHING', 'PUBLISHED', 'UNDER_PROCESSING', 'SUCCESS', 'PUSHED_FAILURE', 'FAILURE' -- statuses
        )),
    -- Failed publish attempts so far.
    attempts            INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- Not claimed before this time (back-off after a failed publish; or a delayed event).
    available_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- The dispatcher that claimed the row, and when (stale dispatch recovery).
    claimed_by          TEXT,
    claimed_at          TIMESTAMPTZ,
    -- Where the broker stored the record.
    published_partition INTEGER,
    published_offset    BIGINT,
    published_at        TIMESTAMPTZ,
    last_error          TEXT,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- Set by the trigger on every update (unless the update sets it explicitly).
    updated_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- The claim (WHERE status = 'PENDING' AND available_at <= now() ORDER BY seq LIMIT n
-- FOR UPDATE SKIP LOCKED) walks this index in seq order and stops after n due rows.
CREATE INDEX outbox_events_pending_seq_idx ON outbox_events (seq) WHERE status = 'PENDING';
-- Per-key order: whether an earlier event of the same topic and key is still in flight.
CREATE INDEX outbox_events_in_flight_key_idx ON outbox_events (topic, partition_key, seq)
    WHERE status IN ('PENDING', 'DISPATCHING');
-- Stale dispatch recovery: DISPATCHING rows claimed before a cut-off.
CREATE INDEX outbox_events_dispatching_claimed_idx ON outbox_events (claimed_at)
    WHERE status = 'DISPATCHING';
-- Retention: SUCCESS (and untracked PUBLISHED) rows older than a cut-off.
CREATE INDEX outbox_events_retention_idx ON outbox_events (updated_at)
    WHERE status IN ('SUCCESS', 'PUBLISHED');

-- The state machine in the database: an UPDATE that changes the status must follow an edge
-- of sluice_core::outbox::EDGES (an UPDATE that keeps the status is a no-op for this check).
-- sluice-outbox's tests parse the lines between the edge markers and compare them with
-- EDGES, and try all 64 pairs against this trigger: change both together.
CREATE FUNCTION outbox_events_before_update() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    allowed BOOLEAN;
BEGIN
    IF NEW.status IS DISTINCT FROM OLD.status THEN
        allowed := CASE OLD.status
            -- edges:begin
            WHEN 'PREQUEUED'        THEN NEW.status IN ('PENDING')
            WHEN 'PENDING'          THEN NEW.status IN ('DISPATCHING')
            WHEN 'DISPATCHING'      THEN NEW.status IN ('PUBLISHED', 'PENDING', 'FAILURE', 'UNDER_PROCESSING')
            WHEN 'PUBLISHED'        THEN NEW.status IN ('UNDER_PROCESSING')
            WHEN 'UNDER_PROCESSING' THEN NEW.status IN ('SUCCESS', 'PUSHED_FAILURE')
            -- edges:end (SUCCESS, PUSHED_FAILURE and FAILURE are terminal)
            ELSE false
        END;
        IF NOT allowed THEN
            RAISE EXCEPTION 'illegal outbox status transition % -> % (event %)',
                    OLD.status, NEW.status, OLD.id
                USING ERRCODE = 'check_violation',
                      CONSTRAINT = 'outbox_events_status_transition',
                      HINT = 'status changes go through the outbox transition helper (docs/ARCHITECTURE.md#outbox)';
        END IF;
    END IF;
    IF NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at THEN
        NEW.updated_at := now();
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER outbox_events_before_update BEFORE UPDATE ON outbox_events
    FOR EACH ROW EXECUTE FUNCTION outbox_events_before_update();

-- A row starts its life in PENDING or PREQUEUED (sluice_core::outbox::OutboxStatus::INITIAL).
CREATE FUNCTION outbox_events_reject_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'an outbox event is inserted as PENDING or PREQUEUED, not % (event %)',
            NEW.status, NEW.id
        USING ERRCODE = 'check_violation',
              CONSTRAINT = 'outbox_events_status_transition',
              HINT = 'status changes go through the outbox transition helper (docs/ARCHITECTURE.md#outbox)';
END
$$;

CREATE TRIGGER outbox_events_initial_status BEFORE INSERT ON outbox_events FOR EACH ROW
    WHEN (NEW.status NOT IN ('PENDING', 'PREQUEUED')) -- initial statuses
    EXECUTE FUNCTION outbox_events_reject_insert();

-- Wake-up: a row that becomes claimable (inserted PENDING, or released from PREQUEUED)
-- notifies channel sluice_outbox with its topic, delivered when the transaction commits
-- (PostgreSQL folds identical notifications of one transaction into one).
CREATE FUNCTION outbox_events_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('sluice_outbox', NEW.topic);
    RETURN NULL;
END
$$;

CREATE TRIGGER outbox_events_notify_insert AFTER INSERT ON outbox_events FOR EACH ROW
    WHEN (NEW.status = 'PENDING')
    EXECUTE FUNCTION outbox_events_notify();

CREATE TRIGGER outbox_events_notify_release AFTER UPDATE OF status ON outbox_events FOR EACH ROW
    WHEN (OLD.status = 'PREQUEUED' AND NEW.status = 'PENDING')
    EXECUTE FUNCTION outbox_events_notify();
