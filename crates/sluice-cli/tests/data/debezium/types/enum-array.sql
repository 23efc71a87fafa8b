DROP SCHEMA IF EXISTS dbzenum CASCADE;
CREATE SCHEMA dbzenum;
CREATE TYPE dbzenum.mood AS ENUM ('sad', 'ok', 'happy, very');
CREATE TABLE dbzenum.t (
  id int PRIMARY KEY,
  m dbzenum.mood NOT NULL DEFAULT 'ok',
  mo dbzenum.mood,
  tags text[],
  nums int4[] NOT NULL DEFAULT '{}',
  big int8[],
  ival interval
);
DROP PUBLICATION IF EXISTS dbzenum_pub;
CREATE PUBLICATION dbzenum_pub FOR TABLE dbzenum.t;
-- then, with the connector streaming (connector properties as ../connector-envelope.properties
-- but topic.prefix=dbzenum, slot.name=dbzenum_slot, publication.name=dbzenum_pub,
-- table.include.list=dbzenum.t, snapshot.mode=no_data, database.dbname=sluice):
INSERT INTO dbzenum.t VALUES (1, 'happy, very', NULL, ARRAY['a','b c','"q"',NULL], '{1,2,3}', '{9007199254740993}', '1 day 02:03:04.5');
INSERT INTO dbzenum.t (id) VALUES (2);
