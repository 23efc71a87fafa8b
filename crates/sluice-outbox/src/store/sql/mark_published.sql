-- mark_published: $1 id, $2 'PUBLISHED', $3 partition, $4 offset, $5 accepted sources
-- (DISPATCHING). Same locked compare-and-set as transition.sql; a row in another status,
-- including one already past PUBLISHED, keeps its status and its recorded offset.
WITH locked AS (
    SELECT id, status FROM outbox_events WHERE id = $1 FOR UPDATE
), moved AS (
    UPDATE outbox_events AS e
    SET status = $2, published_partition = $3, published_offset = $4, published_at = now()
    FROM locked
    WHERE e.id = locked.id AND locked.status = ANY($5) AND e.status = ANY($5)
    RETURNING e.id
)
SELECT locked.status, EXISTS (SELECT 1 FROM moved) AS moved FROM locked
