-- The source side the samples were taken from (database dbz_samples on the stack's PostgreSQL
-- 15.18, wal_level=logical), statement by statement, each its own transaction (psql -c).
-- Before the connector started:
CREATE TABLE public.items (
  id bigint PRIMARY KEY,
  title text,
  amount numeric(12,2),
  doc jsonb,
  big text,
  at timestamptz,
  note text NULL,
  day date,
  ts timestamp
);
ALTER TABLE public.items REPLICA IDENTITY DEFAULT;
CREATE PUBLICATION dbz_samples_pub FOR TABLE public.items;
-- 100 md5 hex digests: 3,200 random-looking bytes that pglz does not compress, so the value
-- is stored out of line (pg_column_size(big) = 3200 = octet_length(big))
CREATE FUNCTION big_text(seed text, n int) RETURNS text LANGUAGE sql AS
  $$ SELECT string_agg(md5(seed || i), '' ORDER BY i) FROM generate_series(1, n) i $$;
INSERT INTO items VALUES (1, 'snapshot row', 1234567890.12, '{"a": 1, "b": [true, null, "x"], "n": 1.50}',
  big_text('one', 100), '2026-03-04 05:06:07.123456+02', NULL, '2026-03-04', '2026-03-04 05:06:07.123456');

-- The connector then started (snapshot.mode=initial: record 00 is the snapshot of row 1), and:
INSERT INTO items VALUES (2, 'inserted', -42.50, '{"nested": {"k": "v"}, "list": [1, 2.5, "três"], "big": 12345678901234567890}',
  big_text('two', 100), '2026-07-08 09:10:11.654321+00', 'a note', '1969-12-31', '1969-12-31 23:59:59.999999');
UPDATE items SET title = 'updated, big untouched', amount = 0.05, note = NULL, doc = '[1, {"x": null}]' WHERE id = 2;
UPDATE items SET id = 3, title = 'key changed 2 -> 3' WHERE id = 2;
DELETE FROM items WHERE id = 3;
INSERT INTO items VALUES (3, 're-inserted', 99.99, '{}', big_text('three', 100), '2026-12-31 23:59:59+05:30', NULL, '2026-12-31', '2026-12-31 23:59:59');
UPDATE items SET big = big_text('one-b', 100), title = 'big changed' WHERE id = 1;
