-- One statement per batch. Natural key (application_id, crawled_at): DO NOTHING (docs/ARCHITECTURE.md#tables).
-- histogram arrives as one JSON array per row (NULL allowed): UNNEST cannot carry a
-- ragged array of arrays, so each row's array is rebuilt in order from its JSON.
INSERT INTO app_stats (
    application_id, crawled_at, title, score, ratings, reviews_count, installs_min,
    installs_real, histogram, price, free, version, updated_at
)
SELECT application_id, crawled_at, title, score, ratings, reviews_count, installs_min,
       installs_real,
       CASE WHEN histogram IS NULL THEN NULL ELSE ARRAY(
           SELECT e.value::bigint FROM jsonb_array_elements_text(histogram) WITH ORDINALITY AS e(value, n)
           ORDER BY e.n) END,
       price, free, version, updated_at
FROM UNNEST(
    $1::bigint[], $2::timestamptz[], $3::varchar[], $4::float8[], $5::bigint[], $6::bigint[],
    $7::bigint[], $8::bigint[], $9::jsonb[], $10::float8[], $11::bool[], $12::varchar[],
    $13::timestamptz[]
) AS t(application_id, crawled_at, title, score, ratings, reviews_count, installs_min,
       installs_real, histogram, price, free, version, updated_at)
ON CONFLICT (application_id, crawled_at) DO NOTHING
RETURNING TRUE AS inserted
