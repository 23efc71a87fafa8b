//! The field rules for a field named at run time (a sink's path into the record): the reasons
//! every decoder gives, naming the field.

use serde_json::{Map, Value};
use uuid::Uuid;

use super::{
    Count, Fields, Path, SqlInt, array, count, describe, echo, integer, number, string, text_rules,
    timestamp,
};
use crate::messages::DecodeError;
use chrono::{DateTime, Utc};

/// The reason a required field is absent (`null: false`) or `null`, with the legacy
/// camelCase hint (the seed topics' producers once wrote camelCase names).
pub(crate) fn missing(object: &Map<String, Value>, field: &str, null: bool) -> DecodeError {
    let hint = if null {
        " (it is null)".to_owned()
    } else {
        Fields::new(object).legacy_hint(field)
    };
    DecodeError::Missing {
        field: field.to_owned().into(),
        hint,
    }
}

/// A string without U+0000 of `min..=max` characters.
pub(crate) fn text(
    field: &str,
    value: &Value,
    min: usize,
    max: Option<usize>,
) -> Result<String, DecodeError> {
    string(Path::new(field), value, min, max)
}

/// A string value already taken out of its record, checked as [`text`] checks it (not copied).
pub(crate) fn owned_text(
    field: &str,
    text: String,
    min: usize,
    max: Option<usize>,
) -> Result<String, DecodeError> {
    text_rules(Path::new(field), &text, min, max).map(|()| text)
}

/// A JSON integer in `lo..=hi`, which fits the SQL type of `T`.
pub(crate) fn int<T: SqlInt>(field: &str, value: &Value, lo: T, hi: T) -> Result<T, DecodeError> {
    integer(Path::new(field), value, lo, hi)
}

/// A finite number `>= lo` (and `<= hi` when given).
pub(crate) fn finite(
    field: &str,
    value: &Value,
    lo: f64,
    hi: Option<f64>,
) -> Result<f64, DecodeError> {
    number(Path::new(field), value, lo, hi)
}

/// A JSON boolean.
pub(crate) fn boolean(field: &str, value: &Value) -> Result<bool, DecodeError> {
    match value {
        Value::Bool(flag) => Ok(*flag),
        other => Err(Path::new(field).error(format!("must be a boolean, got {}", describe(other)))),
    }
}

/// A UUID string.
pub(crate) fn uuid(field: &str, value: &Value) -> Result<Uuid, DecodeError> {
    let path = Path::new(field);
    match value {
        Value::String(text) => crate::forms::uuid(text)
            .ok_or_else(|| path.error(format!("must be a UUID, got {}", echo(text)))),
        other => Err(path.error(format!("must be a UUID string, got {}", describe(other)))),
    }
}

/// An RFC 3339 timestamp (naive = UTC), to the microsecond.
pub(crate) fn time(field: &str, value: &Value) -> Result<DateTime<Utc>, DecodeError> {
    timestamp(Path::new(field), value)
}

/// The elements of an array of `what` (`integers`, `strings`, …) with `how_many` of them;
/// each is checked by `element` with its indexed name (`histogram[3]`).
pub(crate) fn elements<T>(
    field: &str,
    value: &Value,
    what: &str,
    how_many: Count,
    mut element: impl FnMut(&str, &Value) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    let items = array(Path::new(field), value, what)?;
    count(Path::new(field), items, how_many)?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| element(&Path::indexed(field, i).to_string(), item))
        .collect()
}

/// A string in the form `parse` reads, described as `form` (`a date YYYY-MM-DD`): the
/// reason names the form, echoes the value and adds what `parse` found wrong.
pub(crate) fn form<T>(
    field: &str,
    value: &Value,
    form: &str,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<T, DecodeError> {
    let path = Path::new(field);
    match value {
        Value::String(text) => parse(text)
            .map_err(|why| path.error(format!("must be {form}, got {} ({why})", echo(text)))),
        other => Err(path.error(format!(
            "must be {form} as a string, got {}",
            describe(other)
        ))),
    }
}

/// A rule of a declared sink broken by `field` (a rule the shared field readers have no twin of).
pub(crate) fn broken(field: &str, rule: String) -> DecodeError {
    Path::new(field).error(rule)
}
