//! JSON text as Kafka Connect's `JsonConverter` writes it (Jackson's defaults): no
//! whitespace, strings escaped the way Jackson escapes them, doubles as Java prints them.
//! Byte equality with Debezium's records depends on these details (docs/capture.md#the-envelope).

/// Appends `text` as a JSON string: `"` and `\` escaped, the control characters below
/// U+0020 as `\b \t \n \f \r` or `\u00XX` with upper-case hex digits (Jackson's form;
/// serde_json writes lower-case), everything else, non-ASCII included, as it is.
pub(crate) fn push_string(out: &mut String, text: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('"');
    let mut start = 0;
    for (at, byte) in text.bytes().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\t' => "\\t",
            b'\r' => "\\r",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&text[start..at]);
        if escape.is_empty() {
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xf)]));
        } else {
            out.push_str(escape);
        }
        start = at + 1;
    }
    out.push_str(&text[start..]);
    out.push('"');
}

/// Appends a finite double as Java's `Double.toString` lays it out (what Jackson writes
/// for a Connect `float64`): the shortest digits that read back as the same value, in plain
/// notation with at least one fraction digit when 10⁻³ ≤ |v| < 10⁷ (`2.5`, `100.0`),
/// otherwise as `d.dddE±n` (`1.0E7`, `1.234E-5`). Non-finite values are Jackson's quoted
/// `"NaN"`, `"Infinity"`, `"-Infinity"`.
///
/// Java 19 and later print the shortest digits, as here; Java 17, which Connect may run on,
/// sometimes prints one more digit for values it rounds differently.
pub(crate) fn push_double(out: &mut String, value: f64) {
    if value.is_nan() {
        out.push_str("\"NaN\"");
        return;
    }
    if value.is_infinite() {
        out.push_str(if value > 0.0 {
            "\"Infinity\""
        } else {
            "\"-Infinity\""
        });
        return;
    }
    let mut buffer = ryu::Buffer::new();
    push_java_layout(out, buffer.format_finite(value), value);
}

/// As [`push_double`] for a Connect `float32` (Java's `Float.toString`).
pub(crate) fn push_float(out: &mut String, value: f32) {
    if !value.is_finite() {
        push_double(out, f64::from(value));
        return;
    }
    let mut buffer = ryu::Buffer::new();
    push_java_layout(out, buffer.format_finite(value), f64::from(value));
}

/// Re-lays ryu's shortest form (`2.5`, `1e20`, `1.234e-5`, `-0.0`) as Java does.
fn push_java_layout(out: &mut String, shortest: &str, value: f64) {
    let (negative, body) = match shortest.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, shortest),
    };
    // The digits without the point, and the decimal exponent of the first digit.
    let (mantissa, exponent) = match body.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (body, 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut digits: String = format!("{int_part}{frac_part}");
    let mut point = i32::try_from(int_part.len()).unwrap_or(i32::MAX) + exponent;
    // Leading zeros (`0.001`) move the point.
    while digits.len() > 1 && digits.starts_with('0') {
        digits.remove(0);
        point -= 1;
    }
    while digits.len() > 1 && digits.ends_with('0') {
        digits.pop();
    }
    if negative {
        out.push('-');
    }
    let magnitude = value.abs();
    if magnitude == 0.0 {
        out.push_str("0.0");
        return;
    }
    if (1e-3..1e7).contains(&magnitude) {
        push_plain(out, &digits, point);
    } else {
        out.push_str(&digits[..1]);
        out.push('.');
        out.push_str(if digits.len() > 1 { &digits[1..] } else { "0" });
        out.push('E');
        out.push_str(&(point - 1).to_string());
    }
}

/// `digits` with the decimal point after `point` of them (`point` ≤ 0: leading zeros).
fn push_plain(out: &mut String, digits: &str, point: i32) {
    match usize::try_from(point) {
        Ok(0) | Err(_) => {
            out.push_str("0.");
            for _ in 0..point.unsigned_abs() {
                out.push('0');
            }
            out.push_str(digits);
        }
        Ok(whole) if whole >= digits.len() => {
            out.push_str(digits);
            for _ in digits.len()..whole {
                out.push('0');
            }
            out.push_str(".0");
        }
        Ok(whole) => {
            out.push_str(&digits[..whole]);
            out.push('.');
            out.push_str(&digits[whole..]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(text: &str) -> String {
        let mut out = String::new();
        push_string(&mut out, text);
        out
    }

    fn double(value: f64) -> String {
        let mut out = String::new();
        push_double(&mut out, value);
        out
    }

    #[test]
    fn strings_are_escaped_as_jackson_escapes_them() {
        assert_eq!(string("plain três"), "\"plain três\"");
        assert_eq!(string("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(string("\n\t\r\u{8}\u{c}"), "\"\\n\\t\\r\\b\\f\"");
        assert_eq!(string("\u{1}\u{1f}"), "\"\\u0001\\u001F\"");
        assert_eq!(string("/ \u{7f} \u{2028}"), "\"/ \u{7f} \u{2028}\"");
        assert_eq!(string(""), "\"\"");
    }

    #[test]
    fn doubles_are_laid_out_as_java_prints_them() {
        for (value, java) in [
            (2.5, "2.5"),
            (100.0, "100.0"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (0.001, "0.001"),
            (0.0001, "1.0E-4"),
            (1.234e-5, "1.234E-5"),
            (9_999_999.0, "9999999.0"),
            (10_000_000.0, "1.0E7"),
            (1e20, "1.0E20"),
            (-123.456, "-123.456"),
            (0.1 + 0.2, "0.30000000000000004"),
            (f64::MAX, "1.7976931348623157E308"),
            (f64::MIN_POSITIVE, "2.2250738585072014E-308"),
        ] {
            assert_eq!(double(value), java, "{value:e}");
        }
        assert_eq!(double(f64::NAN), "\"NaN\"");
        assert_eq!(double(f64::NEG_INFINITY), "\"-Infinity\"");
        let mut out = String::new();
        push_float(&mut out, 0.1_f32);
        assert_eq!(out, "0.1");
    }
}
