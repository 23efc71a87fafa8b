//! The numeric and time rules of the decoder: a NUMERIC's own digits against its precision,
//! scale and range, a `real`'s single precision, and a timestamp or time of day rounded as its
//! column rounds it.

use chrono::{DateTime, Utc};

use super::{Cell, ColumnDecoder};
use crate::checks::Check;
use crate::decimal::Decimal;
use crate::forms;
use crate::messages::DecodeError;
use crate::messages::fields::dynamic;
use crate::model::Bound;

/// Microseconds from 1970-01-01 to 2000-01-01, PostgreSQL's epoch (it rounds from there).
const POSTGRES_EPOCH_MICROS: i64 = 946_684_800_000_000;

/// `at` rounded to `precision` fractional digits as PostgreSQL rounds a `timestamp(p)`: half
/// away from zero, counted from its epoch.
pub(super) fn round_timestamp(at: DateTime<Utc>, precision: u32) -> DateTime<Utc> {
    if precision >= 6 || crate::infinity::of_instant(at).is_some() {
        return at;
    }
    let unit = 10_i64.pow(6 - precision);
    let micros = at.timestamp_micros() - POSTGRES_EPOCH_MICROS;
    let half = unit / 2;
    let rounded = if micros >= 0 {
        (micros + half) / unit * unit
    } else {
        -((-micros + half) / unit * unit)
    };
    DateTime::from_timestamp_micros(rounded + POSTGRES_EPOCH_MICROS).unwrap_or(at)
}

impl ColumnDecoder {
    /// A timestamp rounded to the column's precision; any other cell as it is.
    pub(super) fn rounded(&self, cell: Cell) -> Cell {
        match (cell, self.time_precision) {
            (Cell::Timestamp(at), Some(precision)) => {
                Cell::Timestamp(round_timestamp(at, precision))
            }
            (Cell::Time(micros), Some(precision)) => {
                Cell::Time(forms::round_time(micros, precision))
            }
            (cell, _) => cell,
        }
    }
}

/// A NUMERIC with at most `precision - scale` digits before the point once rounded to
/// `scale` digits after it (as PostgreSQL rounds, then checks), counted on the number's text:
/// the record's own digits when the one pass kept them, else the f64 serde_json read.
pub(super) fn numeric(
    field: &str,
    text: String,
    precision: u32,
    scale: u32,
) -> Result<Cell, DecodeError> {
    let allowed = precision.saturating_sub(scale);
    let fits = Decimal::parse(&text, Some(scale))
        .is_some_and(|decimal| decimal.whole_digits() <= i64::from(allowed));
    if !fits {
        return Err(dynamic::broken(
            field,
            format!("must have at most {allowed} digits before the point, got {text}"),
        ));
    }
    Ok(Cell::Numeric(text))
}

/// A NUMERIC's own digits as its cell, within the column's precision and scale when it has
/// them (`rest`: the checks after the type's).
pub(super) fn numeric_cell(field: &str, text: &str, rest: &[Check]) -> Result<Cell, DecodeError> {
    match rest.first() {
        Some(Check::NumericDigits { precision, scale }) => {
            numeric(field, text.to_owned(), *precision, *scale)
        }
        _ => Ok(Cell::Numeric(text.to_owned())),
    }
}

/// A float a `real` holds as PostgreSQL reads it: rounded to single precision, neither
/// infinite nor zero from a value that is not.
pub(super) fn single(field: &str, float: f64) -> Result<f64, DecodeError> {
    #[allow(
        clippy::cast_possible_truncation,
        reason = "the rounding a real column does, checked below"
    )]
    let rounded = float as f32;
    if rounded.is_infinite() || (rounded == 0.0 && float != 0.0) {
        return Err(dynamic::broken(
            field,
            format!("must be within the range of a real (single precision), got {float}"),
        ));
    }
    Ok(float)
}

/// The largest exponent PostgreSQL's numeric input reads (`1e1000`).
const MAX_NUMERIC_EXPONENT: i64 = 1000;

/// A number's text as a NUMERIC reads it: a decimal whose exponent PostgreSQL accepts.
fn exact_number(field: &str, text: &str) -> Result<Decimal, DecodeError> {
    let exponent = match text.find(['e', 'E']) {
        Some(at) => text[at + 1..].parse::<i64>().ok(),
        None => Some(0),
    };
    exponent
        .filter(|e| e.abs() <= MAX_NUMERIC_EXPONENT)
        .and_then(|_| Decimal::parse(text, None))
        .ok_or_else(|| {
            dynamic::broken(
                field,
                format!(
                    "must be a number with an exponent within ±{MAX_NUMERIC_EXPONENT}, got {text}"
                ),
            )
        })
}

/// The `min`/`max` rules on a NUMERIC's own digits, with the reasons the f64 rules give.
pub(super) fn exact_range(
    field: &str,
    text: &str,
    min: Option<Bound>,
    max: Option<Bound>,
) -> Result<(), DecodeError> {
    let value = exact_number(field, text)?;
    let decimal = |bound: Bound| match bound {
        Bound::Int(int) => Decimal::parse(&int.to_string(), None),
        Bound::Float(float) => Decimal::parse(&float.to_string(), None),
    };
    let below = min.and_then(decimal).is_some_and(|lo| value < lo);
    let above = max.and_then(decimal).is_some_and(|hi| value > hi);
    let lo = min.map_or(f64::MIN, Bound::as_f64);
    let rule = match max {
        Some(hi) if below || above => {
            format!("must be between {lo} and {}, got {text}", hi.as_f64())
        }
        None if below => format!("must be at least {lo}, got {text}"),
        _ => return Ok(()),
    };
    Err(dynamic::broken(field, rule))
}

/// A bound known to fit the narrower type (the plan intersected it with the type's range).
pub(super) fn narrow<T: TryFrom<i64> + Default>(bound: i64) -> T {
    T::try_from(bound).unwrap_or_default()
}
