-- purge_expired: $1 age in seconds, $2 batch size. Deletes one batch of SUCCESS and
-- (untracked) PUBLISHED and CDC rows last changed before the cut-off; FAILURE and
-- PUSHED_FAILURE rows are kept until an operator acts. Walks outbox_events_retention_idx.
DELETE FROM outbox_events
WHERE id IN (
    SELECT id FROM outbox_events
    WHERE status IN ('SUCCESS', 'PUBLISHED', 'CDC')
      AND updated_at < now() - make_interval(secs => $1::double precision)
    LIMIT $2
)
