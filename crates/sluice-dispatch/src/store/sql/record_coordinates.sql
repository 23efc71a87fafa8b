-- record_coordinates: $1 claim token, $2 ids, $3 partitions, $4 offsets. Where a consumer
-- moved a row on (UNDER_PROCESSING, SUCCESS, PUSHED_FAILURE) before this claim's mark, the
-- record's coordinates are still written, once: the status is left as the consumer left it,
-- and a row of another claim, or one that has its coordinates, is not touched.
UPDATE outbox_events AS e
SET published_partition = a.partition, published_offset = a.kafka_offset, published_at = now()
FROM unnest($2::uuid[], $3::int[], $4::bigint[]) AS a(id, partition, kafka_offset)
WHERE e.id = a.id AND e.claim_id IS NOT DISTINCT FROM $1 AND e.published_offset IS NULL
  AND e.status IN ('UNDER_PROCESSING', 'SUCCESS', 'PUSHED_FAILURE')
