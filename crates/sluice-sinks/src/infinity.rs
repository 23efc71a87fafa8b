//! PostgreSQL's `infinity` and `-infinity` of `date`, `timestamp` and `timestamptz` columns:
//! how records carry them — the words, or the numbers a Debezium connector (and `sluice
//! capture`) writes for them — and how a cell holds them: the latest and the earliest instant
//! (or day) chrono has, both far outside PostgreSQL's range, so no finite value is taken for
//! one. They order as PostgreSQL orders them (after, or before, every finite value) and are
//! bound as the server's own infinities.

use chrono::{DateTime, NaiveDate, Utc};

/// A timestamp cell's `infinity`.
pub const INFINITY: DateTime<Utc> = DateTime::<Utc>::MAX_UTC;
/// A timestamp cell's `-infinity`.
pub const MINUS_INFINITY: DateTime<Utc> = DateTime::<Utc>::MIN_UTC;
/// A date cell's `infinity`.
pub const DATE_INFINITY: NaiveDate = NaiveDate::MAX;
/// A date cell's `-infinity`.
pub const DATE_MINUS_INFINITY: NaiveDate = NaiveDate::MIN;

/// `Some(true)` for `infinity` (or `+infinity`), `Some(false)` for `-infinity`, in any case,
/// as PostgreSQL reads them.
pub(crate) fn word(text: &str) -> Option<bool> {
    // PostgreSQL skips ASCII white space around it.
    let text = text.trim_matches(|c: char| c.is_ascii_whitespace());
    let (positive, rest) = match text.as_bytes().first() {
        Some(b'-') => (false, &text[1..]),
        Some(b'+') => (true, &text[1..]),
        _ => (true, text),
    };
    rest.eq_ignore_ascii_case("infinity").then_some(positive)
}

/// Debezium's string for `-infinity` of a `timestamptz` in an array (pgjdbc's earliest
/// instant printed as a year); its `infinity` there is the word.
pub(crate) fn debezium_zoned(text: &str) -> Option<bool> {
    (text == "+292269055-12-02T23:00:00.000000Z").then_some(false)
}

/// The word of an infinity.
pub(crate) fn text(positive: bool) -> &'static str {
    if positive { "infinity" } else { "-infinity" }
}

/// Debezium's number of days for an infinite date (pgjdbc's infinite dates through its
/// converters: one pair in a column, another in an array).
pub(crate) fn debezium_days(days: i64) -> Option<bool> {
    match days {
        -2_147_472_692 | -622_191_234 => Some(true),
        -2_147_472_691 | -625_821_272 => Some(false),
        _ => None,
    }
}

/// Debezium's number for an infinite timestamp, in microseconds (`per_micro` 1) or
/// milliseconds (`per_micro` 1,000) since the epoch.
pub(crate) fn debezium_instant(count: i64, per_micro: i64) -> Option<bool> {
    match (count, per_micro) {
        (9_223_372_036_825_200_000, 1) | (9_223_372_036_825_200, 1_000) => Some(true),
        (-9_223_372_036_832_400_000, 1) | (-9_223_372_036_832_400, 1_000) => Some(false),
        _ => None,
    }
}

/// A timestamp cell's infinity, if it is one.
pub fn of_instant(at: DateTime<Utc>) -> Option<bool> {
    if at == INFINITY {
        Some(true)
    } else if at == MINUS_INFINITY {
        Some(false)
    } else {
        None
    }
}

/// A date cell's infinity, if it is one.
pub fn of_day(day: NaiveDate) -> Option<bool> {
    if day == DATE_INFINITY {
        Some(true)
    } else if day == DATE_MINUS_INFINITY {
        Some(false)
    } else {
        None
    }
}

/// The timestamp cell of an infinity.
pub(crate) fn instant(positive: bool) -> DateTime<Utc> {
    if positive { INFINITY } else { MINUS_INFINITY }
}

/// The date cell of an infinity.
pub(crate) fn day(positive: bool) -> NaiveDate {
    if positive {
        DATE_INFINITY
    } else {
        DATE_MINUS_INFINITY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_and_debeziums_numbers_are_infinities_and_nothing_else_is() {
        for (text, positive) in [
            ("infinity", Some(true)),
            ("+Infinity", Some(true)),
            ("-INFINITY", Some(false)),
            (" infinity ", Some(true)),
            ("\u{a0}infinity", None),
            ("inf", None),
            ("2026-01-01", None),
            ("", None),
        ] {
            assert_eq!(word(text), positive, "{text}");
        }
        assert_eq!(debezium_days(-2_147_472_692), Some(true));
        assert_eq!(debezium_days(-2_147_472_691), Some(false));
        assert_eq!(debezium_days(19_000), None);
        assert_eq!(debezium_instant(9_223_372_036_825_200_000, 1), Some(true));
        assert_eq!(debezium_instant(-9_223_372_036_832_400, 1_000), Some(false));
        assert_eq!(debezium_instant(9_223_372_036_825_200_000, 1_000), None);
        assert_eq!(of_instant(instant(true)), Some(true));
        assert_eq!(of_day(day(false)), Some(false));
        assert!(MINUS_INFINITY < DateTime::<Utc>::UNIX_EPOCH && INFINITY > Utc::now());
    }
}
