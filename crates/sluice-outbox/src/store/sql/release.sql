-- Compare-and-set for many rows: $1 target status, $2 ids, $3 accepted source statuses.
-- A row in any other status is left alone and not counted.
UPDATE outbox_events
SET status = $1
WHERE id = ANY($2) AND status = ANY($3)
