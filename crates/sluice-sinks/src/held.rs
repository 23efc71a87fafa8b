//! The statements of held rows: a key change's create that keeps a value Debezium did not
//! send waits until its delete has set the old row aside, and every later row of its key
//! waits behind it (docs/ARCHITECTURE.md#sinks, migrations/0017_debezium_held_rows.sql).
//!
//! In one partition a key change's delete always comes before its create; across partitions
//! the new key's partition may be applied first. Waiting keeps the one-by-one effect: the
//! create reads the old row exactly as its delete found it, and nothing of the new key is
//! applied before the create.

use super::names::quote_ident;
use super::statement::{MOVED_ROWS, StatementColumn, array_params_from, aside_match};
use serde::Serialize;

/// Where rows wait (migrations/0017_debezium_held_rows.sql).
pub const HELD_ROWS: &str = "debezium_held_rows";

/// The statements of a sink whose key changes may keep values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeldStatements {
    /// Which of a slice's rows must wait: one array per key column (each row's own key), the
    /// `bool[]` of the creates that read a set-aside row, one array per key column of their
    /// old keys, their LSNs, the rows' numbers, then the seconds a create waits; returns the
    /// numbers of the rows that wait, and -1 when a create somewhere waited longer.
    pub check: String,
    /// Puts rows to wait, in order: the check's arrays, with the rows' data (`jsonb[]`) in
    /// place of their numbers; returns their `seq`.
    pub hold: String,
    /// Locks keys (one array per key column) for the transaction and returns each as rows wait
    /// under it (`jsonb`): a writer that puts rows to wait under a key and one that applies
    /// them take it first, so that the second sees what the first committed.
    pub key: String,
}

/// The first row waiting under a key (`$1` table, `$2` key as the text of its `jsonb`, `$3`
/// the seconds a create waits): its `seq`, whether it still waits for its delete, and its data.
/// A key is carried as text between the statements, never as a `serde_json::Value`: that
/// would round a numeric key past a double's precision, and no row would match it.
pub const NEXT_HELD: &str = "SELECT h.seq, h.waits_old_key IS NOT NULL AND NOT EXISTS \
     (SELECT 1 FROM debezium_moved_rows AS m WHERE m.target_table = h.target_table \
     AND m.old_key = h.waits_old_key AND m.new_key = h.row_key \
     AND m.change_lsn = h.waits_lsn) AND h.held_at > now() - $3 * interval '1 second' AS waits, \
     h.row_data FROM debezium_held_rows AS h WHERE h.target_table = $1 AND h.row_key = $2::jsonb \
     AND h.orphaned_at IS NULL ORDER BY h.seq LIMIT 1";

/// The keys (as text) whose first row is a create that waited longer than it may (`$1` table,
/// `$2` the seconds a create waits).
pub const EXPIRED_HELD: &str = "SELECT DISTINCT h.row_key::text FROM debezium_held_rows AS h \
     WHERE h.target_table = $1 AND h.orphaned_at IS NULL AND h.waits_old_key IS NOT NULL \
     AND h.held_at <= now() - $2 * interval '1 second'";

/// Locks a key as [`HeldStatements::key`] does (`$1` table, `$2` key as the text of its `jsonb`).
pub const LOCK_HELD: &str = "SELECT pg_advisory_xact_lock(hashtextextended('debezium_held_rows ' \
     || $1 || ' ' || $2::jsonb::text, 0))";

/// Removes a row that waited (`$1` table, `$2` key as text, `$3` seq).
pub const TAKE_HELD: &str = "DELETE FROM debezium_held_rows WHERE target_table = $1 \
     AND row_key = $2::jsonb AND seq = $3";

/// Marks a row that waited as one that cannot be applied (`$4` the reason): the rows behind it
/// go on.
pub const ORPHAN_HELD: &str = "UPDATE debezium_held_rows SET orphaned_at = now(), \
     orphan_reason = $4 WHERE target_table = $1 AND row_key = $2::jsonb AND seq = $3";

/// The statements of `table` with key columns `key`.
pub fn held_statements(table: &str, key: &[StatementColumn<'_>]) -> HeldStatements {
    let literal = table.replace('\'', "''");
    let own: Vec<String> = (0..key.len()).map(|i| format!("r.\"key {i}\"")).collect();
    let old: Vec<String> = (0..key.len()).map(|i| format!("r.\"old {i}\"")).collect();
    let mut params = array_params_from(1, key.iter());
    params.push(format!("${}::bool[]", params.len() + 1));
    params.extend(array_params_from(params.len() + 1, key.iter()));
    params.push(format!("${}::bigint[]", params.len() + 1));
    let aliases: Vec<String> = own
        .iter()
        .map(|k| k.trim_start_matches("r.").to_owned())
        .chain([quote_ident("sluice waits")])
        .chain(old.iter().map(|o| o.trim_start_matches("r.").to_owned()))
        .chain([quote_ident("sluice lsn")])
        .collect();
    let waiting_key = format!(
        "EXISTS (SELECT 1 FROM {HELD_ROWS} AS h WHERE h.target_table = '{literal}' \
         AND h.row_key = jsonb_build_array({}) AND h.orphaned_at IS NULL)",
        own.join(", ")
    );
    let no_delete_yet = format!(
        "(r.\"sluice waits\" AND NOT EXISTS (SELECT 1 FROM {MOVED_ROWS} AS m WHERE {}))",
        aside_match(table, &old, &own, "r.\"sluice lsn\"")
    );
    let numbered = |last: &str, alias: &str| {
        let mut params = params.clone();
        params.push(format!("${}::{last}[]", params.len() + 1));
        let mut aliases = aliases.clone();
        aliases.push(quote_ident(alias));
        (params.join(", "), aliases.join(", "))
    };
    let (check_params, check_aliases) = numbered("int", "sluice row");
    let wait = params.len() + 2;
    let check = format!(
        "SELECT r.\"sluice row\" FROM UNNEST({check_params}) AS r({check_aliases})\n\
         WHERE {waiting_key}\n   OR {no_delete_yet}\n\
         UNION ALL SELECT -1 WHERE EXISTS (SELECT 1 FROM {HELD_ROWS} AS h \
         WHERE h.target_table = '{literal}' AND h.orphaned_at IS NULL \
         AND h.waits_old_key IS NOT NULL AND h.held_at <= now() - ${wait}::float8 * interval '1 second')"
    );
    let (hold_params, hold_aliases) = numbered("jsonb", "sluice data");
    let hold = format!(
        "INSERT INTO {HELD_ROWS} (target_table, row_key, waits_old_key, waits_lsn, row_data)\n\
         SELECT '{literal}', jsonb_build_array({}), \
         CASE WHEN r.\"sluice waits\" THEN jsonb_build_array({}) END, \
         CASE WHEN r.\"sluice waits\" THEN coalesce(r.\"sluice lsn\", -1) END, r.\"sluice data\"\n\
         FROM UNNEST({hold_params}) WITH ORDINALITY AS r({hold_aliases}, n)\nORDER BY r.n\n\
         RETURNING seq",
        own.join(", "),
        old.join(", "),
    );
    let key_params = array_params_from(1, key.iter()).join(", ");
    let key_aliases = own
        .iter()
        .map(|k| k.trim_start_matches("r.").to_owned())
        .collect::<Vec<_>>()
        .join(", ");
    // The lock of a key serializes a writer holding rows under it with one applying them:
    // whichever comes second sees what the first committed (docs/ARCHITECTURE.md#sinks).
    let key = format!(
        "SELECT jsonb_build_array({own})::text FROM UNNEST({key_params}) AS r({key_aliases}), \
         LATERAL (SELECT pg_advisory_xact_lock(hashtextextended('{HELD_ROWS} {literal} ' \
         || jsonb_build_array({own})::text, 0))) AS l",
        own = own.join(", "),
    );
    HeldStatements { check, hold, key }
}

#[cfg(test)]
mod tests {
    use super::held_statements;
    use crate::statement::StatementColumn;
    use crate::table::SqlType;

    #[test]
    fn a_row_waits_behind_its_key_or_for_its_delete() {
        let int = SqlType::Integer;
        let id = StatementColumn {
            name: "id",
            sql_type: &int,
            updated: false,
            nullable: false,
            keepable: false,
        };
        let held = held_statements("t", &[id]);
        assert_eq!(
            held.check,
            "SELECT r.\"sluice row\" FROM UNNEST($1::int[], $2::bool[], $3::int[], $4::bigint[], \
             $5::int[]) AS r(\"key 0\", \"sluice waits\", \"old 0\", \"sluice lsn\", \"sluice row\")\n\
             WHERE EXISTS (SELECT 1 FROM debezium_held_rows AS h WHERE h.target_table = 't' \
             AND h.row_key = jsonb_build_array(r.\"key 0\") AND h.orphaned_at IS NULL)\n   \
             OR (r.\"sluice waits\" AND NOT EXISTS (SELECT 1 FROM debezium_moved_rows AS m \
             WHERE m.target_table = 't' AND m.old_key = jsonb_build_array(r.\"old 0\") \
             AND m.new_key = jsonb_build_array(r.\"key 0\") \
             AND m.change_lsn = coalesce(r.\"sluice lsn\", -1)))\n\
             UNION ALL SELECT -1 WHERE EXISTS (SELECT 1 FROM debezium_held_rows AS h \
             WHERE h.target_table = 't' AND h.orphaned_at IS NULL \
             AND h.waits_old_key IS NOT NULL AND h.held_at <= now() - $6::float8 * interval '1 second')"
        );
        assert!(
            held.hold.contains("$5::jsonb[]) WITH ORDINALITY"),
            "{}",
            held.hold
        );
        assert_eq!(
            held.key,
            "SELECT jsonb_build_array(r.\"key 0\")::text FROM UNNEST($1::int[]) AS r(\"key 0\"), \
             LATERAL (SELECT pg_advisory_xact_lock(hashtextextended('debezium_held_rows t ' \
             || jsonb_build_array(r.\"key 0\")::text, 0))) AS l"
        );
    }
}
