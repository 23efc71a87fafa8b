-- Exactly once (docs/ARCHITECTURE.md#offsets): the storage consumer stores, per consumer
-- group, topic and partition, the next offset to read, in the same transaction as the batch
-- those offsets cover. PostgreSQL's copy is the one that counts: a partition is assigned at
-- this offset, and a record below it is never applied again. Kafka's committed offsets still
-- follow (lag tools and alerts read them), but only for information.
CREATE TABLE consumer_offsets (
    consumer_group VARCHAR(255) NOT NULL,
    topic          VARCHAR(249) NOT NULL,
    partition      INTEGER      NOT NULL CHECK (partition >= 0),
    next_offset    BIGINT       NOT NULL CHECK (next_offset >= 0),
    updated_at     TIMESTAMPTZ  NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, topic, partition)
);

-- The groups whose offsets live in consumer_offsets. A group is adopted once, at its first
-- start with this table, by copying Kafka's committed offsets (an upgrade resumes where it
-- was); from then on a partition without a row has never been stored, whatever Kafka says.
CREATE TABLE consumer_offset_groups (
    consumer_group VARCHAR(255) PRIMARY KEY,
    adopted_at     TIMESTAMPTZ  NOT NULL DEFAULT now()
);

-- A batch's first statement, in the batch's transaction (crates/sluice-postgres/src/offsets.rs):
-- for each of its partitions, lock the group's row (waiting for a concurrent owner's COMMIT),
-- return the next offset stored before this batch (NULL: none), and raise it to the batch's
-- own next offset. One round trip; statement by statement, so each lock is taken before its
-- row is read and a row created meanwhile by another transaction is seen.
CREATE FUNCTION claim_consumer_offsets(
    claim_group VARCHAR, claim_topics TEXT[], claim_partitions INTEGER[], claim_next BIGINT[]
) RETURNS TABLE (claimed_topic TEXT, claimed_partition INTEGER, before_offset BIGINT)
LANGUAGE plpgsql AS $$
DECLARE
    i INTEGER;
BEGIN
    FOR i IN 1 .. coalesce(array_length(claim_topics, 1), 0) LOOP
        claimed_topic := claim_topics[i];
        claimed_partition := claim_partitions[i];
        SELECT o.next_offset INTO before_offset FROM consumer_offsets o
         WHERE o.consumer_group = claim_group AND o.topic = claim_topics[i]
           AND o.partition = claim_partitions[i]
           FOR UPDATE;
        IF NOT FOUND THEN
            INSERT INTO consumer_offsets (consumer_group, topic, partition, next_offset)
            VALUES (claim_group, claim_topics[i], claim_partitions[i], claim_next[i])
            ON CONFLICT DO NOTHING;
            IF FOUND THEN
                before_offset := NULL;
                RETURN NEXT;
                CONTINUE;
            END IF;
            -- Created by a concurrent transaction, committed now: lock and read it.
            SELECT o.next_offset INTO before_offset FROM consumer_offsets o
             WHERE o.consumer_group = claim_group AND o.topic = claim_topics[i]
               AND o.partition = claim_partitions[i]
               FOR UPDATE;
        END IF;
        UPDATE consumer_offsets o
           SET next_offset = GREATEST(o.next_offset, claim_next[i]), updated_at = now()
         WHERE o.consumer_group = claim_group AND o.topic = claim_topics[i]
           AND o.partition = claim_partitions[i];
        RETURN NEXT;
    END LOOP;
END $$;
