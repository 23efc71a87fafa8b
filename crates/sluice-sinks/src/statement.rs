//! The one statement of a declared sink, built from its validated columns.
//!
//! `INSERT … SELECT … FROM UNNEST($1::type[], …) ON CONFLICT (key)` and then `DO NOTHING`
//! (insert-ignore), `DO UPDATE SET` every mapped column that is neither a key nor insert-only
//! (always-update), plus `WHERE EXCLUDED.guard > target.guard` (newest-wins: an older version
//! never overwrites a newer row, and a tie keeps the row stored first). A nullable guard
//! column holds the oldest version when NULL: `OR (target.guard IS NULL AND EXCLUDED.guard IS
//! NOT NULL)` — any value replaces a stored NULL, a NULL never replaces a value. It returns one
//! boolean per row written: true inserted, false updated; a row not returned was skipped.
//!
//! Inserted or updated is `xmax = 0` of the row written — except on a partitioned table, whose
//! parent cannot return a system column: there the batch's rows go through a CTE, and a row is
//! updated when its key was in the table in the statement's snapshot (read through the key's
//! index). A row another transaction inserts meanwhile is counted as inserted; what is stored is
//! the same either way.

use super::model::ConflictPolicy;
use super::names::{quote_ident, quote_table};
use super::table::SqlType;

/// A column of the statement, in parameter order.
#[derive(Debug, Clone, Copy)]
pub struct StatementColumn<'a> {
    /// The column.
    pub name: &'a str,
    /// Its type (an array is carried as `jsonb` and rebuilt in order).
    pub sql_type: &'a SqlType,
    /// Whether a conflicting row gets this column's new value.
    pub updated: bool,
    /// Whether the column may hold NULL (for the newest-wins column: NULL is the oldest).
    pub nullable: bool,
    /// Whether a row may leave it as it is (a Debezium sink's value column: a TOASTed value
    /// an update did not change): a `bool[]` parameter says which rows do.
    pub keepable: bool,
}

/// The upsert of one batch. Every name is quoted ([`quote_ident`]): a column may be a
/// reserved word (`order`) or hold capitals or spaces; the target is aliased `target`, so the
/// guard never depends on the table's own name.
pub fn upsert_statement(
    table: &str,
    columns: &[StatementColumn<'_>],
    key: &[String],
    conflict: &ConflictPolicy,
    partitioned: bool,
) -> String {
    let list = columns
        .iter()
        .map(|c| quote_ident(c.name))
        .collect::<Vec<_>>()
        .join(", ");
    let kept: Vec<&StatementColumn<'_>> = columns.iter().filter(|c| c.keepable).collect();
    let mut params = array_params(columns.iter());
    params.extend((0..kept.len()).map(|i| format!("${}::bool[]", columns.len() + i + 1)));
    // Where a kept value is read: the row's own key, or the old key of a row whose key
    // changed (`"sluice from <i>"`, one per key column).
    let from: Vec<String> = if kept.is_empty() {
        Vec::new()
    } else {
        key.iter()
            .enumerate()
            .map(|(i, k)| {
                let param = columns
                    .iter()
                    .find(|c| c.name == k)
                    .and_then(|c| c.sql_type.param_type())
                    .unwrap_or("text");
                params.push(format!("${}::{param}[]", params.len() + 1));
                format!("sluice from {i}")
            })
            .collect()
    };
    if !kept.is_empty() {
        params.push(format!("${}::bool[]", params.len() + 1));
        params.push(format!("${}::bigint[]", params.len() + 1));
    }
    let stored_key = key
        .iter()
        .zip(&from)
        .map(|(k, from)| {
            let nullable = columns.iter().any(|c| c.name == k && c.nullable);
            key_match(
                &format!("x.{}", quote_ident(k)),
                &format!("t.{}", quote_ident(from)),
                nullable,
            )
        })
        .collect::<Vec<_>>()
        .join(" AND ");
    // A key change's old row as its delete set it aside (under the old and the new key).
    let aside = aside_match(
        table,
        &from
            .iter()
            .map(|f| format!("t.{}", quote_ident(f)))
            .collect::<Vec<_>>(),
        &key.iter()
            .map(|k| format!("t.{}", quote_ident(k)))
            .collect::<Vec<_>>(),
        &format!("t.{}", quote_ident(CHANGE)),
    );
    let selected: Vec<String> = columns
        .iter()
        .map(|c| match kept.iter().position(|k| k.name == c.name) {
            // Whether the row exists decides, not its value: a stored NULL is kept as NULL.
            // A key change reads the old row its delete set aside first: the old key may
            // hold a newer row by now (a re-insert applied before the change's create). A
            // delete that found no row left NULL there: the value is nowhere (a re-insert of
            // the old key is not the old row). Without the delete's mark (a create that did not
            // wait for it), the old key's row as it is.
            Some(i) => format!(
                "CASE WHEN NOT t.{flag} THEN {expression} \
                 WHEN t.{moved} AND (SELECT m.image IS NOT NULL FROM {MOVED_ROWS} AS m \
                 WHERE {aside} ORDER BY m.seq LIMIT 1) \
                 THEN (SELECT (jsonb_populate_record(NULL::{table}, m.image)).{name} \
                 FROM {MOVED_ROWS} AS m WHERE {aside} ORDER BY m.seq LIMIT 1) \
                 WHEN t.{moved} AND EXISTS (SELECT 1 FROM {MOVED_ROWS} AS m WHERE {aside}) \
                 THEN {gone} \
                 WHEN EXISTS (SELECT 1 FROM {table} AS x WHERE {stored_key}) \
                 THEN (SELECT x.{name} FROM {table} AS x WHERE {stored_key}) \
                 ELSE {gone} END",
                gone = format!(
                    "(SELECT x.{name} FROM (SELECT 1) AS one LEFT JOIN {table} AS x ON false \
                     WHERE CAST({missing} AS int) IS NULL)",
                    name = quote_ident(c.name),
                    table = quote_table(table),
                    missing = missing_kept_value(c.name, &from),
                ),
                flag = quote_ident(&keep_flag(i)),
                moved = quote_ident(MOVED),
                name = quote_ident(c.name),
                table = quote_table(table),
                expression = select_expression(c),
            ),
            None => select_expression(c),
        })
        .collect();
    // A row that keeps a value no stored row holds changes nothing: the row was deleted by a
    // newer change already applied (from another partition, or before a replay), so the
    // older change has nothing left to update.
    // A row whose key changed is never dropped so: when its old row is gone, what it keeps
    // cannot be had, and the row fails (a dead letter saying so) rather than vanish.
    let filter = if kept.is_empty() {
        String::new()
    } else {
        format!(
            "\nWHERE NOT ({}) OR t.{moved} OR EXISTS (SELECT 1 FROM {} AS x WHERE {stored_key})",
            (0..kept.len())
                .map(|i| format!("t.{}", quote_ident(&keep_flag(i))))
                .collect::<Vec<_>>()
                .join(" OR "),
            quote_table(table),
            moved = quote_ident(MOVED),
        )
    };
    let aliases = columns
        .iter()
        .map(|c| quote_ident(c.name))
        .chain((0..kept.len()).map(|i| quote_ident(&keep_flag(i))))
        .chain(from.iter().map(|f| quote_ident(f)))
        .chain((!kept.is_empty()).then(|| quote_ident(MOVED)))
        .chain((!kept.is_empty()).then(|| quote_ident(CHANGE)))
        .collect::<Vec<_>>()
        .join(", ");
    let key_columns = key;
    let key = key
        .iter()
        .map(|k| quote_ident(k))
        .collect::<Vec<_>>()
        .join(", ");
    let updates = !matches!(conflict, ConflictPolicy::InsertIgnore);
    let mut sql = if partitioned && updates {
        format!(
            "WITH t AS (SELECT * FROM UNNEST({params}) AS t({aliases})),\n\
             existing AS (SELECT {key} FROM {table} WHERE ({key}) IN (SELECT {key} FROM t))\n\
             INSERT INTO {table} AS target ({list})\nSELECT {selected}\nFROM t{filter}\n\
             ON CONFLICT ({key})",
            table = quote_table(table),
            selected = selected.join(", "),
            params = params.join(", "),
        )
    } else {
        format!(
            "INSERT INTO {} AS target ({list})\nSELECT {}\nFROM UNNEST({}) AS t({aliases}){filter}\n\
             ON CONFLICT ({key})",
            quote_table(table),
            selected.join(", "),
            params.join(", "),
        )
    };
    let set: Vec<String> = columns
        .iter()
        .filter(|c| c.updated)
        .map(|c| format!("{0} = EXCLUDED.{0}", quote_ident(c.name)))
        .collect();
    match conflict {
        ConflictPolicy::InsertIgnore => {
            sql.push_str(" DO NOTHING\nRETURNING TRUE AS inserted");
        }
        ConflictPolicy::AlwaysUpdate | ConflictPolicy::NewestWins { .. } => {
            sql.push_str(" DO UPDATE SET\n    ");
            sql.push_str(&set.join(",\n    "));
            if let ConflictPolicy::NewestWins { column } = conflict {
                let guard = quote_ident(column);
                sql.push_str(&format!("\nWHERE EXCLUDED.{guard} > target.{guard}"));
                // NULL is the oldest version: any value replaces it, it replaces none.
                if columns.iter().any(|c| c.name == column && c.nullable) {
                    sql.push_str(&format!(
                        "\n   OR (target.{guard} IS NULL AND EXCLUDED.{guard} IS NOT NULL)"
                    ));
                }
            }
            if partitioned {
                let qualified = |alias: &str| {
                    key_columns
                        .iter()
                        .map(|k| format!("{alias}.{}", quote_ident(k)))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                sql.push_str(&format!(
                    "\nRETURNING NOT EXISTS (SELECT 1 FROM existing AS e WHERE ({}) = ({})) AS inserted",
                    qualified("e"),
                    qualified("target"),
                ));
            } else {
                sql.push_str("\nRETURNING (xmax = 0) AS inserted");
            }
        }
    }
    sql
}

/// The `bool[]` parameter saying which rows changed their key (a `moved_from`).
const MOVED: &str = "sluice moved";

/// The `bigint[]` parameter of each row's key change LSN (a `moved_from`'s).
const CHANGE: &str = "sluice change";

/// Where the delete of a key change sets the old row aside for the new key's create
/// (migrations/0016_debezium_moved_rows.sql).
pub const MOVED_ROWS: &str = "debezium_moved_rows";

/// The set-aside row (`m`) of `table` under the old key `old` and the new key `new` (SQL
/// expressions, in key order, of the key columns' types) by the change at LSN `lsn` (none:
/// -1): the change's own, never another's between the same keys.
pub(super) fn aside_match(table: &str, old: &[String], new: &[String], lsn: &str) -> String {
    format!(
        "m.target_table = '{}' AND m.old_key = jsonb_build_array({}) \
         AND m.new_key = jsonb_build_array({}) AND m.change_lsn = coalesce({lsn}, -1)",
        table.replace('\'', "''"),
        old.join(", "),
        new.join(", "),
    )
}

/// The removal of what key changes' deletes set aside, once their creates have read it:
/// one array per key column for the old keys, then one per key column for the new keys, then
/// the changes' LSNs.
pub fn consume_moved_statement(table: &str, key: &[StatementColumn<'_>]) -> String {
    let mut params = array_params(key.iter());
    push_new_keys_and_lsns(&mut params, key);
    let old: Vec<String> = (0..key.len()).map(|i| format!("c.\"old {i}\"")).collect();
    let new: Vec<String> = (0..key.len()).map(|i| format!("c.\"new {i}\"")).collect();
    let aliases: Vec<String> = old
        .iter()
        .chain(&new)
        .map(|a| a.trim_start_matches("c.").to_owned())
        .chain([quote_ident("lsn")])
        .collect();
    // The oldest set aside for the change: one per change with an LSN; without one (-1) the
    // changes between the same keys queue up, their deletes in the old key's partition order
    // and their creates in the new key's, so the oldest is this create's. A create without an
    // LSN that finds none (it did not wait for its delete: its wait ran out, or it never
    // waits) leaves a mark that its row was taken (-2), which its delete, when it comes,
    // removes instead of queueing a row no create would take but the next change's.
    format!(
        "WITH c AS (SELECT * FROM UNNEST({params}) WITH ORDINALITY AS c({aliases}, n)),\n\
         consumed AS (DELETE FROM {MOVED_ROWS} AS m USING c WHERE {aside}\n\
         AND m.seq = (SELECT min(m.seq) FROM {MOVED_ROWS} AS m WHERE {aside}) RETURNING c.n)\n\
         INSERT INTO {MOVED_ROWS} (target_table, old_key, new_key, change_lsn, image)\n\
         SELECT '{literal}', jsonb_build_array({old}), jsonb_build_array({new}), -2, NULL FROM c\n\
         WHERE c.\"lsn\" IS NULL AND c.n NOT IN (SELECT x.n FROM consumed AS x)",
        params = params.join(", "),
        aliases = aliases.join(", "),
        aside = aside_match(table, &old, &new, "c.\"lsn\""),
        literal = table.replace('\'', "''"),
        old = old.join(", "),
        new = new.join(", "),
    )
}

/// A text naming a kept column whose old row is gone (a key change whose old key's delete
/// was applied first): cast to `int`, it fails the row's statement with it, so the row is
/// dead-lettered with this reason instead of storing NULL for a value Debezium did not send.
/// (It reads the row's key, so PostgreSQL cannot evaluate it before it is needed.)
fn missing_kept_value(column: &str, from: &[String]) -> String {
    let key = from
        .iter()
        .map(|f| format!("t.{}::text", quote_ident(f)))
        .collect::<Vec<_>>()
        .join(" || ', ' || ");
    let column = column.replace('\'', "''");
    format!(
        "'sluice: the value of column {column} Debezium did not send (an unchanged TOASTed \
         value) is in no stored row: the old row of this key change, key ' || {key} || ', is gone'"
    )
}

/// The name of the `bool[]` parameter of the `index`-th keepable column (not a column name:
/// it has a space and sluice's name).
fn keep_flag(index: usize) -> String {
    format!("sluice keep {index}")
}

/// The delete of a batch's keys: `key` the key columns, `guard` the newest-wins column. Its
/// parameters: one array per key column, then the deletes' versions (under newest-wins), then
/// each delete's row number, which it returns for each row deleted. Under newest-wins a row
/// goes only when it is not newer than the delete (`target.g <= version`, a NULL version or a
/// stored NULL always).
pub fn delete_statement(
    table: &str,
    key: &[StatementColumn<'_>],
    guard: Option<&StatementColumn<'_>>,
) -> String {
    deletes(table, key, guard, false)
}

/// The delete of key changes' old keys ([`delete_statement`] with, before the row numbers,
/// one array per key column for the new keys and the changes' LSNs): it also sets each deleted row aside, as
/// `to_jsonb`, for the create of its new key to read what it keeps
/// (docs/ARCHITECTURE.md#sinks). One key change per statement.
pub fn moving_delete_statement(
    table: &str,
    key: &[StatementColumn<'_>],
    guard: Option<&StatementColumn<'_>>,
) -> String {
    deletes(table, key, guard, true)
}

fn deletes(
    table: &str,
    key: &[StatementColumn<'_>],
    guard: Option<&StatementColumn<'_>>,
    moving: bool,
) -> String {
    let mut params = array_params(key.iter().chain(guard));
    let new: Vec<String> = (0..key.len()).map(|i| format!("sluice to {i}")).collect();
    if moving {
        push_new_keys_and_lsns(&mut params, key);
    }
    params.push(format!("${}::int[]", params.len() + 1));
    let mut aliases: Vec<String> = key.iter().map(|c| quote_ident(c.name)).collect();
    if guard.is_some() {
        aliases.push(quote_ident("sluice version"));
    }
    if moving {
        aliases.extend(new.iter().map(|n| quote_ident(n)));
        aliases.push(quote_ident("sluice lsn"));
    }
    aliases.push(quote_ident("sluice row"));
    let matched = key
        .iter()
        .map(|c| {
            let name = quote_ident(c.name);
            key_match(&format!("target.{name}"), &format!("d.{name}"), c.nullable)
        })
        .collect::<Vec<_>>()
        .join(" AND ");
    let mut sql = format!(
        "DELETE FROM {} AS target\nUSING UNNEST({}) AS d({})\nWHERE {matched}",
        quote_table(table),
        params.join(", "),
        aliases.join(", "),
    );
    if let Some(guard) = guard {
        let version = quote_ident("sluice version");
        sql.push_str(&format!(
            "\n  AND (d.{version} IS NULL OR target.{g} IS NULL OR target.{g} <= d.{version})",
            g = quote_ident(guard.name),
        ));
    }
    if !moving {
        sql.push_str(&format!("\nRETURNING d.{}", quote_ident("sluice row")));
        return sql;
    }
    let qualified = |alias: &str, names: &mut dyn Iterator<Item = &str>| -> Vec<String> {
        names
            .map(|n| format!("{alias}.{}", quote_ident(n)))
            .collect()
    };
    // Every key change's delete leaves its mark: the old key's row as the statement found it
    // (deleted, or kept because it is newer under newest-wins), NULL when there was none, so
    // that its create never waits for a delete that came already (held rows,
    // migrations/0017_debezium_held_rows.sql); a delete applied again never erases an image.
    // Without an LSN, a mark that its create took its row already (-2) is removed instead.
    format!(
        "WITH gone AS ({sql}\nRETURNING d.{row} AS {gone}),\n\
         taken AS (DELETE FROM {MOVED_ROWS} AS m WHERE m.seq = (SELECT min(t.seq) \
         FROM {MOVED_ROWS} AS t, UNNEST({params}) AS d({aliases}) \
         WHERE d.{lsn} IS NULL AND t.target_table = '{literal}' \
         AND t.old_key = jsonb_build_array({old}) AND t.new_key = jsonb_build_array({new}) \
         AND t.change_lsn = -2) RETURNING 1),\n\
         aside AS (INSERT INTO {MOVED_ROWS} AS m \
         (target_table, old_key, new_key, change_lsn, image)\n\
         SELECT '{literal}', jsonb_build_array({old}), jsonb_build_array({new}), \
         coalesce(d.{lsn}, -1), (SELECT to_jsonb(x) FROM {table} AS x WHERE {found})\n\
         FROM UNNEST({params}) AS d({aliases}) WHERE NOT EXISTS (SELECT 1 FROM taken)\n\
         ON CONFLICT (target_table, old_key, new_key, change_lsn) WHERE change_lsn >= 0 \
         DO UPDATE SET image = coalesce(EXCLUDED.image, m.image), moved_at = now())\n\
         SELECT g.{gone} FROM gone AS g",
        gone = quote_ident("sluice gone"),
        table = quote_table(table),
        found = key
            .iter()
            .map(|c| {
                let name = quote_ident(c.name);
                key_match(&format!("x.{name}"), &format!("d.{name}"), c.nullable)
            })
            .collect::<Vec<_>>()
            .join(" AND "),
        literal = table.replace('\'', "''"),
        old = qualified("d", &mut key.iter().map(|c| c.name)).join(", "),
        new = qualified("d", &mut new.iter().map(String::as_str)).join(", "),
        row = quote_ident("sluice row"),
        lsn = quote_ident("sluice lsn"),
        params = params.join(", "),
        aliases = aliases.join(", "),
    )
}

/// `stored` matches `wanted`, one part of a key: equal, or both NULL where the column may
/// hold NULL (a key under `UNIQUE NULLS NOT DISTINCT`, whose index holds one NULL as one
/// value). Written as `=` or a both-NULL arm rather than `IS NOT DISTINCT FROM`, so the key's
/// index still serves it.
pub(super) fn key_match(stored: &str, wanted: &str, nullable: bool) -> String {
    if nullable {
        format!("({stored} = {wanted} OR ({stored} IS NULL AND {wanted} IS NULL))")
    } else {
        format!("{stored} = {wanted}")
    }
}

/// Appends to `params` one array per key column (the new keys of key changes, typed as the
/// key) and then the changes' LSNs (`bigint[]`).
fn push_new_keys_and_lsns(params: &mut Vec<String>, key: &[StatementColumn<'_>]) {
    params.extend(array_params_from(params.len() + 1, key.iter()));
    params.push(format!("${}::bigint[]", params.len() + 1));
}

/// `$1::type[]`, `$2::type[]`, … for `columns`, in order.
pub(super) fn array_params<'c>(
    columns: impl Iterator<Item = &'c StatementColumn<'c>>,
) -> Vec<String> {
    array_params_from(1, columns)
}

/// As [`array_params`], numbered from `$first`.
pub(super) fn array_params_from<'c>(
    first: usize,
    columns: impl Iterator<Item = &'c StatementColumn<'c>>,
) -> Vec<String> {
    columns
        .enumerate()
        .map(|(i, c)| {
            format!(
                "${}::{}[]",
                first + i,
                c.sql_type.param_type().unwrap_or("text")
            )
        })
        .collect()
}

/// The `SELECT` expression of a column: itself, or an array rebuilt in order from its JSON.
fn select_expression(column: &StatementColumn<'_>) -> String {
    let name = quote_ident(column.name);
    match column.sql_type {
        SqlType::Array(element) => {
            let element = element.param_type().unwrap_or("text");
            format!(
                "CASE WHEN {name} IS NULL THEN NULL ELSE ARRAY(SELECT e.value::{element} \
                 FROM jsonb_array_elements_text({name}) WITH ORDINALITY AS e(value, n) \
                 ORDER BY e.n) END"
            )
        }
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::{StatementColumn, upsert_statement};
    use crate::model::ConflictPolicy;
    use crate::table::SqlType;

    fn column<'a>(name: &'a str, sql_type: &'a SqlType, updated: bool) -> StatementColumn<'a> {
        StatementColumn {
            name,
            sql_type,
            updated,
            nullable: false,
            keepable: false,
        }
    }

    #[test]
    fn a_partitioned_table_tells_inserted_from_updated_by_its_snapshot_not_xmax() {
        let (id, at, v) = (SqlType::BigInt, SqlType::TimestampTz, SqlType::Integer);
        let sql = upsert_statement(
            "visits",
            &[
                column("id", &id, false),
                column("at", &at, false),
                column("v", &v, true),
            ],
            &["id".into(), "at".into()],
            &ConflictPolicy::AlwaysUpdate,
            true,
        );
        assert!(!sql.contains("xmax"), "{sql}");
        assert!(
            sql.starts_with(
                "WITH t AS (SELECT * FROM UNNEST($1::bigint[], $2::timestamptz[], $3::int[]) \
                 AS t(\"id\", \"at\", \"v\")),\nexisting AS (SELECT \"id\", \"at\" FROM \"visits\" \
                 WHERE (\"id\", \"at\") IN (SELECT \"id\", \"at\" FROM t))\n"
            ),
            "{sql}"
        );
        assert!(
            sql.ends_with(
                "RETURNING NOT EXISTS (SELECT 1 FROM existing AS e WHERE (e.\"id\", e.\"at\") = \
                 (target.\"id\", target.\"at\")) AS inserted"
            ),
            "{sql}"
        );
    }

    #[test]
    fn a_nullable_guard_is_the_oldest_version_when_null() {
        let (id, g) = (SqlType::BigInt, SqlType::BigInt);
        let guard = StatementColumn {
            nullable: true,
            ..column("g", &g, true)
        };
        let sql = upsert_statement(
            "t",
            &[column("id", &id, false), guard],
            &["id".into()],
            &ConflictPolicy::NewestWins { column: "g".into() },
            false,
        );
        assert!(
            sql.contains(
                "WHERE EXCLUDED.\"g\" > target.\"g\"\n   \
                 OR (target.\"g\" IS NULL AND EXCLUDED.\"g\" IS NOT NULL)\n"
            ),
            "{sql}"
        );
    }

    #[test]
    fn insert_ignore_does_nothing_on_conflict() {
        let (id, at) = (SqlType::BigInt, SqlType::TimestampTz);
        let sql = upsert_statement(
            "app_stats",
            &[
                column("application_id", &id, false),
                column("crawled_at", &at, false),
            ],
            &["application_id".into(), "crawled_at".into()],
            &ConflictPolicy::InsertIgnore,
            false,
        );
        assert_eq!(
            sql,
            "INSERT INTO \"app_stats\" AS target (\"application_id\", \"crawled_at\")\n\
             SELECT \"application_id\", \"crawled_at\"\n\
             FROM UNNEST($1::bigint[], $2::timestamptz[]) \
             AS t(\"application_id\", \"crawled_at\")\n\
             ON CONFLICT (\"application_id\", \"crawled_at\") DO NOTHING\n\
             RETURNING TRUE AS inserted"
        );
    }

    #[test]
    fn newest_wins_updates_all_but_key_and_insert_only_behind_the_guard() {
        let (text, int, at) = (
            SqlType::Varchar(Some(255)),
            SqlType::SmallInt,
            SqlType::TimestampTz,
        );
        let sql = upsert_statement(
            "s1.reviews",
            &[
                column("review_id", &text, false),
                column("score", &int, true),
                column("reviewed_at", &at, false),
                column("last_synced_at", &at, true),
            ],
            &["review_id".into()],
            &ConflictPolicy::NewestWins {
                column: "last_synced_at".into(),
            },
            false,
        );
        assert_eq!(
            sql,
            "INSERT INTO \"s1\".\"reviews\" AS target \
             (\"review_id\", \"score\", \"reviewed_at\", \"last_synced_at\")\n\
             SELECT \"review_id\", \"score\", \"reviewed_at\", \"last_synced_at\"\n\
             FROM UNNEST($1::varchar[], $2::smallint[], $3::timestamptz[], $4::timestamptz[]) \
             AS t(\"review_id\", \"score\", \"reviewed_at\", \"last_synced_at\")\n\
             ON CONFLICT (\"review_id\") DO UPDATE SET\n    \
             \"score\" = EXCLUDED.\"score\",\n    \
             \"last_synced_at\" = EXCLUDED.\"last_synced_at\"\n\
             WHERE EXCLUDED.\"last_synced_at\" > target.\"last_synced_at\"\n\
             RETURNING (xmax = 0) AS inserted"
        );
    }

    #[test]
    fn always_update_has_no_guard_and_arrays_are_rebuilt_from_json() {
        let (id, hist) = (SqlType::Uuid, SqlType::Array(Box::new(SqlType::BigInt)));
        let sql = upsert_statement(
            "t",
            &[column("id", &id, false), column("histogram", &hist, true)],
            &["id".into()],
            &ConflictPolicy::AlwaysUpdate,
            false,
        );
        assert!(
            sql.contains("FROM UNNEST($1::uuid[], $2::jsonb[])"),
            "{sql}"
        );
        assert!(
            sql.contains(
                "CASE WHEN \"histogram\" IS NULL THEN NULL ELSE ARRAY(SELECT e.value::bigint \
                 FROM jsonb_array_elements_text(\"histogram\") WITH ORDINALITY AS e(value, n) \
                 ORDER BY e.n) END"
            ),
            "{sql}"
        );
        assert!(sql.ends_with(
            "DO UPDATE SET\n    \"histogram\" = EXCLUDED.\"histogram\"\nRETURNING (xmax = 0) AS inserted"
        ));
        assert!(!sql.contains("WHERE"), "{sql}");
    }
}
