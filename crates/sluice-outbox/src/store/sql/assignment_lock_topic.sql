-- The per-topic allocation lock: $1 namespace, $2 topic. Held until the transaction ends.
SELECT pg_advisory_xact_lock($1, hashtext($2))
