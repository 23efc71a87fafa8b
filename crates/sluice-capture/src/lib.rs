//! The source side of `sluice capture` (issue 46, a spike): PostgreSQL's logical
//! replication stream (`pgoutput`) decoded into a typed change model, ready to become
//! Debezium change events (docs/capture.md).
//!
//! The invariant this crate keeps: **it never acknowledges a position by itself.** The
//! slot's confirmed LSN moves only through [`CaptureStream::acknowledge`], which the
//! caller uses once Kafka has acknowledged every event up to that LSN, so a crash at any
//! point streams again what was not yet durable in Kafka, and loses nothing.
//!
//! `pgoutput` decodes without I/O (pure, property-tested); `source` holds the connection
//! (the `pgwire-replication` transport).

pub mod error;
pub mod lsn;
pub mod model;
pub mod pgoutput;
pub mod source;

pub use error::CaptureError;
pub use lsn::Lsn;
pub use model::{CaptureEvent, Cell, Change, Column, OldRow, Relation, ReplicaIdentity, Tuple};
pub use source::{CaptureStream, CreatedSlot, Session, SlotSnapshot, SourceConfig};
