//! Bytes to a JSON object: tombstone, UTF-8, JSON syntax and the object shape, in that order.

use serde_json::{Map, Value};

use super::echo;
use crate::messages::DecodeError;

/// Parses a record value into the JSON object of a message.
pub(crate) fn parse_object(payload: Option<&[u8]>) -> Result<Map<String, Value>, DecodeError> {
    let bytes = payload.ok_or(DecodeError::NullPayload)?;
    let text = std::str::from_utf8(bytes).map_err(|error| DecodeError::InvalidUtf8 {
        offset: error.valid_up_to(),
    })?;
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(other) => Err(DecodeError::NotAnObject {
            found: json_type(&other),
        }),
        Err(error) => Err(DecodeError::InvalidJson {
            detail: syntax_detail(text, &error),
        }),
    }
}

/// The name of a JSON value's type.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// serde_json's message (with line and column) plus the field the error is in, when known.
///
/// `NaN`, `Infinity` and numbers beyond f64 are syntax errors for serde_json, so this is also
/// where a non-finite `score` is reported, as "... (near field `score`)".
fn syntax_detail(text: &str, error: &serde_json::Error) -> String {
    let offset = byte_offset(text, error.line(), error.column());
    match last_key_before(text, offset) {
        Some(key) => format!("{error} (near field `{key}`)"),
        None => error.to_string(),
    }
}

/// The byte offset of serde_json's 1-based `line` and byte `column`, clamped to the text.
fn byte_offset(text: &str, line: usize, column: usize) -> usize {
    let line_start = match line {
        0 | 1 => 0,
        _ => text
            .match_indices('\n')
            .nth(line - 2)
            .map_or(text.len(), |(newline, _)| newline + 1),
    };
    line_start.saturating_add(column).min(text.len())
}

/// The last object key (a string followed by `:`) that closes before `end`.
///
/// A forward scan that skips over string literals, so quotes and colons inside values are
/// never mistaken for keys. Only `"` and `\` are compared, which never occur inside a
/// multi-byte UTF-8 character, so every slice falls on a character boundary.
fn last_key_before(text: &str, end: usize) -> Option<String> {
    let bytes = text.as_bytes();
    let end = end.min(bytes.len());
    let mut last = None;
    let mut i = 0;
    while i < end {
        if bytes[i] != b'"' {
            i += 1;
            continue;
        }
        let open = i;
        i += 1;
        while i < bytes.len() && bytes[i] != b'"' {
            i += if bytes[i] == b'\\' { 2 } else { 1 };
        }
        if i >= end {
            break;
        }
        let literal = &text[open..=i];
        i += 1;
        let after = text[i..].trim_start_matches([' ', '\t', '\n', '\r']);
        if after.starts_with(':') {
            last = Some(literal);
        }
    }
    last.map(key_name)
}

/// The unescaped name of a key literal, cut for display.
fn key_name(literal: &str) -> String {
    let name = serde_json::from_str::<String>(literal)
        .unwrap_or_else(|_| literal.trim_matches('"').to_string());
    let quoted = echo(&name);
    // `echo` quotes with Debug escaping; a field name reads better bare.
    match quoted
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
    {
        Some(bare) => bare.to_string(),
        None => quoted,
    }
}

#[cfg(test)]
mod tests {
    use super::{byte_offset, last_key_before, parse_object};
    use crate::messages::DecodeError;

    fn detail(text: &str) -> String {
        match parse_object(Some(text.as_bytes())) {
            Err(DecodeError::InvalidJson { detail }) => detail,
            other => panic!("expected invalid JSON for {text:?}, got {other:?}"),
        }
    }

    #[test]
    fn syntax_errors_name_the_nearest_field() {
        let cases = [
            (r#"{"package_name": "a", "score": NaN}"#, Some("score")),
            (r#"{"package_name": "a", "score": Infinity}"#, Some("score")),
            (
                r#"{"package_name": "a", "score": -Infinity}"#,
                Some("score"),
            ),
            ("{\"a\": 1,\n  \"price\": NaN\n}", Some("price")),
            (r#"{"a": "x\":", "b": tru}"#, Some("b")),
            (r#"{"a": "x\":y", "b"}"#, Some("a")),
            (r#"{"histogram": [1, 2, NaN]}"#, Some("histogram")),
            (r#"{"n": 1e400}"#, Some("n")),
            (r#"{"outer": {"inner": NaN}}"#, Some("inner")),
            (r#"{"é": NaN}"#, Some("é")),
            (r#"{"a\"b": NaN}"#, Some("a\\\"b")),
            ("NaN", None),
            ("", None),
            (r#"{"a" 1}"#, None),
        ];
        for (text, field) in cases {
            let detail = detail(text);
            assert!(detail.contains(" at line "), "{text}: {detail}");
            match field {
                Some(field) => {
                    assert!(
                        detail.ends_with(&format!("(near field `{field}`)")),
                        "{text}: {detail}"
                    )
                }
                None => assert!(!detail.contains("near field"), "{text}: {detail}"),
            }
        }
        assert_eq!(
            detail(r#"{"package_name": "com.example", "score": NaN}"#),
            "expected value at line 1 column 42 (near field `score`)"
        );
    }

    #[test]
    fn offsets_follow_lines() {
        let text = "ab\ncd\nef";
        assert_eq!(byte_offset(text, 1, 2), 2);
        assert_eq!(byte_offset(text, 2, 1), 4);
        assert_eq!(byte_offset(text, 3, 9), text.len());
        assert_eq!(byte_offset(text, 9, 1), text.len());
        assert_eq!(
            last_key_before("\"k\": \"unterminated", 100),
            Some("k".into())
        );
    }

    #[test]
    fn payload_shapes() {
        assert_eq!(parse_object(None), Err(DecodeError::NullPayload));
        assert_eq!(
            parse_object(Some(b"{\"a\": \"\xc3\x28\"}")),
            Err(DecodeError::InvalidUtf8 { offset: 7 })
        );
        for (text, found) in [
            ("[]", "array"),
            ("\"x\"", "string"),
            ("5", "number"),
            ("true", "boolean"),
            ("null", "null"),
        ] {
            assert_eq!(
                parse_object(Some(text.as_bytes())),
                Err(DecodeError::NotAnObject { found }),
                "{text}"
            );
        }
        assert!(parse_object(Some(b" {} ")).is_ok());
    }
}
