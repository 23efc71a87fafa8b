//! A record of any format → what it does to its row: an upsert of the columns, a delete by
//! the key, or nothing. The format's envelope comes off first (`envelope`), then the columns
//! are decoded from the row image as from any JSON record (`decode`).

use std::sync::Arc;

use super::decode::{Cell, Frame, RecordMeta, SinkDecoder, key_object};
use super::envelope::{self, ChangeKind};
use super::keep::Keep;
use super::model::{Format, OnTombstone};
use super::transcode::{Transcoded, Writer};
use crate::messages::DecodeError;

/// The header Debezium puts on the create event of a row whose key changed: the old key.
pub const OLD_KEY_HEADER: &str = "__debezium.oldkey";

/// The header Debezium puts on the delete event (and its tombstone) of a row whose key
/// changed: the new key.
pub const NEW_KEY_HEADER: &str = "__debezium.newkey";

/// What a record does to the row of its key.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum RowOp {
    /// Insert, or update by the conflict policy.
    Upsert,
    /// Delete the key's row — under newest-wins, unless the stored row is newer than this
    /// row's version (a delete without a version, a tombstone, always applies).
    Delete,
    /// Nothing: a tombstone the sink ignores, a Debezium event that changes no row.
    Ignore,
    /// A delete of the key, as [`RowOp::Delete`] with `version`, then this row's upsert: a
    /// delete and a later upsert of one key met in one batch.
    Replace {
        /// The delete's version (newest-wins), if it had one.
        version: Option<Cell>,
    },
}

/// One decoded record: its operation, its cells (one per planned column; a delete decodes
/// only its key and version, the rest NULL), and the columns that keep their stored value
/// (Debezium did not read them: a TOASTed value an update left unchanged).
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// What it does.
    pub op: RowOp,
    /// Its cells, shared with its rows.
    pub cells: Arc<[Cell]>,
    /// Positions of the columns left as they are in the row.
    pub keep: Keep,
    /// A row whose key changed: its old key. The new row takes the values it keeps from what
    /// the old key's delete set aside, or else from the old key's row.
    pub moved_from: Option<Moved>,
    /// The delete of a row whose key changed: the new key (cells in key order). The delete
    /// sets the old row aside for the new key's create, which may keep some of its values
    /// (docs/ARCHITECTURE.md#sinks).
    pub moving_to: Option<Moved>,
}

/// The other key of a key change — the old key, on the create of the new one; the new key,
/// on the delete of the old one — with the change's version (newest-wins) and its LSN, which
/// the two events share and which tells this change from another between the same keys.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Moved {
    /// The other key's cells, in key order.
    pub key: Arc<[Cell]>,
    /// The change's newest-wins value.
    pub version: Option<Cell>,
    /// The change's `source.lsn`.
    pub lsn: Option<i64>,
}

impl Decoded {
    /// An upsert of `cells`.
    pub fn upsert(cells: Vec<Cell>) -> Self {
        Self {
            op: RowOp::Upsert,
            cells: cells.into(),
            keep: Keep::default(),
            moved_from: None,
            moving_to: None,
        }
    }
}

impl SinkDecoder {
    /// Decodes one record (`payload` `None`: a tombstone) by the sink's format and tombstone
    /// rule; the first broken rule is the reason.
    pub fn decode_record(
        &self,
        payload: Option<&[u8]>,
        meta: &RecordMeta<'_>,
    ) -> Result<Decoded, DecodeError> {
        // A key in a registry format is read as the JSON it transcodes to; a Debezium key as
        // the JSON converter writes it, with the Connect schema its semantic types (a
        // millisecond `io.debezium.time.Timestamp`, a `VariableScaleDecimal`) are read by.
        let key = match meta.key {
            Some(bytes) => self.transcoded_key(bytes)?.map(|key| self.key_text(key)),
            None => None,
        };
        let meta = &match &key {
            Some(key) => RecordMeta {
                key: Some(key.as_bytes()),
                ..*meta
            },
            None => *meta,
        };
        let value = match payload.map(|bytes| self.value_writer(bytes)).transpose()? {
            Some(Some(writer)) => {
                if let Some(cells) = self.straight(&writer, meta) {
                    return Ok(Decoded::upsert(cells?));
                }
                Some(self.transcoded(writer, "value")?)
            }
            _ => None,
        };
        let frame = Frame {
            schema_id: value.as_ref().map(|v| v.schema_id),
            connect_schema: value.as_ref().and_then(|v| v.schema.connect_schema()),
            ..Frame::new(meta, self.format)
        };
        match (value.as_ref(), payload) {
            (Some(value), _) => self.decode_framed(value.json.as_bytes(), &frame),
            (None, Some(payload)) => self
                .decode_framed(payload, &frame)
                .map_err(|error| self.unframed(error, payload)),
            (None, None) => self.tombstone(&frame),
        }
    }

    /// The reason for a record a JSON sink cannot read because it is in a registry format
    /// (the registry's wire header: magic byte 0, a 4-byte schema id): the sink's `format`
    /// is missing, which "not valid UTF-8" or "expected value" would not tell.
    fn unframed(&self, error: DecodeError, payload: &[u8]) -> DecodeError {
        let unreadable = matches!(
            error,
            DecodeError::InvalidUtf8 { .. }
                | DecodeError::InvalidJson { .. }
                | DecodeError::Envelope { .. }
        );
        match payload {
            [0, id @ ..]
                if unreadable && id.len() >= 4 && self.format != Format::SchemaRegistryJson =>
            {
                let id = i32::from_be_bytes([id[0], id[1], id[2], id[3]]);
                let setting = match self.format {
                    Format::Debezium => "its `value_format`",
                    _ => "its `format`",
                };
                DecodeError::Registry {
                    detail: format!(
                        "payload is not JSON text: it starts with a schema registry wire header \
                         (magic byte 0, schema id {id}); the sink reads JSON, so {setting} must \
                         name the registry format (`avro`, `protobuf` or `json-schema`)"
                    ),
                }
            }
            _ => error,
        }
    }

    /// A plain Avro record's cells straight from its bytes (no JSON text of it), when it is
    /// the common case `decode/scanned.rs` takes (`None`: transcode it).
    fn straight(
        &self,
        writer: &Writer<'_>,
        meta: &RecordMeta<'_>,
    ) -> Option<Result<Vec<Cell>, DecodeError>> {
        if self.format != Format::Json {
            return None;
        }
        let frame = Frame {
            schema_id: Some(writer.header.schema_id),
            ..Frame::new(meta, self.format)
        };
        self.decode_avro_fields(&writer.schema, writer.header.body, &frame)
    }

    /// Whether a registry record value is decoded straight from its bytes (tests show the
    /// straight path is the one taken, not the transcode it falls back to).
    #[cfg(test)]
    pub(crate) fn reads_straight(&self, payload: &[u8], meta: &RecordMeta<'_>) -> bool {
        matches!(self.value_writer(payload), Ok(Some(writer)) if self.straight(&writer, meta).is_some())
    }

    /// A transcoded record key as the decoder reads it: for a Debezium sink, in the Connect
    /// envelope of the schema it was made from when the writer's schema gives one, as a
    /// value's Connect schema is used (docs/ARCHITECTURE.md#registry-formats).
    fn key_text(&self, key: Transcoded) -> String {
        match (self.format, key.schema.connect_schema_text()) {
            (Format::Debezium, Some(schema)) => {
                format!(r#"{{"schema":{schema},"payload":{}}}"#, key.json)
            }
            _ => key.json,
        }
    }

    /// A record value's row image (JSON text by now), its format's envelope off; `None`: a
    /// Connect tombstone (`"payload": null`).
    pub(super) fn unwrapped<'p>(
        &self,
        payload: &'p [u8],
        connect_schema: Option<&serde_json::Value>,
    ) -> Result<Option<std::borrow::Cow<'p, [u8]>>, DecodeError> {
        Ok(Some(match self.format {
            Format::Json => payload.into(),
            Format::SchemaRegistryJson => envelope::schema_registry(payload)
                .map_err(envelope_error)?
                .1
                .into(),
            Format::ConnectJson => {
                match envelope::connect(utf8(payload)?).map_err(envelope_error)? {
                    Some(row) => row.into_bytes().into(),
                    None => return Ok(None),
                }
            }
            Format::Debezium => envelope::debezium_with(utf8(payload)?, connect_schema)
                .map_err(envelope_error)?
                .image
                .into_bytes()
                .into(),
        }))
    }

    /// Decodes a record value (JSON text by now) in its frame, by the sink's format.
    fn decode_framed(&self, payload: &[u8], frame: &Frame<'_>) -> Result<Decoded, DecodeError> {
        let frame = *frame;
        match self.format {
            Format::Json => Ok(Decoded::upsert(self.cells(Some(payload), &frame)?)),
            Format::SchemaRegistryJson => {
                let (id, rest) = envelope::schema_registry(payload).map_err(envelope_error)?;
                let frame = Frame {
                    schema_id: Some(id),
                    ..frame
                };
                Ok(Decoded::upsert(self.cells(Some(rest), &frame)?))
            }
            Format::ConnectJson => {
                match envelope::connect(utf8(payload)?).map_err(envelope_error)? {
                    Some(row) => Ok(Decoded::upsert(self.cells(Some(row.as_bytes()), &frame)?)),
                    None => self.tombstone(&frame),
                }
            }
            Format::Debezium => {
                let change = envelope::debezium_with(utf8(payload)?, frame.connect_schema)
                    .map_err(envelope_error)?;
                let frame = Frame {
                    change: Some(&change.meta),
                    unavailable: &change.unavailable,
                    json_nulls: &change.json_nulls,
                    ..frame
                };
                let image = Some(change.image.as_bytes());
                match change.kind {
                    ChangeKind::Upsert => {
                        let cells = self.cells(image, &frame)?;
                        let moved_from = self
                            .header_key(OLD_KEY_HEADER, "after", payload, &frame)?
                            .map(|key| Moved {
                                key,
                                version: self.guard.and_then(|g| cells.get(g).cloned()),
                                lsn: change.meta.lsn,
                            });
                        Ok(Decoded {
                            op: RowOp::Upsert,
                            cells: cells.into(),
                            keep: self.unavailable_columns(&frame).into(),
                            moved_from,
                            moving_to: None,
                        })
                    }
                    // The delete half of a key change deletes the old row and sets it aside
                    // for the create of the new key (which may come later, in another batch);
                    // that create may also come first (another partition), and then reads
                    // what it keeps from the old row itself.
                    ChangeKind::Delete => {
                        let mut deleted = self.delete(image, &frame)?;
                        deleted.moving_to = self
                            .header_key(NEW_KEY_HEADER, "before", payload, &frame)?
                            .map(|key| Moved {
                                key,
                                version: self.guard.and_then(|g| deleted.cells.get(g).cloned()),
                                lsn: change.meta.lsn,
                            });
                        Ok(deleted)
                    }
                    ChangeKind::Other => Ok(self.ignored()),
                }
            }
        }
    }

    /// A tombstone by the sink's rule.
    fn tombstone(&self, frame: &Frame<'_>) -> Result<Decoded, DecodeError> {
        match self.on_tombstone {
            OnTombstone::Ignore => Ok(self.ignored()),
            OnTombstone::DeadLetter => Err(DecodeError::NullPayload),
            OnTombstone::Delete => {
                // A field source of a key column reads the same path in the record key.
                let image = frame
                    .meta
                    .key
                    .and_then(|key| key_object(key, self.format).ok())
                    .map(|object| serde_json::Value::Object(object).to_string())
                    .unwrap_or_else(|| "{}".to_owned());
                self.delete(Some(image.as_bytes()), frame)
            }
        }
    }

    /// A delete: only the key columns are decoded, and the newest-wins column when the
    /// record has it (a tombstone has no version: NULL, the delete applies whatever the
    /// stored row's version).
    fn delete(&self, image: Option<&[u8]>, frame: &Frame<'_>) -> Result<Decoded, DecodeError> {
        let key = Frame {
            only: Some(&self.key),
            unavailable: &[],
            ..*frame
        };
        let mut cells = self.cells(image, &key)?;
        if let Some(guard) = self.guard {
            let only = [guard];
            let version = Frame {
                only: Some(&only),
                ..key
            };
            if let Ok(mut versioned) = self.cells(image, &version)
                && let (Some(slot), Some(cell)) = (cells.get_mut(guard), versioned.get_mut(guard))
            {
                *slot = std::mem::replace(cell, Cell::Null);
            }
        }
        Ok(Decoded {
            op: RowOp::Delete,
            cells: cells.into(),
            keep: Keep::default(),
            moved_from: None,
            moving_to: None,
        })
    }

    /// The other key of a key change, from header `name` (`None` without it): the header is
    /// the other record key, its logical types read by the schema of the change event
    /// `value`'s row `image`; a `key` source reads it, a `field` source the same path in it.
    fn header_key(
        &self,
        name: &str,
        image: &str,
        value: &[u8],
        frame: &Frame<'_>,
    ) -> Result<Option<Arc<[Cell]>>, DecodeError> {
        let Some(header) = frame
            .meta
            .headers
            .iter()
            .rev()
            .find(|(header, _)| header == name)
            .and_then(|(_, value)| value.as_deref())
        else {
            return Ok(None);
        };
        let header = envelope::key_header(utf8(header)?, utf8(value)?, frame.connect_schema, image)
            .map_err(|e| envelope_error(format!("header {name}: {e}")))?;
        let meta = RecordMeta {
            key: Some(header.as_bytes()),
            ..*frame.meta
        };
        let only: Vec<usize> = self.key.clone();
        let frame = Frame {
            meta: &meta,
            only: Some(&only),
            unavailable: &[],
            json_nulls: &[],
            ..*frame
        };
        let cells = self
            .cells(Some(header.as_bytes()), &frame)
            .map_err(|e| envelope_error(format!("header {name}: {e}")))?;
        Ok(Some(
            self.key
                .iter()
                .map(|k| cells.get(*k).cloned().unwrap_or(Cell::Null))
                .collect(),
        ))
    }

    /// A record that changes no row.
    fn ignored(&self) -> Decoded {
        Decoded {
            op: RowOp::Ignore,
            cells: vec![Cell::Null; self.width()].into(),
            keep: Keep::default(),
            moved_from: None,
            moving_to: None,
        }
    }
}

fn utf8(payload: &[u8]) -> Result<&str, DecodeError> {
    simdutf8::basic::from_utf8(payload).map_err(|_| DecodeError::InvalidUtf8 {
        offset: std::str::from_utf8(payload).map_or_else(|e| e.valid_up_to(), |_| 0),
    })
}

fn envelope_error(detail: String) -> DecodeError {
    DecodeError::Envelope { detail }
}
