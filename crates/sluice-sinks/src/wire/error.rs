//! Why a registry record or a writer's schema could not be read. Every [`WireError`] is a dead
//! letter: the record's bytes will never decode (docs/ARCHITECTURE.md#errors). A
//! [`SchemaError`] is one for every record of that schema id too.

use sluice_core::Disposition;

/// A record whose wire header or body cannot be read; its `Display` is the dead-letter reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The first byte is not the registry wire format's magic byte 0.
    #[error("schema registry wire header: magic byte is {byte}, expected 0")]
    WrongMagic {
        /// The first byte found.
        byte: u8,
    },
    /// The payload ends inside its header.
    #[error("schema registry wire header: payload of {len} bytes is too short for {what}")]
    TooShort {
        /// The payload's length.
        len: usize,
        /// What it is too short for (`the magic byte and schema id`, `message index 2`).
        what: &'static str,
    },
    /// The Protobuf message-index list is not a count and that many indexes.
    #[error("schema registry wire header: message-index list {reason}")]
    BadIndexes {
        /// What is wrong with it.
        reason: String,
    },
    /// The Protobuf message-index path names no message of the schema.
    #[error("message index path {indexes:?} is not a message of the schema")]
    NoSuchMessage {
        /// The path from the header.
        indexes: Vec<i32>,
    },
    /// The body does not decode with its writer's schema.
    #[error("bytes do not decode with {}{}: {reason}", schema_name(*schema_id), field_name(field))]
    Undecodable {
        /// The schema id from the header, when the caller has said it ([`Self::for_schema`]).
        schema_id: Option<i32>,
        /// The field path being read (`order.lines[2].price`); empty at the top.
        field: String,
        /// What did not decode.
        reason: String,
    },
}

impl WireError {
    /// Every wire error is permanent for its record.
    pub fn disposition(&self) -> Disposition {
        Disposition::DeadLetter
    }

    /// This error naming the schema id the record was written with.
    pub fn for_schema(self, id: i32) -> Self {
        match self {
            Self::Undecodable { field, reason, .. } => Self::Undecodable {
                schema_id: Some(id),
                field,
                reason,
            },
            other => other,
        }
    }
}

fn schema_name(id: Option<i32>) -> String {
    match id {
        Some(id) => format!("schema id {id}"),
        None => "the writer's schema".to_owned(),
    }
}

fn field_name(field: &str) -> String {
    if field.is_empty() {
        String::new()
    } else {
        format!(" at field `{field}`")
    }
}

/// A writer's schema that does not parse or compile; its `Display` says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// The registry's `schemaType` is not one sluice reads.
    #[error("schema type {schema_type:?} is not AVRO, PROTOBUF or JSON")]
    UnknownKind {
        /// The `schemaType` the registry returned.
        schema_type: String,
    },
    /// The Avro schema does not parse (or names a type it does not define).
    #[error("Avro schema does not parse: {reason}")]
    Avro {
        /// The parser's reason.
        reason: String,
    },
    /// The .proto file (or one it imports) does not compile.
    #[error("Protobuf schema does not compile: {reason}")]
    Protobuf {
        /// The compiler's reason.
        reason: String,
    },
    /// The JSON Schema is not JSON.
    #[error("JSON Schema is not JSON: {reason}")]
    Json {
        /// The parser's reason.
        reason: String,
    },
}

impl SchemaError {
    /// A schema that does not compile makes each record of its id a dead letter (the caller
    /// may decide to stop instead).
    pub fn disposition(&self) -> Disposition {
        Disposition::DeadLetter
    }
}

/// A decoding fault on its way up: the reason, and the path segments from the innermost
/// outwards (pushed as the fault leaves each field, so a record that decodes pays nothing).
#[derive(Debug)]
pub(super) struct Fault {
    reason: String,
    segments: Vec<String>,
}

impl Fault {
    /// A fault with no path yet.
    pub(super) fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            segments: Vec::new(),
        }
    }

    /// What did not decode.
    pub(super) fn reason(&self) -> &str {
        &self.reason
    }

    /// The fault one field further out (`.name`, or `[i]` for an element).
    pub(super) fn within(mut self, segment: impl FnOnce() -> String) -> Self {
        self.segments.push(segment());
        self
    }

    /// The wire error, with its field path written out.
    pub(super) fn into_error(self) -> WireError {
        let mut field = String::new();
        for segment in self.segments.iter().rev() {
            if !field.is_empty() && !segment.starts_with('[') {
                field.push('.');
            }
            field.push_str(segment);
        }
        WireError::Undecodable {
            schema_id: None,
            field,
            reason: self.reason,
        }
    }
}
