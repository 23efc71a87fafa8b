-- claim_batch: $1 dispatcher id, $2 batch size, $3 this claim's token (claim_id, fresh per
-- call; every later move of these rows compares it), $4 the batch's bytes, $5 the floor (the
-- seq from which the scan looks for due events; 0 for all). PENDING -> DISPATCHING for up to
-- $2 due events, in seq order, in ONE statement; FOR UPDATE SKIP LOCKED: no event is claimed
-- twice.
--
-- The floor (crates/sluice-dispatch/src/floor.rs) spares the scan the index entries that
-- earlier claims left behind below it (a status move is never HOT, so each claimed row leaves
-- a dead entry in outbox_events_pending_seq_idx until vacuum: after a drain of 500,000
-- events a claim from seq 0 passes all of them). The floor only narrows where candidates
-- are looked for: the checks of per-key order below never use it, so a PENDING row below
-- the floor is late (claimed by the next claim from 0), never overtaken by a later event of
-- its key. Each claim returns what the dispatcher needs to move its floor safely: `low`, the
-- lowest PENDING seq from $5 due within ten minutes (a back-off keeps the floor below its
-- row; a longer delay does not hold it) under this statement's snapshot, that snapshot's
-- xmin and xmax, and `blocked_from`, the lowest earlier row that kept a candidate from being
-- claimed (one below the floor lowers it).
--
-- Bounded in bytes as well (docs/ARCHITECTURE.md#memory): the claim stops before the event
-- that would take its payloads and headers past $4 bytes, counted as stored
-- (pg_column_size: compressed when PostgreSQL compressed them; read from the row, never
-- decompressed); the first event is always taken, so an event larger than $4 is a claim of
-- its own, never a stall. `cut` tells the dispatcher that events were left out for the
-- bytes (a backlog, even though fewer than $2 were claimed).
--
-- Per-key order across dispatchers: an event is claimed only if its (topic, partition_key)
-- has no event DISPATCHING at all, and no earlier event PENDING outside this claim (not due,
-- beyond the limit or the bytes, or locked by a concurrent claim). So one key is in flight at one
-- dispatcher at a time, and a claim holds a key's events as a prefix in seq order.
-- `candidates` already skips keys that are in flight or blocked by a not-due row (so they do
-- not fill the batch); the final check catches the earlier PENDING rows that are not part
-- of this claim (one a concurrent claim holds locked, or one cut by the limit or the bytes). Both run
-- under the statement's one snapshot, so an earlier row is either DISPATCHING there
-- (excluded by `candidates`) or PENDING (caught by the final check, even when a concurrent
-- claim has moved it since). The final check probes outbox_events_pending_key_idx, once
-- for each of at most $2 rows.
--
-- updated_at is set here, so the touch trigger (migration 0012) has nothing to do.
WITH candidates AS MATERIALIZED (
    SELECT e.id, e.topic, e.partition_key, e.seq,
           pg_column_size(e.payload) + pg_column_size(e.headers) AS bytes
    FROM outbox_events AS e
    WHERE e.status = 'PENDING'
      AND e.seq >= $5
      AND e.available_at <= now()
      -- No event of the key in flight. The keys in flight (the rows DISPATCHING: a few
      -- batches per dispatcher, read once from outbox_events_dispatching_key_idx) are
      -- hashed once per claim, so that each PENDING row the scan passes costs a hash lookup:
      -- while a backlog lasts most keys are in flight and the scan passes many of their
      -- rows before it finds $2 free ones (an index probe per row instead, as an anti-join
      -- plans it, measured 0.6× the events/s of three dispatchers). The planner hashes a
      -- `NOT IN (subquery)` only while its row estimate fits in work_mem ×
      -- hash_mem_multiplier, and otherwise re-reads the whole set for every row the scan
      -- passes (measured: 7 s for one claim with 50,000 keys in flight and work_mem
      -- 64kB). So the set is collected into an array (an InitPlan, run once) and unnested:
      -- the planner estimates an unnested array at 100 rows whatever it holds, so it always
      -- hashes it, and a hashed subplan holds every row it is given. A key is
      -- `topic/partition_key`: a topic name never holds a `/`, and neither column is NULL.
      AND e.topic || '/' || e.partition_key NOT IN (
          SELECT unnest(ARRAY(
              SELECT o.topic || '/' || o.partition_key FROM outbox_events AS o
              WHERE o.status = 'DISPATCHING'
          ))
      )
      -- No earlier row of the key waiting for its back-off (or enqueued with a later
      -- available_at): outbox_events_delayed_key_idx holds only such rows. A correlated
      -- subquery with LIMIT, not NOT EXISTS: it stays one probe of that index per row the
      -- scan passes. As an anti-join, with statistics taken while few rows were delayed, the
      -- planner read every delayed row into a Materialize and compared each passing row
      -- with all of them (measured: 9.5 s for one claim with 20,000 rows delayed).
      AND (SELECT 1 FROM outbox_events AS o
           WHERE o.status = 'PENDING' AND o.available_at > o.created_at
             AND o.topic = e.topic AND o.partition_key = e.partition_key AND o.seq < e.seq
             AND o.available_at > now()
           LIMIT 1) IS NULL
    ORDER BY e.seq
    LIMIT $2
    FOR UPDATE SKIP LOCKED
),
-- The candidates within the byte budget: a prefix in seq order (the running sum only grows,
-- so once one event is left out every later one is too).
within AS MATERIALIZED (
    SELECT s.id, s.topic, s.partition_key, s.seq
    FROM (
        SELECT c.id, c.topic, c.partition_key, c.seq, c.bytes,
               sum(c.bytes) OVER (ORDER BY c.seq) AS upto,
               row_number() OVER (ORDER BY c.seq) AS n
        FROM candidates AS c
    ) AS s
    WHERE s.n = 1 OR s.upto <= $4
),
-- The final per-key check: the lowest earlier PENDING row of the candidate's key outside this
-- claim, if any (NULL: the candidate is claimed). A correlated subquery with LIMIT, not NOT
-- EXISTS: it stays one index probe per candidate, where the planner could turn an anti-join
-- into a scan of the whole table.
checked AS MATERIALIZED (
    SELECT c.id,
           (SELECT o.seq FROM outbox_events AS o
            WHERE o.status = 'PENDING'
              AND o.topic = c.topic AND o.partition_key = c.partition_key AND o.seq < c.seq
              AND o.id NOT IN (SELECT id FROM within)
            ORDER BY o.topic, o.partition_key, o.seq
            LIMIT 1) AS blocker
    FROM within AS c
)
UPDATE outbox_events AS e
SET status = 'DISPATCHING', claimed_by = $1, claimed_at = now(), claim_id = $3,
    updated_at = now()
FROM checked AS c
WHERE e.id = c.id AND c.blocker IS NULL
RETURNING e.id, e.seq, e.aggregate_type, e.aggregate_id, e.event_type, e.topic,
          e.partition_key, e.partition, e.payload, e.headers, e.attempts, e.claim_id, e.created_at,
          (SELECT count(*) FROM candidates) > (SELECT count(*) FROM within) AS cut,
          (SELECT min(o.seq) FROM outbox_events AS o
           WHERE o.status = 'PENDING' AND o.seq >= $5
             AND o.available_at <= now() + interval '10 minutes') AS low,
          (SELECT min(blocker) FROM checked) AS blocked_from,
          pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS snapshot_xmin,
          pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS snapshot_xmax
