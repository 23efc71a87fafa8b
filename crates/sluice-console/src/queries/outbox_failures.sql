-- FAILURE rows, newest first (a FAILURE row is terminal, so few and rarely many).
SELECT id, topic, partition_key, event_type, attempts, last_error, claimed_by, claimed_at,
       updated_at
FROM outbox_events
WHERE status = 'FAILURE'
ORDER BY updated_at DESC
LIMIT $1
