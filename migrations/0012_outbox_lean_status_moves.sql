-- Cheaper status moves on the dispatcher's hot path (0005-0011 are applied and never edited).
--
-- Every status move is an update PostgreSQL cannot do in place ("HOT"), because `status`
-- is in the predicate of the partial indexes: the new row version gets an entry in every
-- index whose predicate it matches, and the BEFORE UPDATE trigger ran a PL/pgSQL function
-- per row. Measured per event before this file: the claim (PENDING -> DISPATCHING) wrote
-- four index entries, the mark (DISPATCHING -> PUBLISHED) two, each after a PL/pgSQL call.
--
-- 1. The claim writes two index entries instead of four.
--    - The claim's final per-key check only needs earlier PENDING rows of the key (an earlier
--      DISPATCHING row is already excluded by the candidates' check against
--      outbox_events_dispatching_key_idx, under the same snapshot), so it probes a PENDING-only
--      index, which a row leaves at its claim, instead of one that a claimed row enters again.
--    - Stale dispatch recovery lists the DISPATCHING rows from outbox_events_dispatching_key_idx
--      (it holds only in-flight rows; recovery sorts them by claimed_at) instead of an index of
--      its own that every claim wrote to.
CREATE INDEX outbox_events_pending_key_idx ON outbox_events (topic, partition_key, seq)
    WHERE status = 'PENDING';
DROP INDEX outbox_events_in_flight_key_idx;
DROP INDEX outbox_events_dispatching_claimed_idx;

-- 2. The state machine as a trigger condition: a legal move (and an update that keeps the
--    status) is checked in the trigger's WHEN clause, without calling any function; only an
--    illegal one calls outbox_events_reject_transition, which raises. The edges are those of
--    sluice_core::outbox::EDGES, unchanged from 0011 (sluice-outbox's tests compare them).
DROP TRIGGER outbox_events_before_update ON outbox_events;
DROP FUNCTION outbox_events_before_update();

CREATE FUNCTION outbox_events_reject_transition() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'illegal outbox status transition % -> % (event %)',
            OLD.status, NEW.status, OLD.id
        USING ERRCODE = 'check_violation',
              CONSTRAINT = 'outbox_events_status_transition',
              HINT = 'status changes go through the outbox transition helper (docs/ARCHITECTURE.md#outbox)';
END
$$;

CREATE TRIGGER outbox_events_status_transition BEFORE UPDATE OF status ON outbox_events
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status AND NOT CASE OLD.status
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
        END)
    EXECUTE FUNCTION outbox_events_reject_transition();

-- 3. updated_at: every update still refreshes it unless the update sets it itself; the
--    dispatcher's statements set it, so they skip the function call.
CREATE FUNCTION outbox_events_touch() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END
$$;

CREATE TRIGGER outbox_events_touch BEFORE UPDATE ON outbox_events FOR EACH ROW
    WHEN (OLD.updated_at IS NOT DISTINCT FROM NEW.updated_at)
    EXECUTE FUNCTION outbox_events_touch();
