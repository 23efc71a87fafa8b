//! Schema registry records (Avro, Protobuf, JSON Schema) turned into the JSON row image the
//! sink's decoder reads ("transcoding"), without I/O: the caller fetches the writer's schema
//! by the id in the wire header, compiles it once ([`WriterSchema::compile`]) and transcodes
//! each record's body ([`WriterSchema::to_json`]).
//!
//! Invariant: the JSON written holds each value in the form its column's check reads
//! (`forms.rs`, `decode/value.rs`): bytes as standard base64, decimals as JSON numbers digit
//! for digit, dates `YYYY-MM-DD`, times `HH:MM:SS.ffffff`, timestamps RFC 3339 to the
//! microsecond (`Z` for an instant, no offset for a local time), intervals ISO 8601. A value
//! that has no such form (NaN, a date past year 9999) is written so that the column check
//! rejects it naming the field, not the whole record. No input bytes panic: a body that does
//! not decode is a [`WireError`], a dead letter (docs/ARCHITECTURE.md#errors).

mod avro;
mod avro_connect;
mod avro_fields;
mod avro_logical;
mod avro_names;
mod avro_read;
mod avro_schema;
mod error;
mod json_schema;
mod json_text;
mod protobuf;
mod protobuf_scalar;
mod protobuf_wkt;
#[cfg(test)]
mod tests;

pub use avro_fields::{TopFields, Wanted};
pub use error::{SchemaError, WireError};

/// The registry wire format's first byte.
pub const MAGIC_BYTE: u8 = 0;

/// What kind of schema the registry holds for an id: its `schemaType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemaKind {
    /// `AVRO`, the registry's default when `schemaType` is absent.
    Avro,
    /// `PROTOBUF`: a .proto file.
    Protobuf,
    /// `JSON`: a JSON Schema; the body is JSON text already.
    Json,
}

impl SchemaKind {
    /// The kind the registry's `schemaType` names (absent = `AVRO`).
    pub fn from_registry(schema_type: Option<&str>) -> Result<Self, SchemaError> {
        match schema_type {
            None | Some("AVRO") => Ok(Self::Avro),
            Some("PROTOBUF") => Ok(Self::Protobuf),
            Some("JSON") => Ok(Self::Json),
            Some(other) => Err(SchemaError::UnknownKind {
                schema_type: other.to_owned(),
            }),
        }
    }
}

/// A writer's schema compiled once, to transcode every record written with it; immutable and
/// shared across threads.
#[derive(Debug)]
pub struct WriterSchema {
    compiled: Compiled,
    /// An Avro schema's Kafka Connect schema (`avro_connect`), for Debezium's change events.
    connect: Option<serde_json::Value>,
    /// The same as JSON text, written once (a Debezium key's envelope is made of it).
    connect_text: Option<String>,
}

#[derive(Debug)]
enum Compiled {
    Avro(avro::AvroSchema),
    Protobuf(protobuf::ProtoSchema),
    Json(json_schema::JsonSchema),
}

impl WriterSchema {
    /// Compiles the schema text the registry returned. `references`: each schema it refers to,
    /// transitively, as (the reference's name as the registry gives it — for Protobuf the
    /// import path —, its schema text).
    pub fn compile(
        kind: SchemaKind,
        text: &str,
        references: &[(String, String)],
    ) -> Result<Self, SchemaError> {
        let connect = match kind {
            SchemaKind::Avro => avro_connect::connect_schema(text),
            SchemaKind::Protobuf | SchemaKind::Json => None,
        };
        let compiled = match kind {
            SchemaKind::Avro => Compiled::Avro(avro::AvroSchema::compile(text, references)?),
            SchemaKind::Protobuf => {
                Compiled::Protobuf(protobuf::ProtoSchema::compile(text, references)?)
            }
            SchemaKind::Json => Compiled::Json(json_schema::JsonSchema::compile(text)?),
        };
        let connect_text = connect.as_ref().map(serde_json::Value::to_string);
        Ok(Self {
            compiled,
            connect,
            connect_text,
        })
    }

    /// The Kafka Connect schema an Avro schema was made from (its `connect.name`s), as the
    /// JSON converter would write it: what a Debezium change event's fields mean.
    pub fn connect_schema(&self) -> Option<&serde_json::Value> {
        self.connect.as_ref()
    }

    /// [`Self::connect_schema`] as JSON text.
    pub fn connect_schema_text(&self) -> Option<&str> {
        self.connect_text.as_deref()
    }

    /// The kind of schema this is.
    pub fn kind(&self) -> SchemaKind {
        match self.compiled {
            Compiled::Avro(_) => SchemaKind::Avro,
            Compiled::Protobuf(_) => SchemaKind::Protobuf,
            Compiled::Json(_) => SchemaKind::Json,
        }
    }

    /// The record's body (after the wire header) as the JSON text of its row image.
    /// `indexes`: the Protobuf message-index path (empty or `[0]`: the file's first message;
    /// ignored for the other kinds).
    pub fn to_json(&self, indexes: &[i32], body: &[u8]) -> Result<String, WireError> {
        match &self.compiled {
            Compiled::Avro(schema) => schema.to_json(body),
            Compiled::Protobuf(schema) => schema.to_json(indexes, body),
            Compiled::Json(schema) => schema.to_json(body),
        }
    }

    /// A plain Avro record's top-level fields `wanted` read straight into values, as
    /// [`WriterSchema::to_json`] and a parse of it would give them; `None` for another kind of
    /// schema, a root that is not a record, or a body that does not decode (the caller then
    /// transcodes the whole record, which names the reason).
    pub fn top_fields(&self, body: &[u8], wanted: Wanted<'_>) -> Option<TopFields> {
        match &self.compiled {
            Compiled::Avro(schema) => schema.top_fields(body, wanted),
            Compiled::Protobuf(_) | Compiled::Json(_) => None,
        }
    }

    /// Whether a field path (its segments) can hold a value in records of this schema, in any
    /// branch of a union or oneof; a path into a map, a `google.protobuf.Struct` or an open
    /// JSON object is accepted from there on. `indexes` as for [`Self::to_json`] (a subject's
    /// latest version means its first message: `[]`).
    pub fn has_path(&self, indexes: &[i32], path: &[&str]) -> bool {
        match &self.compiled {
            Compiled::Avro(schema) => schema.has_path(path),
            Compiled::Protobuf(schema) => schema.has_path(indexes, path),
            Compiled::Json(schema) => schema.has_path(path),
        }
    }

    /// Whether records of this schema may hold a value at `path`, whichever message of a
    /// Protobuf file they are ([`Self::has_path`] for the other formats): what a subject
    /// check may ask before it has seen a record's message-index list.
    pub fn may_have_path(&self, path: &[&str]) -> bool {
        match &self.compiled {
            Compiled::Protobuf(schema) => schema.any_has_path(path),
            _ => self.has_path(&[], path),
        }
    }
}

/// A record's registry wire header taken off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header<'a> {
    /// The writer's schema id.
    pub schema_id: i32,
    /// The Protobuf message-index path (`[0]` for the first message; empty for the other
    /// kinds).
    pub indexes: Vec<i32>,
    /// The bytes after the header.
    pub body: &'a [u8],
}

/// Reads the wire header: the magic byte 0, the schema id (4 bytes, big-endian) and, for
/// Protobuf, the message-index list (a zigzag varint count, then that many zigzag varint
/// indexes; a count of 0 — the single byte 0 — means `[0]`).
pub fn header(payload: &[u8], protobuf: bool) -> Result<Header<'_>, WireError> {
    let len = payload.len();
    let (&magic, rest) = payload.split_first().ok_or(WireError::TooShort {
        len,
        what: "the magic byte and schema id",
    })?;
    if magic != MAGIC_BYTE {
        return Err(WireError::WrongMagic { byte: magic });
    }
    let (id, mut body) = rest.split_first_chunk::<4>().ok_or(WireError::TooShort {
        len,
        what: "the magic byte and schema id",
    })?;
    let schema_id = i32::from_be_bytes(*id);
    let mut indexes = Vec::new();
    if protobuf {
        let count = header_varint(&mut body, "the count")?;
        if count < 0 || usize::try_from(count).is_ok_and(|n| n > body.len()) {
            return Err(WireError::BadIndexes {
                reason: format!("counts {count} indexes in {} bytes", body.len()),
            });
        }
        if count == 0 {
            indexes.push(0);
        }
        for _ in 0..count {
            let index = header_varint(&mut body, "an index")?;
            indexes.push(i32::try_from(index).map_err(|_| WireError::BadIndexes {
                reason: format!("holds {index}, beyond a 32-bit index"),
            })?);
        }
    }
    Ok(Header {
        schema_id,
        indexes,
        body,
    })
}

/// One zigzag varint of the header (`what` it is, for the reason).
fn header_varint(body: &mut &[u8], what: &str) -> Result<i64, WireError> {
    avro_read::long(body).map_err(|fault| WireError::BadIndexes {
        reason: format!("{what}: {}", fault.reason()),
    })
}
