//! A Protobuf field's value that is not a message, as JSON text: every integer exactly (64-bit
//! ones too, as numbers, not proto3 JSON's strings), floats as Avro's, bytes base64, an enum
//! its value's name (an unknown number the number), a map key as a JSON string.

use prost_reflect::{Kind, MapKey, Value};

use super::json_text as text;

/// Appends a value that is not a message, list or map; `kind` names an enum's values.
/// Returns `false` (and appends nothing) for a message, list or map.
pub(super) fn push_scalar(out: &mut String, value: &Value, kind: &Kind) -> bool {
    match value {
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::I32(n) => text::push_int(out, *n),
        Value::I64(n) => text::push_int(out, *n),
        Value::U32(n) => text::push_int(out, *n),
        Value::U64(n) => text::push_int(out, *n),
        Value::F32(x) => text::push_f32(out, *x),
        Value::F64(x) => text::push_f64(out, *x),
        Value::String(s) => text::push_string(out, s),
        Value::Bytes(b) => text::push_base64(out, b),
        Value::EnumNumber(number) => match kind.as_enum().and_then(|e| e.get_value(*number)) {
            Some(known) => text::push_string(out, known.name()),
            None => text::push_int(out, *number),
        },
        Value::Message(_) | Value::List(_) | Value::Map(_) => return false,
    }
    true
}

/// Appends a map key as a JSON string (`"7"`, `"true"`, `"name"`).
pub(super) fn push_key(out: &mut String, key: &MapKey) {
    match key {
        MapKey::String(s) => text::push_string(out, s),
        MapKey::Bool(b) => out.push_str(if *b { "\"true\"" } else { "\"false\"" }),
        MapKey::I32(n) => quoted(out, *n),
        MapKey::I64(n) => quoted(out, *n),
        MapKey::U32(n) => quoted(out, *n),
        MapKey::U64(n) => quoted(out, *n),
    }
}

fn quoted(out: &mut String, n: impl itoa::Integer) {
    out.push('"');
    text::push_int(out, n);
    out.push('"');
}
