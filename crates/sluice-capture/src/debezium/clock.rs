//! PostgreSQL's date and time text (`DateStyle = ISO`, the session pinned to it) read in full:
//! years of more than four digits, `BC` (year 1 BC is the proleptic year 0, as Java's
//! `LocalDate` counts), an offset with seconds, and `24:00:00`, which a `time` may hold. A
//! value these cannot read stops the capture, so none that PostgreSQL prints is refused.

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Utc};

/// Microseconds in a day: `24:00:00`.
const DAY_MICROS: i64 = 86_400_000_000;

/// `text` without a trailing ` BC`, and whether it had one.
fn era(text: &str) -> (&str, bool) {
    match text.strip_suffix(" BC") {
        Some(rest) => (rest, true),
        None => (text, false),
    }
}

/// `YYYY…-MM-DD` (four or more year digits), in the era given.
fn day(text: &str, bc: bool) -> Result<NaiveDate, &'static str> {
    let mut parts = text.splitn(3, '-');
    let mut number =
        |what| -> Result<i64, &'static str> { parts.next().ok_or(what)?.parse().map_err(|_| what) };
    let year = number("no year")?;
    let month = number("no month")?;
    let day = number("no day")?;
    let year = if bc { 1 - year } else { year };
    NaiveDate::from_ymd_opt(
        i32::try_from(year).map_err(|_| "year out of range")?,
        u32::try_from(month).map_err(|_| "no month")?,
        u32::try_from(day).map_err(|_| "no day")?,
    )
    .ok_or("no such day")
}

/// A `date`.
pub(super) fn date(text: &str) -> Result<NaiveDate, &'static str> {
    let (text, bc) = era(text);
    day(text, bc)
}

/// `HH:MM:SS[.ffffff]` as microseconds since midnight, `24:00:00` included.
pub(super) fn time_micros(text: &str) -> Result<i64, &'static str> {
    if text == "24:00:00" {
        return Ok(DAY_MICROS);
    }
    let time = NaiveTime::parse_from_str(text, "%H:%M:%S%.f").map_err(|_| "not HH:MM:SS")?;
    Ok(time
        .signed_duration_since(NaiveTime::MIN)
        .num_microseconds()
        .unwrap_or(0))
}

/// A `timestamp`: `<date> HH:MM:SS[.ffffff][ BC]`.
pub(super) fn timestamp(text: &str) -> Result<NaiveDateTime, &'static str> {
    let (text, bc) = era(text);
    let (date, time) = text.split_once(' ').ok_or("not a date and a time")?;
    let micros = time_micros(time)?;
    let midnight = day(date, bc)?.and_time(NaiveTime::MIN);
    Ok(midnight + chrono::Duration::microseconds(micros))
}

/// `±HH[:MM[:SS]]` → seconds east of UTC.
pub(super) fn offset_seconds(offset: &str) -> Result<i64, &'static str> {
    let sign = match offset.as_bytes().first() {
        Some(b'-') => -1,
        Some(b'+') => 1,
        _ => return Err("no UTC offset"),
    };
    let mut seconds = 0;
    for (at, part) in offset[1..].split(':').enumerate() {
        let value: i64 = part.parse().map_err(|_| "offset not a number")?;
        seconds += value * [3600, 60, 1].get(at).copied().ok_or("offset too long")?;
    }
    Ok(sign * seconds)
}

/// A `timestamptz` in UTC: `<date> HH:MM:SS[.ffffff]±HH[:MM[:SS]][ BC]`.
pub(super) fn zoned(text: &str) -> Result<DateTime<Utc>, &'static str> {
    let (text, bc) = era(text);
    let (date, rest) = text.split_once(' ').ok_or("not a date and a time")?;
    let at = rest.rfind(['+', '-']).ok_or("no UTC offset")?;
    let (time, offset) = rest.split_at(at);
    let local = day(date, bc)?.and_time(NaiveTime::MIN)
        + chrono::Duration::microseconds(time_micros(time)?);
    Ok((local - chrono::Duration::seconds(offset_seconds(offset)?)).and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_postgresql_prints_is_read() {
        let d = |y, m, d| NaiveDate::from_ymd_opt(y, m, d).unwrap();
        assert_eq!(date("2026-03-04"), Ok(d(2026, 3, 4)));
        assert_eq!(date("0044-03-15 BC"), Ok(d(-43, 3, 15)));
        assert_eq!(date("10000-01-01"), Ok(d(10000, 1, 1)));
        assert_eq!(time_micros("24:00:00"), Ok(86_400_000_000));
        assert_eq!(time_micros("00:00:00.5"), Ok(500_000));
        assert_eq!(
            timestamp("0001-01-01 00:00:00 BC").map(|t| t.and_utc().timestamp()),
            Ok(-62_167_219_200)
        );
        assert_eq!(
            zoned("2026-03-04 05:06:07.5+02").map(|t| t.to_rfc3339()),
            Ok("2026-03-04T03:06:07.500+00:00".to_owned())
        );
        assert_eq!(
            zoned("1900-01-01 00:00:00+05:53:28").map(|t| t.to_rfc3339()),
            Ok("1899-12-31T18:06:32+00:00".to_owned())
        );
        assert_eq!(
            zoned("0044-03-15 10:00:00+00 BC").map(|t| t.timestamp()),
            Ok(-63_517_788_000)
        );
    }

    #[test]
    fn what_is_no_date_is_refused() {
        assert!(date("2026-02-30").is_err());
        assert!(date("March 4").is_err());
        assert!(timestamp("2026-03-04").is_err());
        assert!(zoned("2026-03-04 05:06:07").is_err());
    }
}
