//! pgoutput's logical replication messages, decoded without I/O.
//!
//! The format is PostgreSQL's "Logical Replication Message Formats" (protocol chapter 55.9),
//! protocol version 1 and 2 without `streaming`: both send the same messages, one whole
//! committed transaction at a time (docs/capture.md#protocol-version). `message` reads one
//! message into its wire shape (relations named by OID); `decoder` keeps the relations and
//! turns the messages into the typed model of `crate::model`.

mod decoder;
mod message;
mod reader;
#[cfg(test)]
mod tests;

pub use decoder::{Decoder, postgres_time};
pub use message::{Message, decode_message};

/// A message pgoutput should not have sent, or sent cut short. Fatal for the stream: the
/// slot still holds the message, so a restart reads it again (a bug to fix, not data to skip).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The message ended inside the named field.
    #[error("pgoutput message cut short in {what}")]
    Truncated {
        /// The field being read.
        what: &'static str,
    },
    /// Bytes left after the message's last field.
    #[error("pgoutput message longer than its fields")]
    TrailingBytes,
    /// A string field is not UTF-8.
    #[error("pgoutput {what} is not UTF-8")]
    NotUtf8 {
        /// The field.
        what: &'static str,
    },
    /// A message type this decoder does not know.
    #[error("unknown pgoutput message type {0:?}")]
    UnknownMessage(char),
    /// A streamed (in-progress) transaction's message: the stream was started without
    /// `streaming`, so this cannot happen unless the options changed.
    #[error("pgoutput streaming message {0:?}, but streaming was not requested")]
    Streaming(char),
    /// A tuple column kind other than `n`, `u`, `t`, `b`.
    #[error("unknown pgoutput tuple column kind {0:?}")]
    UnknownColumnKind(char),
    /// A tuple or old-row marker other than the ones the message type allows.
    #[error("unexpected pgoutput tuple marker {0:?}")]
    UnexpectedTupleMarker(char),
    /// A replica identity setting other than `d`, `n`, `f`, `i`.
    #[error("unknown replica identity {0:?}")]
    UnknownReplicaIdentity(char),
    /// A message other than a row change reached the change decoder (a bug).
    #[error("not a row change: {0}")]
    NotAChange(String),
    /// A change names a relation no Relation message described in this session.
    #[error("change for relation {0} before its Relation message")]
    UnknownRelation(u32),
    /// A tuple's column count differs from its relation's.
    #[error("{table}: tuple has {got} columns, the relation {expected}")]
    ColumnCount {
        /// `schema.table`.
        table: String,
        /// The relation's column count.
        expected: usize,
        /// The tuple's.
        got: usize,
    },
}
