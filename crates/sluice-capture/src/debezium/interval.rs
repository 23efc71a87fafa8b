//! An `interval` as Debezium's `io.debezium.time.MicroDuration` (`interval.handling.mode=
//! numeric`): microseconds, a month counted as 365.25 / 12 days. PostgreSQL's text output in
//! `IntervalStyle = postgres` (the session is pinned to it) is read as pgjdbc's `PGInterval`
//! reads it, and the sum is made in floating point in Debezium's order
//! (`MicroDuration.durationMicros`), so the same interval gives the same number.

/// Debezium's `MicroDuration.DAYS_PER_MONTH_AVG`.
const DAYS_PER_MONTH_AVG: f64 = 365.25 / 12.0;

/// `1 year 2 mons -3 days +04:05:06.789` → microseconds.
pub(super) fn micros(text: &str) -> Result<i64, &'static str> {
    let (mut years, mut months, mut days) = (0i32, 0i32, 0i32);
    let (mut hours, mut minutes, mut seconds) = (0i32, 0i32, 0f64);
    let mut words = text.split_whitespace();
    while let Some(word) = words.next() {
        if word.contains(':') {
            (hours, minutes, seconds) = time(word)?;
            continue;
        }
        let n: i32 = word.parse().map_err(|_| "not a number of units")?;
        let unit = words.next().ok_or("a number without a unit")?;
        match unit.trim_end_matches('s') {
            "year" => years = n,
            "mon" => months = n,
            "day" => days = n,
            _ => return Err("a unit other than years, months and days before the time"),
        }
    }
    let total_months = years
        .checked_mul(12)
        .and_then(|m| m.checked_add(months))
        .ok_or("too many months")?;
    let number_of_days = f64::from(total_months) * DAYS_PER_MONTH_AVG + f64::from(days);
    let number_of_seconds =
        ((number_of_days * 24.0 + f64::from(hours)) * 60.0 + f64::from(minutes)) * 60.0 + seconds;
    // Java's (long) cast: toward zero.
    Ok((number_of_seconds * 1_000_000.0) as i64)
}

/// `[+-]HH:MM:SS[.ffffff]` → (hours, minutes, seconds), each with the sign; the seconds as
/// `PGInterval.getSeconds` gives them (whole seconds plus the microseconds over 10⁶).
fn time(word: &str) -> Result<(i32, i32, f64), &'static str> {
    let (sign, rest) = match word.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, word.strip_prefix('+').unwrap_or(word)),
    };
    let mut parts = rest.split(':');
    let mut number = |what| -> Result<&str, &'static str> { parts.next().ok_or(what) };
    let hours: i32 = number("no hours")?
        .parse()
        .map_err(|_| "hours not a number")?;
    let minutes: i32 = number("no minutes")?
        .parse()
        .map_err(|_| "minutes not a number")?;
    let second_text = number("no seconds")?;
    let (whole, fraction) = second_text.split_once('.').unwrap_or((second_text, ""));
    let whole: i32 = whole.parse().map_err(|_| "seconds not a number")?;
    if fraction.len() > 6 || !fraction.chars().all(|c| c.is_ascii_digit()) {
        return Err("more than microseconds");
    }
    let micros: i32 = format!("{fraction:0<6}")
        .parse()
        .map_err(|_| "seconds not a number")?;
    let seconds = f64::from(whole) + f64::from(micros) / 1e6;
    Ok((sign * hours, sign * minutes, f64::from(sign) * seconds))
}

#[cfg(test)]
mod tests {
    use super::micros;

    #[test]
    fn intervals_are_debeziums_microseconds() {
        // Debezium 3.6.1 wrote 93784500000 for '1 day 02:03:04.5' (tests/data/debezium/types).
        assert_eq!(micros("1 day 02:03:04.5"), Ok(93_784_500_000));
        assert_eq!(micros("00:00:00"), Ok(0));
        assert_eq!(micros("-00:00:01.25"), Ok(-1_250_000));
        assert_eq!(micros("3 days"), Ok(259_200_000_000));
        // A month is 30.4375 days; a year 365.25.
        assert_eq!(micros("1 mon"), Ok(2_629_800_000_000));
        assert_eq!(micros("1 year"), Ok(31_557_600_000_000));
        assert_eq!(micros("-1 days +02:00:00"), Ok(-79_200_000_000));
        // ((14 × 30.4375 + 3) days, 04:05, 6 + 789000 / 10⁶ s) summed in doubles, as Java does.
        assert_eq!(
            micros("1 year 2 mons 3 days 04:05:06.789"),
            Ok(37_091_106_789_000)
        );
        assert!(micros("1 fortnight").is_err());
        assert!(micros("P1D").is_err());
    }
}
