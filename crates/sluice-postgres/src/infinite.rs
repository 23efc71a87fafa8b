//! Timestamps and dates bound in PostgreSQL's binary form with its infinities: a cell's
//! `infinity` or `-infinity` ([`sluice_sinks::infinity`]) is sent as the server's own
//! (`i64::MAX`/`i64::MIN` microseconds, `i32::MAX`/`i32::MIN` days), which chrono's values
//! cannot say; any other value as sqlx would send it.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use sluice_sinks::infinity;
use sqlx::encode::{Encode, IsNull};
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArgumentBuffer, PgHasArrayType, PgTypeInfo};
use sqlx::{Postgres, Type};

/// 2000-01-01T00:00:00Z, PostgreSQL's epoch, in microseconds since 1970's.
const EPOCH_MICROS: i64 = 946_684_800_000_000;
/// 2000-01-01 in days since 1970-01-01.
const EPOCH_DAYS: i64 = 10_957;

/// A `timestamptz` (`NAIVE` false) or `timestamp` (`NAIVE` true, the UTC wall time)
/// parameter.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stamp<const NAIVE: bool>(pub DateTime<Utc>);

impl<const NAIVE: bool> Type<Postgres> for Stamp<NAIVE> {
    fn type_info() -> PgTypeInfo {
        if NAIVE {
            <NaiveDateTime as Type<Postgres>>::type_info()
        } else {
            <DateTime<Utc> as Type<Postgres>>::type_info()
        }
    }
}

impl<const NAIVE: bool> PgHasArrayType for Stamp<NAIVE> {
    fn array_type_info() -> PgTypeInfo {
        if NAIVE {
            <NaiveDateTime as PgHasArrayType>::array_type_info()
        } else {
            <DateTime<Utc> as PgHasArrayType>::array_type_info()
        }
    }
}

impl<const NAIVE: bool> Encode<'_, Postgres> for Stamp<NAIVE> {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        let micros = match infinity::of_instant(self.0) {
            Some(true) => i64::MAX,
            Some(false) => i64::MIN,
            None => self
                .0
                .timestamp_micros()
                .checked_sub(EPOCH_MICROS)
                .ok_or_else(|| format!("timestamp out of range for PostgreSQL: {}", self.0))?,
        };
        <i64 as Encode<Postgres>>::encode(micros, buf)
    }

    fn size_hint(&self) -> usize {
        std::mem::size_of::<i64>()
    }
}

/// A `date` parameter.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Day(pub NaiveDate);

impl Type<Postgres> for Day {
    fn type_info() -> PgTypeInfo {
        <NaiveDate as Type<Postgres>>::type_info()
    }
}

impl PgHasArrayType for Day {
    fn array_type_info() -> PgTypeInfo {
        <NaiveDate as PgHasArrayType>::array_type_info()
    }
}

impl Encode<'_, Postgres> for Day {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        let days = match infinity::of_day(self.0) {
            Some(true) => i32::MAX,
            Some(false) => i32::MIN,
            None => {
                let since_1970 = i64::from(chrono::Datelike::num_days_from_ce(&self.0)) - 719_163;
                i32::try_from(since_1970 - EPOCH_DAYS)
                    .map_err(|_| format!("date out of range for PostgreSQL: {}", self.0))?
            }
        };
        <i32 as Encode<Postgres>>::encode(days, buf)
    }

    fn size_hint(&self) -> usize {
        std::mem::size_of::<i32>()
    }
}
