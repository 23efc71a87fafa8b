-- stale_dispatches: $1 age in seconds, $2 limit. DISPATCHING rows claimed before the
-- cut-off, oldest claim first, with the claim token each is held by: recovery's later moves
-- compare it. Read from outbox_events_dispatching_key_idx, which holds only the rows in
-- flight (a few batches per dispatcher), and sorted: no index of its own for every claim
-- to write to (migration 0012).
SELECT id, topic, partition, claim_id,
       (extract(epoch FROM claimed_at) * 1000)::bigint AS claimed_at_ms
FROM outbox_events
WHERE status = 'DISPATCHING'
  AND claimed_at < now() - make_interval(secs => $1::double precision)
ORDER BY claimed_at
LIMIT $2
