//! The upsert of a declared sink: its planned statement with one `UNNEST` array per column,
//! each bound as its planned parameter type, one statement for the whole slice (the same
//! shape as the built-in topics' upsert).

use crate::lookup::{LookupValue, lookup_query};
use sluice_core::sinks::{Cell, Sink, SinkError, SinkPlan, SinkRow, Source, time_text};
use sqlx::Postgres;
use sqlx::postgres::PgArguments;
use sqlx::postgres::types::PgInterval;
use sqlx::query::QueryScalar;
use sqlx::{Executor, PgConnection};

type Scalar<'q> = QueryScalar<'q, Postgres, bool, PgArguments>;

/// Why a slice cannot be bound (a bug in the caller, not a database error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BindError {
    /// A cell does not fit its column's parameter type (a lookup left unresolved, …).
    #[error("column `{column}` ({param_type}): cannot bind {cell}")]
    Mismatch {
        /// The column.
        column: String,
        /// Its parameter type.
        param_type: String,
        /// The cell, as debug text.
        cell: String,
    },
}

/// An upsert that could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeclaredUpsertError {
    /// The rows do not fit the plan.
    #[error(transparent)]
    Bind(#[from] BindError),
    /// The database refused the statement.
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// Upserts `rows` (one per natural key, lookups resolved) with the plan's statement; the
/// statement's answers: one per row written, true inserted, false updated (a row not
/// returned was skipped).
pub async fn upsert_declared(
    conn: &mut PgConnection,
    plan: &SinkPlan,
    rows: &[SinkRow],
) -> Result<Vec<bool>, DeclaredUpsertError> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    static NULL: Cell = Cell::Null;
    let mut query = sqlx::query_scalar::<_, bool>(&plan.statement);
    for (index, column) in plan.columns.iter().enumerate() {
        let cells = rows.iter().map(|row| row.cell(index).unwrap_or(&NULL));
        query = bind(query, &column.column, &column.param_type, cells)?;
    }
    Ok(query.fetch_all(conn).await?)
}

/// Prepares every statement `sink` runs — its upsert and each lookup's query — against the
/// live schema (parse, analysis and parameter types: what `PREPARE` checks), so that no SQL
/// error can first appear at run time. The server's refusals are the sink's errors; any other
/// failure (the connection) is returned as is.
pub async fn prepare_sink(
    conn: &mut PgConnection,
    sink: &Sink,
    plan: &SinkPlan,
) -> Result<Vec<SinkError>, sqlx::Error> {
    let mut statements = vec![(None, "upsert", plan.statement.clone())];
    for (mapping, column) in sink.columns.iter().zip(&plan.columns) {
        if let Source::Lookup(lookup) = &mapping.source {
            let value =
                LookupValue::from_param_type(&column.param_type).unwrap_or(LookupValue::Text);
            statements.push((
                Some(column.column.clone()),
                "lookup",
                lookup_query(lookup, column.lookup_key.as_deref(), value),
            ));
        }
    }
    let mut errors = Vec::new();
    for (column, statement, sql) in statements {
        match (&mut *conn).prepare(sql.as_str()).await {
            Ok(_) => {}
            Err(sqlx::Error::Database(db)) => errors.push(SinkError::StatementRefused {
                sink: sink.name.clone(),
                column,
                statement,
                message: format!(
                    "SQLSTATE {}: {}",
                    db.code().unwrap_or_default(),
                    db.message()
                ),
            }),
            Err(other) => return Err(other),
        }
    }
    // A statement prepared here has the parameter types PostgreSQL infers (`varchar[]`); the
    // writers bind theirs as the cells' own (`text[]`, cast by the statement). Left in the
    // connection's statement cache, the inferred one would be reused by a later upsert on the
    // same connection and refuse its binary arrays.
    sqlx::Connection::clear_cached_statements(&mut *conn).await?;
    Ok(errors)
}

/// Binds one column's cells as the array of `param_type` (text borrowed from the rows, as the
/// built-in topics bind theirs).
fn bind<'q>(
    query: Scalar<'q>,
    column: &str,
    param_type: &str,
    cells: impl Iterator<Item = &'q Cell>,
) -> Result<Scalar<'q>, BindError> {
    let mismatch = |cell: &Cell| BindError::Mismatch {
        column: column.to_owned(),
        param_type: param_type.to_owned(),
        cell: format!("{cell:?}"),
    };
    macro_rules! array {
        ($($pattern:pat => $value:expr),+ $(,)?) => {{
            let mut values = Vec::new();
            for cell in cells {
                values.push(match cell {
                    Cell::Null => None,
                    $($pattern => Some($value),)+
                    other => return Err(mismatch(other)),
                });
            }
            Ok(query.bind(values))
        }};
    }
    match param_type {
        "smallint" => array!(Cell::SmallInt(v) => *v),
        "int" => array!(Cell::Int(v) => *v, Cell::SmallInt(v) => i32::from(*v)),
        "bigint" => array!(
            Cell::BigInt(v) => *v,
            Cell::Int(v) => i64::from(*v),
            Cell::SmallInt(v) => i64::from(*v),
        ),
        "float4" => array!(Cell::Float(v) => v.to_string()),
        "float8" => array!(Cell::Float(v) => *v),
        "bool" => array!(Cell::Bool(v) => *v),
        "uuid" => array!(Cell::Uuid(v) => *v),
        "timestamptz" => array!(Cell::Timestamp(v) => *v),
        "timestamp" => array!(Cell::Timestamp(v) => v.naive_utc()),
        "jsonb" | "json" => array!(Cell::Json(v) => v.clone()),
        "date" => array!(Cell::Date(v) => *v),
        // A time travels as text: rounding to a `time(p)` can reach `24:00:00`.
        "time" => array!(Cell::Time(v) => time_text(*v)),
        "interval" => array!(Cell::Interval(v) => PgInterval {
            months: v.months,
            days: v.days,
            microseconds: v.micros,
        }),
        "bytea" => array!(Cell::Bytes(v) => v.as_slice()),
        // numeric (and real, above), char(n), inet, cidr, enum labels and citext travel as
        // text and are cast by the statement (or assigned to the column).
        _ => array!(
            Cell::Text(v) => v.as_str(),
            Cell::Numeric(v) => v.as_str(),
        ),
    }
}
