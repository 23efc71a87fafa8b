-- The table a dead letter's record was going to (docs/ARCHITECTURE.md#dead-letters): one sink
-- may write many tables (docs/sinks.md#many-tables, #routes), and an operator of a
-- hundred tables needs to see which one fails. NULL: a record no table was chosen for (a
-- decode error before routing, an unrouted record), and every dead letter recorded before
-- this migration. The name is the sink's, as its metrics label it (`[schema.]table`).
--
-- A nullable column without a default is added without rewriting the table.
ALTER TABLE dead_letter_events ADD COLUMN target_table TEXT;
-- `sluice dlq list --table` and the console's table filter walk one table's dead letters
-- newest first (keyset pages on (recorded_at, id), as migration 0014's indexes do).
CREATE INDEX dead_letter_events_table_recorded_idx
    ON dead_letter_events (target_table, recorded_at, id);
-- The console's pipelines page counts a pipeline's dead letters by table and kind (by its
-- topics, or its group for a pattern sink): from the index alone, not the rows' payloads.
CREATE INDEX dead_letter_events_topic_table_kind_idx
    ON dead_letter_events (topic, target_table, error_kind);
CREATE INDEX dead_letter_events_group_table_kind_idx
    ON dead_letter_events (consumer_group, target_table, error_kind);
