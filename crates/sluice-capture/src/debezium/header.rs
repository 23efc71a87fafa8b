//! The `__debezium.oldkey` / `__debezium.newkey` headers of a key change as Kafka Connect's
//! default header converter writes Debezium's key struct (docs/capture.md#key-headers).
//!
//! `SimpleHeaderConverter.fromConnectHeader` is `Values.convertToString(schema, struct)`,
//! which ignores the schema and prints each Java value by its class (`Values.append`): a
//! `Number` by its `toString()` (a `Decimal` is a `BigDecimal`: `2001.5714285714`, not the
//! JSON converter's base64), a `Boolean` as `true`/`false`, a `String` in double quotes with
//! only `\` and `"` escaped, a `byte[]`/`ByteBuffer` as quoted base64, a `List` as `[…]`, a
//! `Struct` as `{"field":value,…}` (so a `VariableScaleDecimal` is
//! `{"scale":0,"value":"AJY="}`), and a null as `null`.

use super::decimal;
use super::json::{push_double, push_float};
use super::types::{self, Kind, ValueError, parse_float};

/// Appends `text` (PostgreSQL's text of a value of `column`, a `kind`) as `Values.append`
/// prints the Java value Debezium holds for it inside a struct.
pub(super) fn push_value(
    out: &mut String,
    kind: Kind,
    column: &str,
    text: &str,
) -> Result<(), ValueError> {
    match kind {
        Kind::Decimal { .. } | Kind::Money => {
            let (unscaled, scale) = kind.decimal(column, text)?;
            decimal::push_java(out, &unscaled, scale);
        }
        Kind::Float32 | Kind::Float64 => push_java_float(out, kind, column, text)?,
        Kind::Text | Kind::Json | Kind::Uuid | Kind::Xml | Kind::Tsvector => {
            push_string(out, text);
        }
        Kind::Array(element) => {
            let items = super::array::elements(text)
                .map_err(|why| ValueError::of(column, kind, text, why))?;
            types::push_array(out, element, column, &items, push_element)?;
        }
        // Numbers (integers, days, µs), booleans, base64 bytes, the VariableScaleDecimal and
        // Point structs, and the zoned times' strings (digits, `-:.TZ+`, `infinity`: nothing
        // to escape) are written as the JSON converter writes them.
        _ => kind.push_value(out, column, text)?,
    }
    Ok(())
}

/// One array element: what differs from JSON as [`push_value`] writes it, the rest with
/// the element quirks of the JSON converter's arrays ([`types::push_element`]).
fn push_element(out: &mut String, kind: Kind, column: &str, item: &str) -> Result<(), ValueError> {
    match kind {
        Kind::Decimal { .. }
        | Kind::Float32
        | Kind::Float64
        | Kind::Text
        | Kind::Json
        | Kind::Uuid => push_value(out, kind, column, item),
        _ => types::push_element(out, kind, column, item),
    }
}

/// A `float`/`double` as Java's `Float.toString`/`Double.toString` (a `Number`): as in JSON
/// when finite, and `NaN`, `Infinity`, `-Infinity` unquoted.
fn push_java_float(
    out: &mut String,
    kind: Kind,
    column: &str,
    text: &str,
) -> Result<(), ValueError> {
    let value = parse_float(text).map_err(|why| ValueError::of(column, kind, text, why))?;
    if value.is_nan() {
        out.push_str("NaN");
    } else if value.is_infinite() {
        out.push_str(if value > 0.0 { "Infinity" } else { "-Infinity" });
    } else if kind == Kind::Float32 {
        push_float(out, value as f32);
    } else {
        push_double(out, value);
    }
    Ok(())
}

/// A `String` inside a struct or list: quoted, `\` → `\\` and `"` → `\"` (`Values.escape`),
/// every other character, control characters included, as it is.
pub(super) fn push_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        if matches!(c, '\\' | '"') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(kind: Kind, text: &str) -> String {
        let mut out = String::new();
        push_value(&mut out, kind, "k", text).unwrap_or_else(|error| panic!("{error}"));
        out
    }

    const NUMERIC_30_10: i32 = ((30 << 16) | 10) + 4;

    /// The tester's records from Debezium 3.6.1: `{"k":2001.5714285714}` for a
    /// `numeric(30,10)` key, `{"k":{"scale":0,"value":"AJY="}}` for an unconstrained one.
    #[test]
    fn numeric_keys_are_written_as_debezium_writes_them() {
        let constrained = Kind::of(1700, NUMERIC_30_10);
        assert_eq!(header(constrained, "2001.5714285714"), "2001.5714285714");
        assert_eq!(header(constrained, "0.0000000000"), "0E-10");
        assert_eq!(header(constrained, "-1.0000000000"), "-1.0000000000");
        assert_eq!(
            header(Kind::VariableDecimal, "150"),
            "{\"scale\":0,\"value\":\"AJY=\"}"
        );
        assert_eq!(
            header(Kind::VariableDecimal, "150.00"),
            "{\"scale\":0,\"value\":\"AJY=\"}"
        );
        assert_eq!(header(Kind::Money, "-$1,234.57"), "-1234.57");
    }

    #[test]
    fn strings_escape_only_backslash_and_quote() {
        assert_eq!(header(Kind::Text, "a\"b\\c"), "\"a\\\"b\\\\c\"");
        // Control characters and non-ASCII as they are (the JSON converter escapes the first).
        assert_eq!(header(Kind::Text, "x\ny\u{1}é"), "\"x\ny\u{1}é\"");
        assert_eq!(
            header(Kind::Uuid, "0e5e3b1c-1f2a-4b3c-8d4e-5f6a7b8c9d0e"),
            "\"0e5e3b1c-1f2a-4b3c-8d4e-5f6a7b8c9d0e\""
        );
        assert_eq!(header(Kind::Json, "{\"a\": 1}"), "\"{\\\"a\\\": 1}\"");
    }

    #[test]
    fn other_key_types_are_their_java_values() {
        assert_eq!(header(Kind::Int16, "-7"), "-7");
        assert_eq!(header(Kind::Int32, "42"), "42");
        assert_eq!(
            header(Kind::Int64, "9223372036854775807"),
            "9223372036854775807"
        );
        assert_eq!(header(Kind::Boolean, "t"), "true");
        assert_eq!(header(Kind::Boolean, "f"), "false");
        assert_eq!(header(Kind::Date, "2026-03-04"), "20516");
        assert_eq!(header(Kind::Date, "infinity"), "-2147472692");
        assert_eq!(
            header(Kind::TimestampMicros, "2026-03-04 05:06:07.123456"),
            "1772600767123456"
        );
        assert_eq!(
            header(Kind::TimestampMillis, "2026-03-04 05:06:07.123"),
            "1772600767123"
        );
        assert_eq!(
            header(Kind::ZonedTimestamp, "2026-03-04 03:06:07.123456+00"),
            "\"2026-03-04T03:06:07.123456Z\""
        );
        assert_eq!(header(Kind::Bytes, "\\x00ff10"), "\"AP8Q\"");
        assert_eq!(header(Kind::Float64, "1e+20"), "1.0E20");
        assert_eq!(header(Kind::Float64, "NaN"), "NaN");
        assert_eq!(header(Kind::Float32, "-Infinity"), "-Infinity");
        assert_eq!(header(Kind::Float32, "0.1"), "0.1");
        assert_eq!(header(Kind::Interval, "1 day"), "86400000000");
    }

    #[test]
    fn arrays_are_lists_of_their_elements() {
        let texts = Kind::of(1009, -1);
        assert_eq!(
            header(texts, "{a,\"b\\\"c\",NULL}"),
            "[\"a\",\"b\\\"c\",null]"
        );
        let ints = Kind::of(1007, -1);
        assert_eq!(header(ints, "{1,2}"), "[1,2]");
        let numerics = Kind::of(1231, -1);
        assert_eq!(
            header(numerics, "{1.50,0.000}"),
            "[{\"scale\":1,\"value\":\"Dw==\"},{\"scale\":0,\"value\":\"AA==\"}]"
        );
    }
}
