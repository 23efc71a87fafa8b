//! The statements of a declared sink, built from its validated columns: the one upsert per
//! batch (`upsert.rs`) and, for a sink that deletes, its deletes and what key changes set
//! aside (`delete.rs`); here the column type they share and the SQL pieces both use.

mod delete;
mod upsert;

pub use delete::{consume_moved_statement, delete_statement, moving_delete_statement};
pub use upsert::{raised_reason, upsert_statement};

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

/// `stored` matches `wanted`, one part of a key of type `sql_type`: equal (by the type's
/// [`SqlType::equality`]), or both NULL where the column may hold NULL (a key under `UNIQUE
/// NULLS NOT DISTINCT`, whose index holds one NULL as one value). Written as `=` or a
/// both-NULL arm rather than `IS NOT DISTINCT FROM`, so the key's index still serves it.
pub(super) fn key_match(stored: &str, wanted: &str, sql_type: &SqlType, nullable: bool) -> String {
    let equals = sql_type.equality();
    if nullable {
        format!("({stored} {equals} {wanted} OR ({stored} IS NULL AND {wanted} IS NULL))")
    } else {
        format!("{stored} {equals} {wanted}")
    }
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
        .map(|(i, c)| format!("${}::{}", first + i, c.sql_type.param_array()))
        .collect()
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
