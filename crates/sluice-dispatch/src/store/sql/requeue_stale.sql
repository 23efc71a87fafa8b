-- requeue_stale: $1 id, $2 the claim token recovery listed, $3 'PENDING', $4 accepted
-- sources (DISPATCHING). Stale recovery's DISPATCHING -> PENDING, only while the row is
-- still held by the claim that was found stale: a row another recovery round already
-- requeued (and a dispatcher maybe re-claimed) is left alone and not returned.
UPDATE outbox_events
SET status = $3, claimed_by = NULL, claimed_at = NULL, claim_id = NULL, updated_at = now()
WHERE id = $1 AND status = ANY($4) AND claim_id IS NOT DISTINCT FROM $2
RETURNING id
