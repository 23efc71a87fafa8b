-- Dead letters of one batch, in the batch's transaction. The identity is the coordinates,
-- the Kafka timestamp and a digest of key and payload (migration 0009): a redelivered
-- record's dead letter is not inserted twice, and a new record at the coordinates of an old
-- one (its topic was deleted and created again) is kept.
--
-- Headers (migration 0015) arrive as one flat list for the whole batch: $12 the letter each
-- header belongs to (its 1-based position in $1..$11), $13 its name, $14 its value (NULL: a
-- header without a value), in order. They are grouped back per letter in that order; a
-- letter without headers gets empty arrays (NULL is
-- left to rows recorded before the migration, whose headers were not kept).
--
-- $15 is the table each letter's record was going to (migration 0018; NULL: none chosen).
WITH letters AS (
    SELECT * FROM UNNEST(
        $1::varchar[], $2::int[], $3::bigint[], $4::varchar[], $5::bytea[], $6::bytea[],
        $7::int[], $8::timestamptz[], $9::varchar[], $10::text[], $11::int[], $15::text[]
    ) WITH ORDINALITY AS l (
        topic, partition, kafka_offset, consumer_group, key, payload, payload_size,
        kafka_timestamp, error_kind, reason, replay_count, target_table, letter
    )
), headers AS (
    SELECT h.letter,
           array_agg(h.name ORDER BY h.position) AS names,
           array_agg(h.value ORDER BY h.position) AS "values"
    FROM UNNEST($12::bigint[], $13::text[], $14::bytea[]) WITH ORDINALITY
        AS h (letter, name, value, position)
    GROUP BY h.letter
)
INSERT INTO dead_letter_events (
    topic, partition, kafka_offset, consumer_group, key, payload, payload_size,
    kafka_timestamp, error_kind, reason, replay_count, header_names, header_values,
    target_table
)
SELECT l.topic, l.partition, l.kafka_offset, l.consumer_group, l.key, l.payload,
       l.payload_size, l.kafka_timestamp, l.error_kind, l.reason, l.replay_count,
       coalesce(h.names, '{}'), coalesce(h."values", '{}'),
       l.target_table
FROM letters l
LEFT JOIN headers h ON h.letter = l.letter
ORDER BY l.letter
-- The only conflict possible is on dead_letter_events_identity (the id is generated).
ON CONFLICT DO NOTHING
