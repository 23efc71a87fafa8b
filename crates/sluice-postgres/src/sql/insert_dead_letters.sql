-- Dead letters of one batch, in the batch's transaction (SPEC S4.5). The coordinates are
-- the identity: a redelivered dead letter is not inserted twice.
INSERT INTO dead_letter_events (
    topic, partition, kafka_offset, consumer_group, key, payload, payload_size,
    kafka_timestamp, error_kind, reason, replay_count
)
SELECT * FROM UNNEST(
    $1::varchar[], $2::int[], $3::bigint[], $4::varchar[], $5::bytea[], $6::bytea[], $7::int[],
    $8::timestamptz[], $9::varchar[], $10::text[], $11::int[]
)
ON CONFLICT (topic, partition, kafka_offset) DO NOTHING
