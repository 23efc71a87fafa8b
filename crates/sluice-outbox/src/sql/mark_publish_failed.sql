-- mark_publish_failed / requeue: $1 id, $2 dispatcher id, $3 target ('PENDING' or
-- 'FAILURE'), $4 attempts after this failure, $5 back-off in milliseconds, $6 error text.
-- A compare-and-set on this dispatcher's claim: a row recovery already moved (or another
-- dispatcher re-claimed) is left alone and not returned.
UPDATE outbox_events
SET status = $3,
    attempts = $4,
    available_at = now() + make_interval(secs => $5::double precision / 1000.0),
    last_error = $6,
    claimed_by = NULL,
    claimed_at = NULL
WHERE id = $1 AND status = 'DISPATCHING' AND claimed_by = $2
RETURNING status
