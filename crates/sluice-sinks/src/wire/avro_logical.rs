//! Avro's logical types in the forms the column checks read: a decimal (on bytes or fixed) as
//! a JSON number digit for digit, a uuid as its text, a date `YYYY-MM-DD`, a time of day
//! `HH:MM:SS.ffffff`, a timestamp RFC 3339 to the microsecond (`Z` for an instant, no offset
//! for a local timestamp), a duration as an ISO 8601 interval. Logical types apache-avro does
//! not know (Debezium's `io.debezium.time.MicroTimestamp`, …) never get here: they are their
//! underlying type.

use super::avro_read as read;
use super::error::Fault;
use super::json_text::{self as text, Zone};
pub(super) use crate::modes::Unit;

/// Where a uuid's value is: a string (kept as it is), or 16 bytes (fixed or bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum UuidForm {
    /// A string.
    String,
    /// Fixed(16).
    Fixed,
    /// Length-prefixed bytes.
    Bytes,
}

/// A logical type over its underlying encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Logical {
    /// `decimal`: a two's-complement unscaled integer on bytes (`size` None) or fixed(size).
    Decimal {
        /// Digits after the point.
        scale: usize,
        /// The fixed size, when on a fixed.
        size: Option<usize>,
    },
    /// `big-decimal`: bytes holding the unscaled bytes then the scale.
    BigDecimal,
    /// `uuid`.
    Uuid(UuidForm),
    /// `date`: days since the epoch (int).
    Date,
    /// `time-millis` (int) or `time-micros` (long).
    Time(Unit),
    /// `timestamp-*` (`Zone::Utc`) and `local-timestamp-*` (`Zone::Local`), a long.
    Timestamp(Unit, Zone),
    /// `duration`: fixed(12), months, days and milliseconds as little-endian u32s.
    Duration,
}

impl Logical {
    /// Reads one value and appends its JSON.
    pub(super) fn write(&self, input: &mut &[u8], out: &mut String) -> Result<(), Fault> {
        match self {
            Self::Decimal { scale, size } => {
                let unscaled = match size {
                    Some(n) => read::take(input, *n)?,
                    None => read::bytes(input)?,
                };
                text::push_decimal(out, unscaled, *scale);
            }
            Self::BigDecimal => big_decimal(read::bytes(input)?, out)?,
            Self::Uuid(form) => uuid(*form, input, out)?,
            Self::Date => text::push_date(out, read::int(input)?),
            Self::Time(unit) => {
                let raw = match unit {
                    Unit::Millis => i64::from(read::int(input)?),
                    _ => read::long(input)?,
                };
                // A time of day never overflows (a millis one is 32 bits).
                let micros = unit.micros(raw).unwrap_or(i64::MAX);
                text::push_time(out, micros, raw);
            }
            Self::Timestamp(unit, zone) => {
                let raw = read::long(input)?;
                let (seconds, nanos) = text::split_epoch(raw, unit.per_second());
                text::push_timestamp(out, seconds, nanos, *zone, raw);
            }
            Self::Duration => {
                let [months, days, millis] = [(); 3].map(|()| read::array::<4>(input));
                let part = |bytes: Result<[u8; 4], Fault>| bytes.map(u32::from_le_bytes);
                let millis = i128::from(part(millis)?) * 1_000;
                text::push_interval(
                    out,
                    i64::from(part(months)?),
                    i64::from(part(days)?),
                    millis,
                );
            }
        }
        Ok(())
    }
}

/// A uuid's text: a string as written, 16 bytes as the hyphenated form.
fn uuid(form: UuidForm, input: &mut &[u8], out: &mut String) -> Result<(), Fault> {
    let raw = match form {
        UuidForm::String => {
            text::push_string(out, read::string(input)?);
            return Ok(());
        }
        UuidForm::Fixed => read::take(input, 16)?,
        UuidForm::Bytes => read::bytes(input)?,
    };
    let id = uuid::Uuid::from_slice(raw)
        .map_err(|_| Fault::new(format!("a uuid of {} bytes, not 16", raw.len())))?;
    text::push_string(
        out,
        id.hyphenated()
            .encode_lower(&mut uuid::Uuid::encode_buffer()),
    );
    Ok(())
}

/// A `big-decimal`: within the bytes, the length-prefixed unscaled integer, then the scale as
/// a long (negative: that many zeros after the digits).
fn big_decimal(mut inner: &[u8], out: &mut String) -> Result<(), Fault> {
    /// The most digits a scale may add or shift: beyond any column's.
    const MAX_SCALE: u64 = 1_000;
    let unscaled = read::bytes(&mut inner)?;
    let scale = read::long(&mut inner)?;
    if scale.unsigned_abs() > MAX_SCALE {
        return Err(Fault::new(format!("a big-decimal scale of {scale}")));
    }
    // |scale| <= MAX_SCALE, so it fits a usize either way.
    let shift = usize::try_from(scale.unsigned_abs()).unwrap_or(0);
    if scale >= 0 {
        text::push_decimal(out, unscaled, shift);
    } else {
        let start = out.len();
        text::push_decimal(out, unscaled, 0);
        if &out[start..] != "0" {
            out.extend(std::iter::repeat_n('0', shift));
        }
    }
    Ok(())
}
