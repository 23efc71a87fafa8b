-- claim_state: $1 ids. Where rows a claim could not settle are now: status and token.
SELECT id, status, claim_id FROM outbox_events WHERE id = ANY($1)
