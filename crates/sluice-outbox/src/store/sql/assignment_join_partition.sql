-- One more user in an opened partition: $1 topic, $2 partition.
UPDATE topic_partition_counts SET users = users + 1
WHERE topic = $1 AND partition = $2
