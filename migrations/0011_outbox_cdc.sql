-- The CDC relay of the outbox (docs/ARCHITECTURE.md#outbox; 0005_outbox.sql is applied and
-- never edited).
--
-- A deployment that relays the outbox with change data capture (the Debezium PostgreSQL
-- connector and its Outbox Event Router, reading a publication of inserts) inserts its rows
-- in status CDC. The relay publishes the row's insert from the WAL once the inserting
-- transaction commits; no dispatcher claims a CDC row (a claim takes PENDING rows only), so
-- CDC rows and dispatched rows can share the table. A consumer that tracks its processing
-- moves a CDC row on as it would a PUBLISHED one (CDC -> UNDER_PROCESSING -> SUCCESS or
-- PUSHED_FAILURE); retention deletes CDC rows like untracked PUBLISHED ones.
--
-- 1. CDC is a status and an initial status.
ALTER TABLE outbox_events DROP CONSTRAINT outbox_events_status_check;
ALTER TABLE outbox_events ADD CONSTRAINT outbox_events_status_check CHECK (status IN (
    'PREQUEUED', 'PENDING', 'DISPATCHING', 'PUBLISHED', 'UNDER_PROCESSING', 'SUCCESS', 'PUSHED_FAILURE', 'FAILURE', 'CDC' -- statuses
));

DROP TRIGGER outbox_events_initial_status ON outbox_events;
CREATE TRIGGER outbox_events_initial_status BEFORE INSERT ON outbox_events FOR EACH ROW
    WHEN (NEW.status NOT IN ('PENDING', 'PREQUEUED', 'CDC')) -- initial statuses
    EXECUTE FUNCTION outbox_events_reject_insert();

CREATE OR REPLACE FUNCTION outbox_events_reject_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'an outbox event is inserted as PENDING, PREQUEUED or CDC, not % (event %)',
            NEW.status, NEW.id
        USING ERRCODE = 'check_violation',
              CONSTRAINT = 'outbox_events_status_transition',
              HINT = 'status changes go through the outbox transition helper (docs/ARCHITECTURE.md#outbox)';
END
$$;

-- 2. The router turns columns into headers one by one; it cannot spread the headers object
--    over several headers, so a CDC row carries none of its own (the dispatcher would send
--    them, the relay would not: the two would differ).
ALTER TABLE outbox_events ADD CONSTRAINT outbox_events_cdc_headers
    CHECK (status <> 'CDC' OR headers = '{}'::jsonb);

-- 3. The edge table: 0006's with CDC -> UNDER_PROCESSING added.
CREATE OR REPLACE FUNCTION outbox_events_before_update() RETURNS trigger
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
            WHEN 'FAILURE'          THEN NEW.status IN ('PENDING')
            WHEN 'CDC'              THEN NEW.status IN ('UNDER_PROCESSING')
            -- edges:end (SUCCESS and PUSHED_FAILURE are terminal; FAILURE only re-opens)
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

-- 4. Retention walks this index; CDC rows are retired with SUCCESS and PUBLISHED ones.
DROP INDEX outbox_events_retention_idx;
CREATE INDEX outbox_events_retention_idx ON outbox_events (updated_at)
    WHERE status IN ('SUCCESS', 'PUBLISHED', 'CDC');
