-- mark_publish_failed / requeue: $1 id, $2 claim token, $3 target ('PENDING' or 'FAILURE'),
-- $4 attempts after this failure, $5 back-off in milliseconds, $6 error text.
-- A compare-and-set on this claim (status and token together): a row recovery already
-- moved, or another dispatcher re-claimed, is left alone and not returned.
UPDATE outbox_events
SET status = $3,
    attempts = $4,
    available_at = now() + make_interval(secs => $5::double precision / 1000.0),
    last_error = $6,
    claimed_by = NULL,
    claimed_at = NULL,
    claim_id = NULL,
    updated_at = now()
WHERE id = $1 AND status = 'DISPATCHING' AND claim_id IS NOT DISTINCT FROM $2
RETURNING status
