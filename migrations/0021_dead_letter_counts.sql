-- Dead letters counted as they are written (docs/ARCHITECTURE.md#dead-letters): the console's
-- pipelines page shows each pipeline's dead letters by table and kind, and counting a million
-- rows on every load took a quarter of a second and grew with the table. Now the page sums
-- the rows of `dead_letter_counts`, which triggers keep so that
--   SELECT topic, consumer_group, NULLIF(target_table, ''), error_kind, sum(n)
--   FROM dead_letter_counts GROUP BY 1, 2, 3, 4
-- equals the same count of `dead_letter_events` in every snapshot: each change of the dead
-- letters (insert, delete, an update of a counted column, truncate) adds its tally in the
-- same transaction.
--
-- Tallies are only appended (a statement's dead letters per key, or minus its deleted ones)
-- and folded, never updated in place, and a fold takes only the tallies no one else holds
-- (SKIP LOCKED). So counting never makes a transaction wait: two writers, a writer setting a
-- held row of another partition aside, an operator's open DELETE. `id` gives the table a
-- replica identity, so a publication of every table does not refuse the folds.
CREATE TABLE dead_letter_counts (
    id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    topic          VARCHAR(249) NOT NULL,
    consumer_group VARCHAR(255) NOT NULL,
    -- '' for a dead letter without a table (NULL there): a key of equal parts, which an
    -- index finds whole. No table is named ''.
    target_table   TEXT NOT NULL,
    error_kind     VARCHAR(64) NOT NULL,
    n              BIGINT NOT NULL
);
-- A pipeline is found by its topics, or by its group for a pattern sink; a fold finds a key's
-- tallies by either. Both hold the whole key: until autovacuum first analyses a new counts
-- table the planner may take either for a key's probe, and with the group alone it read every
-- tally of the group for each key (measured: a 500-key batch took 100-340 ms, growing,
-- against 9 ms).
CREATE INDEX dead_letter_counts_topic_idx
    ON dead_letter_counts (topic, consumer_group, target_table, error_kind);
CREATE INDEX dead_letter_counts_group_idx
    ON dead_letter_counts (consumer_group, topic, target_table, error_kind);

-- The trigger functions run as the tables' owner (SECURITY DEFINER), so a role that may
-- write, replay or delete dead letters needs no rights on the counts; with a fixed
-- search_path, and the counts table named in the schema of the dead letters that fired them
-- (TG_TABLE_SCHEMA), so no caller's search_path or temporary table can redirect them.
--
-- After its tally a statement folds the tallies of each key it touched into one once the key
-- has more than 16 (a probe of at most 17 index entries per key): a few rows per key however
-- many statements, with no reader doing it, and a fold rewrites one key's few rows, never a
-- topic's. A transaction under REPEATABLE READ or SERIALIZABLE only appends: SKIP LOCKED
-- there fails on a tally another fold took since its snapshot.
CREATE FUNCTION dead_letter_counts_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    counts text := format('%I.dead_letter_counts', TG_TABLE_SCHEMA);
    changed text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        changed := 'SELECT topic, consumer_group, coalesce(target_table, '''') AS target_table,
                           error_kind, 1 AS d
                    FROM added';
    ELSIF TG_OP = 'DELETE' THEN
        changed := 'SELECT topic, consumer_group, coalesce(target_table, '''') AS target_table,
                           error_kind, -1 AS d
                    FROM removed';
    ELSE
        -- An update moves a row from its old key to its new one; a replay's bookkeeping
        -- (replay_count, replayed_at) changes no key and adds nothing.
        changed := 'SELECT topic, consumer_group, coalesce(target_table, '''') AS target_table,
                           error_kind, 1 AS d
                    FROM added
                    UNION ALL
                    SELECT topic, consumer_group, coalesce(target_table, ''''), error_kind, -1
                    FROM removed';
    END IF;
    EXECUTE format(
        'INSERT INTO %s (topic, consumer_group, target_table, error_kind, n)
         SELECT topic, consumer_group, target_table, error_kind, sum(d)
         FROM (%s) AS changed GROUP BY 1, 2, 3, 4 HAVING sum(d) <> 0', counts, changed);
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN NULL;
    END IF;
    EXECUTE format(
        'WITH keys AS (
             SELECT DISTINCT topic, consumer_group, target_table, error_kind FROM (%2$s) AS c
         ), crowded AS (
             SELECT k.* FROM keys AS k
             WHERE (SELECT count(*) FROM (
                        SELECT 1 FROM %1$s AS t
                        WHERE t.topic = k.topic AND t.consumer_group = k.consumer_group
                          AND t.target_table = k.target_table AND t.error_kind = k.error_kind
                        LIMIT 17) AS probe) > 16
         ), taken AS (
             DELETE FROM %1$s
             WHERE id = ANY(ARRAY(
                 SELECT t.id FROM %1$s AS t JOIN crowded AS k
                     ON t.topic = k.topic AND t.consumer_group = k.consumer_group
                    AND t.target_table = k.target_table AND t.error_kind = k.error_kind
                 FOR UPDATE OF t SKIP LOCKED))
             RETURNING topic, consumer_group, target_table, error_kind, n
         )
         INSERT INTO %1$s (topic, consumer_group, target_table, error_kind, n)
         SELECT topic, consumer_group, target_table, error_kind, sum(n)
         FROM taken GROUP BY 1, 2, 3, 4 HAVING sum(n) <> 0', counts, changed);
    RETURN NULL;
END
$$;

-- DELETE, not TRUNCATE: it needs no lock a reader of the counts holds. No fold can run
-- beside it: a fold is part of a statement on the dead letters, which TRUNCATE locks out.
CREATE FUNCTION dead_letter_counts_truncated() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    EXECUTE format('DELETE FROM %I.dead_letter_counts', TG_TABLE_SCHEMA);
    RETURN NULL;
END
$$;

-- Counts again from the dead letters: after a data-only restore made without
-- --disable-triggers (it counts the restored dead letters twice) or an edit with the triggers
-- disabled. It locks out writers of dead letters while it counts; run it alone (two
-- recounts in transactions that have written dead letters would deadlock upgrading locks).
CREATE FUNCTION dead_letter_counts_recount() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    LOCK TABLE dead_letter_events IN SHARE ROW EXCLUSIVE MODE;
    DELETE FROM dead_letter_counts;
    INSERT INTO dead_letter_counts (topic, consumer_group, target_table, error_kind, n)
    SELECT topic, consumer_group, coalesce(target_table, ''), error_kind, count(*)
    FROM dead_letter_events GROUP BY 1, 2, 3, 4;
END
$$;
-- The recount reads and writes the tables of the schema it is created in, whatever the
-- caller's search_path.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION dead_letter_counts_recount() SET search_path = %I, pg_temp',
                   current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION dead_letter_counts_changed() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dead_letter_counts_truncated() FROM PUBLIC;

-- Creating the triggers locks out writers of dead letters until this migration commits, so
-- the count below starts from exactly the rows the triggers will not see.
CREATE TRIGGER dead_letter_counts_inserted AFTER INSERT ON dead_letter_events
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION dead_letter_counts_changed();
CREATE TRIGGER dead_letter_counts_deleted AFTER DELETE ON dead_letter_events
    REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION dead_letter_counts_changed();
CREATE TRIGGER dead_letter_counts_updated AFTER UPDATE ON dead_letter_events
    REFERENCING OLD TABLE AS removed NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION dead_letter_counts_changed();
CREATE TRIGGER dead_letter_counts_truncated AFTER TRUNCATE ON dead_letter_events
    FOR EACH STATEMENT EXECUTE FUNCTION dead_letter_counts_truncated();

INSERT INTO dead_letter_counts (topic, consumer_group, target_table, error_kind, n)
SELECT topic, consumer_group, coalesce(target_table, ''), error_kind, count(*)
FROM dead_letter_events GROUP BY 1, 2, 3, 4;
