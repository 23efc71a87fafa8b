//! PostgreSQL's date and time text (`DateStyle = ISO`, the session pinned to it) read in full:
//! years of more than four digits, `BC` (year 1 BC is the proleptic year 0, as Java's
//! `LocalDate` counts), an offset with seconds, and `24:00:00`, which a `time` may hold. A
//! value these cannot read stops the capture, so none that PostgreSQL prints is refused.

use chrono::NaiveTime;

/// Microseconds in a day: `24:00:00`.
const DAY_MICROS: i64 = 86_400_000_000;

/// `text` without a trailing ` BC`, and whether it had one.
fn era(text: &str) -> (&str, bool) {
    match text.strip_suffix(" BC") {
        Some(rest) => (rest, true),
        None => (text, false),
    }
}

/// Whether proleptic Gregorian `year` is a leap year.
fn leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// Days from 1970-01-01 to proleptic Gregorian `year-month-day` (Howard Hinnant's
/// `days_from_civil`): any year PostgreSQL holds (4713 BC to 5874897), which chrono's dates
/// (to 262142) do not all reach.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The proleptic Gregorian `(year, month, day)` of `days` from 1970-01-01
/// (`civil_from_days`, the inverse of [`days_from_civil`]).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `YYYY…-MM-DD` (four or more year digits), in the era given, as days from 1970-01-01.
fn day(text: &str, bc: bool) -> Result<i64, &'static str> {
    let mut parts = text.splitn(3, '-');
    let mut number =
        |what| -> Result<i64, &'static str> { parts.next().ok_or(what)?.parse().map_err(|_| what) };
    let year = number("no year")?;
    let month = number("no month")?;
    let day = number("no day")?;
    // PostgreSQL's dates end in 5874897; past ten million years is no date it prints.
    if !(0..=10_000_000).contains(&year) {
        return Err("year out of range");
    }
    let year = if bc { 1 - year } else { year };
    let last = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap(year) => 29,
        2 => 28,
        _ => return Err("no such month"),
    };
    if !(1..=last).contains(&day) {
        return Err("no such day");
    }
    Ok(days_from_civil(year, month, day))
}

/// A `date`, as days from 1970-01-01.
pub(super) fn date(text: &str) -> Result<i64, &'static str> {
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

/// A count from the epoch that PostgreSQL's last years pass (microseconds after 294246):
/// held at the 64-bit bounds, the nearest value a Debezium timestamp can carry.
pub(super) fn saturated(count: i128) -> i64 {
    i64::try_from(count).unwrap_or(if count < 0 { i64::MIN } else { i64::MAX })
}

/// A `timestamp` (`<date> HH:MM:SS[.ffffff][ BC]`) as microseconds from the epoch, wider than
/// 64 bits (a caller in milliseconds divides before it [`saturated`]s).
pub(super) fn timestamp(text: &str) -> Result<i128, &'static str> {
    let (text, bc) = era(text);
    let (date, time) = text.split_once(' ').ok_or("not a date and a time")?;
    let micros = time_micros(time)?;
    let days = day(date, bc)?;
    Ok(i128::from(days) * i128::from(DAY_MICROS) + i128::from(micros))
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

/// A `timestamptz` (`<date> HH:MM:SS[.ffffff]±HH[:MM[:SS]][ BC]`) as microseconds from the
/// epoch in UTC (not bounded: every year PostgreSQL prints fits).
pub(super) fn zoned(text: &str) -> Result<i128, &'static str> {
    let (text, bc) = era(text);
    let (date, rest) = text.split_once(' ').ok_or("not a date and a time")?;
    let at = rest.rfind(['+', '-']).ok_or("no UTC offset")?;
    let (time, offset) = rest.split_at(at);
    let local =
        i128::from(day(date, bc)?) * i128::from(DAY_MICROS) + i128::from(time_micros(time)?);
    Ok(local - i128::from(offset_seconds(offset)?) * 1_000_000)
}

/// `micros` from the epoch in UTC as ISO-8601 with six fraction digits, as Java's
/// `ISO_OFFSET_DATE_TIME` writes the year: four digits at least, a `+` past 9999, a `-`
/// before year 0 (1 BC).
pub(super) fn iso_utc(micros: i128) -> String {
    let day_micros = i128::from(DAY_MICROS);
    let days = i64::try_from(micros.div_euclid(day_micros)).unwrap_or_default();
    let of_day = i64::try_from(micros.rem_euclid(day_micros)).unwrap_or_default();
    let (year, month, day) = civil_from_days(days);
    let year = if year > 9999 {
        format!("+{year}")
    } else if year < 0 {
        format!("-{:04}", -year)
    } else {
        format!("{year:04}")
    };
    let seconds = of_day / 1_000_000;
    format!(
        "{year}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60,
        of_day % 1_000_000
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    #[test]
    fn what_postgresql_prints_is_read() {
        let d = |y, m, d| {
            NaiveDate::from_ymd_opt(y, m, d)
                .unwrap()
                .signed_duration_since(NaiveDate::from_ymd_opt(1970, 1, 1).unwrap())
                .num_days()
        };
        assert_eq!(date("2026-03-04"), Ok(d(2026, 3, 4)));
        assert_eq!(date("0044-03-15 BC"), Ok(d(-43, 3, 15)));
        assert_eq!(date("10000-01-01"), Ok(d(10000, 1, 1)));
        assert_eq!(date("4714-11-24 BC"), Ok(d(-4713, 11, 24)));
        assert_eq!(date("262142-12-31"), Ok(95_026_236));
        assert_eq!(time_micros("24:00:00"), Ok(86_400_000_000));
        assert_eq!(time_micros("00:00:00.5"), Ok(500_000));
        assert_eq!(
            timestamp("0001-01-01 00:00:00 BC"),
            Ok(-62_167_219_200_000_000)
        );
        assert_eq!(
            zoned("2026-03-04 05:06:07.5+02").map(iso_utc),
            Ok("2026-03-04T03:06:07.500000Z".to_owned())
        );
        assert_eq!(
            zoned("1900-01-01 00:00:00+05:53:28").map(iso_utc),
            Ok("1899-12-31T18:06:32.000000Z".to_owned())
        );
        assert_eq!(
            zoned("0044-03-15 10:00:00+00 BC"),
            Ok(-63_517_788_000_000_000)
        );
        assert_eq!(
            zoned("0044-03-15 10:00:00+00 BC").map(iso_utc),
            Ok("-0043-03-15T10:00:00.000000Z".to_owned())
        );
        assert_eq!(
            zoned("10000-01-01 00:00:00+00").map(iso_utc),
            Ok("+10000-01-01T00:00:00.000000Z".to_owned())
        );
    }

    #[test]
    fn postgresqls_last_years_are_read() {
        // Dates to 5874897 (chrono's end at 262142 once stopped the capture here).
        assert_eq!(date("262143-01-01"), Ok(95_026_237));
        assert_eq!(date("5874897-12-31"), Ok(2_145_042_905));
        assert_eq!(date("294276-12-31"), Ok(106_762_939));
        // A timestamp past the 64-bit microseconds is held at the bound.
        assert_eq!(
            timestamp("262143-06-01 00:00:00"),
            Ok(95_026_388 * 86_400_000_000)
        );
        assert_eq!(
            timestamp("294276-12-31 23:59:59.999999").map(saturated),
            Ok(i64::MAX)
        );
        assert_eq!(
            zoned("262143-06-01 00:00:00+00").map(iso_utc),
            Ok("+262143-06-01T00:00:00.000000Z".to_owned())
        );
        assert_eq!(
            zoned("294276-12-31 23:59:59.999999+00").map(iso_utc),
            Ok("+294276-12-31T23:59:59.999999Z".to_owned())
        );
        // Every day from 4713 BC to the end round-trips, leap days included.
        for days in (-2_440_588..2_145_042_906).step_by(9_973) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(date("2000-02-29"), Ok(11_016));
        assert!(date("1900-02-29").is_err());
        assert!(date("262144-02-30").is_err());
    }

    #[test]
    fn what_is_no_date_is_refused() {
        assert!(date("2026-02-30").is_err());
        assert!(date("2026-13-01").is_err());
        assert!(date("March 4").is_err());
        assert!(timestamp("2026-03-04").is_err());
        assert!(zoned("2026-03-04 05:06:07").is_err());
    }
}
