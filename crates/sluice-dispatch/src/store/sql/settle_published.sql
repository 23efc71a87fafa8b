-- settle_published: $1 claim token, $2 ids, $3 partitions, $4 offsets, $5 'PUBLISHED',
-- $6 accepted sources (DISPATCHING). DISPATCHING -> PUBLISHED for the rows this claim still
-- holds, in one statement; returns the ids that moved. A row requeued, re-claimed (another
-- token), or moved on by a consumer is left alone: the compare is on the status and the
-- claim token together. IS NOT DISTINCT FROM: a row claimed before claim tokens existed has
-- NULL, and stale recovery settles it with NULL. updated_at is set here (no trigger call).
UPDATE outbox_events AS e
SET status = $5, published_partition = a.partition, published_offset = a.kafka_offset,
    published_at = now(), updated_at = now()
FROM unnest($2::uuid[], $3::int[], $4::bigint[]) AS a(id, partition, kafka_offset)
WHERE e.id = a.id AND e.status = ANY($6) AND e.claim_id IS NOT DISTINCT FROM $1
RETURNING e.id
