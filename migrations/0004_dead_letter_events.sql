-- dead_letter_events: records that can never be stored (docs/ARCHITECTURE.md#dead-letters).
-- Natural key (topic, partition, kafka_offset): replaying a partition must not multiply rows.
CREATE TABLE dead_letter_events (
    id              BIGSERIAL PRIMARY KEY,
    topic           VARCHAR(249) NOT NULL,
    partition       INTEGER NOT NULL,
    kafka_offset    BIGINT NOT NULL,
    consumer_group  VARCHAR(255) NOT NULL,
    key             BYTEA,
    payload         BYTEA,
    payload_size    INTEGER NOT NULL,
    kafka_timestamp TIMESTAMPTZ,
    error_kind      VARCHAR(64) NOT NULL,
    reason          TEXT NOT NULL,
    recorded_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    replay_count    INTEGER NOT NULL DEFAULT 0,
    replayed_at     TIMESTAMPTZ,
    CONSTRAINT dead_letter_events_coordinates UNIQUE (topic, partition, kafka_offset)
);
-- Operators filter by kind and time (sluice dlq list).
CREATE INDEX dead_letter_events_kind_recorded_idx ON dead_letter_events (error_kind, recorded_at);
CREATE INDEX dead_letter_events_recorded_idx ON dead_letter_events (recorded_at);
