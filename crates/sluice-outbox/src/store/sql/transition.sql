-- Compare-and-set for one row: $1 id, $2 target status, $3 accepted source statuses.
-- The row is locked first, so the status returned is the one the decision was made on
-- (the newest committed one), also when a concurrent change made the move miss.
-- No row: no such event. moved = false: the row was in `status` and is unchanged.
WITH locked AS (
    SELECT id, status FROM outbox_events WHERE id = $1 FOR UPDATE
), moved AS (
    UPDATE outbox_events AS e
    SET status = $2
    FROM locked
    WHERE e.id = locked.id AND locked.status = ANY($3) AND e.status = ANY($3)
    RETURNING e.id
)
SELECT locked.status, EXISTS (SELECT 1 FROM moved) AS moved FROM locked
