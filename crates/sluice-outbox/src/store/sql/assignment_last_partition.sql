-- The highest opened partition of a topic and its user count: $1 topic.
SELECT partition, users FROM topic_partition_counts
WHERE topic = $1 ORDER BY partition DESC LIMIT 1
