-- A user's assigned partition: $1 topic, $2 user id.
SELECT partition FROM user_partition_assignments WHERE topic = $1 AND user_id = $2
