-- The consumer's read of an outbox row: $1 id. Locks the row until the transaction ends, so
-- two consumers handling the same event take turns and the second sees the first's result.
SELECT status FROM outbox_events WHERE id = $1 FOR UPDATE
