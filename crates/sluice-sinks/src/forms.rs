//! The JSON forms of the column types JSON has no type for — a date, a time of day, an
//! interval, bytes, a network address, a padded `char(n)` — each a string, read strictly, so
//! that what the table stores is the value the record wrote (or the record is a dead letter
//! with the reason). Each reader returns what is wrong in words; the decoder names the field.

use base64::Engine as _;
use chrono::{Datelike, NaiveDate};
use std::net::IpAddr;

use super::checks::Check;

/// Microseconds in a day.
pub const MICROS_PER_DAY: i64 = 86_400_000_000;

/// A date `YYYY-MM-DD` with a year of 1–9999.
pub(super) fn date(text: &str) -> Result<NaiveDate, String> {
    if !shaped(text, 10, &[(4, b'-'), (7, b'-')]) {
        return Err("the form is YYYY-MM-DD".into());
    }
    let number = |range: std::ops::Range<usize>| text[range].parse::<u32>().unwrap_or(0);
    let year = i32::try_from(number(0..4)).unwrap_or(0);
    if year == 0 {
        return Err("years run from 0001".into());
    }
    NaiveDate::from_ymd_opt(year, number(5..7), number(8..10)).ok_or_else(|| "no such day".into())
}

/// A UUID in any form PostgreSQL's `uuid` input reads — 32 hex digits, upper or lower case,
/// a hyphen allowed after any group of four, the whole optionally in braces
/// (`{a0eebc999c0b4ef8bb6d6bb9bd380a11}`) — or in the `uuid` crate's (`urn:uuid:…`).
pub fn uuid(text: &str) -> Option<uuid::Uuid> {
    postgres_uuid(text).or_else(|| uuid::Uuid::parse_str(text).ok())
}

/// PostgreSQL's `string_to_uuid`: an optional `{`, 16 bytes of two hex digits each with an
/// optional `-` after every second byte but the last, the `}` if one opened.
fn postgres_uuid(text: &str) -> Option<uuid::Uuid> {
    let (mut rest, braced) = match text.strip_prefix('{') {
        Some(rest) => (rest.as_bytes(), true),
        None => (text.as_bytes(), false),
    };
    let mut bytes = [0u8; 16];
    for (i, byte) in bytes.iter_mut().enumerate() {
        let [high, low, tail @ ..] = rest else {
            return None;
        };
        let digit = |c: u8| char::from(c).to_digit(16);
        *byte = u8::try_from(digit(*high)? * 16 + digit(*low)?).ok()?;
        rest = match tail {
            [b'-', after @ ..] if i % 2 == 1 && i < 15 => after,
            _ => tail,
        };
    }
    match (rest, braced) {
        ([], false) | ([b'}'], true) => Some(uuid::Uuid::from_bytes(bytes)),
        _ => None,
    }
}

/// Whether a text constant is a value of a column checked by `check`, for the checks of
/// the types whose JSON form is a string of their own (`None` for any other check).
pub(super) fn constant_fits(text: &str, check: &Check) -> Option<Result<(), String>> {
    let described = |form: &str, read: Result<(), String>| {
        read.map_err(|why| format!("it is not {form} ({why})"))
    };
    Some(match check {
        Check::Date => described("a date", date(text).map(|_| ())),
        Check::Time => described("a time of day", time(text).map(|_| ())),
        Check::Interval => described("an interval", interval(text).map(|_| ())),
        Check::Bytes => described("base64 bytes", bytes(text).map(|_| ())),
        Check::Address { network } => {
            described("an IP address", address(text, *network).map(|_| ()))
        }
        Check::Padded(max) => match max {
            _ if text.contains('\0') => Err("it contains U+0000".into()),
            Some(max) if unpadded(text).chars().count() > *max => Err(format!(
                "more than {max} characters besides trailing spaces"
            )),
            _ => Ok(()),
        },
        Check::Label { type_name, labels } => {
            if labels.iter().any(|label| label == text) {
                Ok(())
            } else {
                Err(format!("it is not a label of enum {type_name}"))
            }
        }
        _ => return None,
    })
}

/// `len` ASCII bytes, digits but for the separators at their positions (`YYYY-MM-DD`).
fn shaped(text: &str, len: usize, separators: &[(usize, u8)]) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == len
        && bytes
            .iter()
            .enumerate()
            .all(|(i, b)| match separators.iter().find(|(at, _)| *at == i) {
                Some((_, separator)) => b == separator,
                None => b.is_ascii_digit(),
            })
}

/// A date as PostgreSQL reads it back (`2026-12-02`).
pub fn date_text(date: NaiveDate) -> String {
    format!("{:04}-{:02}-{:02}", date.year(), date.month(), date.day())
}

/// A time of day `HH:MM:SS` with up to six fractional digits, as microseconds since
/// midnight (`24:00:00` and leap seconds are not read).
pub(super) fn time(text: &str) -> Result<i64, String> {
    let form = || "the form is HH:MM:SS with up to 6 fractional digits".to_owned();
    let (clock, fraction) = match text.split_once('.') {
        Some((clock, fraction)) => (clock, Some(fraction)),
        None => (text, None),
    };
    if !shaped(clock, 8, &[(2, b':'), (5, b':')]) {
        return Err(form());
    }
    let number = |range: std::ops::Range<usize>| clock[range].parse::<i64>().unwrap_or(0);
    let (hours, minutes, seconds) = (number(0..2), number(3..5), number(6..8));
    if hours > 23 || minutes > 59 || seconds > 59 {
        return Err("hours run to 23, minutes and seconds to 59".into());
    }
    let micros = match fraction {
        None => 0,
        Some(digits) => fraction_micros(digits).ok_or_else(form)?,
    };
    Ok(((hours * 60 + minutes) * 60 + seconds) * 1_000_000 + micros)
}

/// Up to six fractional digits as microseconds.
fn fraction_micros(digits: &str) -> Option<i64> {
    if digits.is_empty() || digits.len() > 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value: i64 = digits.parse().ok()?;
    Some(value * 10_i64.pow(6 - u32::try_from(digits.len()).ok()?))
}

/// A time of day rounded to `precision` fractional digits as a `time(p)` column rounds it:
/// half up (`23:59:59.7` in a `time(0)` is `24:00:00`).
pub(super) fn round_time(micros: i64, precision: u32) -> i64 {
    if precision >= 6 {
        return micros;
    }
    let unit = 10_i64.pow(6 - precision);
    (micros + unit / 2) / unit * unit
}

/// A time of day as PostgreSQL reads it (`HH:MM:SS.ffffff`, up to `24:00:00.000000`).
pub fn time_text(micros: i64) -> String {
    let (seconds, fraction) = (micros / 1_000_000, micros % 1_000_000);
    format!(
        "{:02}:{:02}:{:02}.{fraction:06}",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    )
}

/// An interval as PostgreSQL keeps it: months, days and microseconds, each signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Interval {
    /// Months (a year is 12).
    pub months: i32,
    /// Days (a week is 7).
    pub days: i32,
    /// Microseconds (hours, minutes and seconds).
    pub micros: i64,
}

impl Interval {
    /// The span PostgreSQL compares intervals by: a month is 30 days, a day 24 hours
    /// (`P1D` = `PT24H`, `P1M` = `P30D`).
    pub fn span(self) -> i128 {
        (i128::from(self.months) * 30 + i128::from(self.days)) * i128::from(MICROS_PER_DAY)
            + i128::from(self.micros)
    }

    /// The ISO 8601 text PostgreSQL reads back as the same three fields.
    pub fn text(self) -> String {
        let sign = if self.micros < 0 { "-" } else { "" };
        let micros = self.micros.unsigned_abs();
        format!(
            "P{}M{}DT{sign}{}.{:06}S",
            self.months,
            self.days,
            micros / 1_000_000,
            micros % 1_000_000
        )
    }
}

/// An ISO 8601 duration with designators, `P[nY][nM][nW][nD][T[nH][nM][n[.f]S]]`: each
/// number an integer with an optional `-`, the seconds with up to six fractional digits.
pub(super) fn interval(text: &str) -> Result<Interval, String> {
    let form = || {
        "the form is ISO 8601 P[nY][nM][nW][nD][T[nH][nM][nS]] (seconds with up to 6 \
         fractional digits)"
            .to_owned()
    };
    let too_big = || "it does not fit an interval".to_owned();
    let rest = text.strip_prefix('P').ok_or_else(form)?;
    let (date_part, time_part) = match rest.split_once('T') {
        Some((date, time)) if !time.is_empty() => (date, Some(time)),
        Some(_) => return Err(form()),
        None => (rest, None),
    };
    let mut months: i64 = 0;
    let mut days: i64 = 0;
    let mut micros: i64 = 0;
    let mut any = false;
    for (number, unit) in components(date_part, "YMWD").ok_or_else(form)? {
        let value: i64 = number.parse().map_err(|_| form())?;
        any = true;
        let (total, factor) = match unit {
            'Y' => (&mut months, 12),
            'M' => (&mut months, 1),
            'W' => (&mut days, 7),
            _ => (&mut days, 1),
        };
        *total = value
            .checked_mul(factor)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(too_big)?;
    }
    for (number, unit) in components(time_part.unwrap_or(""), "HMS").ok_or_else(form)? {
        any = true;
        let value = match unit {
            'S' => seconds_micros(number).ok_or_else(form)?,
            _ => {
                let whole: i64 = number.parse().map_err(|_| form())?;
                let factor = if unit == 'H' {
                    3_600_000_000
                } else {
                    60_000_000
                };
                whole.checked_mul(factor).ok_or_else(too_big)?
            }
        };
        micros = micros.checked_add(value).ok_or_else(too_big)?;
    }
    if !any {
        return Err(form());
    }
    Ok(Interval {
        months: i32::try_from(months).map_err(|_| too_big())?,
        days: i32::try_from(days).map_err(|_| too_big())?,
        micros,
    })
}

/// The `<number><unit>` pairs of one part of a duration, units in the order of `units`, each
/// at most once; `None` when the part is not that.
fn components<'t>(part: &'t str, units: &str) -> Option<Vec<(&'t str, char)>> {
    let mut pairs = Vec::new();
    let mut rest = part;
    let mut allowed = units;
    while !rest.is_empty() {
        let at = rest.find(|c: char| c.is_ascii_alphabetic())?;
        let unit = rest[at..].chars().next()?;
        let position = allowed.find(unit)?;
        let number = &rest[..at];
        let digits = number.strip_prefix('-').unwrap_or(number);
        let fractional = unit == 'S' && digits.contains('.');
        if digits.is_empty() || (!fractional && !digits.bytes().all(|b| b.is_ascii_digit())) {
            return None;
        }
        pairs.push((number, unit));
        allowed = &allowed[position + 1..];
        rest = &rest[at + 1..];
    }
    Some(pairs)
}

/// Seconds with up to six fractional digits (and an optional `-`) as microseconds.
fn seconds_micros(number: &str) -> Option<i64> {
    let (negative, digits) = match number.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, number),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let fraction = if fraction.is_empty() && !digits.contains('.') {
        0
    } else {
        fraction_micros(fraction)?
    };
    let micros = whole
        .parse::<i64>()
        .ok()?
        .checked_mul(1_000_000)?
        .checked_add(fraction)?;
    Some(if negative { -micros } else { micros })
}

/// Bytes written as standard base64 (RFC 4648, with padding).
pub(super) fn bytes(text: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("not standard base64: {e}"))
}

/// Bytes as PostgreSQL's hex input reads them (`\x0102`).
pub fn bytes_text(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(2 + bytes.len() * 2);
    text.push_str("\\x");
    for byte in bytes {
        text.push_str(&format!("{byte:02x}"));
    }
    text
}

/// A network address `addr` or `addr/prefix` (IPv4 or IPv6), as `addr/prefix` (the prefix
/// of a bare address is all of it); for a `cidr` (`network`), no bit may be set right of the
/// prefix.
pub(super) fn address(text: &str, network: bool) -> Result<String, String> {
    let form = || "the form is an IPv4 or IPv6 address with an optional /prefix".to_owned();
    let (addr, prefix) = match text.split_once('/') {
        Some((addr, prefix)) => (addr, Some(prefix)),
        None => (text, None),
    };
    let addr: IpAddr = addr.parse().map_err(|_| form())?;
    let bits: u32 = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = match prefix {
        None => bits,
        Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
            digits.parse::<u32>().map_err(|_| form())?
        }
        Some(_) => return Err(form()),
    };
    if prefix > bits {
        return Err(format!(
            "the prefix of an address of {bits} bits is at most {bits}"
        ));
    }
    if network {
        let value: u128 = match addr {
            IpAddr::V4(v4) => u128::from(u32::from(v4)),
            IpAddr::V6(v6) => u128::from(v6),
        };
        let host_bits = bits - prefix;
        let host = if host_bits == 0 {
            0
        } else {
            value & (u128::MAX >> (128 - host_bits))
        };
        if host != 0 {
            return Err("a network has no bits set right of its prefix".into());
        }
    }
    Ok(format!("{addr}/{prefix}"))
}

/// The characters a `char(n)` keeps: trailing spaces do not count (PostgreSQL drops those
/// beyond `n` and compares without them).
pub(super) fn unpadded(text: &str) -> &str {
    text.trim_end_matches(' ')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_in_every_form_postgresql_reads() {
        let id = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11";
        for form in [
            id,
            "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11",
            "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}",
            "a0eebc999c0b4ef8bb6d6bb9bd380a11",
            "a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11",
            "{a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11}",
            "{a0eebc999c0b4ef8bb6d6bb9bd380a11}",
            "urn:uuid:a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        ] {
            assert_eq!(
                uuid(form).map(|u| u.to_string()).as_deref(),
                Some(id),
                "{form}"
            );
        }
        for refused in [
            "",
            "a0eebc99",
            "{a0eebc999c0b4ef8bb6d6bb9bd380a11",
            "a0eebc999c0b4ef8bb6d6bb9bd380a11}",
            "a0eebc999c0b4ef8bb6d6bb9bd380a11-",
            "a0e-ebc999c0b4ef8bb6d6bb9bd380a11",
            "a0eebc999c0b4ef8bb6d6bb9bd380a1g",
            "a0eebc999c0b4ef8bb6d6bb9bd380a11ff",
        ] {
            assert_eq!(uuid(refused), None, "{refused}");
        }
    }

    #[test]
    fn dates_are_iso_days_that_exist() {
        assert_eq!(date("2024-02-29").map(date_text), Ok("2024-02-29".into()));
        for bad in [
            "2023-02-29",
            "0000-01-01",
            "2024-1-01",
            "20240101",
            "2024-01-01T00:00",
        ] {
            assert!(date(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn times_round_as_the_column_does() {
        assert_eq!(time("23:59:59.7"), Ok(86_399_700_000));
        assert_eq!(time_text(round_time(86_399_700_000, 0)), "24:00:00.000000");
        assert_eq!(
            time_text(time("00:00:01.000001").unwrap_or(0)),
            "00:00:01.000001"
        );
        for bad in [
            "24:00:00",
            "12:60:00",
            "12:00:60",
            "1:00:00",
            "12:00:00.1234567",
            "12:00:00.",
        ] {
            assert!(time(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn intervals_keep_their_three_fields_and_compare_by_span() {
        let read = |text: &str| interval(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(
            read("P1Y2M1W3DT4H5M6.5S"),
            Interval {
                months: 14,
                days: 10,
                micros: 14_706_500_000
            }
        );
        assert_eq!(read("PT-1.5S").micros, -1_500_000);
        assert_eq!(read("P1D").span(), read("PT24H").span());
        assert_eq!(read("P1M").span(), read("P30D").span());
        assert_eq!(
            interval(&read("P-1M2DT-0.000001S").text()),
            Ok(read("P-1M2DT-0.000001S"))
        );
        for bad in [
            "P",
            "PT",
            "1D",
            "P1H",
            "PT1D",
            "P1D1Y",
            "P1.5D",
            "P99999999999Y",
            "P1DT",
        ] {
            assert!(interval(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn addresses_get_their_prefix_and_networks_no_host_bits() {
        assert_eq!(address("10.0.0.1", false), Ok("10.0.0.1/32".into()));
        assert_eq!(
            address("2001:DB8:0::1/64", false),
            Ok("2001:db8::1/64".into())
        );
        assert_eq!(address("10.1.0.0/16", true), Ok("10.1.0.0/16".into()));
        assert_eq!(address("::/0", true), Ok("::/0".into()));
        for (bad, network) in [
            ("10.0.0.1/24", true),
            ("10.0.0.1/33", false),
            ("010.0.0.1", false),
            ("10.1/16", true),
            ("fe80::1%eth0", false),
        ] {
            assert!(address(bad, network).is_err(), "{bad}");
        }
    }

    #[test]
    fn bytes_are_base64_and_travel_as_hex() {
        assert_eq!(bytes("AAEC/w=="), Ok(vec![0, 1, 2, 255]));
        assert_eq!(bytes_text(&[0, 1, 2, 255]), "\\x000102ff");
        assert!(bytes("AAEC/w").is_err());
        assert!(bytes("not base64!").is_err());
    }
}
