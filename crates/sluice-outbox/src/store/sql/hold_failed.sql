-- hold_failed: $1 id, $2 the work's error. A record whose work failed goes to the consumer's
-- retry tiers or its dead-letter topic: its row becomes UNDER_PROCESSING with the error (when
-- still DISPATCHING, PUBLISHED or CDC), so retention, which purges PUBLISHED rows after
-- OUTBOX_RETENTION_DAYS, never purges an event still to be retried or replayed. A row another
-- consumer moved on meanwhile is left as it is.
UPDATE outbox_events SET status = 'UNDER_PROCESSING', last_error = $2
WHERE id = $1 AND status IN ('DISPATCHING', 'PUBLISHED', 'CDC')
