-- outbox_status: $1 stale age in seconds. Counts per status, the oldest due PENDING row's
-- age, and how many DISPATCHING rows are older than the stale timeout.
SELECT
    (SELECT coalesce(jsonb_object_agg(status, n), '{}'::jsonb)
     FROM (SELECT status, count(*) AS n FROM outbox_events GROUP BY status) AS c) AS counts,
    (SELECT extract(epoch FROM now() - min(available_at))::double precision
     FROM outbox_events WHERE status = 'PENDING' AND available_at <= now()) AS oldest_pending_seconds,
    (SELECT count(*) FROM outbox_events
     WHERE status = 'DISPATCHING'
       AND claimed_at < now() - make_interval(secs => $1::double precision)) AS stuck_dispatching
