//! What a Debezium schema needs of a captured table beyond pgoutput's Relation message,
//! read from `pg_catalog` on an ordinary connection when a Relation message arrives:
//! `NOT NULL`, constant defaults, the primary key (the record key) and an enum's labels, per column
//! (docs/capture.md#values). The replication connection runs no SQL once it streams.

use crate::debezium::{ColumnCatalog, constant_default};
use crate::model::Relation;
use sqlx::{PgConnection, Row};

/// An enum's labels in their order (`enumsortorder`): Debezium 3.6.1 listed `sad,ok,happy`
/// for `ok` added `BEFORE 'happy'` (tests/data/debezium/types' README).
///
/// A domain column is read as its base type (Debezium's too): under domains over domains the
/// last one, with the first type modifier a domain sets on the way (`numeric(10,2)`); a
/// domain `NOT NULL` makes the column required, as pgjdbc reports it to Debezium.
const COLUMNS_SQL: &str = "
SELECT a.attname::text AS name, a.atttypid::bigint AS type_oid,
       NOT (a.attnotnull OR coalesce(b.required, false)) AS optional,
       pg_get_expr(d.adbin, d.adrelid) AS default_expression,
       coalesce(a.attnum = ANY (i.indkey), false) AS primary_key,
       (SELECT string_agg(e.enumlabel::text, ',' ORDER BY e.enumsortorder)
          FROM pg_enum e WHERE e.enumtypid = coalesce(b.base, a.atttypid)) AS enum_allowed,
       b.base::bigint AS domain_base, b.typmod AS domain_typmod
FROM pg_attribute a
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.attgenerated = ''
LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary
LEFT JOIN LATERAL (
    WITH RECURSIVE down(base, typmod, required, depth) AS (
        SELECT t.typbasetype, t.typtypmod, t.typnotnull, 1 FROM pg_type t
        WHERE t.oid = a.atttypid AND t.typtype = 'd'
        UNION ALL
        SELECT t.typbasetype, CASE WHEN down.typmod = -1 THEN t.typtypmod ELSE down.typmod END,
               down.required OR t.typnotnull, down.depth + 1
        FROM down JOIN pg_type t ON t.oid = down.base AND t.typtype = 'd'
        WHERE down.depth < 32)
    SELECT base, typmod, required FROM down ORDER BY depth DESC LIMIT 1
) b ON true
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
                // The catalog is today's and the Relation message the change's: a column
                // whose type changed since keeps the Relation's type.
                let now: i64 = row.try_get("type_oid")?;
                let base: Option<i64> = row
                    .try_get::<Option<i64>, _>("domain_base")?
                    .filter(|_| now == i64::from(column.type_oid));
                let modifier: Option<i32> = row.try_get("domain_typmod")?;
                let mut entry = ColumnCatalog {
                    optional: row.try_get("optional")?,
                    default: None,
                    primary_key: row.try_get("primary_key")?,
                    enum_allowed: row.try_get("enum_allowed")?,
                    domain_base: base
                        .and_then(|oid| u32::try_from(oid).ok())
                        .map(|oid| (oid, modifier.unwrap_or(-1))),
                };
                let kind = entry.kind(column.type_oid, column.type_modifier);
                entry.default = expression.and_then(|e| constant_default(kind, &column.name, &e));
                entry
            }
            None => ColumnCatalog {
                optional: true,
                default: None,
                primary_key: false,
                enum_allowed: None,
                domain_base: None,
            },
        };
        catalog.push(entry);
    }
    Ok(catalog)
}
