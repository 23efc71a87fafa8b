-- Browsing dead letters page by page (sluice console): keyset pagination walks
-- (recorded_at, id) downwards, for all dead letters or one pipeline's (by topic, or by group
-- for a pattern sink), so a page costs the same on the millionth row as on the first.
-- The composite index replaces the single-column one on recorded_at (its prefix).
CREATE INDEX dead_letter_events_recorded_id_idx ON dead_letter_events (recorded_at, id);
CREATE INDEX dead_letter_events_topic_recorded_idx ON dead_letter_events (topic, recorded_at, id);
CREATE INDEX dead_letter_events_group_recorded_idx
    ON dead_letter_events (consumer_group, recorded_at, id);
DROP INDEX dead_letter_events_recorded_idx;
