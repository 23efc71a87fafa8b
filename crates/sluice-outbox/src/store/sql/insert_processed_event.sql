-- process_once by outbox event id: $1 consumer group, $2 event id.
-- No row inserted: the group already processed this event, whatever offset it came at.
INSERT INTO processed_outbox_events (consumer_group, event_id)
VALUES ($1, $2)
ON CONFLICT DO NOTHING
