//! The sources outside the record value: a constant, the record's coordinates, its key and
//! headers, and the change event's envelope, each checked as a field's value.

use std::borrow::Cow;

use chrono::DateTime;
use serde_json::{Map, Value};

use super::value::find;
use super::{Cell, ColumnDecoder, Frame, RecordMeta};
use crate::checks::Check;
use crate::envelope;
use crate::messages::DecodeError;
use crate::messages::fields::dynamic;
use crate::model::{CdcField, Format, KafkaField, Source};

impl ColumnDecoder {
    /// The cell of a source outside the record value (a constant, the record's coordinates,
    /// key or headers, the change event's envelope); `None` for a field or a lookup.
    pub(super) fn outside_value(&self, frame: &Frame<'_>) -> Option<Result<Cell, DecodeError>> {
        match &self.source {
            Source::Field(_) | Source::Lookup(_) => None,
            _ => Some(self.outside(frame)),
        }
    }

    fn outside(&self, frame: &Frame<'_>) -> Result<Cell, DecodeError> {
        let meta = frame.meta;
        match &self.source {
            Source::Field(_) | Source::Lookup(_) => Ok(Cell::Null),
            Source::Const(_) => Ok(self.constant.clone().unwrap_or(Cell::Null)),
            Source::Kafka(KafkaField::SchemaId) => {
                Ok(frame.schema_id.map_or(Cell::Null, Cell::Int))
            }
            Source::Kafka(field) => kafka_cell(*field, meta),
            Source::Key(None) => match meta.key {
                None => self.absent(None),
                Some(bytes) => self.present_text(utf8_key(bytes)?),
            },
            Source::Key(Some(path)) => match meta.key {
                None => self.absent(None),
                Some(bytes) => {
                    let object = key_object(bytes, frame.format)?;
                    match find(&object, path) {
                        Some(Value::Null) | None => self.absent(Some(&object)),
                        Some(value) => self.present_outside(value.clone()),
                    }
                }
            },
            Source::Header { name, path } => {
                let value = meta
                    .headers
                    .iter()
                    .rev()
                    .find(|(header, _)| header == name)
                    .and_then(|(_, value)| value.as_deref());
                match (value, path) {
                    (None, _) => self.absent(None),
                    (Some(bytes), None) => match std::str::from_utf8(bytes) {
                        Ok(text) => self.present_text(text.to_owned()),
                        Err(_) => Err(dynamic::broken(
                            &self.field_name,
                            "must be UTF-8 text".into(),
                        )),
                    },
                    (Some(bytes), Some(path)) => {
                        let object: Map<String, Value> =
                            serde_json::from_slice(bytes).map_err(|_| {
                                dynamic::broken(&self.field_name, "must be a JSON object".into())
                            })?;
                        match find(&object, path) {
                            Some(Value::Null) | None => self.absent(None),
                            Some(value) => self.present_outside(value.clone()),
                        }
                    }
                }
            }
            Source::Cdc(field) => {
                let change = frame.change;
                let value = match field {
                    CdcField::Op => change.map(|c| Value::String(c.op.clone())),
                    CdcField::Lsn => change.and_then(|c| c.lsn).map(Value::from),
                    CdcField::Txid => change.and_then(|c| c.txid).map(Value::from),
                    CdcField::TsMs => change.and_then(|c| c.ts_ms).map(|ms| {
                        if matches!(self.checks.first(), Some(Check::Timestamp { .. })) {
                            DateTime::from_timestamp_millis(ms)
                                .map_or(Value::Null, |at| Value::String(at.to_rfc3339()))
                        } else {
                            Value::from(ms)
                        }
                    }),
                };
                match value {
                    None | Some(Value::Null) => self.absent(None),
                    Some(value) => self.present_outside(value),
                }
            }
        }
    }

    /// A text source (the whole record key, a header's bytes) read as its column's type:
    /// into a number or boolean column its text is read as that JSON scalar (a key `42` into
    /// a `bigint`, a header `true` into a `boolean`), with a number's own digits; into any
    /// other column (text, a uuid, a timestamp, …) it is the string. Text that is not such a
    /// scalar stays a string, which the column's check refuses by name.
    fn present_text(&self, text: String) -> Result<Cell, DecodeError> {
        // Surrounding white space is not part of a number: such text stays a string.
        let bare = text.trim() == text;
        let scalar = match self.checks.first().filter(|_| bare) {
            Some(Check::Integer { .. } | Check::Number { .. }) => {
                serde_json::from_str::<Value>(&text)
                    .ok()
                    .filter(Value::is_number)
            }
            Some(Check::Boolean) => serde_json::from_str::<Value>(&text)
                .ok()
                .filter(Value::is_boolean),
            _ => None,
        };
        match scalar {
            // The digits as written for a NUMERIC (a float column reads the number).
            Some(value) => self.present(
                Cow::Owned(value),
                self.numeric.then_some(text.as_str()),
                false,
            ),
            None => self.present_outside(Value::String(text)),
        }
    }

    /// A present value from outside the record value, checked as a field's.
    pub(super) fn present_outside(&self, value: Value) -> Result<Cell, DecodeError> {
        if value.is_null() {
            return self.absent(None);
        }
        self.present(Cow::Owned(value), None, false)
    }
}

/// The record key as UTF-8 text without U+0000.
fn utf8_key(bytes: &[u8]) -> Result<String, DecodeError> {
    match std::str::from_utf8(bytes) {
        Ok(text) if !text.contains('\0') => Ok(text.to_owned()),
        _ => Err(dynamic::broken(
            "(record key)",
            "must be UTF-8 text without U+0000".into(),
        )),
    }
}

/// The record key as a JSON object (inside its Connect envelope for a Connect or Debezium
/// topic).
pub(crate) fn key_object(bytes: &[u8], format: Format) -> Result<Map<String, Value>, DecodeError> {
    let text = utf8_key(bytes)?;
    let text = match format {
        Format::ConnectJson | Format::Debezium => envelope::connect(&text)
            .map_err(|why| dynamic::broken("(record key)", why))?
            .unwrap_or_default(),
        Format::Json | Format::SchemaRegistryJson => text,
    };
    serde_json::from_str(&text)
        .map_err(|_| dynamic::broken("(record key)", "must be a JSON object".into()))
}

/// A coordinate of the record.
fn kafka_cell(field: KafkaField, meta: &RecordMeta<'_>) -> Result<Cell, DecodeError> {
    Ok(match field {
        KafkaField::Timestamp => meta.timestamp.map_or(Cell::Null, Cell::Timestamp),
        KafkaField::Topic => Cell::Text(meta.topic.to_owned()),
        KafkaField::Partition => Cell::Int(meta.partition),
        KafkaField::Offset => Cell::BigInt(meta.offset),
        // Read from the wire header by the frame, never here.
        KafkaField::SchemaId => Cell::Null,
        KafkaField::Key => match meta.key {
            None => Cell::Null,
            Some(bytes) => Cell::Text(utf8_key(bytes)?),
        },
    })
}
