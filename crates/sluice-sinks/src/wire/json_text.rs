//! JSON text written straight into one `String`, in the forms the sink's column checks read
//! (`forms.rs`, `decode/value.rs`): strings escaped, bytes as standard padded base64, floats
//! shortest round-trip (NaN and the infinities as strings the checks reject by name), decimals
//! digit for digit, dates, times and timestamps as their ISO texts.

use std::fmt::Write as _;

use base64::Engine as _;
use chrono::{DateTime, Datelike, NaiveDate, Timelike, Utc};
use num_bigint::BigInt;

/// Microseconds in one second.
const MICROS_PER_SECOND: i64 = 1_000_000;
/// Microseconds in a day: a time of day is below it.
const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;

/// Appends formatted text without an intermediate `String`.
fn push_fmt(out: &mut String, args: std::fmt::Arguments<'_>) {
    // Writing to a `String` cannot fail: its `fmt::Write` always returns `Ok`.
    let _ = out.write_fmt(args);
}

/// Appends `text` as a JSON string (quotes, `\"`, `\\` and control characters escaped).
pub(super) fn push_string(out: &mut String, text: &str) {
    out.push('"');
    let bytes = text.as_bytes();
    let mut start = 0;
    for (i, &byte) in bytes.iter().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x00..=0x1f => "",
            _ => continue,
        };
        // Every byte escaped is ASCII, so `start..i` and `i + 1..` are on char boundaries.
        out.push_str(&text[start..i]);
        if escape.is_empty() {
            push_fmt(out, format_args!("\\u{byte:04x}"));
        } else {
            out.push_str(escape);
        }
        start = i + 1;
    }
    out.push_str(&text[start..]);
    out.push('"');
}

/// Appends bytes as a JSON string of standard base64 with padding (the sink's bytes form).
pub(super) fn push_base64(out: &mut String, bytes: &[u8]) {
    out.push('"');
    base64::engine::general_purpose::STANDARD.encode_string(bytes, out);
    out.push('"');
}

/// Appends an integer.
pub(super) fn push_int(out: &mut String, value: impl itoa::Integer) {
    out.push_str(itoa::Buffer::new().format(value));
}

/// Appends a double as its shortest round-trip JSON number; NaN and the infinities, which
/// JSON has no number for, as the strings `"NaN"`, `"Infinity"`, `"-Infinity"`.
pub(super) fn push_f64(out: &mut String, value: f64) {
    if value.is_finite() {
        out.push_str(ryu::Buffer::new().format_finite(value));
    } else {
        push_non_finite(out, value.is_nan(), value > 0.0);
    }
}

/// Appends a float as its shortest single-precision round-trip JSON number (`0.1`, not the
/// double nearest the float), NaN and the infinities as [`push_f64`] does.
pub(super) fn push_f32(out: &mut String, value: f32) {
    if value.is_finite() {
        out.push_str(ryu::Buffer::new().format_finite(value));
    } else {
        push_non_finite(out, value.is_nan(), value > 0.0);
    }
}

fn push_non_finite(out: &mut String, nan: bool, positive: bool) {
    out.push_str(match (nan, positive) {
        (true, _) => "\"NaN\"",
        (false, true) => "\"Infinity\"",
        (false, false) => "\"-Infinity\"",
    });
}

/// Appends a decimal as a JSON number written digit for digit: `unscaled` is a big-endian
/// two's-complement integer of any length (empty = 0), `scale` digits after the point
/// (unscaled -12345 scale 3 → `-12.345`, 1 scale 3 → `0.001`, scale 0 → `12345`).
pub(super) fn push_decimal(out: &mut String, unscaled: &[u8], scale: usize) {
    let digits = if unscaled.len() <= 16 {
        let mut value: i128 = if unscaled.first().is_some_and(|b| b & 0x80 != 0) {
            -1
        } else {
            0
        };
        for &byte in unscaled {
            value = (value << 8) | i128::from(byte);
        }
        value.to_string()
    } else {
        BigInt::from_signed_bytes_be(unscaled).to_string()
    };
    push_scaled(out, &digits, scale);
}

/// Appends integer text (`-` then digits) with a point put `scale` digits from the right.
pub(super) fn push_scaled(out: &mut String, integer: &str, scale: usize) {
    let (sign, digits) = match integer.strip_prefix('-') {
        Some(digits) => ("-", digits),
        None => ("", integer),
    };
    out.push_str(sign);
    if scale == 0 {
        out.push_str(digits);
    } else if digits.len() > scale {
        let (whole, fraction) = digits.split_at(digits.len() - scale);
        out.push_str(whole);
        out.push('.');
        out.push_str(fraction);
    } else {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', scale - digits.len()));
        out.push_str(digits);
    }
}

/// Appends a date (days since 1970-01-01) as `"YYYY-MM-DD"`; a day outside the years
/// 0001–9999 the date form reads is written as its number, which a date column rejects by name.
pub(super) fn push_date(out: &mut String, days: i32) {
    let date = NaiveDate::from_ymd_opt(1970, 1, 1)
        .and_then(|epoch| epoch.checked_add_signed(chrono::TimeDelta::days(i64::from(days))))
        .filter(|date| (1..=9999).contains(&date.year()));
    match date {
        Some(date) => {
            out.push('"');
            push_ymd(out, date.year(), date.month(), date.day());
            out.push('"');
        }
        None => push_int(out, days),
    }
}

/// Appends a time of day (microseconds since midnight) as `"HH:MM:SS.ffffff"`; a value outside
/// one day is written as its number (`raw`), which a time column rejects by name.
pub(super) fn push_time(out: &mut String, micros: i64, raw: i64) {
    if !(0..MICROS_PER_DAY).contains(&micros) {
        push_int(out, raw);
        return;
    }
    let (seconds, fraction) = (micros / MICROS_PER_SECOND, micros % MICROS_PER_SECOND);
    push_fmt(
        out,
        format_args!(
            "\"{:02}:{:02}:{:02}.{fraction:06}\"",
            seconds / 3600,
            seconds / 60 % 60,
            seconds % 60
        ),
    );
}

/// How a timestamp is written: with `Z` (an instant) or without an offset (a local time, the
/// form a `timestamp` without time zone column reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Zone {
    /// RFC 3339 in UTC, `…Z`.
    Utc,
    /// RFC 3339 without an offset.
    Local,
}

/// Appends a timestamp (`seconds` since the epoch and `nanos` within that second, 0–999 999
/// 999) as RFC 3339 to the microsecond (nanoseconds past it rounded, as PostgreSQL rounds
/// them); an instant outside the years 0001–9999 is written as its number (`raw`).
pub(super) fn push_timestamp(out: &mut String, seconds: i64, nanos: u32, zone: Zone, raw: i64) {
    let Some(t) = instant(seconds, nanos) else {
        push_int(out, raw);
        return;
    };
    // Written digit by digit: a registry record's timestamps are written once per record,
    // and the formatting machinery cost several times the digits.
    out.push('"');
    push_ymd(out, t.year(), t.month(), t.day());
    out.push('T');
    push_padded(out, t.hour(), 2);
    out.push(':');
    push_padded(out, t.minute(), 2);
    out.push(':');
    push_padded(out, t.second(), 2);
    out.push('.');
    push_padded(out, t.nanosecond() / 1_000, 6);
    if zone == Zone::Utc {
        out.push('Z');
    }
    out.push('"');
}

/// Appends a date of the years 0001–9999 as `YYYY-MM-DD`.
fn push_ymd(out: &mut String, year: i32, month: u32, day: u32) {
    push_padded(out, year.unsigned_abs(), 4);
    out.push('-');
    push_padded(out, month, 2);
    out.push('-');
    push_padded(out, day, 2);
}

/// Appends `value` in decimal, zero-padded to `width` digits.
fn push_padded(out: &mut String, value: u32, width: usize) {
    let mut digits = [b'0'; 10];
    let mut rest = value;
    let mut start = digits.len();
    while rest > 0 {
        start -= 1;
        // `rest % 10` is one digit.
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    let start = start.min(digits.len().saturating_sub(width));
    for &digit in &digits[start..] {
        out.push(char::from(digit));
    }
}

/// The instant `seconds` since the epoch and `nanos` within that second, rounded to the
/// microsecond as PostgreSQL rounds a fraction's digits (a `timestamp-nanos` of `…999999999`
/// is the next second), when it is in the years 0001–9999 the timestamp form reads (`None`
/// otherwise).
pub(super) fn instant(seconds: i64, nanos: u32) -> Option<DateTime<Utc>> {
    crate::messages::fields::rounded_instant(seconds, nanos)
        .filter(|t| (1..=9999).contains(&t.year()))
}

/// Splits a count of `per_second` units since the epoch into whole seconds (floored) and
/// nanoseconds within that second.
pub(super) fn split_epoch(value: i64, per_second: i64) -> (i64, u32) {
    let seconds = value.div_euclid(per_second);
    let rest = value.rem_euclid(per_second);
    let nanos = rest * (1_000_000_000 / per_second);
    // `rest` < `per_second`, so `nanos` < 10^9 and fits a u32.
    (seconds, u32::try_from(nanos).unwrap_or(0))
}

/// Appends an interval as the ISO 8601 text the interval form reads: months, days and a signed
/// number of microseconds (`P1M2DT-3.500000S`).
pub(super) fn push_interval(out: &mut String, months: i64, days: i64, micros: i128) {
    let sign = if micros < 0 { "-" } else { "" };
    let micros = micros.unsigned_abs();
    push_fmt(
        out,
        format_args!(
            "\"P{months}M{days}DT{sign}{}.{:06}S\"",
            micros / 1_000_000,
            micros % 1_000_000
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(write: impl FnOnce(&mut String)) -> String {
        let mut out = String::new();
        write(&mut out);
        out
    }

    #[test]
    fn strings_escape_what_json_needs() {
        let text = written(|o| push_string(o, "a\"b\\c\nd\u{1}é€"));
        assert_eq!(text, r#""a\"b\\c\nd\u0001é€""#);
        let back: String = serde_json::from_str(&text).unwrap();
        assert_eq!(back, "a\"b\\c\nd\u{1}é€");
    }

    #[test]
    fn decimals_keep_their_digits() {
        let cases: [(&[u8], usize, &str); 8] = [
            (&[0xcf, 0xc7], 3, "-12.345"),
            (&[0x30, 0x39], 0, "12345"),
            (&[0x01], 3, "0.001"),
            (&[0xff], 3, "-0.001"),
            (&[], 2, "0.00"),
            (&[0x00], 0, "0"),
            (
                &[0x7f; 20],
                0,
                "727885129180488904360266563744972327436484050815",
            ),
            (
                &[0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                1,
                "",
            ),
        ];
        for (bytes, scale, expected) in cases {
            let expected = if expected.is_empty() {
                let big = BigInt::from_signed_bytes_be(bytes).to_string();
                format!("{}.{}", &big[..big.len() - 1], &big[big.len() - 1..])
            } else {
                expected.to_owned()
            };
            assert_eq!(written(|o| push_decimal(o, bytes, scale)), expected);
        }
    }

    #[test]
    fn times_and_dates_in_their_forms() {
        assert_eq!(written(|o| push_date(o, 0)), "\"1970-01-01\"");
        assert_eq!(written(|o| push_date(o, -1)), "\"1969-12-31\"");
        assert_eq!(written(|o| push_date(o, i32::MAX)), "2147483647");
        assert_eq!(
            written(|o| push_time(o, 3_723_000_001, 0)),
            "\"01:02:03.000001\""
        );
        assert_eq!(written(|o| push_time(o, -1, -1)), "-1");
        let (s, n) = split_epoch(-1, 1_000);
        assert_eq!((s, n), (-1, 999_000_000));
        assert_eq!(
            written(|o| push_timestamp(o, s, n, Zone::Utc, -1)),
            "\"1969-12-31T23:59:59.999000Z\""
        );
        // Nanoseconds round to the microsecond as PostgreSQL rounds the fraction's digits.
        let (s, n) = split_epoch(1_700_000_000_123_456_789, 1_000_000_000);
        assert_eq!(
            written(|o| push_timestamp(o, s, n, Zone::Local, 0)),
            "\"2023-11-14T22:13:20.123457\""
        );
        let (s, n) = split_epoch(1_700_000_000_999_999_500, 1_000_000_000);
        assert_eq!(
            written(|o| push_timestamp(o, s, n, Zone::Utc, 0)),
            "\"2023-11-14T22:13:21.000000Z\""
        );
        let (s, n) = split_epoch(-1, 1_000_000_000);
        assert_eq!(
            written(|o| push_timestamp(o, s, n, Zone::Utc, 0)),
            "\"1970-01-01T00:00:00.000000Z\""
        );
        assert_eq!(
            written(|o| push_timestamp(o, i64::MAX / 1000, 0, Zone::Utc, 7)),
            "7"
        );
        assert_eq!(
            written(|o| push_interval(o, 1, 2, -3_500_000)),
            "\"P1M2DT-3.500000S\""
        );
    }

    #[test]
    fn floats_shortest_and_non_finite_as_strings() {
        assert_eq!(written(|o| push_f32(o, 0.1)), "0.1");
        assert_eq!(written(|o| push_f64(o, 1.0)), "1.0");
        assert_eq!(written(|o| push_f64(o, f64::NAN)), "\"NaN\"");
        assert_eq!(written(|o| push_f64(o, f64::NEG_INFINITY)), "\"-Infinity\"");
        assert_eq!(written(|o| push_f32(o, f32::INFINITY)), "\"Infinity\"");
    }
}
