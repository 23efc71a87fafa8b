//! Where a decoder finds the writers' schemas of registry records (docs/ARCHITECTURE.md#registry-formats):
//! filled by the registry client before a batch is decoded, read here without waiting. A
//! record whose schema is not known yet is not decoded at all ([`DecodeError::SchemaPending`]):
//! its batch waits for the schema and is decoded again, never dead-lettered for it.
//!
//! [`DecodeError::SchemaPending`]: crate::messages::DecodeError::SchemaPending

use crate::wire::WriterSchema;
use std::fmt;
use std::sync::Arc;

/// What is known of a schema id.
#[derive(Debug, Clone)]
pub enum Known {
    /// Its compiled schema.
    Schema(Arc<WriterSchema>),
    /// The registry refused it (not there, or it does not compile): the reason, which its
    /// records' dead letters give.
    Refused(Arc<str>),
}

/// The writers' schemas fetched so far, by id.
pub trait WriterSchemas: Send + Sync + fmt::Debug {
    /// What is known of `id`; `None`: not fetched yet.
    fn known(&self, id: i32) -> Option<Known>;
}
