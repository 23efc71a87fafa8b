-- Idempotent processing (docs/ARCHITECTURE.md#idempotent-processing): a consumer's transaction inserts its processed row here
-- together with its own effects, so a record redelivered to the same group finds the row
-- (a key conflict) and is not processed again. See crates/sluice-outbox/src/process_once.rs.

-- The seed's contract: one row per Kafka record a group processed, keyed by its coordinates.
-- VARCHAR(249) is Kafka's longest topic name.
CREATE TABLE processed_kafka_messages (
    consumer_group VARCHAR(255) NOT NULL,
    topic          VARCHAR(249) NOT NULL,
    partition      INTEGER      NOT NULL,
    kafka_offset   BIGINT       NOT NULL,
    processed_at   TIMESTAMPTZ  NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, topic, partition, kafka_offset)
);

-- An addition to the seed's contract: one row per outbox event a group processed, keyed by
-- the event id the dispatcher sends in a header. A re-published event (stale-dispatch
-- recovery, an operator's retry) arrives at another offset but with the same id, so this key
-- survives re-publication where the coordinates do not.
CREATE TABLE processed_outbox_events (
    consumer_group VARCHAR(255) NOT NULL,
    event_id       UUID         NOT NULL,
    processed_at   TIMESTAMPTZ  NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, event_id)
);
