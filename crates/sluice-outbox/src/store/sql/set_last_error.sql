-- set_last_error: $1 id, $2 the reason (a consumer's rejection), kept on the row.
UPDATE outbox_events SET last_error = $2 WHERE id = $1
