-- One outbox event, in the caller's transaction. The status is PENDING, PREQUEUED or CDC
-- (the table's trigger rejects anything else); a missing available_at means "now".
INSERT INTO outbox_events (
    id, aggregate_type, aggregate_id, event_type, topic, partition_key, partition,
    payload, headers, status, available_at
)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, COALESCE($11, now()))
