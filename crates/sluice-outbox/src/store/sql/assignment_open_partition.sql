-- A partition opened with its first user: $1 topic, $2 partition.
INSERT INTO topic_partition_counts (topic, partition, users) VALUES ($1, $2, 1)
