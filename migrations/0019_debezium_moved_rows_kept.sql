-- Key changes replayed (docs/ARCHITECTURE.md#sinks). A source's capture re-sends, after a
-- crash, what its replication slot had not confirmed: a key change's delete and create come
-- a second time, after the first create already read the old row its delete set aside. So a
-- row set aside by a change with an LSN is no longer removed when its create reads it: the
-- create marks it read, and it is removed a day after it was last read (by the writers, with
-- a later key change's create of the table, through the index below). A row no create has
-- read yet stays a week (a create that needed nothing from it never reads it). A replayed
-- delete that finds no row (the first moved it) keeps the image set aside first, and the
-- replayed create reads that same old row. Rows without an LSN (-1) still queue and are
-- taken by their creates.
ALTER TABLE debezium_moved_rows ADD COLUMN read_at TIMESTAMPTZ;
CREATE INDEX debezium_moved_rows_age
    ON debezium_moved_rows (target_table, read_at, moved_at)
    WHERE change_lsn >= 0;
