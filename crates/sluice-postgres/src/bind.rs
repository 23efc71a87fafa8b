//! Binding a sink's rows to its statements: one array per column, each cell bound as its
//! column's planned parameter type, and what a write of a declared sink can fail with.

use crate::infinite::{Day, Stamp};
use sluice_sinks::{Cell, time_text};
use sqlx::Postgres;
use sqlx::postgres::PgArguments;
use sqlx::postgres::types::PgInterval;
use sqlx::query::QueryScalar;
use std::borrow::Cow;

/// A query returning one scalar per row, with the arguments bound so far.
pub(crate) type Scalar<'q, O> = QueryScalar<'q, Postgres, O, PgArguments>;

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
    /// A row deletes its key, but the sink has no delete statement.
    #[error("sink `{sink}`: a row deletes its key, but the sink does not delete")]
    NoDelete {
        /// The sink.
        sink: String,
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

/// Binds one column's cells as the array of `param_type` (text borrowed from the rows, as the
/// built-in topics bind theirs).
pub(crate) fn bind<'q, O>(
    query: Scalar<'q, O>,
    column: &str,
    param_type: &str,
    cells: impl Iterator<Item = &'q Cell>,
) -> Result<Scalar<'q, O>, BindError> {
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
        // Through the infinities' own binary form (`infinity`, `-infinity`).
        "timestamptz" => array!(Cell::Timestamp(v) => Stamp::<false>(*v)),
        "timestamp" => array!(Cell::Timestamp(v) => Stamp::<true>(*v)),
        // JSON travels as its text: a record's own (its numbers' digits), borrowed from the
        // cell as text is, or serialized from a value that has none.
        "jsonb" | "json" => array!(
            Cell::Json(v) => Cow::Owned(v.to_string()),
            Cell::RawJson(v) => Cow::Borrowed(v.as_str()),
        ),
        "date" => array!(Cell::Date(v) => Day(*v)),
        // A time travels as text: rounding to a `time(p)` can reach `24:00:00`.
        "time" => array!(Cell::Time(v) => time_text(*v)),
        "interval" => array!(Cell::Interval(v) => PgInterval {
            months: v.months,
            days: v.days,
            microseconds: v.micros,
        }),
        "bytea" => array!(Cell::Bytes(v) => v.as_slice()),
        // numeric (and real, above), char(n), inet, cidr, enum labels, citext and the types
        // the server parses (timetz, macaddr, …) travel as text and are cast by the statement
        // (or assigned to the column).
        _ => array!(
            Cell::Text(v) => v.as_str(),
            Cell::Numeric(v) => v.as_str(),
        ),
    }
}
