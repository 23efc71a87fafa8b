//! What a Debezium schema needs of a captured table beyond pgoutput's Relation message,
//! read from `pg_catalog` on an ordinary connection when a Relation message arrives:
//! `NOT NULL`, constant defaults, the primary key (the record key) and an enum's labels, per column
//! (docs/capture.md#values). The replication connection runs no SQL once it streams.

use crate::debezium::{ColumnCatalog, Kind, constant_default};
use crate::model::Relation;
use sqlx::{PgConnection, Row};

/// An enum's labels in their order (`enumsortorder`): Debezium 3.6.1 listed `sad,ok,happy`
/// for `ok` added `BEFORE 'happy'` (tests/data/debezium/types' README).
const COLUMNS_SQL: &str = "
SELECT a.attname::text AS name, NOT a.attnotnull AS optional,
       pg_get_expr(d.adbin, d.adrelid) AS default_expression,
       coalesce(a.attnum = ANY (i.indkey), false) AS primary_key,
       (SELECT string_agg(e.enumlabel::text, ',' ORDER BY e.enumsortorder)
          FROM pg_enum e WHERE e.enumtypid = a.atttypid) AS enum_allowed
FROM pg_attribute a
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.attgenerated = ''
LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary
WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped";

/// The catalog's view of `relation`'s columns, one per column of the Relation message in its
/// order (matched by name; a column the catalog no longer has, dropped since the change
/// was written, reads as optional, without default, not in the key).
pub async fn column_catalog(
    conn: &mut PgConnection,
    relation: &Relation,
) -> Result<Vec<ColumnCatalog>, sqlx::Error> {
    let rows = sqlx::query(COLUMNS_SQL)
        .bind(i64::from(relation.oid))
        .fetch_all(conn)
        .await?;
    let mut catalog = Vec::with_capacity(relation.columns.len());
    for column in &relation.columns {
        let row = rows.iter().find(|row| {
            row.try_get::<String, _>("name")
                .is_ok_and(|name| name == column.name)
        });
        let entry = match row {
            Some(row) => {
                let expression: Option<String> = row.try_get("default_expression")?;
                let kind = Kind::of(column.type_oid, column.type_modifier);
                ColumnCatalog {
                    optional: row.try_get("optional")?,
                    default: expression.and_then(|e| constant_default(kind, &column.name, &e)),
                    primary_key: row.try_get("primary_key")?,
                    enum_allowed: row.try_get("enum_allowed")?,
                }
            }
            None => ColumnCatalog {
                optional: true,
                default: None,
                primary_key: false,
                enum_allowed: None,
            },
        };
        catalog.push(entry);
    }
    Ok(catalog)
}
