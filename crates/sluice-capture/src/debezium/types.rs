//! PostgreSQL column types as Debezium 3.6 maps them with its defaults
//! (`decimal.handling.mode=precise`, `time.precision.mode=adaptive`,
//! `binary.handling.mode=bytes`, `interval.handling.mode=numeric`): the Connect schema of
//! each column, and its value from PostgreSQL's text output (docs/capture.md#values).

use super::clock;
use super::decimal;
use super::element::Element;
use super::json::{push_double, push_float, push_string};
use super::values::{self, Clock};
use crate::model::TypeOid;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use num_bigint::BigInt;
use std::borrow::Cow;

/// A value whose text does not read as its column's type (a PostgreSQL output this map does
/// not know). Fatal for the capture: a change cannot be skipped without breaking its key's
/// order, so the operator must see it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("column {column}: {type_name} value {text:?} cannot be read ({why})")]
pub struct ValueError {
    /// The column.
    pub column: String,
    /// Its type as this map knows it.
    pub type_name: &'static str,
    /// The text PostgreSQL sent (cut at 80 characters).
    pub text: String,
    /// Why it could not be read.
    pub why: &'static str,
}

impl ValueError {
    /// `text` of `column`, a `kind`, could not be read: `why`.
    pub(super) fn of(column: &str, kind: Kind, text: &str, why: &'static str) -> Self {
        Self {
            column: column.to_owned(),
            type_name: kind.type_name(),
            text: text.chars().take(80).collect(),
            why,
        }
    }
}

/// A column's Debezium type: what its Connect schema is and how its text becomes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `bool` → `boolean`.
    Boolean,
    /// `int2` → `int16`.
    Int16,
    /// `int4` → `int32`.
    Int32,
    /// `int8` → `int64`.
    Int64,
    /// `float4` → `float`.
    Float32,
    /// `float8` → `double`.
    Float64,
    /// `numeric(p,s)` → `bytes` named `org.apache.kafka.connect.data.Decimal`.
    Decimal {
        /// Declared precision.
        precision: u16,
        /// Declared scale.
        scale: u16,
    },
    /// `numeric` without a declared scale → `io.debezium.data.VariableScaleDecimal`.
    VariableDecimal,
    /// `text`, `varchar`, `bpchar`, `name`, and types this map does not know.
    Text,
    /// `json`, `jsonb` → `string` named `io.debezium.data.Json`.
    Json,
    /// `uuid` → `string` named `io.debezium.data.Uuid`.
    Uuid,
    /// `xml` → `string` named `io.debezium.data.Xml`.
    Xml,
    /// `bytea` → `bytes`.
    Bytes,
    /// `date` → `int32` days since 1970-01-01, `io.debezium.time.Date`.
    Date,
    /// `timestamp(p ≤ 3)` → `int64` ms, `io.debezium.time.Timestamp`.
    TimestampMillis,
    /// `timestamp`, `timestamp(p > 3)` → `int64` µs, `io.debezium.time.MicroTimestamp`.
    TimestampMicros,
    /// `timestamptz` → `string` in UTC, `io.debezium.time.ZonedTimestamp`.
    ZonedTimestamp,
    /// `time(p ≤ 3)` → `int32` ms, `io.debezium.time.Time`.
    TimeMillis,
    /// `time`, `time(p > 3)` → `int64` µs, `io.debezium.time.MicroTime`.
    TimeMicros,
    /// `interval` → `int64` µs, `io.debezium.time.MicroDuration`.
    Interval,
    /// `timetz` → `string` in UTC, `io.debezium.time.ZonedTime`.
    ZonedTime,
    /// `bit`, `bit(1)` → `boolean`.
    Bit,
    /// `bit(n > 1)`, `varbit(n)` → `bytes` named `io.debezium.data.Bits {length}`.
    Bits {
        /// The declared length (2147483647 for a `varbit` without one).
        length: u32,
    },
    /// `money` → Decimal of scale 2.
    Money,
    /// `point` → `io.debezium.data.geometry.Point` struct.
    Point,
    /// `tsvector` → `string` named `io.debezium.data.Tsvector`.
    Tsvector,
    /// A one-dimensional array of one of these → `array` of its items (optional), its value
    /// a JSON array.
    Array(Element),
}

impl Kind {
    /// The kind of a column of type `oid` with modifier `typmod` (`atttypmod`).
    pub fn of(oid: TypeOid, typmod: i32) -> Kind {
        match oid {
            16 => Kind::Boolean,
            21 => Kind::Int16,
            23 => Kind::Int32,
            20 => Kind::Int64,
            700 => Kind::Float32,
            701 => Kind::Float64,
            1700 if typmod >= 4 => {
                let packed = typmod - 4;
                Kind::Decimal {
                    precision: u16::try_from((packed >> 16) & 0xffff).unwrap_or(0),
                    scale: u16::try_from(packed & 0xffff).unwrap_or(0),
                }
            }
            1700 => Kind::VariableDecimal,
            114 | 3802 => Kind::Json,
            2950 => Kind::Uuid,
            142 => Kind::Xml,
            17 => Kind::Bytes,
            1082 => Kind::Date,
            1114 if (0..=3).contains(&typmod) => Kind::TimestampMillis,
            1114 => Kind::TimestampMicros,
            1184 => Kind::ZonedTimestamp,
            1083 if (0..=3).contains(&typmod) => Kind::TimeMillis,
            1083 => Kind::TimeMicros,
            1186 => Kind::Interval,
            1266 => Kind::ZonedTime,
            // Debezium: a length of 1 is a boolean, for `bit` and `varbit` alike.
            1560 if typmod <= 1 => Kind::Bit,
            1562 if typmod == 1 => Kind::Bit,
            1560 | 1562 => Kind::Bits {
                length: u32::try_from(typmod).unwrap_or(2_147_483_647),
            },
            790 => Kind::Money,
            600 => Kind::Point,
            3614 => Kind::Tsvector,
            26 => Kind::Int64,
            _ => super::element::element_oid(oid)
                .and_then(|element| Element::of_kind(Kind::of(element, typmod)))
                .map_or(Kind::Text, Kind::Array),
        }
    }

    /// The schema's `type`, `name`, `version` and `parameters` as JSON members, without the
    /// braces, in JsonConverter's order (`optional` goes between `type` and `name`, so the
    /// caller gets the two parts: before and after it).
    pub(crate) fn schema_parts(self) -> (Cow<'static, str>, String) {
        let named = |name: &str| format!(",\"name\":\"{name}\",\"version\":1");
        let (head, tail): (&'static str, String) = match self {
            Kind::Boolean => ("\"type\":\"boolean\"", String::new()),
            Kind::Int16 => ("\"type\":\"int16\"", String::new()),
            Kind::Int32 => ("\"type\":\"int32\"", String::new()),
            Kind::Int64 => ("\"type\":\"int64\"", String::new()),
            Kind::Float32 => ("\"type\":\"float\"", String::new()),
            Kind::Float64 => ("\"type\":\"double\"", String::new()),
            Kind::Decimal { precision, scale } => (
                "\"type\":\"bytes\"",
                format!(
                    ",\"name\":\"org.apache.kafka.connect.data.Decimal\",\"version\":1,\"parameters\":{{\"scale\":\"{scale}\",\"connect.decimal.precision\":\"{precision}\"}}"
                ),
            ),
            Kind::VariableDecimal => (
                "\"type\":\"struct\",\"fields\":[{\"type\":\"int32\",\"optional\":false,\"field\":\"scale\"},{\"type\":\"bytes\",\"optional\":false,\"field\":\"value\"}]",
                ",\"name\":\"io.debezium.data.VariableScaleDecimal\",\"version\":1,\"doc\":\"Variable scaled decimal\"".to_owned(),
            ),
            Kind::Text => ("\"type\":\"string\"", String::new()),
            Kind::Json => ("\"type\":\"string\"", named("io.debezium.data.Json")),
            Kind::Uuid => ("\"type\":\"string\"", named("io.debezium.data.Uuid")),
            Kind::Xml => ("\"type\":\"string\"", named("io.debezium.data.Xml")),
            Kind::Bytes => ("\"type\":\"bytes\"", String::new()),
            Kind::Date => ("\"type\":\"int32\"", named("io.debezium.time.Date")),
            Kind::TimestampMillis => ("\"type\":\"int64\"", named("io.debezium.time.Timestamp")),
            Kind::TimestampMicros => (
                "\"type\":\"int64\"",
                named("io.debezium.time.MicroTimestamp"),
            ),
            Kind::ZonedTimestamp => (
                "\"type\":\"string\"",
                named("io.debezium.time.ZonedTimestamp"),
            ),
            Kind::TimeMillis => ("\"type\":\"int32\"", named("io.debezium.time.Time")),
            Kind::TimeMicros => ("\"type\":\"int64\"", named("io.debezium.time.MicroTime")),
            Kind::Interval => ("\"type\":\"int64\"", named("io.debezium.time.MicroDuration")),
            Kind::ZonedTime => ("\"type\":\"string\"", named("io.debezium.time.ZonedTime")),
            Kind::Bit => ("\"type\":\"boolean\"", String::new()),
            Kind::Bits { length } => (
                "\"type\":\"bytes\"",
                format!(",\"name\":\"io.debezium.data.Bits\",\"version\":1,\"parameters\":{{\"length\":\"{length}\"}}"),
            ),
            Kind::Money => (
                "\"type\":\"bytes\"",
                ",\"name\":\"org.apache.kafka.connect.data.Decimal\",\"version\":1,\"parameters\":{\"scale\":\"2\"}".to_owned(),
            ),
            Kind::Point => (
                "\"type\":\"struct\",\"fields\":[{\"type\":\"double\",\"optional\":false,\"field\":\"x\"},{\"type\":\"double\",\"optional\":false,\"field\":\"y\"},{\"type\":\"bytes\",\"optional\":true,\"field\":\"wkb\"},{\"type\":\"int32\",\"optional\":true,\"field\":\"srid\"}]",
                ",\"name\":\"io.debezium.data.geometry.Point\",\"version\":1,\"doc\":\"Geometry (POINT)\"".to_owned(),
            ),
            Kind::Tsvector => ("\"type\":\"string\"", named("io.debezium.data.Tsvector")),
            Kind::Array(element) => {
                // The items: the element's schema, optional.
                let (head, tail) = element.kind().schema_parts();
                let array = format!(
                    "\"type\":\"array\",\"items\":{{{head},\"optional\":true{tail}}}"
                );
                return (Cow::Owned(array), String::new());
            }
        };
        (Cow::Borrowed(head), tail)
    }

    /// The JSON value Debezium writes for a NULL in a required column of this kind without
    /// a default: the type's zero.
    pub fn zero(self) -> &'static str {
        match self {
            Kind::Boolean => "false",
            Kind::Int16
            | Kind::Int32
            | Kind::Int64
            | Kind::Date
            | Kind::TimestampMillis
            | Kind::TimestampMicros
            | Kind::TimeMillis
            | Kind::TimeMicros
            | Kind::Interval => "0",
            Kind::Bit => "false",
            Kind::Bits { .. } | Kind::Tsvector => "\"\"",
            Kind::Money => "\"AA==\"",
            Kind::ZonedTime => "\"00:00:00Z\"",
            Kind::Point => "{\"x\":0.0,\"y\":0.0,\"wkb\":null,\"srid\":null}",
            Kind::Float32 | Kind::Float64 => "0.0",
            // The unscaled integer 0 in one byte.
            Kind::Decimal { .. } => "\"AA==\"",
            Kind::VariableDecimal => "{\"scale\":0,\"value\":\"AA==\"}",
            Kind::Bytes => "\"\"",
            Kind::ZonedTimestamp => "\"1970-01-01T00:00:00Z\"",
            Kind::Text | Kind::Json | Kind::Uuid | Kind::Xml => "\"\"",
            Kind::Array(_) => "[]",
        }
    }

    /// The clock kind of a type that has infinities.
    fn clock(self) -> Option<Clock> {
        match self {
            Kind::Date => Some(Clock::Date),
            Kind::TimestampMillis => Some(Clock::TimestampMillis),
            Kind::TimestampMicros => Some(Clock::TimestampMicros),
            Kind::ZonedTimestamp => Some(Clock::Zoned),
            _ => None,
        }
    }

    /// The name this map gives the kind in errors.
    fn type_name(self) -> &'static str {
        match self {
            Kind::Boolean => "boolean",
            Kind::Int16 | Kind::Int32 | Kind::Int64 => "integer",
            Kind::Float32 | Kind::Float64 => "float",
            Kind::Decimal { .. } | Kind::VariableDecimal => "numeric",
            Kind::Text | Kind::Json | Kind::Uuid | Kind::Xml => "text",
            Kind::Bytes => "bytea",
            Kind::Date => "date",
            Kind::TimestampMillis | Kind::TimestampMicros => "timestamp",
            Kind::ZonedTimestamp => "timestamptz",
            Kind::TimeMillis | Kind::TimeMicros => "time",
            Kind::Interval => "interval",
            Kind::ZonedTime => "timetz",
            Kind::Bit | Kind::Bits { .. } => "bit string",
            Kind::Money => "money",
            Kind::Point => "point",
            Kind::Tsvector => "tsvector",
            Kind::Array(_) => "array",
        }
    }

    /// Appends the JSON value of `text`, the column's value in PostgreSQL's text output
    /// (the walsender's session pinned to ISO dates, UTC, `extra_float_digits=3`).
    pub fn push_value(self, out: &mut String, column: &str, text: &str) -> Result<(), ValueError> {
        let fail = |why: &'static str| ValueError::of(column, self, text, why);
        if let Some(infinite) = self.clock().and_then(|c| values::infinity(c, false, text)) {
            out.push_str(infinite);
            return Ok(());
        }
        match self {
            Kind::Boolean => out.push_str(match text {
                "t" => "true",
                "f" => "false",
                _ => return Err(fail("not t or f")),
            }),
            Kind::Int16 | Kind::Int32 | Kind::Int64 => {
                text.parse::<i64>().map_err(|_| fail("not an integer"))?;
                out.push_str(text);
            }
            Kind::Float32 => push_float(out, parse_float(text).map_err(fail)? as f32),
            Kind::Float64 => push_double(out, parse_float(text).map_err(fail)?),
            Kind::Decimal { .. } => {
                let (unscaled, _) = self.decimal(column, text)?;
                push_base64(out, &unscaled.to_signed_bytes_be());
            }
            Kind::VariableDecimal => {
                let (unscaled, scale) = decimal::stripped(text).map_err(fail)?;
                out.push_str("{\"scale\":");
                out.push_str(&scale.to_string());
                out.push_str(",\"value\":");
                push_base64(out, &unscaled.to_signed_bytes_be());
                out.push('}');
            }
            Kind::Text | Kind::Json | Kind::Uuid | Kind::Xml | Kind::Tsvector => {
                push_string(out, text)
            }
            Kind::ZonedTime => values::push_zoned_time(out, text).map_err(fail)?,
            Kind::Bit => values::push_bit(out, text).map_err(fail)?,
            Kind::Bits { .. } => values::push_bits(out, text).map_err(fail)?,
            Kind::Money => values::push_money(out, text).map_err(fail)?,
            Kind::Point => values::push_point(out, text).map_err(fail)?,
            Kind::Bytes => {
                let hex = text
                    .strip_prefix("\\x")
                    .ok_or_else(|| fail("not \\x hex"))?;
                push_base64(
                    out,
                    &decode_hex(hex).ok_or_else(|| fail("odd or non-hex digits"))?,
                );
            }
            Kind::Date => {
                let days = clock::date(text).map_err(fail)?;
                out.push_str(&days.to_string());
            }
            Kind::TimestampMicros | Kind::TimestampMillis | Kind::TimeMicros | Kind::TimeMillis => {
                push_clock(self, out, text).map_err(fail)?
            }
            Kind::ZonedTimestamp => push_zoned(out, text).map_err(fail)?,
            Kind::Interval => {
                let micros = super::interval::micros(text).map_err(fail)?;
                out.push_str(&micros.to_string());
            }
            Kind::Array(element) => {
                let items = super::array::elements(text).map_err(fail)?;
                push_array(out, element, column, &items, push_element)?;
            }
        }
        Ok(())
    }
}

impl Kind {
    /// The unscaled integer and scale of `text`, a value of a `Decimal` column (`numeric(p,s)`
    /// at the column's scale, `money` at 2) as Debezium's `BigDecimal` holds it.
    pub(super) fn decimal(self, column: &str, text: &str) -> Result<(BigInt, u32), ValueError> {
        let fail = |why: &'static str| ValueError::of(column, self, text, why);
        match self {
            Kind::Decimal { scale, .. } => {
                let (unscaled, written) = decimal::unscaled(text).map_err(fail)?;
                if written != u32::from(scale) {
                    return Err(fail("scale differs from the column's"));
                }
                Ok((unscaled, written))
            }
            Kind::Money => Ok((values::money_unscaled(text).map_err(fail)?, 2)),
            _ => Err(fail("not a Decimal column")),
        }
    }

    /// Whether `text` is a value Debezium's converter fails on for this kind: a `numeric`
    /// `NaN`, `Infinity` or `-Infinity`, or an array of `numeric` holding one (pgjdbc cannot
    /// read such an array, so Debezium loses the whole array, not the element). What the
    /// record then holds is the caller's (docs/capture.md#numeric-nan-and-infinity).
    pub fn lacks_decimal_form(self, text: &str) -> bool {
        match self {
            Kind::Decimal { .. } | Kind::VariableDecimal => decimal::is_special(text),
            Kind::Array(element) => {
                matches!(element.kind(), Kind::Decimal { .. } | Kind::VariableDecimal)
                    && super::array::elements(text).is_ok_and(|items| {
                        items.iter().flatten().any(|item| decimal::is_special(item))
                    })
            }
            _ => false,
        }
    }
}

/// A timestamp without zone (ms or µs since the epoch) or a time of day (ms or µs since
/// midnight), by `kind`.
fn push_clock(kind: Kind, out: &mut String, text: &str) -> Result<(), &'static str> {
    let value = match kind {
        Kind::TimestampMicros | Kind::TimestampMillis => {
            let micros = clock::timestamp(text)?;
            clock::saturated(if kind == Kind::TimestampMillis {
                micros.div_euclid(1000)
            } else {
                micros
            })
        }
        _ => {
            let micros = clock::time_micros(text)?;
            if kind == Kind::TimeMillis {
                micros / 1000
            } else {
                micros
            }
        }
    };
    out.push_str(&value.to_string());
    Ok(())
}

/// An array's elements as `[…]`, each by `element`'s kind through `push` (a row image's
/// form, or a key header's), NULLs as `null`.
pub(super) fn push_array(
    out: &mut String,
    element: Element,
    column: &str,
    items: &[Option<String>],
    push: fn(&mut String, Kind, &str, &str) -> Result<(), ValueError>,
) -> Result<(), ValueError> {
    out.push('[');
    for (at, item) in items.iter().enumerate() {
        if at > 0 {
            out.push(',');
        }
        match item {
            Some(item) => push(out, element.kind(), column, item)?,
            None => out.push_str("null"),
        }
    }
    out.push(']');
    Ok(())
}

/// One array element (not NULL). Where Debezium 3.6.1 reads an element otherwise than a
/// column of its type (seen here): a `time` to the millisecond (`23:59:59.999999` →
/// 86399999000 µs), and the infinities of dates and timestamps ([`values::infinity`]). An
/// unconstrained `numeric` loses its trailing zeros as a column's does (`0.000` →
/// `{"scale":0,…}`); a `numeric` `NaN` never gets here ([`Kind::lacks_decimal_form`]).
pub(super) fn push_element(
    out: &mut String,
    kind: Kind,
    column: &str,
    item: &str,
) -> Result<(), ValueError> {
    if let Some(infinite) = kind.clock().and_then(|c| values::infinity(c, true, item)) {
        out.push_str(infinite);
        return Ok(());
    }
    match kind {
        Kind::TimeMicros => {
            let micros =
                clock::time_micros(item).map_err(|why| ValueError::of(column, kind, item, why))?;
            out.push_str(&(micros / 1000 * 1000).to_string());
            Ok(())
        }
        _ => kind.push_value(out, column, item),
    }
}

impl Element {
    /// The kind of one element.
    pub(super) fn kind(self) -> Kind {
        match self {
            Element::Boolean => Kind::Boolean,
            Element::Int16 => Kind::Int16,
            Element::Int32 => Kind::Int32,
            Element::Int64 => Kind::Int64,
            Element::Float32 => Kind::Float32,
            Element::Float64 => Kind::Float64,
            Element::Text => Kind::Text,
            Element::Uuid => Kind::Uuid,
            Element::Json => Kind::Json,
            Element::Bytes => Kind::Bytes,
            Element::Decimal { precision, scale } => Kind::Decimal { precision, scale },
            Element::VariableDecimal => Kind::VariableDecimal,
            Element::Date => Kind::Date,
            Element::TimestampMillis => Kind::TimestampMillis,
            Element::TimestampMicros => Kind::TimestampMicros,
            Element::ZonedTimestamp => Kind::ZonedTimestamp,
            Element::TimeMillis => Kind::TimeMillis,
            Element::TimeMicros => Kind::TimeMicros,
        }
    }

    /// The element of an array kind, if it is one of these.
    pub(super) fn of_kind(kind: Kind) -> Option<Element> {
        Some(match kind {
            Kind::Boolean => Element::Boolean,
            Kind::Int16 => Element::Int16,
            Kind::Int32 => Element::Int32,
            Kind::Int64 => Element::Int64,
            Kind::Float32 => Element::Float32,
            Kind::Float64 => Element::Float64,
            Kind::Text => Element::Text,
            Kind::Uuid => Element::Uuid,
            Kind::Json => Element::Json,
            Kind::Bytes => Element::Bytes,
            Kind::Decimal { precision, scale } => Element::Decimal { precision, scale },
            Kind::VariableDecimal => Element::VariableDecimal,
            Kind::Date => Element::Date,
            Kind::TimestampMillis => Element::TimestampMillis,
            Kind::TimestampMicros => Element::TimestampMicros,
            Kind::ZonedTimestamp => Element::ZonedTimestamp,
            Kind::TimeMillis => Element::TimeMillis,
            Kind::TimeMicros => Element::TimeMicros,
            _ => return None,
        })
    }
}

/// PostgreSQL's float text (`2.5`, `1e+20`, `NaN`, `Infinity`, `-Infinity`).
pub(super) fn parse_float(text: &str) -> Result<f64, &'static str> {
    match text {
        "NaN" => Ok(f64::NAN),
        "Infinity" => Ok(f64::INFINITY),
        "-Infinity" => Ok(f64::NEG_INFINITY),
        _ => text.parse::<f64>().map_err(|_| "not a number"),
    }
}

fn push_base64(out: &mut String, bytes: &[u8]) {
    out.push('"');
    BASE64.encode_string(bytes, out);
    out.push('"');
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(hex.get(at..at + 2)?, 16).ok())
        .collect()
}

/// `2026-03-04 03:06:07.123456+00` (the session in UTC) → `"2026-03-04T03:06:07.123456Z"`:
/// ISO-8601 in UTC, always six fraction digits, as Debezium's ZonedTimestamp writes it.
fn push_zoned(out: &mut String, text: &str) -> Result<(), &'static str> {
    let at = clock::zoned(text)?;
    out.push('"');
    out.push_str(&clock::iso_utc(at));
    out.push('"');
    Ok(())
}

#[cfg(test)]
mod tests;
