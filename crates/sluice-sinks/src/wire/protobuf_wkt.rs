//! Protobuf's well-known types in the forms the column checks read: a `Timestamp` as RFC 3339
//! UTC to the microsecond (nanoseconds past it rounded, as PostgreSQL rounds them), a
//! `Duration` as an ISO 8601 interval, a wrapper (`Int64Value`, …) as its inner value, and
//! `Struct`, `Value` and `ListValue` as the plain JSON they stand for. `Empty` and `Any` are
//! ordinary messages (`{}`, `{"type_url": …, "value": base64}`).

use prost_reflect::{DynamicMessage, Kind, MessageDescriptor, ReflectMessage, Value};

use super::json_text::{self as text, Zone};
use super::protobuf_scalar::{push_key, push_scalar};

/// The package of the well-known types.
const PACKAGE: &str = "google.protobuf.";
/// Nanoseconds in one second: a `Timestamp`'s or `Duration`'s nanos are below it.
const NANOS_PER_SECOND: i32 = 1_000_000_000;

/// How a message type is written when it is not an ordinary message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Known {
    /// `Timestamp`: a string.
    Timestamp,
    /// `Duration`: a string.
    Duration,
    /// A wrapper: its field 1.
    Wrapper,
    /// `Struct` or `Value`: any JSON.
    Open,
    /// `ListValue`: a JSON array.
    List,
}

/// The well-known type a message type is, if it is one written its own way.
pub(super) fn known(message: &MessageDescriptor) -> Option<Known> {
    let name = message.full_name().strip_prefix(PACKAGE)?;
    Some(match name {
        "Timestamp" => Known::Timestamp,
        "Duration" => Known::Duration,
        "DoubleValue" | "FloatValue" | "Int64Value" | "UInt64Value" | "Int32Value"
        | "UInt32Value" | "BoolValue" | "StringValue" | "BytesValue" => Known::Wrapper,
        "Struct" | "Value" => Known::Open,
        "ListValue" => Known::List,
        _ => return None,
    })
}

/// Appends a well-known message written its own way; `false` (nothing appended) for any other
/// message, or a `Timestamp`/`Duration` whose nanos are out of range (then written as the
/// message it is).
pub(super) fn push_known(out: &mut String, message: &DynamicMessage) -> bool {
    let Some(kind) = known(&message.descriptor()) else {
        return false;
    };
    let field = |number| message.get_field_by_number(number);
    // A Timestamp's and a Duration's fields: seconds (1) and nanos (2).
    let seconds = || field(1).and_then(|v| v.as_i64()).unwrap_or(0);
    let nanos = || field(2).and_then(|v| v.as_i32()).unwrap_or(0);
    match kind {
        Known::Timestamp => {
            let Some(nanos) = u32::try_from(nanos())
                .ok()
                .filter(|n| *n < NANOS_PER_SECOND.unsigned_abs())
            else {
                return false;
            };
            let seconds = seconds();
            text::push_timestamp(out, seconds, nanos, Zone::Utc, seconds);
        }
        Known::Duration => {
            let (seconds, nanos) = (seconds(), nanos());
            if !(-NANOS_PER_SECOND + 1..NANOS_PER_SECOND).contains(&nanos) {
                return false;
            }
            // Rounded as PostgreSQL rounds an interval's fraction of a second.
            let fraction = f64::from(nanos) / 1e9;
            let micros = i128::from(seconds) * 1_000_000
                + i128::from(crate::messages::fields::micros_of_fraction(fraction));
            text::push_interval(out, 0, 0, micros);
        }
        Known::Wrapper => {
            let inner = message.descriptor().get_field(1);
            match (inner, field(1)) {
                (Some(inner), Some(value)) => {
                    push_scalar(out, &value, &inner.kind());
                }
                _ => out.push_str("null"),
            }
        }
        Known::Open | Known::List => push_open(out, message),
    }
    true
}

/// A `Struct` (an object), `Value` (one JSON value; none set: null) or `ListValue` (an array).
fn push_open(out: &mut String, message: &DynamicMessage) {
    match message.descriptor().name() {
        "Struct" => {
            let fields = message.get_field_by_number(1);
            let mut entries: Vec<_> = fields
                .as_deref()
                .and_then(Value::as_map)
                .map(|map| map.iter().collect())
                .unwrap_or_default();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_key(out, key);
                out.push(':');
                push_json_value(out, value);
            }
            out.push('}');
        }
        "ListValue" => {
            let values = message.get_field_by_number(1);
            out.push('[');
            let items = values.as_deref().and_then(Value::as_list).unwrap_or(&[]);
            for (i, value) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_json_value(out, value);
            }
            out.push(']');
        }
        _ => match message.fields().next() {
            None => out.push_str("null"),
            Some((field, value)) => match value {
                Value::EnumNumber(_) => out.push_str("null"),
                Value::Message(inner) => push_open(out, inner),
                scalar => {
                    push_scalar(out, scalar, &field.kind());
                }
            },
        },
    }
}

/// A `google.protobuf.Value` held in a `Struct` or `ListValue`.
fn push_json_value(out: &mut String, value: &Value) {
    match value {
        Value::Message(message) => push_open(out, message),
        _ => out.push_str("null"),
    }
}

/// Whether a field of this kind is written as a JSON value a path can go into (a `Struct`
/// or `Value`).
pub(super) fn is_open(kind: &Kind) -> bool {
    kind.as_message()
        .and_then(known)
        .is_some_and(|k| k == Known::Open)
}
