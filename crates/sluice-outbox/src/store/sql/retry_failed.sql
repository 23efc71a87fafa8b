-- retry_failed: $1 'PENDING', $2 accepted sources ('FAILURE'), $3 ids or NULL for all.
-- The operator's re-open: attempts start again, claimable at once; last_error is kept.
UPDATE outbox_events
SET status = $1, attempts = 0, available_at = now(), claimed_by = NULL, claimed_at = NULL
WHERE status = ANY($2) AND ($3::uuid[] IS NULL OR id = ANY($3))
