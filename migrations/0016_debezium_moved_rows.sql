-- Key changes of Debezium sinks (docs/ARCHITECTURE.md#sinks): the delete of a row whose key
-- changed (`d` with `__debezium.newkey`) deletes the old row and sets it aside here, as
-- to_jsonb, under its table, old key, new key and the change's LSN (source.lsn, which the two
-- events share; -1 without one), in the same transaction. The create of the
-- new key (`c` with `__debezium.oldkey`) reads from it the values it keeps (an unchanged
-- TOASTed value Debezium did not send) and removes it, whichever batch it comes in. A row is
-- left here only when the create never came (it was dead-lettered) or came first (another
-- partition) and read the old row itself; with an LSN no other change reads it (moved_at
-- says how old).
CREATE TABLE debezium_moved_rows (
    target_table TEXT        NOT NULL,
    old_key      JSONB       NOT NULL,
    new_key      JSONB       NOT NULL,
    change_lsn   BIGINT      NOT NULL,
    image        JSONB       NOT NULL,
    moved_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    seq          BIGINT      GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (target_table, old_key, new_key, change_lsn, seq)
);
-- A change with an LSN has one set-aside row (its delete, applied again by a replay, replaces
-- it). Changes without one (-1: a source with no integer LSN, such as Debezium's MySQL, SQL
-- Server and Oracle connectors) queue up by seq: their deletes come in the old key's
-- partition order and their creates in the new key's, so a create takes the oldest.
CREATE UNIQUE INDEX debezium_moved_rows_change
    ON debezium_moved_rows (target_table, old_key, new_key, change_lsn)
    WHERE change_lsn >= 0;
