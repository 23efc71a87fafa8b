-- A dead letter keeps its record's Kafka headers (docs/ARCHITECTURE.md#dead-letters), so a
-- replay re-publishes them: a sink column read from a header, and a Debezium key change's
-- `__debezium.oldkey`, need them to apply the replayed record as the original would have been.
--
-- Two parallel arrays, element i of each being the record's i-th header: the order is kept,
-- a name may repeat, a header without a value is a NULL element of header_values, and the
-- values are bytea, so any bytes (not UTF-8, NUL) are kept exactly without an encoding of
-- our own. Header names are text: a Kafka header name is a string (librdkafka hands it out
-- as a C string, so it holds no NUL).
--
-- Dead letters recorded before this migration had their headers dropped: both columns are
-- NULL there ("not kept", shown as such), and such a row replays as before, with no headers
-- but the replay count. Every later row has both arrays, empty for a record without headers.
--
-- The CHECK is added NOT VALID and validated apart: adding it valid would scan a large
-- table under the ACCESS EXCLUSIVE lock of the ALTER, while VALIDATE scans under a lock that
-- lets the storage consumer go on inserting.
ALTER TABLE dead_letter_events
    ADD COLUMN header_names TEXT[],
    ADD COLUMN header_values BYTEA[],
    ADD CONSTRAINT dead_letter_events_headers_paired CHECK (
        (header_names IS NULL AND header_values IS NULL)
        OR (cardinality(header_names) = cardinality(header_values)
            AND array_position(header_names, NULL) IS NULL)
    ) NOT VALID;
ALTER TABLE dead_letter_events VALIDATE CONSTRAINT dead_letter_events_headers_paired;
