-- Key changes replayed (docs/ARCHITECTURE.md#sinks). A source's capture re-sends, after a
-- crash, what its replication slot had not confirmed: a key change's delete and create come
-- a second time, after the first create already read the old row its delete set aside. So a
-- row set aside by a change with an LSN is no longer removed when its create reads it: it is
-- kept for a day after its delete was last applied, and the replayed create reads the same
-- old row. A replayed delete keeps the image the first one set aside (the old key may hold a
-- newer row by then). Rows without an LSN (-1) still queue and are taken by their creates.
-- The writers remove a table's expired rows with its key changes, through this index.
CREATE INDEX debezium_moved_rows_age
    ON debezium_moved_rows (target_table, moved_at)
    WHERE change_lsn >= 0;
