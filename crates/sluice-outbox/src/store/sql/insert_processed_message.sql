-- process_once by Kafka coordinates: $1 consumer group, $2 topic, $3 partition, $4 offset.
-- No row inserted: the group already processed this record (or a concurrent transaction
-- holding the same key committed first; the insert waits for it).
INSERT INTO processed_kafka_messages (consumer_group, topic, partition, kafka_offset)
VALUES ($1, $2, $3, $4)
ON CONFLICT DO NOTHING
