//! The values of the types whose text needs more than a parse: `timetz` as Debezium's
//! `ZonedTime`, bit strings as `boolean` or `Bits`, `money` as a Decimal, `point` as
//! `io.debezium.data.geometry.Point` (docs/capture.md#values).

use super::json::{push_double, push_string};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{NaiveTime, Timelike};
use num_bigint::BigInt;

/// The types with an `infinity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Clock {
    /// `date`.
    Date,
    /// `timestamp(p ≤ 3)`.
    TimestampMillis,
    /// `timestamp`.
    TimestampMicros,
    /// `timestamptz`.
    Zoned,
}

/// What Debezium 3.6.1 wrote here for PostgreSQL's `infinity` and `-infinity` (pgjdbc's
/// `DATE_POSITIVE_INFINITY` / `DATE_NEGATIVE_INFINITY` through its converters, which treat a
/// column and an array's element differently); `None` when `text` is no infinity. A capture must not stop on them.
pub(super) fn infinity(clock: Clock, in_array: bool, text: &str) -> Option<&'static str> {
    let positive = match text {
        "infinity" => true,
        "-infinity" => false,
        _ => return None,
    };
    Some(match (clock, in_array, positive) {
        (Clock::Date, false, true) => "-2147472692",
        (Clock::Date, false, false) => "-2147472691",
        (Clock::Date, true, true) => "-622191234",
        (Clock::Date, true, false) => "-625821272",
        (Clock::TimestampMicros, _, true) => "9223372036825200000",
        (Clock::TimestampMicros, _, false) => "-9223372036832400000",
        (Clock::TimestampMillis, _, true) => "9223372036825200",
        (Clock::TimestampMillis, _, false) => "-9223372036832400",
        (Clock::Zoned, _, true) => "\"infinity\"",
        (Clock::Zoned, false, false) => "\"-infinity\"",
        (Clock::Zoned, true, false) => "\"+292269055-12-02T23:00:00.000000Z\"",
    })
}

/// `04:05:06.789+05:30` → `"22:35:06.789Z"`: the time in UTC (wrapped to the day), its
/// fraction as PostgreSQL printed it (no trailing zeros), as `ISO_OFFSET_TIME` writes it.
pub(super) fn push_zoned_time(out: &mut String, text: &str) -> Result<(), &'static str> {
    let at = text.rfind(['+', '-']).ok_or("no UTC offset")?;
    let (clock, offset) = text.split_at(at);
    // `24:00:00` is midnight, as Java's resolver reads it.
    let micros = super::clock::time_micros(clock)? % 86_400_000_000;
    let time = NaiveTime::MIN + chrono::Duration::microseconds(micros);
    let utc = time - chrono::Duration::seconds(super::clock::offset_seconds(offset)?);
    let fraction = clock.split_once('.').map_or("", |(_, f)| f);
    let mut text = format!("{:02}:{:02}:{:02}", utc.hour(), utc.minute(), utc.second());
    if !fraction.is_empty() {
        text.push('.');
        text.push_str(fraction);
    }
    text.push('Z');
    push_string(out, &text);
    Ok(())
}

/// `bit(1)`: `1`/`0` → `true`/`false`.
pub(super) fn push_bit(out: &mut String, text: &str) -> Result<(), &'static str> {
    out.push_str(match text {
        "1" => "true",
        "0" => "false",
        _ => return Err("not a single bit"),
    });
    Ok(())
}

/// `bit(n)`, `varbit`: the bits read as a number, first bit highest, written as its bytes
/// least significant first and no more of them than it needs (Java's `BitSet.toByteArray`:
/// `0001` is one byte, `0000` none), base64.
pub(super) fn push_bits(out: &mut String, text: &str) -> Result<(), &'static str> {
    let mut bytes = vec![0u8; text.len().div_ceil(8)];
    for (at, bit) in text.bytes().rev().enumerate() {
        match bit {
            b'1' => bytes[at / 8] |= 1 << (at % 8),
            b'0' => {}
            _ => return Err("not 0s and 1s"),
        }
    }
    while bytes.last() == Some(&0) {
        bytes.pop();
    }
    out.push('"');
    BASE64.encode_string(&bytes, out);
    out.push('"');
    Ok(())
}

/// `money` in the C monetary locale (`$1,234.57`, `-$0.50`; the session is pinned to it) →
/// Decimal of scale 2.
pub(super) fn push_money(out: &mut String, text: &str) -> Result<(), &'static str> {
    let unscaled = money_unscaled(text)?;
    out.push('"');
    BASE64.encode_string(unscaled.to_signed_bytes_be(), out);
    out.push('"');
    Ok(())
}

/// `money`'s text as the unscaled integer of its Decimal of scale 2 (`-$1,234.57` →
/// -123457).
pub(super) fn money_unscaled(text: &str) -> Result<BigInt, &'static str> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let digits: String = rest
        .strip_prefix('$')
        .ok_or("no $ (lc_monetary is pinned to C)")?
        .chars()
        .filter(|c| *c != ',')
        .collect();
    let (whole, cents) = digits.split_once('.').ok_or("no cents")?;
    if cents.len() != 2 {
        return Err("not two fraction digits");
    }
    let mut unscaled: BigInt = format!("{whole}{cents}")
        .parse()
        .map_err(|_| "not a number")?;
    if negative {
        unscaled = -unscaled;
    }
    Ok(unscaled)
}

/// `(1.5,-2)` → `{"x":1.5,"y":-2.0,"wkb":"…","srid":null}`, the WKB a little-endian point.
pub(super) fn push_point(out: &mut String, text: &str) -> Result<(), &'static str> {
    let inner = text
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or("not (x,y)")?;
    let (x, y) = inner.split_once(',').ok_or("not (x,y)")?;
    let x: f64 = x.parse().map_err(|_| "x not a number")?;
    let y: f64 = y.parse().map_err(|_| "y not a number")?;
    let mut wkb = vec![1u8, 1, 0, 0, 0];
    wkb.extend_from_slice(&x.to_le_bytes());
    wkb.extend_from_slice(&y.to_le_bytes());
    out.push_str("{\"x\":");
    push_double(out, x);
    out.push_str(",\"y\":");
    push_double(out, y);
    out.push_str(",\"wkb\":\"");
    BASE64.encode_string(&wkb, out);
    out.push_str("\",\"srid\":null}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(f: fn(&mut String, &str) -> Result<(), &'static str>, text: &str) -> String {
        let mut out = String::new();
        f(&mut out, text).unwrap_or_else(|e| panic!("{text}: {e}"));
        out
    }

    /// Each expected value is what Debezium 3.6.1 wrote for the same text here (2026-12-06,
    /// docs/capture.md#debeziums-logical-types).
    #[test]
    fn debeziums_values() {
        assert_eq!(
            run(push_zoned_time, "04:05:06.789+05:30"),
            "\"22:35:06.789Z\""
        );
        assert_eq!(run(push_zoned_time, "04:05:06.789-02"), "\"06:05:06.789Z\"");
        assert_eq!(run(push_zoned_time, "23:59:59+00"), "\"23:59:59Z\"");
        assert_eq!(
            run(push_zoned_time, "00:00:00.123456-11:30"),
            "\"11:30:00.123456Z\""
        );
        assert_eq!(run(push_zoned_time, "12:00:00.1+00"), "\"12:00:00.1Z\"");
        assert_eq!(run(push_bit, "1"), "true");
        assert_eq!(run(push_bit, "0"), "false");
        assert_eq!(run(push_bits, "1010"), "\"Cg==\"");
        assert_eq!(run(push_bits, "110"), "\"Bg==\"");
        assert_eq!(run(push_bits, "1010101011"), "\"qwI=\"");
        assert_eq!(run(push_bits, "1000000000000001"), "\"AYA=\"");
        assert_eq!(run(push_bits, "1"), "\"AQ==\"");
        assert_eq!(run(push_bits, "0000000000000001"), "\"AQ==\"");
        assert_eq!(run(push_bits, "0000"), "\"\"");
        assert_eq!(run(push_bits, ""), "\"\"");
        assert_eq!(run(push_money, "-$0.01"), "\"/w==\"");
        assert_eq!(
            run(push_money, "$92,233,720,368,547,758.07"),
            "\"f/////////8=\""
        );
        assert_eq!(run(push_zoned_time, "00:00:00+14"), "\"10:00:00Z\"");
        assert_eq!(run(push_zoned_time, "24:00:00+01"), "\"23:00:00Z\"");
        assert_eq!(run(push_zoned_time, "12:00:00+05:30:15"), "\"06:29:45Z\"");
        assert_eq!(
            run(push_point, "(-0,3.25)"),
            "{\"x\":-0.0,\"y\":3.25,\"wkb\":\"AQEAAAAAAAAAAAAAgAAAAAAAAApA\",\"srid\":null}"
        );
        assert_eq!(run(push_money, "$12.34"), "\"BNI=\"");
        assert_eq!(run(push_money, "-$1,234,567.89"), "\"+KQy6w==\"");
        assert_eq!(run(push_money, "$0.50"), "\"Mg==\"");
        assert_eq!(
            run(push_point, "(1.5,-2)"),
            "{\"x\":1.5,\"y\":-2.0,\"wkb\":\"AQEAAAAAAAAAAAD4PwAAAAAAAADA\",\"srid\":null}"
        );
        assert_eq!(
            run(push_point, "(10000000000,-1e-06)"),
            "{\"x\":1.0E10,\"y\":-1.0E-6,\"wkb\":\"AQEAAAAAAAAgX6ACQo3ttaD3xrC+\",\"srid\":null}"
        );
    }

    #[test]
    fn infinities_are_debeziums() {
        assert_eq!(
            infinity(Clock::Date, false, "infinity"),
            Some("-2147472692")
        );
        assert_eq!(
            infinity(Clock::Date, false, "-infinity"),
            Some("-2147472691")
        );
        assert_eq!(infinity(Clock::Date, true, "infinity"), Some("-622191234"));
        assert_eq!(infinity(Clock::Date, true, "-infinity"), Some("-625821272"));
        assert_eq!(
            infinity(Clock::TimestampMicros, false, "-infinity"),
            Some("-9223372036832400000")
        );
        assert_eq!(
            infinity(Clock::TimestampMillis, true, "-infinity"),
            Some("-9223372036832400")
        );
        assert_eq!(
            infinity(Clock::Zoned, true, "-infinity"),
            Some("\"+292269055-12-02T23:00:00.000000Z\"")
        );
        assert_eq!(infinity(Clock::Date, false, "2026-01-01"), None);
    }

    #[test]
    fn what_is_not_such_a_value_is_refused() {
        let mut out = String::new();
        assert!(push_zoned_time(&mut out, "04:05:06").is_err());
        assert!(push_bit(&mut out, "10").is_err());
        assert!(push_bits(&mut out, "102").is_err());
        assert!(push_money(&mut out, "€12,34").is_err());
        assert!(push_money(&mut out, "$12.3").is_err());
        assert!(push_point(&mut out, "1,2").is_err());
    }
}
