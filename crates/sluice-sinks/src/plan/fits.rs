//! Whether a source's values fit a column's type: a lookup's value, a constant, a Kafka
//! coordinate, a field of a change event's envelope, and the types a lookup key may have.

use crate::checks::{MAX_TOPIC_CHARS, value_checks};
use crate::forms;
use crate::messages::fields::parse_timestamp;
use crate::model::{CdcField, Constant, KafkaField, ValueRules};
use crate::table::SqlType;

/// Whether a value of `from` can be stored in `to` without loss.
pub(super) fn assignable(from: &SqlType, to: &SqlType) -> bool {
    if from == to {
        return true;
    }
    match (from.int_range(), to.int_range()) {
        (Some((lo, hi)), Some((to_lo, to_hi))) => lo >= to_lo && hi <= to_hi,
        _ => match (from, to) {
            (SqlType::Varchar(_) | SqlType::Text, SqlType::Text | SqlType::Varchar(None)) => true,
            (SqlType::Varchar(Some(a)), SqlType::Varchar(Some(b))) => a <= b,
            (SqlType::Uuid, SqlType::Uuid) => true,
            _ => false,
        },
    }
}

/// Whether a constant can be written to `sql_type`.
pub(super) fn constant_fits(constant: &Constant, sql_type: &SqlType) -> Result<(), String> {
    let checks = value_checks(sql_type, &ValueRules::default());
    if let Some(check) = checks.first()
        && let Some(fits) = match constant {
            Constant::Text(text) => forms::constant_fits(text, check),
            _ => forms::constant_fits("", check)
                .map(|_| Err(format!("a {sql_type} is written as a string"))),
        }
    {
        return fits;
    }
    match (constant, sql_type) {
        (Constant::Text(text), SqlType::Text | SqlType::Varchar(_) | SqlType::Parsed(_)) => {
            if text.contains('\0') {
                return Err("it contains U+0000".into());
            }
            match sql_type {
                SqlType::Varchar(Some(max)) if text.chars().count() > *max => Err(format!(
                    "{} characters, the column holds {max}",
                    text.chars().count()
                )),
                _ => Ok(()),
            }
        }
        (Constant::Text(text), SqlType::Uuid) => crate::forms::uuid(text)
            .map(|_| ())
            .ok_or_else(|| "it is not a UUID".into()),
        (Constant::Text(text), SqlType::TimestampTz | SqlType::Timestamp) => parse_timestamp(text)
            .map(|_| ())
            .ok_or_else(|| "it is not an RFC 3339 timestamp".into()),
        (Constant::Int(int), _) if sql_type.int_range().is_some() => {
            let (lo, hi) = sql_type.int_range().unwrap_or((i64::MIN, i64::MAX));
            if (lo..=hi).contains(int) {
                Ok(())
            } else {
                Err(format!("out of range {lo}..{hi}"))
            }
        }
        (Constant::Int(_) | Constant::Float(_), SqlType::Real | SqlType::Double) => Ok(()),
        (Constant::Int(_) | Constant::Float(_), kind) if kind.is_decimal() => Ok(()),
        (Constant::Bool(_), SqlType::Boolean) => Ok(()),
        (_, SqlType::Json | SqlType::Jsonb) => Ok(()),
        (Constant::Text(_), _) => Err("a string".into()),
        (Constant::Int(_), _) => Err("an integer".into()),
        (Constant::Float(_), _) => Err("a float".into()),
        (Constant::Bool(_), _) => Err("a boolean".into()),
    }
}

/// Whether a Kafka coordinate can be written to `sql_type`.
pub(super) fn kafka_fits(field: KafkaField, sql_type: &SqlType) -> Result<(), String> {
    let ok = match field {
        KafkaField::Timestamp => matches!(sql_type, SqlType::TimestampTz | SqlType::Timestamp),
        KafkaField::Topic => match sql_type {
            SqlType::Text | SqlType::Varchar(None) => true,
            SqlType::Varchar(Some(max)) => *max >= MAX_TOPIC_CHARS,
            _ => false,
        },
        KafkaField::Partition => {
            matches!(
                sql_type,
                SqlType::Integer | SqlType::BigInt | SqlType::Numeric { .. }
            )
        }
        KafkaField::Offset => match sql_type {
            SqlType::BigInt => true,
            SqlType::Numeric { precision, scale } => {
                precision.is_none_or(|p| p.saturating_sub(*scale) >= 19)
            }
            _ => false,
        },
        KafkaField::Key => sql_type.is_text(),
        KafkaField::SchemaId => matches!(sql_type, SqlType::Integer | SqlType::BigInt),
    };
    if ok {
        return Ok(());
    }
    Err(match field {
        KafkaField::Timestamp => "a timestamp".into(),
        KafkaField::Topic => format!("a topic name has up to {MAX_TOPIC_CHARS} characters"),
        KafkaField::Partition => "a partition is a 32-bit integer".into(),
        KafkaField::Offset => "an offset is a 64-bit integer".into(),
        KafkaField::Key => "a key is text".into(),
        KafkaField::SchemaId => "a schema id is a 32-bit integer".into(),
    })
}

/// Whether a field of a change event's envelope can be written to `sql_type`.
pub(super) fn cdc_fits(field: CdcField, sql_type: &SqlType) -> Result<(), String> {
    let wide_integer = matches!(sql_type, SqlType::BigInt)
        || matches!(sql_type, SqlType::Numeric { precision, scale }
            if precision.is_none_or(|p| p.saturating_sub(*scale) >= 19));
    let ok = match field {
        CdcField::Op => sql_type.is_text() || matches!(sql_type, SqlType::Char(_)),
        CdcField::Lsn | CdcField::Txid => wide_integer,
        CdcField::TsMs => {
            wide_integer || matches!(sql_type, SqlType::TimestampTz | SqlType::Timestamp)
        }
    };
    if ok {
        return Ok(());
    }
    Err(match field {
        CdcField::Op => "an operation is text (`c`, `r`, `u`, `d`)".into(),
        CdcField::Lsn => "an LSN is a 64-bit integer".into(),
        CdcField::Txid => "a transaction id is a 64-bit integer".into(),
        CdcField::TsMs => "a time in milliseconds is a 64-bit integer or a timestamp".into(),
    })
}

/// The type a lookup's query casts its keys to for a key column of `sql_type` (text, an
/// integer or a uuid), so the key's index is used; `None`: no lookup key can be of this type.
pub(super) fn lookup_cast(sql_type: &SqlType) -> Option<&'static str> {
    match sql_type {
        SqlType::Text | SqlType::Varchar(_) => Some("text"),
        SqlType::SmallInt => Some("smallint"),
        SqlType::Integer => Some("int"),
        SqlType::BigInt => Some("bigint"),
        SqlType::Uuid => Some("uuid"),
        _ => None,
    }
}
