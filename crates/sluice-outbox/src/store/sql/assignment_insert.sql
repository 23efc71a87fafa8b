-- A user's partition, recorded once: $1 topic, $2 user id, $3 partition.
INSERT INTO user_partition_assignments (topic, user_id, partition) VALUES ($1, $2, $3)
