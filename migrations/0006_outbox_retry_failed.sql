-- Two additions to 0005_outbox.sql, which is applied and never edited:
-- 1. The operator's re-open of a failed outbox event (`sluice outbox retry-failed`): FAILURE ->
--    PENDING becomes an edge of the state machine (sluice_core::outbox::OPERATOR_REOPEN).
-- 2. Two partial indexes for the dispatcher's claim.
-- The trigger function below is 0005's with that one edge added. sluice-outbox's tests read
-- the edge block of the newest migration that has one and compare it with
-- sluice_core::outbox::EDGES.
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

-- The claim's per-key checks (crates/sluice-outbox/src/sql/claim.sql), each an index probe
-- that does not walk the dead entries a key's published rows leave in the wider in-flight
-- index: the nearest earlier DISPATCHING row of a key (a backward scan, one step), and an
-- earlier row of the key held back by its available_at (back-off or a delayed event; rows
-- whose available_at never moved past created_at are never in this index).
CREATE INDEX outbox_events_dispatching_key_idx ON outbox_events (topic, partition_key, seq)
    WHERE status = 'DISPATCHING';
CREATE INDEX outbox_events_delayed_key_idx ON outbox_events (topic, partition_key, seq)
    WHERE status = 'PENDING' AND available_at > created_at;

-- A re-opened event is claimable again: wake the dispatchers as for a released one.
CREATE TRIGGER outbox_events_notify_reopen AFTER UPDATE OF status ON outbox_events FOR EACH ROW
    WHEN (OLD.status = 'FAILURE' AND NEW.status = 'PENDING')
    EXECUTE FUNCTION outbox_events_notify();
