-- The Kafka timestamp of the record just below each stored offset (docs/ARCHITECTURE.md#offsets):
-- what tells a topic deleted and created again while the consumer was stopped from the one it
-- read. The record at next_offset - 1 is the last one the batch that stored the offset read;
-- a record at that offset now stamped otherwise is another log's
-- (crates/sluice-storage/src/offsets.rs). NULL: not known (an offset adopted from Kafka, set
-- by `sluice replay`, stored before this migration or by an older sluice, or a record without
-- a timestamp).
ALTER TABLE consumer_offsets ADD COLUMN last_record_ms BIGINT;

-- claim_consumer_offsets (migration 0013) with the timestamp of each partition's last record
-- in the batch ($5, NULL for none): stored with the offset whenever the batch's offset is the
-- one stored.
CREATE FUNCTION claim_consumer_offsets(
    claim_group VARCHAR, claim_topics TEXT[], claim_partitions INTEGER[], claim_next BIGINT[],
    claim_last_ms BIGINT[]
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
            INSERT INTO consumer_offsets (consumer_group, topic, partition, next_offset,
                                          last_record_ms)
            VALUES (claim_group, claim_topics[i], claim_partitions[i], claim_next[i],
                    claim_last_ms[i])
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
        -- On the right of SET, o.next_offset is the value before this UPDATE.
        UPDATE consumer_offsets o
           SET next_offset = GREATEST(o.next_offset, claim_next[i]), updated_at = now(),
               last_record_ms = CASE WHEN claim_next[i] >= o.next_offset
                                     THEN claim_last_ms[i] ELSE o.last_record_ms END
         WHERE o.consumer_group = claim_group AND o.topic = claim_topics[i]
           AND o.partition = claim_partitions[i];
        RETURN NEXT;
    END LOOP;
END $$;

-- The four-argument claim of an older sluice still running beside a newer one (a rolling
-- upgrade): its offsets move with no timestamp known.
CREATE OR REPLACE FUNCTION claim_consumer_offsets(
    claim_group VARCHAR, claim_topics TEXT[], claim_partitions INTEGER[], claim_next BIGINT[]
) RETURNS TABLE (claimed_topic TEXT, claimed_partition INTEGER, before_offset BIGINT)
LANGUAGE sql AS $$
    SELECT * FROM claim_consumer_offsets(
        claim_group, claim_topics, claim_partitions, claim_next,
        array_fill(NULL::BIGINT, ARRAY[coalesce(array_length(claim_topics, 1), 0)]));
$$;
