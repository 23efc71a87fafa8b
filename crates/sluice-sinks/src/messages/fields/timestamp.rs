//! Timestamps: RFC 3339, naive times taken as UTC, kept to the microsecond like TIMESTAMPTZ.

use chrono::{DateTime, TimeDelta, Timelike, Utc};

/// Nanoseconds in one second; chrono stores a leap second as `:59` plus this much.
const NANOS_PER_SECOND: u32 = 1_000_000_000;

/// Where the fraction of a second starts in an RFC 3339 text (`YYYY-MM-DDTHH:MM:SS.`).
const FRACTION_AT: usize = 19;

/// Parses an RFC 3339 timestamp into UTC, rounded to whole microseconds as PostgreSQL rounds.
///
/// Accepted: `T`, `t` or a space between date and time; `Z`, `z` or `±hh:mm` as the offset;
/// no offset at all (the upstream scraper's naive times), which means UTC. Digits past the
/// microsecond round as PostgreSQL's input rounds them ([`micros_of_fraction`]), which may
/// carry into the next second. A leap second (`:60`) rolls into the next minute, as
/// PostgreSQL does.
pub(crate) fn parse(text: &str) -> Option<DateTime<Utc>> {
    let parsed = DateTime::parse_from_rfc3339(text)
        .or_else(|_| DateTime::parse_from_rfc3339(&format!("{text}Z")))
        .ok()?
        .with_timezone(&Utc);
    let whole = match parsed.nanosecond() {
        NANOS_PER_SECOND.. => parsed
            .with_nanosecond(0)?
            .checked_add_signed(TimeDelta::seconds(1))?,
        _ => parsed.with_nanosecond(0)?,
    };
    let micros = match text.as_bytes().get(FRACTION_AT) {
        Some(b'.') => {
            let digits = text[FRACTION_AT + 1..]
                .bytes()
                .take_while(u8::is_ascii_digit)
                .count();
            // The point and its digits (`.123456789`) read as a float, without a copy.
            micros_of_fraction(text[FRACTION_AT..=FRACTION_AT + digits].parse().ok()?)
        }
        _ => 0,
    };
    whole.checked_add_signed(TimeDelta::microseconds(micros))
}

/// The microseconds PostgreSQL makes of a fraction of a second: `rint(fraction * 1000000)`
/// (its `ParseFractionalSecond`), a tie to the even one, so `.0000015` is 2 µs, `.0000025`
/// is 2 µs and `.9999995` is a whole second.
pub(crate) fn micros_of_fraction(fraction: f64) -> i64 {
    // A fraction of one second: at most 1,000,000 after rounding.
    (fraction * 1_000_000.0).round_ties_even() as i64
}

/// `seconds` since the epoch and `nanos` (0–999,999,999) of the next, rounded to the
/// microsecond as PostgreSQL rounds the fraction's text ([`micros_of_fraction`]).
pub(crate) fn rounded_instant(seconds: i64, nanos: u32) -> Option<DateTime<Utc>> {
    epoch_micros(seconds, nanos).and_then(DateTime::from_timestamp_micros)
}

/// Microseconds since the epoch of `seconds` and `nanos` (0–999,999,999) of the next,
/// rounded as [`rounded_instant`]; `None` when it overflows.
pub(crate) fn epoch_micros(seconds: i64, nanos: u32) -> Option<i64> {
    let fraction = f64::from(nanos) / f64::from(NANOS_PER_SECOND);
    seconds
        .checked_mul(1_000_000)?
        .checked_add(micros_of_fraction(fraction))
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};

    use super::parse;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn accepted_forms() {
        let cases = [
            ("2026-01-02T03:04:05Z", "2026-01-02T03:04:05Z"),
            ("2026-01-02t03:04:05z", "2026-01-02T03:04:05Z"),
            ("2026-01-02 03:04:05Z", "2026-01-02T03:04:05Z"),
            ("2026-01-02T03:04:05", "2026-01-02T03:04:05Z"),
            ("2026-01-02 03:04:05", "2026-01-02T03:04:05Z"),
            ("2026-01-02T03:04:05.123456", "2026-01-02T03:04:05.123456Z"),
            ("2026-01-02 03:04:05.5", "2026-01-02T03:04:05.5Z"),
            ("2026-01-02T03:04:05.1234567", "2026-01-02T03:04:05.123457Z"),
            ("2026-01-02T03:04:05.999999999", "2026-01-02T03:04:06Z"),
            (
                "2026-01-02T03:04:05.1234561891234Z",
                "2026-01-02T03:04:05.123456Z",
            ),
            ("2026-01-02T03:04:05+02:00", "2026-01-02T01:04:05Z"),
            (
                "2026-01-02T03:04:05.123456789-05:30",
                "2026-01-02T08:34:05.123457Z",
            ),
            // Ties as PostgreSQL rounds them (`'…0000015'::timestamptz` is `…000002`).
            ("2026-01-01T00:00:00.0000005Z", "2026-01-01T00:00:00Z"),
            (
                "2026-01-01T00:00:00.0000015Z",
                "2026-01-01T00:00:00.000002Z",
            ),
            (
                "2026-01-01T00:00:00.0000025Z",
                "2026-01-01T00:00:00.000002Z",
            ),
            (
                "2026-01-01T00:00:00.0000035Z",
                "2026-01-01T00:00:00.000004Z",
            ),
            (
                "2026-01-01T00:00:00.1234565Z",
                "2026-01-01T00:00:00.123456Z",
            ),
            (
                "2026-01-01T00:00:00.00000050001Z",
                "2026-01-01T00:00:00.000001Z",
            ),
            ("1969-12-31T23:59:59.9999995Z", "1970-01-01T00:00:00Z"),
            ("1969-12-31T23:59:59.0000005Z", "1969-12-31T23:59:59Z"),
            ("2016-12-31T23:59:60.9999999Z", "2017-01-01T00:00:01Z"),
            ("2026-01-01T00:30:00+01:00", "2025-12-31T23:30:00Z"),
            ("2016-12-31T23:59:60Z", "2017-01-01T00:00:00Z"),
            ("2016-12-31T23:59:60.25Z", "2017-01-01T00:00:00.25Z"),
            ("2016-12-31T23:59:60.5", "2017-01-01T00:00:00.5Z"),
        ];
        for (input, expected) in cases {
            assert_eq!(parse(input), Some(utc(expected)), "{input}");
        }
    }

    #[test]
    fn rejected_forms() {
        let cases = [
            "",
            "yesterday",
            "2026-01-02",
            "2026-01-02T03:04",
            "2026-1-2T03:04:05Z",
            "2026-01-02T3:04:05Z",
            " 2026-01-02T03:04:05Z",
            "2026-01-02T03:04:05Z ",
            "2026-01-02T03:04:05.Z",
            "2026-01-02T03:04:05+0100",
            "2026-01-02T03:04:05+01:00Z",
            "2026-13-01T00:00:00Z",
            "2026-02-30T00:00:00Z",
            "2026-01-02T24:00:00Z",
            "+10000-01-01T00:00:00Z",
            "2026-01-02T03:04:05\0",
            "1700000000",
        ];
        for input in cases {
            assert_eq!(parse(input), None, "{input:?}");
        }
    }
}
