//! A small reader over a message's JSON object, so each decoder is a declarative list of fields.
//!
//! Invariant: every value a helper returns satisfies the rule it was asked to check *and* the
//! limits of its database column (integer range of the SQL type, VARCHAR length in characters,
//! finite floats, no U+0000, UUID syntax). The first broken rule is returned as the reason, so
//! a decoder reports exactly one reason per message, in the order of its fields.

pub(crate) mod dynamic;
mod payload;
mod timestamp;

use std::fmt;

use chrono::{DateTime, Utc};
use serde_json::{Map, Number, Value};

use super::DecodeError;

pub(crate) use payload::parse_object;
pub(crate) use timestamp::{
    epoch_micros, micros_of_fraction, parse as parse_timestamp, rounded_instant,
};

/// Longest value echoed back in a reason, in characters.
const ECHO_CHARS: usize = 40;

/// A reader over the fields of one message object.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fields<'a> {
    object: &'a Map<String, Value>,
}

impl<'a> Fields<'a> {
    /// Reads the fields of `object`.
    pub(crate) fn new(object: &'a Map<String, Value>) -> Self {
        Self { object }
    }

    /// A hint when the legacy camelCase twin of a missing field is present.
    pub(crate) fn legacy_hint(&self, field: &str) -> String {
        let camel = camel_case(field);
        if camel != field && self.object.contains_key(&camel) {
            format!(" (found legacy camelCase field `{camel}`)")
        } else {
            String::new()
        }
    }
}

/// An integer type with a PostgreSQL column type of the same range.
pub(crate) trait SqlInt: Copy + Into<i64> + TryFrom<i64> {
    /// The SQL type name used in reasons.
    const SQL_TYPE: &'static str;
    /// The smallest value of the SQL type.
    const SQL_MIN: i64;
    /// The largest value of the SQL type.
    const SQL_MAX: i64;
}

impl SqlInt for i16 {
    const SQL_TYPE: &'static str = "SMALLINT";
    const SQL_MIN: i64 = i16::MIN as i64;
    const SQL_MAX: i64 = i16::MAX as i64;
}

impl SqlInt for i32 {
    const SQL_TYPE: &'static str = "INTEGER";
    const SQL_MIN: i64 = i32::MIN as i64;
    const SQL_MAX: i64 = i32::MAX as i64;
}

impl SqlInt for i64 {
    const SQL_TYPE: &'static str = "BIGINT";
    const SQL_MIN: i64 = i64::MIN;
    const SQL_MAX: i64 = i64::MAX;
}

/// Where a value sits in the message: a field, or one element of an array field.
#[derive(Debug, Clone, Copy)]
struct Path<'a> {
    field: &'a str,
    index: Option<usize>,
}

impl<'a> Path<'a> {
    fn new(field: &'a str) -> Self {
        Self { field, index: None }
    }

    fn indexed(field: &'a str, index: usize) -> Self {
        Self {
            field,
            index: Some(index),
        }
    }

    fn error(self, rule: String) -> DecodeError {
        DecodeError::invalid(self.to_string(), rule)
    }
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            None => f.write_str(self.field),
            Some(index) => write!(f, "{}[{index}]", self.field),
        }
    }
}

/// A string without U+0000 of `min..=max` characters (`max = None`: no limit).
fn string(
    path: Path<'_>,
    value: &Value,
    min: usize,
    max: Option<usize>,
) -> Result<String, DecodeError> {
    let Value::String(text) = value else {
        return Err(path.error(format!("must be a string, got {}", describe(value))));
    };
    text_rules(path, text, min, max)?;
    Ok(text.clone())
}

/// The rules of a text value: no U+0000 and `min..=max` characters.
fn text_rules(
    path: Path<'_>,
    text: &str,
    min: usize,
    max: Option<usize>,
) -> Result<(), DecodeError> {
    if text.contains('\0') {
        return Err(path.error("must not contain U+0000".into()));
    }
    if min > 0 || max.is_some() {
        let chars = text.chars().count();
        if chars < min {
            let rule = if min == 1 {
                "must not be empty".to_string()
            } else {
                format!("must be at least {min} characters, got {chars}")
            };
            return Err(path.error(rule));
        }
        if let Some(max) = max.filter(|max| chars > *max) {
            return Err(path.error(format!("must be at most {max} characters, got {chars}")));
        }
    }
    Ok(())
}

/// A JSON integer (not a float, not a string) in `lo..=hi`.
fn integer<T: SqlInt>(path: Path<'_>, value: &Value, lo: T, hi: T) -> Result<T, DecodeError> {
    let Value::Number(number) = value else {
        return Err(path.error(format!("must be an integer, got {}", describe(value))));
    };
    let (lo, hi): (i64, i64) = (lo.into(), hi.into());
    let out_of_range = || {
        path.error(format!(
            "out of range for {} ({lo} … {hi}), got {number}",
            T::SQL_TYPE
        ))
    };
    let wide = match (number.as_i64(), number.as_u64()) {
        (Some(signed), _) => i128::from(signed),
        (None, Some(unsigned)) => i128::from(unsigned),
        // serde_json reads the JSON integer `-0` as the float -0.0.
        (None, None)
            if number
                .as_f64()
                .is_some_and(|f| f == 0.0 && f.is_sign_negative()) =>
        {
            0
        }
        (None, None) => {
            return Err(float_as_integer::<T>(path, number, out_of_range));
        }
    };
    if wide < i128::from(T::SQL_MIN) || wide > i128::from(T::SQL_MAX) {
        return Err(out_of_range());
    }
    if wide < i128::from(lo) || wide > i128::from(hi) {
        return Err(path.error(format!("must be between {lo} and {hi}, got {wide}")));
    }
    i64::try_from(wide)
        .ok()
        .and_then(|narrow| T::try_from(narrow).ok())
        .ok_or_else(out_of_range)
}

/// The reason a JSON float was given where an integer is required.
fn float_as_integer<T: SqlInt>(
    path: Path<'_>,
    number: &Number,
    out_of_range: impl FnOnce() -> DecodeError,
) -> DecodeError {
    let float = number.as_f64().unwrap_or(f64::NAN);
    if !float.is_finite() || float.fract() != 0.0 {
        return path.error(format!("must be an integer, got {number}"));
    }
    // `SQL_MAX as f64 + 1.0` is exact for SMALLINT and INTEGER and rounds to 2^63 for BIGINT:
    // either way it is the first value past the type's range.
    if float < T::SQL_MIN as f64 || float >= T::SQL_MAX as f64 + 1.0 {
        return out_of_range();
    }
    path.error(format!(
        "must be a JSON integer (no fraction or exponent), got {number}"
    ))
}

/// A finite JSON number (integer or float) `>= lo`, and `<= hi` when given.
fn number(path: Path<'_>, value: &Value, lo: f64, hi: Option<f64>) -> Result<f64, DecodeError> {
    let Value::Number(number) = value else {
        return Err(path.error(format!("must be a number, got {}", describe(value))));
    };
    let float = number.as_f64().unwrap_or(f64::NAN);
    if !float.is_finite() {
        return Err(path.error(format!("must be a finite number, got {number}")));
    }
    match hi {
        Some(hi) if !(lo..=hi).contains(&float) => {
            Err(path.error(format!("must be between {lo} and {hi}, got {number}")))
        }
        None if float < lo => Err(path.error(format!("must be at least {lo}, got {number}"))),
        _ => Ok(float),
    }
}

/// A timestamp string; see [`timestamp::parse`] for the accepted forms.
fn timestamp(path: Path<'_>, value: &Value) -> Result<DateTime<Utc>, DecodeError> {
    let Value::String(text) = value else {
        return Err(path.error(format!(
            "must be an RFC 3339 timestamp string, got {}",
            describe(value)
        )));
    };
    timestamp::parse(text)
        .ok_or_else(|| path.error(format!("must be an RFC 3339 timestamp, got {}", echo(text))))
}

/// How many elements an array must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Count {
    /// Exactly this many.
    Exactly(usize),
    /// At most this many.
    AtMost(usize),
    /// Any number.
    Any,
}

/// Checks the element count of an array.
fn count(path: Path<'_>, items: &[Value], count: Count) -> Result<(), DecodeError> {
    match count {
        Count::Exactly(len) if items.len() != len => Err(path.error(format!(
            "must have exactly {len} elements, got {}",
            items.len()
        ))),
        Count::AtMost(max) if items.len() > max => Err(path.error(format!(
            "must have at most {max} entries, got {}",
            items.len()
        ))),
        _ => Ok(()),
    }
}

/// The elements of a JSON array of `what`.
fn array<'v>(path: Path<'_>, value: &'v Value, what: &str) -> Result<&'v [Value], DecodeError> {
    match value {
        Value::Array(items) => Ok(items),
        other => Err(path.error(format!(
            "must be an array of {what}, got {}",
            describe(other)
        ))),
    }
}

/// A short description of a JSON value for a reason: its type, and the value if it is short.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => number.to_string(),
        Value::String(text) => format!("a string {}", echo(text)),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// `text` quoted, cut to [`ECHO_CHARS`] characters.
pub(crate) fn echo(text: &str) -> String {
    match text.char_indices().nth(ECHO_CHARS) {
        Some((cut, _)) => format!("{:?}…", &text[..cut]),
        None => format!("{text:?}"),
    }
}

/// `crawled_at` → `crawledAt`: the field's name in the legacy camelCase messages.
fn camel_case(snake: &str) -> String {
    let mut camel = String::with_capacity(snake.len());
    let mut upper_next = false;
    for c in snake.chars() {
        if c == '_' {
            upper_next = true;
        } else if upper_next {
            camel.push(c.to_ascii_uppercase());
            upper_next = false;
        } else {
            camel.push(c);
        }
    }
    camel
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{Count, camel_case, dynamic, echo};
    use crate::messages::DecodeError;

    fn object(value: Value) -> serde_json::Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("test object expected, got {other}"),
        }
    }

    #[test]
    fn camel_case_twins() {
        assert_eq!(camel_case("package_name"), "packageName");
        assert_eq!(camel_case("thumbs_up_count"), "thumbsUpCount");
        assert_eq!(camel_case("at"), "at");
    }

    #[test]
    fn echo_cuts_long_values() {
        assert_eq!(echo("abc"), "\"abc\"");
        let long = "é".repeat(50);
        assert_eq!(echo(&long), format!("\"{}\"…", "é".repeat(40)));
    }

    #[test]
    fn null_is_said_absent_is_hinted_and_present_values_are_read() {
        let map = object(json!({ "a": null, "b": "x", "cField": 1 }));
        assert_eq!(
            dynamic::missing(&map, "a", true),
            DecodeError::Missing {
                field: "a".into(),
                hint: " (it is null)".into()
            }
        );
        assert_eq!(dynamic::text("b", &map["b"], 1, Some(5)), Ok("x".into()));
        assert_eq!(
            dynamic::missing(&map, "d", false),
            DecodeError::Missing {
                field: "d".into(),
                hint: String::new()
            }
        );
        assert_eq!(
            dynamic::missing(&map, "c_field", false).to_string(),
            "field `c_field`: required field is missing (found legacy camelCase field `cField`)"
        );
    }

    #[test]
    fn the_first_broken_element_wins() {
        let value = json!(["ok", "", "also too long", 5]);
        let result = dynamic::elements("tags", &value, "strings", Count::Any, |name, item| {
            dynamic::text(name, item, 1, Some(3))
        });
        assert_eq!(
            result.unwrap_err().to_string(),
            "field `tags[1]`: must not be empty"
        );
        let count = dynamic::elements(
            "tags",
            &value,
            "strings",
            Count::Exactly(2),
            |name, item| dynamic::text(name, item, 1, Some(3)),
        );
        assert_eq!(
            count.unwrap_err().to_string(),
            "field `tags`: must have exactly 2 elements, got 4",
            "the count is checked before any element"
        );
    }

    #[test]
    fn integer_reasons() {
        let map = object(json!({
            "small": 40000, "neg": -1, "float": 2.5, "integral": 3.0, "huge": 1e30, "text": "5"
        }));
        let reason = |field: &str| {
            dynamic::int::<i16>(field, &map[field], 1, 5)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            reason("small"),
            "field `small`: out of range for SMALLINT (1 … 5), got 40000"
        );
        assert_eq!(
            reason("neg"),
            "field `neg`: must be between 1 and 5, got -1"
        );
        assert_eq!(
            reason("float"),
            "field `float`: must be an integer, got 2.5"
        );
        assert_eq!(
            reason("integral"),
            "field `integral`: must be a JSON integer (no fraction or exponent), got 3.0"
        );
        assert_eq!(
            reason("huge"),
            "field `huge`: out of range for SMALLINT (1 … 5), got 1e+30"
        );
        assert_eq!(
            reason("text"),
            "field `text`: must be an integer, got a string \"5\""
        );
        assert_eq!(dynamic::int::<i16>("ok", &json!(5), 1, 5), Ok(5));
    }
}
