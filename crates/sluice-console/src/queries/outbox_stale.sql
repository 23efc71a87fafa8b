-- DISPATCHING rows claimed more than $1 seconds ago (outbox_events_dispatching_claimed_idx).
SELECT id, topic, partition_key, event_type, attempts, last_error, claimed_by, claimed_at,
       updated_at
FROM outbox_events
WHERE status = 'DISPATCHING' AND claimed_at < now() - make_interval(secs => $1)
ORDER BY claimed_at
LIMIT $2
