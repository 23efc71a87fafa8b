//! A schema registry record → the JSON text of its row image (docs/ARCHITECTURE.md#registry-formats):
//! the wire header gives the writer's schema id, the schema (fetched before the batch was
//! decoded) turns the bytes into JSON, and the columns are decoded from that as from any
//! JSON record, by the same rules.

use super::decode::SinkDecoder;
use super::model::Encoding;
use crate::messages::DecodeError;
use crate::schemas::Known;
use crate::wire::{self, SchemaKind, WireError, WriterSchema};
use std::sync::Arc;

/// A record's bytes as JSON text, with the schema id of its wire header.
#[derive(Debug)]
pub(super) struct Transcoded {
    pub(super) schema_id: i32,
    pub(super) json: String,
    /// The writer's schema (a Debezium event's Connect schema comes from it).
    pub(super) schema: Arc<WriterSchema>,
}

/// A registry record's wire header and the writer's schema it names.
pub(super) struct Writer<'b> {
    pub(super) header: wire::Header<'b>,
    pub(super) schema: Arc<WriterSchema>,
}

impl SinkDecoder {
    /// The writer of a record value, when values are in a registry format.
    pub(super) fn value_writer<'b>(
        &self,
        payload: &'b [u8],
    ) -> Result<Option<Writer<'b>>, DecodeError> {
        self.writer(payload, self.value_encoding, "value")
    }

    /// The record key as JSON, when keys are in a registry format.
    pub(super) fn transcoded_key(&self, key: &[u8]) -> Result<Option<Transcoded>, DecodeError> {
        match self.writer(key, self.key_encoding, "key")? {
            Some(writer) => self.transcoded(writer, "key").map(Some),
            None => Ok(None),
        }
    }

    fn writer<'b>(
        &self,
        bytes: &'b [u8],
        encoding: Encoding,
        part: &str,
    ) -> Result<Option<Writer<'b>>, DecodeError> {
        let expected = match encoding {
            Encoding::Json => return Ok(None),
            Encoding::Avro => SchemaKind::Avro,
            Encoding::Protobuf => SchemaKind::Protobuf,
            Encoding::JsonSchema => SchemaKind::Json,
        };
        let header = wire::header(bytes, encoding == Encoding::Protobuf)
            .map_err(|error| broken(part, format!("wire header: {error}")))?;
        let id = header.schema_id;
        let Some(schemas) = &self.schemas else {
            // The runner gives every registry sink the registry before it starts.
            return Err(broken(
                part,
                format!("schema id {id}: no schema registry configured"),
            ));
        };
        let schema = match schemas.known(id) {
            None => return Err(DecodeError::SchemaPending { schema_id: id }),
            Some(Known::Refused(reason)) => return Err(broken(part, reason.to_string())),
            Some(Known::Schema(schema)) => schema,
        };
        if schema.kind() != expected {
            return Err(broken(
                part,
                format!(
                    "schema id {id} is a {:?} schema; the sink reads {}",
                    schema.kind(),
                    encoding.as_str()
                ),
            ));
        }
        Ok(Some(Writer { header, schema }))
    }

    /// The record's bytes as JSON text, by its writer's schema.
    pub(super) fn transcoded(
        &self,
        writer: Writer<'_>,
        part: &str,
    ) -> Result<Transcoded, DecodeError> {
        let Writer { header, schema } = writer;
        let id = header.schema_id;
        let json = schema
            .to_json(&header.indexes, header.body)
            .map_err(|error| match error {
                undecodable @ WireError::Undecodable { .. } => {
                    broken(part, undecodable.for_schema(id).to_string())
                }
                other => broken(part, format!("schema id {id}: {other}")),
            })?;
        Ok(Transcoded {
            schema_id: id,
            json,
            schema,
        })
    }
}

/// A registry record that cannot be read: a dead letter naming the part and the reason.
fn broken(part: &str, detail: String) -> DecodeError {
    DecodeError::Registry {
        detail: format!("record {part}: {detail}"),
    }
}
