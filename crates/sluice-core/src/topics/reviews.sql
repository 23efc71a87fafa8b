-- One statement per batch, with the monotonic guard of docs/ARCHITECTURE.md#tables: an older message never
-- overwrites a newer row. first_seen_at and sentiment are never written here.
-- RETURNING (xmax = 0) tells inserted (true) from updated (false); rows not returned were
-- skipped by the guard.
INSERT INTO reviews (
    review_id, application_id, user_name, score, content, thumbs_up_count, app_version,
    reviewed_at, reply_content, replied_at, last_synced_at
)
SELECT * FROM UNNEST(
    $1::varchar[], $2::bigint[], $3::varchar[], $4::smallint[], $5::text[], $6::int[],
    $7::varchar[], $8::timestamptz[], $9::text[], $10::timestamptz[], $11::timestamptz[]
)
ON CONFLICT (review_id) DO UPDATE SET
    thumbs_up_count = EXCLUDED.thumbs_up_count,
    score           = EXCLUDED.score,
    content         = EXCLUDED.content,
    user_name       = EXCLUDED.user_name,
    app_version     = EXCLUDED.app_version,
    reply_content   = EXCLUDED.reply_content,
    replied_at      = EXCLUDED.replied_at,
    last_synced_at  = EXCLUDED.last_synced_at
WHERE EXCLUDED.last_synced_at > reviews.last_synced_at
RETURNING (xmax = 0) AS inserted
