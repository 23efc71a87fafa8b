DROP SCHEMA IF EXISTS dbzt2 CASCADE;
CREATE SCHEMA dbzt2;
CREATE TYPE dbzt2.mood AS ENUM ('sad', 'happy');
ALTER TYPE dbzt2.mood ADD VALUE 'ok' BEFORE 'happy';
CREATE TABLE dbzt2.t (
  id int PRIMARY KEY, b16 bit(16), b4 bit(4), vb varbit, mon money, ttz timetz, pt point, tv tsvector, o oid,
  md int4[], mdt text[], e dbzt2.mood, u uuid[], n numeric(6,2)[], d date[], ts timestamptz[], js jsonb[],
  by bytea[], tsn timestamp(3)[], ti time[], nv numeric[], ch "char"[], bl bool[], f8 float8[]
);
CREATE TABLE dbzt2.toast (id int PRIMARY KEY, big_tags text[], big_nums int4[], note text);
ALTER TABLE dbzt2.toast ALTER COLUMN big_tags SET STORAGE EXTERNAL, ALTER COLUMN big_nums SET STORAGE EXTERNAL;
DROP PUBLICATION IF EXISTS dbzt2_pub;
CREATE PUBLICATION dbzt2_pub FOR TABLE dbzt2.t, dbzt2.toast;
-- then, with the connector streaming (as enum-array.sql's, topic.prefix=dbzt2, table.include.list=dbzt2\..*):
INSERT INTO dbzt2.t VALUES (1, B'0000000000000001', B'0000', B'', -0.01, '00:00:00+14', '(-0,3.25)', 'a:1 b:2', 4294967295,
  '{{1,2},{3,4}}', '{{a,b},{c,d}}', 'ok', '{}', ARRAY[NULL, 0.01]::numeric(6,2)[], ARRAY['infinity'::date], ARRAY['2026-03-04 05:06:07.5+02'::timestamptz],
  ARRAY['[1, 2]'::jsonb, NULL], ARRAY['\x'::bytea], ARRAY['2026-01-01 00:00:00.123'::timestamp(3)], ARRAY['23:59:59.999999'::time], ARRAY[1.5, -2, 0.000]::numeric[], ARRAY['x'::"char"], ARRAY[true, NULL], ARRAY[1.5e300, -0.1]);
INSERT INTO dbzt2.t (id, mon, e) VALUES (2, 92233720368547758.07, 'happy');
INSERT INTO dbzt2.toast SELECT 1, array_agg(md5(g::text)), array_agg(g), 'first' FROM generate_series(1, 600) g;
UPDATE dbzt2.toast SET note = 'second' WHERE id = 1;
ALTER TABLE dbzt2.t ADD COLUMN sd date, ADD COLUMN sd2 date, ADD COLUMN sts timestamp, ADD COLUMN sts2 timestamp, ADD COLUMN stz timestamptz, ADD COLUMN stz2 timestamptz, ADD COLUMN sts3 timestamp(3);
INSERT INTO dbzt2.t (id, sd, sd2, sts, sts2, stz, stz2, sts3, d, ts, tsn) VALUES (3, 'infinity', '-infinity', 'infinity', '-infinity', 'infinity', '-infinity', 'infinity', ARRAY['-infinity'::date], ARRAY['infinity'::timestamptz, '-infinity'], ARRAY['-infinity'::timestamp(3)]);
