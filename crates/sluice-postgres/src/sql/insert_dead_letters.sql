-- Dead letters of one batch, in the batch's transaction. The identity is the coordinates,
-- the Kafka timestamp and a digest of key and payload (migration 0009): a redelivered
-- record's dead letter is not inserted twice, and a new record at the coordinates of an old
-- one (its topic was deleted and created again) is kept.
INSERT INTO dead_letter_events (
    topic, partition, kafka_offset, consumer_group, key, payload, payload_size,
    kafka_timestamp, error_kind, reason, replay_count
)
SELECT * FROM UNNEST(
    $1::varchar[], $2::int[], $3::bigint[], $4::varchar[], $5::bytea[], $6::bytea[], $7::int[],
    $8::timestamptz[], $9::varchar[], $10::text[], $11::int[]
)
-- The only conflict possible is on dead_letter_events_identity (the id is generated).
ON CONFLICT DO NOTHING
