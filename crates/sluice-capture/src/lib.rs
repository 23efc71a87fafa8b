//! `sluice capture` (issue 46, in progress): PostgreSQL's logical replication stream
//! (`pgoutput`) decoded into a typed change model, turned into the records Debezium's
//! PostgreSQL connector writes, and relayed to Kafka (docs/capture.md).
//!
//! The invariant this crate keeps: **it never acknowledges a position by itself.** The
//! slot's confirmed LSN moves only through [`CaptureStream::acknowledge`], which the relay
//! uses once Kafka has acknowledged every event up to that LSN, so a crash at any point
//! streams again what was not yet durable in Kafka, and loses nothing.
//!
//! - `pgoutput` decodes without I/O (pure, property-tested); `source` holds the connection
//!   (the `pgwire-replication` transport);
//! - `debezium` builds the records (pure, tested byte for byte against the connector's own
//!   records); `catalog` reads what the Relation message lacks (`NOT NULL`, defaults, the
//!   primary key);
//! - `relay` sends the records and confirms positions behind Kafka's acknowledgements.
//!   Not yet: the snapshot, heartbeats, reconnects, the `sluice capture` command
//!   (docs/capture.md#what-remains).

pub mod catalog;
pub mod debezium;
pub mod error;
pub mod lsn;
pub mod metrics;
pub mod model;
pub mod outbox;
pub mod pgoutput;
pub mod relay;
pub mod settings;
pub mod snapshot;
pub mod source;

pub use error::CaptureError;
pub use lsn::Lsn;
pub use model::{CaptureEvent, Cell, Change, Column, OldRow, Relation, ReplicaIdentity, Tuple};
pub use source::{CaptureStream, CreatedSlot, Session, SlotSnapshot, SourceConfig};
