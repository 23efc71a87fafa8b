-- Key changes across partitions (docs/ARCHITECTURE.md#sinks). The create of a key change
-- (`c` with `__debezium.oldkey`) that keeps a value Debezium did not send (an unchanged
-- TOASTed value) needs the old row as its delete found it. When the new key's partition is
-- applied before the old key's, the delete has not come yet: the create waits here, and every
-- later row of its key waits behind it, in order, until the delete comes and applies them in
-- its own transaction.
--
-- A delete of a key change now always leaves its mark in debezium_moved_rows, with the old
-- row as it deleted it, or NULL when it found none (a newer row under newest-wins, or a row
-- that was never stored): a create that comes after its delete never waits.
ALTER TABLE debezium_moved_rows ALTER COLUMN image DROP NOT NULL;

CREATE TABLE debezium_held_rows (
    target_table  TEXT        NOT NULL,
    -- The key of the row it writes, as jsonb_build_array of the key columns.
    row_key       JSONB       NOT NULL,
    -- A key change's create: the old key and the change's LSN (-1 without one) of the delete
    -- whose set-aside row it reads. NULL: any other row, which waits only for those before it.
    waits_old_key JSONB,
    waits_lsn     BIGINT,
    -- The decoded row (cells, operation, kept columns, key change) and its record (to be
    -- dead-lettered if it can never be applied), as sluice wrote them.
    row_data      JSONB       NOT NULL,
    held_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- A row that cannot be applied when its turn comes (the delete came and neither it nor
    -- the table had the old row) is dead-lettered with its record and removed; set only for a
    -- row held without its record (a caller of the library that gave none): kept here for
    -- the operator, and the rows behind it go on.
    orphaned_at   TIMESTAMPTZ,
    orphan_reason TEXT,
    seq           BIGINT      GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (target_table, row_key, seq)
);
