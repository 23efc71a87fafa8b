//! The catalog reader of declared sinks: a table's columns (type, VARCHAR length, NUMERIC
//! precision and scale, NOT NULL, default) and its unique constraints and indexes, read from
//! `pg_catalog` on the caller's connection (its `search_path` resolves unqualified names).
//!
//! It only reads; what the shapes mean (which source fits which column, each column's
//! checks, the statement) is decided in `sluice_core::sinks`.

use sluice_core::sinks::{ColumnShape, Sink, Source, SqlType, TableShape, quote_table};
use sqlx::PgConnection;
use std::collections::HashMap;

/// The columns of a table in table order, with the type name of an array's element.
const COLUMNS_SQL: &str = "
SELECT a.attname::text AS name, t.typname::text AS typname,
       CASE WHEN t.typcategory = 'A' THEN e.typname::text END AS element,
       a.atttypmod AS typmod, a.attnotnull AS not_null,
       (a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '') AS has_default,
       (a.attgenerated = '' AND a.attidentity <> 'a') AS writable
FROM pg_attribute a
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_type e ON e.oid = t.typelem
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum";

/// The key columns of every unique index that can arbitrate `ON CONFLICT`: immediate, no
/// predicate, no expression (a unique constraint has such an index), and whether it is
/// `NULLS NOT DISTINCT` (read through `to_jsonb`, so that a server before 15, which has no
/// such column, reads false).
const UNIQUE_KEYS_SQL: &str = "
SELECT array_agg(a.attname::text ORDER BY k.ord) AS columns,
       bool_or(COALESCE((to_jsonb(i) ->> 'indnullsnotdistinct')::bool, false))
           AS nulls_not_distinct
FROM pg_index i
CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indimmediate
  AND i.indpred IS NULL AND i.indexprs IS NULL AND k.ord <= i.indnkeyatts
GROUP BY i.indexrelid";

/// One row of [`COLUMNS_SQL`].
#[derive(Debug, sqlx::FromRow)]
struct CatalogColumn {
    name: String,
    typname: String,
    element: Option<String>,
    typmod: i32,
    not_null: bool,
    has_default: bool,
    writable: bool,
}

/// The shape of `table` (`[schema.]table`, each name as the catalog has it), or `None` when
/// no such table is visible.
pub async fn table_shape(
    conn: &mut PgConnection,
    table: &str,
) -> Result<Option<TableShape>, sqlx::Error> {
    let name = table;
    let table = &quote_table(name);
    // `None`: no such table; `Some(true)`: a partitioned one.
    let partitioned: Option<bool> =
        sqlx::query_scalar("SELECT relkind = 'p' FROM pg_class WHERE oid = to_regclass($1)")
            .bind(table)
            .fetch_optional(&mut *conn)
            .await?;
    let Some(partitioned) = partitioned else {
        return Ok(None);
    };
    let rows: Vec<CatalogColumn> = sqlx::query_as(COLUMNS_SQL)
        .bind(table)
        .fetch_all(&mut *conn)
        .await?;
    let columns = rows
        .into_iter()
        .map(|c| ColumnShape {
            time_precision: match c.typname.as_str() {
                "timestamptz" | "timestamp" => u32::try_from(c.typmod).ok().filter(|p| *p < 6),
                _ => None,
            },
            sql_type: SqlType::from_catalog(&c.typname, c.element.as_deref(), c.typmod),
            name: c.name,
            not_null: c.not_null,
            has_default: c.has_default,
            writable: c.writable,
        })
        .collect();
    let keys: Vec<(Vec<String>, bool)> = sqlx::query_as(UNIQUE_KEYS_SQL)
        .bind(table)
        .fetch_all(&mut *conn)
        .await?;
    let nulls_not_distinct_keys = keys
        .iter()
        .filter(|(_, nnd)| *nnd)
        .map(|(columns, _)| columns.clone())
        .collect();
    let unique_keys = keys.into_iter().map(|(columns, _)| columns).collect();
    Ok(Some(TableShape {
        name: name.to_owned(),
        columns,
        unique_keys,
        nulls_not_distinct_keys,
        partitioned,
    }))
}

/// The shapes of every table the sinks name (their tables and lookup tables), keyed as
/// written; a table that does not exist is absent.
pub async fn sink_tables(
    conn: &mut PgConnection,
    sinks: &[Sink],
) -> Result<HashMap<String, TableShape>, sqlx::Error> {
    let mut names: Vec<&str> = Vec::new();
    for sink in sinks {
        names.push(&sink.table);
        for mapping in &sink.columns {
            if let Source::Lookup(lookup) = &mapping.source {
                names.push(&lookup.table);
            }
        }
    }
    names.sort_unstable();
    names.dedup();
    let mut shapes = HashMap::with_capacity(names.len());
    for name in names {
        if let Some(shape) = table_shape(conn, name).await? {
            shapes.insert(name.to_owned(), shape);
        }
    }
    Ok(shapes)
}
