//! The catalog reader of declared sinks: a table's columns (type, VARCHAR length, NUMERIC
//! precision and scale, NOT NULL, default) and its unique constraints and indexes (which of
//! them is the primary key), read from
//! `pg_catalog` on the caller's connection (its `search_path` resolves unqualified names).
//!
//! It only reads; what the shapes mean (which source fits which column, each column's
//! checks, the statement) is decided in `sluice_sinks`.

use sluice_sinks::{ColumnShape, Sink, Source, SqlType, TableShape, quote_table};
use sqlx::PgConnection;
use std::collections::HashMap;

/// The columns of a table in table order. A domain is read as the type it is over (through
/// domains over domains), NOT NULL if the domain is; its CHECK is the server's to enforce on
/// write (a row it refuses is dead-lettered with the server's reason). An enum (or an array
/// of one) comes with its type's oid, whose labels [`ENUM_LABELS_SQL`] reads.
const COLUMNS_SQL: &str = "
WITH RECURSIVE base AS (
    SELECT a.attnum, a.atttypid AS typid, a.atttypmod AS typmod, false AS domain_not_null,
           0 AS depth
    FROM pg_attribute a
    WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
    SELECT b.attnum, d.typbasetype, d.typtypmod, b.domain_not_null OR d.typnotnull, b.depth + 1
    FROM base b JOIN pg_type d ON d.oid = b.typid
    WHERE d.typtype = 'd' AND b.depth < 32
), resolved AS (
    SELECT DISTINCT ON (attnum) attnum, typid, typmod, domain_not_null
    FROM base ORDER BY attnum, depth DESC
)
SELECT a.attname::text AS name, t.typname::text AS typname,
       CASE WHEN t.typcategory = 'A' THEN e.typname::text END AS element,
       r.typmod AS typmod, (a.attnotnull OR r.domain_not_null) AS not_null,
       (a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '') AS has_default,
       (a.attgenerated = '' AND a.attidentity <> 'a') AS writable,
       CASE WHEN t.typtype = 'e' THEN t.oid::int8
            WHEN t.typcategory = 'A' AND e.typtype = 'e' THEN e.oid::int8 END AS enum_oid,
       format_type(CASE WHEN t.typcategory = 'A' THEN e.oid ELSE t.oid END, NULL) AS type_name,
       (t.typcategory = 'A' AND e.typtype = 'd') AS domain_elements
FROM pg_attribute a
JOIN resolved r ON r.attnum = a.attnum
JOIN pg_type t ON t.oid = r.typid
LEFT JOIN pg_type e ON e.oid = t.typelem
WHERE a.attrelid = to_regclass($1)
ORDER BY a.attnum";

/// The labels of enum types, in their sort order.
const ENUM_LABELS_SQL: &str = "
SELECT enumtypid::int8 AS oid, array_agg(enumlabel::text ORDER BY enumsortorder) AS labels
FROM pg_enum WHERE enumtypid::int8 = ANY($1) GROUP BY enumtypid";

/// The key columns of every unique index that can arbitrate `ON CONFLICT`: immediate, no
/// predicate, no expression (a unique constraint has such an index), and whether it is
/// `NULLS NOT DISTINCT` (read through `to_jsonb`, so that a server before 15, which has no
/// such column, reads false).
const UNIQUE_KEYS_SQL: &str = "
SELECT array_agg(a.attname::text ORDER BY k.ord) AS columns,
       bool_or(COALESCE((to_jsonb(i) ->> 'indnullsnotdistinct')::bool, false))
           AS nulls_not_distinct,
       bool_or(i.indisprimary) AS is_primary
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
    enum_oid: Option<i64>,
    type_name: String,
    domain_elements: bool,
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
    let enum_oids: Vec<i64> = rows.iter().filter_map(|c| c.enum_oid).collect();
    let labels: HashMap<i64, Vec<String>> = if enum_oids.is_empty() {
        HashMap::new()
    } else {
        sqlx::query_as(ENUM_LABELS_SQL)
            .bind(&enum_oids)
            .fetch_all(&mut *conn)
            .await?
            .into_iter()
            .collect()
    };
    let columns = rows
        .into_iter()
        .map(|c| ColumnShape {
            time_precision: match c.typname.as_str() {
                "timestamptz" | "timestamp" | "time" => {
                    u32::try_from(c.typmod).ok().filter(|p| *p < 6)
                }
                _ => None,
            },
            sql_type: column_type(&c, &labels),
            name: c.name,
            not_null: c.not_null,
            has_default: c.has_default,
            writable: c.writable,
        })
        .collect();
    let keys: Vec<(Vec<String>, bool, bool)> = sqlx::query_as(UNIQUE_KEYS_SQL)
        .bind(table)
        .fetch_all(&mut *conn)
        .await?;
    let nulls_not_distinct_keys = keys
        .iter()
        .filter(|(_, nnd, _)| *nnd)
        .map(|(columns, _, _)| columns.clone())
        .collect();
    let primary_key = keys
        .iter()
        .find(|(_, _, primary)| *primary)
        .map(|(columns, _, _)| columns.clone());
    let unique_keys = keys.into_iter().map(|(columns, _, _)| columns).collect();
    Ok(Some(TableShape {
        name: name.to_owned(),
        columns,
        unique_keys,
        nulls_not_distinct_keys,
        primary_key,
        partitioned,
    }))
}

/// A column's type: an enum (or an array of one) with its labels, an array of a domain
/// refused (its elements' CHECK could not be told from the array's), any other as
/// [`SqlType::from_catalog`] reads it.
fn column_type(column: &CatalogColumn, labels: &HashMap<i64, Vec<String>>) -> SqlType {
    if column.domain_elements {
        return SqlType::Other(format!("{}[]", column.type_name));
    }
    let Some(oid) = column.enum_oid else {
        return match SqlType::from_catalog(
            &column.typname,
            column.element.as_deref(),
            column.typmod,
        ) {
            SqlType::Citext(_) => SqlType::Citext(column.type_name.clone()),
            other => other,
        };
    };
    let enumerated = SqlType::Enum {
        name: column.type_name.clone(),
        labels: labels.get(&oid).cloned().unwrap_or_default(),
    };
    if column.element.is_some() {
        SqlType::Array(Box::new(enumerated))
    } else {
        enumerated
    }
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
