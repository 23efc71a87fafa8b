-- mark_published_batch: $1 ids, $2 partitions, $3 offsets, $4 'PUBLISHED', $5 accepted
-- sources (DISPATCHING). The compare-and-set of mark_published.sql for a whole batch in one
-- statement; returns the ids that moved. A row in another status is left as it is (the
-- caller decides about it row by row with mark_published).
UPDATE outbox_events AS e
SET status = $4, published_partition = a.partition, published_offset = a.kafka_offset,
    published_at = now()
FROM unnest($1::uuid[], $2::int[], $3::bigint[]) AS a(id, partition, kafka_offset)
WHERE e.id = a.id AND e.status = ANY($5)
RETURNING e.id
