//! The lookup of a declared sink: a field's value → another table's value column through its
//! unique key column (`package_name` → `application_id` is one). Like the applications
//! resolver: a TTL cache per sink in front of one `WHERE key = ANY($1)` query per batch for
//! the keys it misses, and no negative caching (a key registered a moment ago is found at
//! once).

use sluice_sinks::{Cell, Lookup, quote_ident, quote_table};
use sqlx::PgConnection;
use std::time::Duration;

use crate::key_cache::{Found, KeyCache, ResolveStats};

/// How the looked-up value is read and written (the plan checked it fits the column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupValue {
    /// Written to a `smallint` column.
    SmallInt,
    /// Written to an `integer` column.
    Int,
    /// Written to a `bigint` column.
    BigInt,
    /// Written to a text column.
    Text,
}

impl LookupValue {
    /// From the written column's parameter type (`None`: not a supported lookup value).
    pub fn from_param_type(param_type: &str) -> Option<Self> {
        Some(match param_type {
            "smallint" => Self::SmallInt,
            "int" => Self::Int,
            "bigint" => Self::BigInt,
            "text" | "varchar" => Self::Text,
            _ => return None,
        })
    }
}

/// One lookup's resolver with its own cache.
#[derive(Debug)]
pub struct LookupResolver {
    cache: KeyCache<Cell>,
    query: String,
    value: LookupValue,
}

impl LookupResolver {
    /// A resolver for `lookup` (validated names) writing `value`s; `key_type`: the key
    /// column's type as the plan gives it (`ColumnPlan::lookup_key`; `None`: text).
    pub fn new(lookup: &Lookup, key_type: Option<&str>, value: LookupValue, ttl: Duration) -> Self {
        Self {
            cache: KeyCache::new(ttl),
            query: lookup_query(lookup, key_type, value),
            value,
        }
    }

    /// Forgets one cached key (its row was deleted or changed after it was resolved).
    pub fn forget(&self, key: &str) {
        self.cache.forget(key);
    }

    /// The cells of the given keys; unknown keys are absent.
    pub async fn resolve<'k>(
        &self,
        conn: &mut PgConnection,
        keys: impl IntoIterator<Item = &'k str>,
    ) -> Result<(Found<Cell>, ResolveStats), sqlx::Error> {
        let mut split = self.cache.split(keys);
        if split.missing.is_empty() {
            return Ok((split.found, split.stats));
        }
        let missing = &split.missing;
        let cells: Vec<(String, Cell)> = match self.value {
            LookupValue::Text => {
                let rows: Vec<(String, Option<String>)> = sqlx::query_as(&self.query)
                    .bind(missing)
                    .fetch_all(conn)
                    .await?;
                rows.into_iter()
                    .map(|(key, value)| (key, value.map_or(Cell::Null, Cell::Text)))
                    .collect()
            }
            integer => {
                let rows: Vec<(String, Option<i64>)> = sqlx::query_as(&self.query)
                    .bind(missing)
                    .fetch_all(conn)
                    .await?;
                rows.into_iter()
                    .map(|(key, value)| (key, value.map_or(Cell::Null, |v| int_cell(integer, v))))
                    .collect()
            }
        };
        self.cache.found(&mut split, cells);
        Ok((split.found, split.stats))
    }
}

/// The query of `lookup`: the value of each key of `$1` (`text[]`, cast to the key column's
/// type `key_type` so that its index is used) that is in the table, every name quoted. Keys
/// come back as text in the key type's canonical form, the form the decoder gives them.
pub fn lookup_query(lookup: &Lookup, key_type: Option<&str>, value: LookupValue) -> String {
    let cast = match value {
        LookupValue::Text => "text",
        _ => "bigint",
    };
    let keys = match key_type {
        Some(key_type @ ("smallint" | "int" | "bigint" | "uuid")) => {
            format!("$1::text[]::{key_type}[]")
        }
        _ => "$1".to_owned(),
    };
    format!(
        "SELECT {key}::text, {column}::{cast} FROM {table} WHERE {key} = ANY({keys})",
        key = quote_ident(&lookup.key_column),
        column = quote_ident(&lookup.value_column),
        table = quote_table(&lookup.table),
    )
}

/// An integer as the written column's cell (the plan checked the value column fits it).
fn int_cell(value: LookupValue, int: i64) -> Cell {
    match value {
        LookupValue::SmallInt => i16::try_from(int).map_or(Cell::BigInt(int), Cell::SmallInt),
        LookupValue::Int => i32::try_from(int).map_or(Cell::BigInt(int), Cell::Int),
        _ => Cell::BigInt(int),
    }
}
