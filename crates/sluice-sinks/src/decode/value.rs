//! A value → its cell by the column's checks (the first one says the type): the field found
//! in the record, NULL or the reason when it is absent, and the rule a present value breaks.

use std::borrow::Cow;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::cell::{cell_json, lookup_key};
use super::numbers::{exact_range, narrow, numeric, numeric_cell, single};
use super::{Cell, ColumnDecoder, Frame};
use crate::checks::Check;
use crate::forms;
use crate::infinity;
use crate::messages::DecodeError;
use crate::messages::fields::{Count, dynamic};
use crate::model::{Bound, FieldPath, Source};
use crate::modes::{self, Reading};

impl ColumnDecoder {
    pub(super) fn decode(
        &self,
        object: &Map<String, Value>,
        frame: &Frame<'_>,
    ) -> Result<Cell, DecodeError> {
        if let Some(cell) = self.outside_value(frame) {
            return cell;
        }
        match &self.source {
            Source::Lookup(lookup) => self.field(object, &lookup.field, true),
            Source::Field(path) => self.field(object, path, false),
            _ => Ok(Cell::Null),
        }
    }

    /// NULL for an absent optional value; the reason for a required one.
    pub(super) fn absent(&self, object: Option<&Map<String, Value>>) -> Result<Cell, DecodeError> {
        if !self.required {
            return Ok(Cell::Null);
        }
        Err(match object {
            Some(object) => dynamic::missing(object, &self.field_name, false),
            None => DecodeError::Missing {
                field: self.field_name.clone().into(),
                hint: String::new(),
            },
        })
    }

    fn field(
        &self,
        object: &Map<String, Value>,
        path: &FieldPath,
        lookup: bool,
    ) -> Result<Cell, DecodeError> {
        let name = self.field_name.as_str();
        match find(object, path) {
            Some(Value::Null) | None if !self.required => Ok(Cell::Null),
            Some(Value::Null) => Err(dynamic::missing(object, name, true)),
            None => Err(dynamic::missing(object, name, false)),
            Some(value) => self.present(Cow::Borrowed(value), None, lookup),
        }
    }

    /// The cell of a present, non-null value (taken when owned, so text and JSON are not
    /// copied); `number`: the value's text as the record wrote it, when kept.
    pub(super) fn present(
        &self,
        value: Cow<'_, Value>,
        number: Option<&str>,
        lookup: bool,
    ) -> Result<Cell, DecodeError> {
        let name = self.field_name.as_str();
        let cell = match (value, self.checks.first()) {
            (Cow::Owned(Value::String(text)), Some(Check::Text { min, max })) => {
                Cell::Text(dynamic::owned_text(name, text, *min, *max)?)
            }
            (json, Some(Check::Json)) if !has_nul(&json) => match number {
                Some(text) if self.json => Cell::RawJson(text.to_owned()),
                _ => Cell::Json(json.into_owned()),
            },
            (value, _) => match value_cell(name, &value, number, &self.checks, &self.reading)? {
                Cell::Float(_) if !lookup && self.numeric => {
                    Cell::Numeric(number.map_or_else(|| value.to_string(), str::to_owned))
                }
                cell => cell,
            },
        };
        Ok(if lookup { lookup_key(cell) } else { cell })
    }
}

/// The value at `path` (nested objects), if every step exists.
pub(super) fn find<'v>(object: &'v Map<String, Value>, path: &FieldPath) -> Option<&'v Value> {
    let (first, rest) = path.segments().split_first()?;
    rest.iter().try_fold(object.get(first)?, |value, segment| {
        value.as_object()?.get(segment)
    })
}

/// A present value checked by `checks` (the first one says the type); `number`: its text as
/// the record wrote it, when kept.
pub(super) fn value_cell(
    field: &str,
    value: &Value,
    number: Option<&str>,
    checks: &[Check],
    reading: &Reading,
) -> Result<Cell, DecodeError> {
    let Some((first, rest)) = checks.split_first() else {
        return Ok(Cell::Json(value.clone()));
    };
    if let Some(count) = array_count(first) {
        return array_cell(field, value, number, count, rest, reading);
    }
    if let (Check::Number { min, max }, Value::String(text), true) =
        (first, value, reading.decimal_strings)
    {
        // A decimal string (decimal.handling.mode=string): its own digits, as a number's.
        let text = modes::decimal_text(text).map_err(|why| dynamic::broken(field, why))?;
        exact_range(field, text, *min, *max)?;
        return numeric_cell(field, text, rest);
    }
    if let Some(cell) = modes::debezium_cell(field, value, first, reading)? {
        return Ok(cell);
    }
    if let (Check::Number { min, max }, Some(text)) = (first, number) {
        // A NUMERIC column's own digits: the rules hold for them, not for the f64.
        dynamic::finite(field, value, f64::MIN, None)?;
        exact_range(field, text, *min, *max)?;
        return numeric_cell(field, text, rest);
    }
    scalar_cell(field, value, first, rest, reading)
}

/// How many elements an array check admits (`None`: `first` is not an array check).
fn array_count(first: &Check) -> Option<Count> {
    match first {
        Check::Items(n) => Some(Count::Exactly(*n)),
        Check::MaxItems(n) => Some(Count::AtMost(*n)),
        Check::Array => Some(Count::Any),
        _ => None,
    }
}

/// An array of `count` elements, each checked by the `Check::Each` rules in `rest`, as a JSON
/// array of its elements' cells; `number`: the array's text as the record wrote it, when kept.
fn array_cell(
    field: &str,
    value: &Value,
    number: Option<&str>,
    count: Count,
    rest: &[Check],
    reading: &Reading,
) -> Result<Cell, DecodeError> {
    let element: Vec<Check> = rest
        .iter()
        .filter_map(|c| match c {
            Check::Each(inner) => Some((**inner).clone()),
            _ => None,
        })
        .collect();
    let what = match element.first() {
        Some(Check::Integer { .. }) => "integers",
        Some(Check::Text { .. }) => "strings",
        Some(Check::Number { .. }) => "numbers",
        Some(Check::Timestamp { .. }) => "timestamps",
        Some(Check::Uuid) => "UUIDs",
        Some(Check::Boolean) => "booleans",
        _ => "values",
    };
    // A NUMERIC[]'s elements get their own digits, read from the array's text.
    let texts: Vec<&RawValue> = number
        .filter(|text| text.starts_with('['))
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default();
    let mut texts = texts.into_iter().map(|raw| {
        let text = raw.get();
        text.starts_with(|c: char| c == '-' || c.is_ascii_digit())
            .then_some(text)
    });
    let cells = dynamic::elements(field, value, what, count, |name, item| {
        let text = texts.next().flatten();
        // A PostgreSQL array may hold NULLs, and a change event carries them as they are; a
        // plain record's array too, unless its column sets rules on its elements (the seeds'
        // `histogram` and `domains`), which a NULL cannot meet.
        if item.is_null() && (reading.debezium || rest.contains(&Check::NullItems)) {
            return Ok(Cell::Null);
        }
        value_cell(name, item, text, &element, reading)
    })?;
    Ok(Cell::Json(Value::Array(
        cells.into_iter().map(cell_json).collect(),
    )))
}

/// A value of a type other than an array, read from its JSON form (`first`: its type's check,
/// `rest`: the checks after it).
fn scalar_cell(
    field: &str,
    value: &Value,
    first: &Check,
    rest: &[Check],
    reading: &Reading,
) -> Result<Cell, DecodeError> {
    let cell = match first {
        Check::Text { min, max } => Cell::Text(dynamic::text(field, value, *min, *max)?),
        Check::Integer { sql_type, lo, hi } => match *sql_type {
            "SMALLINT" => Cell::SmallInt(dynamic::int(field, value, narrow(*lo), narrow(*hi))?),
            "INTEGER" => Cell::Int(dynamic::int(field, value, narrow(*lo), narrow(*hi))?),
            _ => Cell::BigInt(dynamic::int(field, value, *lo, *hi)?),
        },
        Check::Number { min, max } => float_cell(field, value, *min, *max, rest)?,
        Check::Uuid => Cell::Uuid(dynamic::uuid(field, value)?),
        Check::Timestamp { .. } => match value
            .as_str()
            .and_then(|text| infinity::word(text).or_else(|| infinity::debezium_zoned(text)))
        {
            Some(positive) => Cell::Timestamp(infinity::instant(positive)),
            None => Cell::Timestamp(dynamic::time(field, value)?),
        },
        Check::Boolean => Cell::Bool(dynamic::boolean(field, value)?),
        Check::Date => match value.as_str().and_then(infinity::word) {
            Some(positive) => Cell::Date(infinity::day(positive)),
            None => Cell::Date(dynamic::form(field, value, "a date", forms::date)?),
        },
        Check::Time => Cell::Time(dynamic::form(field, value, "a time of day", forms::time)?),
        Check::Interval => {
            Cell::Interval(dynamic::form(field, value, "an interval", forms::interval)?)
        }
        Check::Bytes => Cell::Bytes(modes::bytes(field, value, reading.binary)?),
        Check::Padded(max) => Cell::Text(padded_text(field, value, *max)?),
        Check::Address { network } => {
            let what = if *network {
                "an IP network"
            } else {
                "an IP address"
            };
            Cell::Text(dynamic::form(field, value, what, |text| {
                forms::address(text, *network)
            })?)
        }
        Check::Label { type_name, labels } => {
            Cell::Text(label_text(field, value, type_name, labels)?)
        }
        Check::Json if has_nul(value) => {
            return Err(dynamic::broken(field, "must not contain U+0000".into()));
        }
        Check::Json => Cell::Json(value.clone()),
        // The plan puts a type check first; anything else keeps the value as it is.
        _ => Cell::Json(value.clone()),
    };
    Ok(cell)
}

/// A float column's value within `min`/`max` (a NUMERIC's read from the f64 when its digits
/// were not kept, a `real`'s in single precision).
fn float_cell(
    field: &str,
    value: &Value,
    min: Option<Bound>,
    max: Option<Bound>,
    rest: &[Check],
) -> Result<Cell, DecodeError> {
    // NaN and the infinities, which JSON cannot hold as numbers, as Debezium, Jackson and
    // sluice's Avro reading write them: a float column takes them (no bound can hold them).
    if let (Value::String(text), None, None) = (value, min, max)
        && !matches!(rest.first(), Some(Check::NumericDigits { .. }))
        && let Some(special) = special_float(text)
    {
        return Ok(Cell::Float(special));
    }
    let lo = min.map_or(f64::MIN, Bound::as_f64);
    let float = dynamic::finite(field, value, lo, max.map(Bound::as_f64))?;
    Ok(match rest.first() {
        Some(Check::NumericDigits { precision, scale }) => {
            numeric(field, value.to_string(), *precision, *scale)?
        }
        Some(Check::Single) => Cell::Float(single(field, float)?),
        _ => Cell::Float(float),
    })
}

/// `NaN`, `Infinity` and `-Infinity` (also `+Infinity`) as the floats they name.
fn special_float(text: &str) -> Option<f64> {
    match text {
        "NaN" => Some(f64::NAN),
        "Infinity" | "+Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

/// A `char(n)` value: text without U+0000, at most `max` characters besides trailing spaces.
fn padded_text(field: &str, value: &Value, max: Option<usize>) -> Result<String, DecodeError> {
    dynamic::form(field, value, "character text", |text| {
        let kept = forms::unpadded(text).chars().count();
        if text.contains('\0') {
            Err("it contains U+0000".to_owned())
        } else if let Some(max) = max.filter(|max| kept > *max) {
            Err(format!(
                "{kept} characters besides trailing spaces, the column holds {max}"
            ))
        } else {
            Ok(text.to_owned())
        }
    })
}

/// An enum column's value: one of `labels` of enum `type_name`.
fn label_text(
    field: &str,
    value: &Value,
    type_name: &str,
    labels: &[String],
) -> Result<String, DecodeError> {
    let what = format!("a label of enum {type_name}");
    dynamic::form(field, value, &what, |text| {
        if labels.iter().any(|label| label == text) {
            Ok(text.to_owned())
        } else {
            Err(format!("labels: {}", shown_labels(labels)))
        }
    })
}

/// Whether a JSON value holds U+0000 in a string or key (`jsonb` refuses it).
fn has_nul(value: &Value) -> bool {
    match value {
        Value::String(text) => text.contains('\0'),
        Value::Array(items) => items.iter().any(has_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

/// An enum's labels for a reason: the first ten, then how many more.
fn shown_labels(labels: &[String]) -> String {
    let mut shown = labels
        .iter()
        .take(10)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if labels.len() > 10 {
        shown.push_str(&format!(" and {} more", labels.len() - 10));
    }
    shown
}
