//! One decoded value of a row ([`Cell`]): its equality, its form as a JSON array element, and
//! its form as a lookup key.

use chrono::{DateTime, NaiveDate, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::forms::{self, Interval};
use crate::infinity;

/// One decoded value of a row (serialized only where a row waits in the database: a key
/// change's create held for its delete).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum Cell {
    /// SQL NULL.
    Null,
    /// Text.
    Text(String),
    /// A SMALLINT.
    SmallInt(i16),
    /// An INTEGER.
    Int(i32),
    /// A BIGINT.
    BigInt(i64),
    /// A finite float.
    Float(f64),
    /// A NUMERIC, as its JSON text.
    Numeric(String),
    /// A boolean.
    Bool(bool),
    /// A UUID.
    Uuid(Uuid),
    /// A timestamp in UTC.
    Timestamp(DateTime<Utc>),
    /// A JSON value (a `json`/`jsonb` column, or an array carried as JSON).
    Json(Value),
    /// A JSON value as the record wrote it (a top-level field of a `json`/`jsonb` column:
    /// its numbers keep their digits).
    RawJson(String),
    /// A date.
    Date(NaiveDate),
    /// A time of day, in microseconds since midnight (up to `24:00:00`, which rounding to a
    /// `time(p)` can reach).
    Time(i64),
    /// An interval.
    Interval(Interval),
    /// Bytes.
    Bytes(Vec<u8>),
    /// A lookup key still to resolve.
    Lookup(String),
}

/// Cells are equal when they hold the same value: a JSON value as the record wrote it equals
/// the parsed value it reads as (the one pass keeps a JSON column's text, the whole-tree parse
/// its value).
impl PartialEq for Cell {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Cell::Null, Cell::Null) => true,
            (Cell::Text(a), Cell::Text(b))
            | (Cell::Numeric(a), Cell::Numeric(b))
            | (Cell::Lookup(a), Cell::Lookup(b))
            | (Cell::RawJson(a), Cell::RawJson(b)) => a == b,
            (Cell::SmallInt(a), Cell::SmallInt(b)) => a == b,
            (Cell::Int(a), Cell::Int(b)) => a == b,
            (Cell::BigInt(a), Cell::BigInt(b)) | (Cell::Time(a), Cell::Time(b)) => a == b,
            (Cell::Float(a), Cell::Float(b)) => a == b,
            (Cell::Bool(a), Cell::Bool(b)) => a == b,
            (Cell::Uuid(a), Cell::Uuid(b)) => a == b,
            (Cell::Timestamp(a), Cell::Timestamp(b)) => a == b,
            (Cell::Json(a), Cell::Json(b)) => a == b,
            (Cell::RawJson(text), Cell::Json(value)) | (Cell::Json(value), Cell::RawJson(text)) => {
                serde_json::from_str::<Value>(text).is_ok_and(|parsed| parsed == *value)
            }
            (Cell::Date(a), Cell::Date(b)) => a == b,
            (Cell::Interval(a), Cell::Interval(b)) => a == b,
            (Cell::Bytes(a), Cell::Bytes(b)) => a == b,
            _ => false,
        }
    }
}

/// A checked lookup key as the text its query sends (the key column's own text form: an
/// integer in decimal, a UUID lower-case with hyphens).
pub(super) fn lookup_key(cell: Cell) -> Cell {
    match cell {
        Cell::Text(key) => Cell::Lookup(key),
        Cell::SmallInt(key) => Cell::Lookup(key.to_string()),
        Cell::Int(key) => Cell::Lookup(key.to_string()),
        Cell::BigInt(key) => Cell::Lookup(key.to_string()),
        Cell::Uuid(key) => Cell::Lookup(key.hyphenated().to_string()),
        // Validation admits only text, integer and uuid keys.
        other => other,
    }
}

/// A cell as a JSON array element.
pub(super) fn cell_json(cell: Cell) -> Value {
    match cell {
        Cell::Null => Value::Null,
        Cell::Text(text) | Cell::Lookup(text) | Cell::Numeric(text) => Value::String(text),
        Cell::SmallInt(int) => int.into(),
        Cell::Int(int) => int.into(),
        Cell::BigInt(int) => int.into(),
        // -0 as text: a JSON number would pass through jsonb's numeric, which has no -0.
        Cell::Float(float) if float == 0.0 && float.is_sign_negative() => {
            Value::String("-0".into())
        }
        Cell::Float(float) => float.into(),
        Cell::Bool(flag) => flag.into(),
        Cell::Uuid(uuid) => Value::String(uuid.to_string()),
        Cell::Timestamp(at) => Value::String(match infinity::of_instant(at) {
            Some(positive) => infinity::text(positive).to_owned(),
            None => at.to_rfc3339(),
        }),
        Cell::Json(json) => json,
        Cell::RawJson(text) => serde_json::from_str(&text).unwrap_or(Value::Null),
        Cell::Date(date) => Value::String(match infinity::of_day(date) {
            Some(positive) => infinity::text(positive).to_owned(),
            None => forms::date_text(date),
        }),
        Cell::Time(micros) => Value::String(forms::time_text(micros)),
        Cell::Interval(interval) => Value::String(interval.text()),
        Cell::Bytes(bytes) => Value::String(forms::bytes_text(&bytes)),
    }
}
