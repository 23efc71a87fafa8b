//! Debezium's value-handling modes, and what a value without a schema reads as.
//!
//! A Debezium connector (and any Kafka Connect source) writes some column types in forms that
//! only its schema names: a `Decimal` as base64 bytes, a time as an integer of milliseconds or
//! microseconds, bytes as base64 or hex. With the JsonConverter's `schemas.enable=false` the
//! record carries no schema, so the value names no type: the column's SQL type (from the
//! catalog) and the connector's declared mode decide how it reads (docs/ARCHITECTURE.md and
//! docs/sinks.md, "Schemaless Debezium streams"). A form two modes share (`"1234"` is base64
//! and a decimal; `1000` is milliseconds and microseconds) is read only by the declared mode,
//! never guessed; a form no other mode gives (an integer for a date, `…Z` after a time of
//! day) is read whatever the mode.

use base64::Engine as _;
use chrono::{DateTime, Datelike, NaiveDate, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::checks::Check;
use super::decimal::Decimal;
use super::decode::cell::Cell;
use super::forms::{self, Interval, MICROS_PER_DAY};
use super::infinity;
use super::table::SqlType;
use crate::messages::DecodeError;
use crate::messages::fields::{dynamic, echo};

/// The connector's modes, as a sink declares them (`debezium = { … }`); the defaults are
/// Debezium's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct DebeziumModes {
    /// The converter's `schemas.enable`: whether records carry their Connect schema.
    pub schemas: bool,
    /// `decimal.handling.mode`.
    pub decimal: DecimalMode,
    /// `time.precision.mode`.
    pub time: TimeMode,
    /// `binary.handling.mode`.
    pub binary: BinaryMode,
    /// Seconds a key change's create that keeps a value waits for its delete (the old key's
    /// partition behind) before it reads the old key's row as it is; 0: it never waits.
    pub key_change_wait: u64,
}

/// The default of [`DebeziumModes::key_change_wait`]: ten minutes.
pub const DEFAULT_KEY_CHANGE_WAIT: u64 = 600;

impl Default for DebeziumModes {
    fn default() -> Self {
        Self {
            schemas: true,
            decimal: DecimalMode::Precise,
            time: TimeMode::Adaptive,
            binary: BinaryMode::Bytes,
            key_change_wait: DEFAULT_KEY_CHANGE_WAIT,
        }
    }
}

impl DebeziumModes {
    /// Whether a `numeric` column can be read: `precise` writes a `numeric(p, s)` as bytes
    /// whose scale only the schema has.
    pub fn reads_numeric(self) -> bool {
        self.schemas || self.decimal != DecimalMode::Precise
    }
}

/// As `sluice sinks validate` prints them: `schemas off, decimal string, time adaptive,
/// binary bytes, key changes wait 600 s`.
impl std::fmt::Display for DebeziumModes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "schemas {}, decimal {}, time {}, binary {}, key changes wait {} s",
            if self.schemas { "on" } else { "off" },
            mode_name(self.decimal),
            mode_name(self.time),
            mode_name(self.binary),
            self.key_change_wait
        )
    }
}

/// A mode's name as the file writes it.
fn mode_name(mode: impl Serialize) -> String {
    serde_json::to_value(mode)
        .ok()
        .and_then(|value| value.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// `decimal.handling.mode`: how a `numeric` travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DecimalMode {
    /// A Connect `Decimal`: base64 of the unscaled value, the scale in the schema.
    Precise,
    /// A string holding the decimal (`"9975623.66"`), digit for digit.
    String,
    /// A JSON number (a double).
    Double,
}

/// `time.precision.mode`: how a date, a time of day and a timestamp without zone travel (a
/// `timestamptz` is ISO 8601 text in every mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeMode {
    /// A time or timestamp of precision 0–3 in milliseconds, of 4–6 in microseconds.
    Adaptive,
    /// A time in microseconds; a timestamp as `adaptive`.
    AdaptiveTimeMicroseconds,
    /// Kafka Connect's logical types: milliseconds.
    Connect,
    /// Microseconds.
    Microseconds,
    /// Nanoseconds.
    Nanoseconds,
    /// ISO 8601 text (`2017-09-15Z`, `04:05:11.789Z`, `2019-07-09T02:28:57.1Z`).
    Isostring,
}

/// `binary.handling.mode`: how a `bytea` travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BinaryMode {
    /// Connect bytes, which the JsonConverter writes as standard base64.
    #[default]
    Bytes,
    /// Standard base64 text.
    Base64,
    /// URL-safe base64 text (`-` and `_`).
    Base64UrlSafe,
    /// Hexadecimal text.
    Hex,
}

/// A column's own choice for a `numeric` (`{ field = "amount", decimal = "string" }`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DecimalForm {
    /// A JSON number only (the default of a `json` sink).
    Number,
    /// A string holding a decimal, digit for digit, or a JSON number.
    String,
}

/// A count of time since an origin, in one unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    /// Milliseconds.
    Millis,
    /// Microseconds.
    Micros,
    /// Nanoseconds.
    Nanos,
}

impl Unit {
    /// How many of it make a second.
    pub(crate) fn per_second(self) -> i64 {
        match self {
            Self::Millis => 1_000,
            Self::Micros => 1_000_000,
            Self::Nanos => 1_000_000_000,
        }
    }

    /// `value` units as microseconds (nanoseconds rounded as PostgreSQL rounds the digits of
    /// a fraction of a second, ties to even); `None` when it overflows.
    pub(crate) fn micros(self, value: i64) -> Option<i64> {
        match self {
            Self::Millis => value.checked_mul(1_000),
            Self::Micros => Some(value),
            Self::Nanos => {
                // Below 10^9: a u32.
                let nanos = u32::try_from(value.rem_euclid(1_000_000_000)).ok()?;
                crate::messages::fields::epoch_micros(value.div_euclid(1_000_000_000), nanos)
            }
        }
    }

    /// The unit's name in a reason.
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Millis => "milliseconds",
            Self::Micros => "microseconds",
            Self::Nanos => "nanoseconds",
        }
    }
}

/// The forms one column reads beside its own (docs/sinks.md, "Types and their JSON forms").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Reading {
    /// A `numeric` reads a string holding a decimal.
    pub(super) decimal_strings: bool,
    /// Debezium's forms no other mode shares: a date as days since 1970-01-01, an interval
    /// as microseconds, a date or time of day with a trailing `Z`.
    pub(super) debezium: bool,
    /// A time of day as an integer count since midnight.
    pub(super) time_unit: Option<Unit>,
    /// A timestamp as an integer count since 1970-01-01T00:00:00Z.
    pub(super) epoch_unit: Option<Unit>,
    /// How a `bytea`'s string is encoded.
    pub(super) binary: BinaryMode,
    /// A `numeric` of a Debezium or Connect sink that reads no decimal string: a string's
    /// reason says which mode reads it.
    pub(super) numeric_hint: bool,
}

impl Reading {
    /// How a column of `kind` (an array: its elements) reads: `modes` when the sink is a
    /// Debezium or Connect sink, `decimal` the column's own choice, `precision` a time or
    /// timestamp column's fractional digits (`None`: six), standing for the source column's
    /// (a replica has its source's types).
    pub(super) fn new(
        modes: Option<DebeziumModes>,
        decimal: Option<DecimalForm>,
        kind: &SqlType,
        precision: Option<u32>,
    ) -> Self {
        let kind = match kind {
            SqlType::Array(element) => element.as_ref(),
            kind => kind,
        };
        let decimal_strings = match decimal {
            Some(form) => form == DecimalForm::String,
            None => modes.is_some_and(|m| m.decimal == DecimalMode::String),
        } && kind.is_decimal();
        let Some(modes) = modes else {
            return Self {
                decimal_strings,
                ..Self::default()
            };
        };
        let milli = precision.is_some_and(|p| p <= 3);
        let adaptive = if milli { Unit::Millis } else { Unit::Micros };
        let (time_unit, epoch_unit) = match modes.time {
            TimeMode::Adaptive => (Some(adaptive), Some(adaptive)),
            TimeMode::AdaptiveTimeMicroseconds => (Some(Unit::Micros), Some(adaptive)),
            TimeMode::Connect => (Some(Unit::Millis), Some(Unit::Millis)),
            TimeMode::Microseconds => (Some(Unit::Micros), Some(Unit::Micros)),
            TimeMode::Nanoseconds => (Some(Unit::Nanos), Some(Unit::Nanos)),
            TimeMode::Isostring => (None, None),
        };
        Self {
            decimal_strings,
            debezium: true,
            time_unit: time_unit.filter(|_| matches!(kind, SqlType::Time)),
            epoch_unit: epoch_unit
                .filter(|_| matches!(kind, SqlType::Timestamp | SqlType::TimestampTz)),
            binary: modes.binary,
            numeric_hint: !decimal_strings && kind.is_decimal(),
        }
    }
}

/// The instant `count` units after 1970-01-01T00:00:00Z within the years 0000–9999, or the
/// infinity Debezium's number stands for; `None` when it is neither.
fn epoch_instant(unit: Unit, count: i64) -> Option<DateTime<Utc>> {
    // Debezium writes the infinities in milliseconds or microseconds; in nanoseconds those
    // numbers are real instants (2262, 1677).
    let per_micro = match unit {
        Unit::Millis => Some(1_000),
        Unit::Micros => Some(1),
        Unit::Nanos => None,
    };
    if let Some(positive) = per_micro.and_then(|per| infinity::debezium_instant(count, per)) {
        return Some(infinity::instant(positive));
    }
    unit.micros(count)
        .and_then(DateTime::from_timestamp_micros)
        .filter(|at| (0..=9999).contains(&at.year()))
}

/// A decimal string's text when it is a decimal (`-12.50`, as `BigDecimal.toPlainString`
/// writes it), kept digit for digit; the reason when it is not (`NaN` and the infinities
/// too: a `numeric(p, s)` cannot hold them).
pub(super) fn decimal_text(text: &str) -> Result<&str, String> {
    if Decimal::parse(text, None).is_some() {
        Ok(text)
    } else {
        Err(format!(
            "must be a decimal number (decimal.handling.mode=string), got {}",
            echo(text)
        ))
    }
}

/// The cell of a value in a form a Debezium mode gives the column's type (`first`, its type
/// check) and no JSON form of its own has; `None` when the value is not in such a form.
pub(super) fn debezium_cell(
    field: &str,
    value: &Value,
    first: &Check,
    reading: &Reading,
) -> Result<Option<Cell>, DecodeError> {
    let broken = |why: String| dynamic::broken(field, why);
    let zulu = |value: &Value| match value {
        Value::String(text) if reading.debezium => text.strip_suffix('Z').map(str::to_owned),
        _ => None,
    };
    let count = |what: &str| {
        value
            .as_i64()
            .ok_or_else(|| broken(format!("must be a whole number of {what}, got {value}")))
    };
    Ok(Some(match (first, value) {
        (Check::Number { .. }, Value::String(text)) if reading.numeric_hint => {
            return Err(broken(format!(
                "must be a number, got a string {} (a Debezium decimal string needs \
                 `debezium = {{ decimal = \"string\" }}`; decimal.handling.mode=precise bytes \
                 need the schema)",
                echo(text)
            )));
        }
        (Check::Date, Value::Number(_)) if reading.debezium => {
            let days = count("days since 1970-01-01")?;
            if let Some(positive) = infinity::debezium_days(days) {
                return Ok(Some(Cell::Date(infinity::day(positive))));
            }
            let date = NaiveDate::from_ymd_opt(1970, 1, 1)
                .and_then(|epoch| epoch.checked_add_signed(TimeDelta::try_days(days)?))
                .filter(|date| (1..=9999).contains(&date.year()))
                .ok_or_else(|| {
                    broken(format!(
                        "must be a day of the years 0001–9999, got {days} days since 1970-01-01"
                    ))
                })?;
            Cell::Date(date)
        }
        (Check::Date, _) if zulu(value).is_some() => {
            let text = Value::String(zulu(value).unwrap_or_default());
            Cell::Date(dynamic::form(field, &text, "a date", forms::date)?)
        }
        (Check::Time, Value::Number(_)) if reading.time_unit.is_some() => {
            let unit = reading.time_unit.unwrap_or(Unit::Micros);
            let what = format!("{} since midnight", unit.name());
            let micros = unit
                .micros(count(&what)?)
                .filter(|micros| (0..=MICROS_PER_DAY).contains(micros))
                .ok_or_else(|| broken(format!("must be {what} up to 24:00:00, got {value}")))?;
            Cell::Time(micros)
        }
        (Check::Time, _) if zulu(value).is_some() => {
            let text = Value::String(zulu(value).unwrap_or_default());
            Cell::Time(dynamic::form(field, &text, "a time of day", forms::time)?)
        }
        (Check::Timestamp { .. }, Value::Number(_)) if reading.epoch_unit.is_some() => {
            let unit = reading.epoch_unit.unwrap_or(Unit::Micros);
            let what = format!("{} since 1970-01-01T00:00:00Z", unit.name());
            Cell::Timestamp(epoch_instant(unit, count(&what)?).ok_or_else(|| {
                broken(format!(
                    "must be {what} within the years 0000–9999, got {value}"
                ))
            })?)
        }
        (Check::Interval, Value::Number(_)) if reading.debezium => Cell::Interval(Interval {
            months: 0,
            days: 0,
            micros: count("microseconds (interval.handling.mode=numeric)")?,
        }),
        _ => return Ok(None),
    }))
}

/// Bytes in the form `mode` writes them.
pub(super) fn bytes(field: &str, value: &Value, mode: BinaryMode) -> Result<Vec<u8>, DecodeError> {
    match mode {
        BinaryMode::Bytes | BinaryMode::Base64 => {
            dynamic::form(field, value, "bytes", forms::bytes)
        }
        BinaryMode::Base64UrlSafe => dynamic::form(field, value, "URL-safe base64 bytes", |text| {
            base64::engine::general_purpose::URL_SAFE
                .decode(text)
                .map_err(|e| format!("not URL-safe base64: {e}"))
        }),
        BinaryMode::Hex => dynamic::form(field, value, "hex bytes", hex),
    }
}

/// Hexadecimal text, two digits a byte, either case.
fn hex(text: &str) -> Result<Vec<u8>, String> {
    if !text.len().is_multiple_of(2) {
        return Err("an odd number of hex digits".into());
    }
    text.as_bytes()
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or_else(|| "not hexadecimal".to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::Unit;

    #[test]
    fn nanoseconds_round_to_microseconds_as_postgresql_rounds() {
        let micros = |nanos: i64| Unit::Nanos.micros(nanos);
        assert_eq!(micros(1_499), Some(1));
        assert_eq!(micros(1_500), Some(2), "a tie to the even one");
        assert_eq!(micros(2_500), Some(2), "a tie to the even one");
        assert_eq!(micros(999_999_999), Some(1_000_000), "into the next second");
        assert_eq!(micros(-1), Some(0), "1969-12-31T23:59:59.999999999 is 1970");
        assert_eq!(micros(-1_000_000_000), Some(-1_000_000));
        assert_eq!(micros(i64::MAX).map(|m| m > 0), Some(true));
        assert_eq!(Unit::Millis.micros(i64::MAX), None);
    }
}
