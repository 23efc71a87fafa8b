-- claim_batch: $1 dispatcher id, $2 batch size, $3 this claim's token (claim_id, fresh per
-- call; every later move of these rows compares it). PENDING -> DISPATCHING for up to $2 due
-- events, in seq order, in ONE statement; FOR UPDATE SKIP LOCKED: no event is claimed twice.
--
-- Per-key order across dispatchers: an event is claimed only if no earlier event of its
-- (topic, partition_key) is still in flight outside this claim, i.e. DISPATCHING, or PENDING
-- and not part of this claim (not due, beyond the limit, or locked by a concurrent claim).
-- So one key is in flight at one dispatcher at a time, and a claim holds a key's events as
-- a prefix in seq order. `candidates` already skips keys blocked by a DISPATCHING or not-due
-- row (so they do not fill the batch); the final check catches the earlier PENDING rows
-- that are not part of this claim (one a concurrent claim holds locked, or one cut by the
-- limit). Both run under the statement's one snapshot, so an earlier row is either
-- DISPATCHING there (excluded by `candidates`) or PENDING (caught by the final check, even
-- when a concurrent claim has moved it since). The final check probes
-- outbox_events_pending_key_idx, for at most $2 rows.
--
-- updated_at is set here, so the touch trigger (migration 0012) has nothing to do.
WITH candidates AS MATERIALIZED (
    SELECT e.id, e.topic, e.partition_key, e.seq
    FROM outbox_events AS e
    WHERE e.status = 'PENDING'
      AND e.available_at <= now()
      -- The nearest earlier DISPATCHING row of the key, found by a backward scan of
      -- outbox_events_dispatching_key_idx: one step when the key is in flight, however many
      -- dead index entries the key's published rows left behind.
      AND (SELECT o.seq FROM outbox_events AS o
           WHERE o.status = 'DISPATCHING'
             AND o.topic = e.topic AND o.partition_key = e.partition_key AND o.seq < e.seq
           ORDER BY o.seq DESC LIMIT 1) IS NULL
      -- An earlier row of the key that is waiting for its back-off (or was enqueued with a
      -- later available_at): outbox_events_delayed_key_idx holds only such rows.
      AND NOT EXISTS (
          SELECT 1 FROM outbox_events AS o
          WHERE o.status = 'PENDING' AND o.available_at > o.created_at
            AND o.topic = e.topic AND o.partition_key = e.partition_key AND o.seq < e.seq
            AND o.available_at > now()
      )
    ORDER BY e.seq
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE outbox_events AS e
SET status = 'DISPATCHING', claimed_by = $1, claimed_at = now(), claim_id = $3,
    updated_at = now()
FROM candidates AS c
WHERE e.id = c.id
  AND NOT EXISTS (
      SELECT 1 FROM outbox_events AS o
      WHERE o.status = 'PENDING'
        AND o.topic = c.topic AND o.partition_key = c.partition_key AND o.seq < c.seq
        AND o.id NOT IN (SELECT id FROM candidates)
  )
RETURNING e.id, e.seq, e.aggregate_type, e.aggregate_id, e.event_type, e.topic,
          e.partition_key, e.partition, e.payload, e.headers, e.attempts, e.claim_id, e.created_at
