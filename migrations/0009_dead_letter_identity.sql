-- A dead letter's identity survives the re-creation of its topic.
--
-- The coordinates (topic, partition, kafka_offset) alone are reused when a topic is deleted
-- and created again: a new poison record at an old dead letter's coordinates was dropped by
-- ON CONFLICT DO NOTHING while its offset moved on, so it was stored nowhere. The identity
-- is now the coordinates plus what the record itself carries: its Kafka timestamp and a
-- digest of its key and stored payload. A redelivered record is byte-identical (same
-- timestamp, key and payload), so inserting its dead letter again is still a no-op; a new
-- record at reused coordinates has a new timestamp (and, when a producer sets timestamps
-- explicitly, almost always other bytes) and is kept.
--
-- The digest is a generated column: PostgreSQL computes it for existing rows and for every
-- insert, so it cannot drift from the stored bytes. Lengths are prefixed (-1 for NULL), so
-- key and payload cannot run into each other.
ALTER TABLE dead_letter_events
    ADD COLUMN record_digest BYTEA NOT NULL GENERATED ALWAYS AS (sha256(
        int4send(coalesce(length(key), -1)) || coalesce(key, '\x'::bytea)
        || int4send(coalesce(length(payload), -1)) || coalesce(payload, '\x'::bytea)
    )) STORED;
ALTER TABLE dead_letter_events DROP CONSTRAINT dead_letter_events_coordinates;
-- A record without a timestamp still has one identity: the missing timestamp counts as one
-- value (an expression index rather than NULLS NOT DISTINCT, which needs PostgreSQL 15).
CREATE UNIQUE INDEX dead_letter_events_identity ON dead_letter_events
    (topic, partition, kafka_offset, coalesce(kafka_timestamp, '-infinity'::timestamptz), record_digest);
