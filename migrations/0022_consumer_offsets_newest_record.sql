-- The newest Kafka timestamp of the records below each stored offset (docs/ARCHITECTURE.md#offsets):
-- what tells a topic deleted and created again while the consumer was stopped from the one it
-- read. Every record below a stored offset went through a batch that raised this value to at
-- least its timestamp, so a record below the offset stamped later than it was never read by
-- this group: the log is another one (crates/sluice-storage/src/offsets.rs). NULL: not known
-- (an offset adopted from Kafka, set by `sluice replay`, or stored before this migration).
ALTER TABLE consumer_offsets ADD COLUMN newest_record_ms BIGINT;

-- claim_consumer_offsets (migration 0013) with each partition's newest record timestamp of the
-- batch ($5, NULL for none): raised with the offset, kept as the greatest seen.
DROP FUNCTION claim_consumer_offsets(VARCHAR, TEXT[], INTEGER[], BIGINT[]);

CREATE FUNCTION claim_consumer_offsets(
    claim_group VARCHAR, claim_topics TEXT[], claim_partitions INTEGER[], claim_next BIGINT[],
    claim_newest BIGINT[]
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
                                          newest_record_ms)
            VALUES (claim_group, claim_topics[i], claim_partitions[i], claim_next[i],
                    claim_newest[i])
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
           SET next_offset = GREATEST(o.next_offset, claim_next[i]), updated_at = now(),
               newest_record_ms = GREATEST(o.newest_record_ms, claim_newest[i])
         WHERE o.consumer_group = claim_group AND o.topic = claim_topics[i]
           AND o.partition = claim_partitions[i];
        RETURN NEXT;
    END LOOP;
END $$;
