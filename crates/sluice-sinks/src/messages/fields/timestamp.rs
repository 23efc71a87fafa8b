//! Timestamps: RFC 3339, naive times taken as UTC, kept to the microsecond like TIMESTAMPTZ.

use chrono::{DateTime, TimeDelta, Timelike, Utc};

/// Nanoseconds in one second; chrono stores a leap second as `:59` plus this much.
const NANOS_PER_SECOND: u32 = 1_000_000_000;

/// Parses an RFC 3339 timestamp into UTC, truncated to whole microseconds.
///
/// Accepted: `T`, `t` or a space between date and time; `Z`, `z` or `±hh:mm` as the offset;
/// no offset at all (the upstream scraper's naive times), which means UTC. Digits past the
/// microsecond are dropped, not rounded. A leap second (`:60`) rolls into the next minute, as
/// PostgreSQL does.
pub(crate) fn parse(text: &str) -> Option<DateTime<Utc>> {
    let parsed = DateTime::parse_from_rfc3339(text)
        .or_else(|_| DateTime::parse_from_rfc3339(&format!("{text}Z")))
        .ok()?
        .with_timezone(&Utc);
    let (whole, nanos) = match parsed.nanosecond() {
        leap @ NANOS_PER_SECOND.. => {
            let second = parsed
                .with_nanosecond(0)?
                .checked_add_signed(TimeDelta::seconds(1))?;
            (second, leap - NANOS_PER_SECOND)
        }
        nanos => (parsed, nanos),
    };
    whole.with_nanosecond(nanos - nanos % 1_000)
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
            ("2026-01-02T03:04:05.1234567", "2026-01-02T03:04:05.123456Z"),
            (
                "2026-01-02T03:04:05.999999999",
                "2026-01-02T03:04:05.999999Z",
            ),
            (
                "2026-01-02T03:04:05.1234567891234Z",
                "2026-01-02T03:04:05.123456Z",
            ),
            ("2026-01-02T03:04:05+02:00", "2026-01-02T01:04:05Z"),
            (
                "2026-01-02T03:04:05.123456789-05:30",
                "2026-01-02T08:34:05.123456Z",
            ),
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
