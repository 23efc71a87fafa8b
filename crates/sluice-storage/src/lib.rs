//! The storage consumer: Kafka → PostgreSQL with the four guarantees of docs/ARCHITECTURE.md#guarantees.
//!
//! 1. **Nothing published is lost**: a batch's offsets are committed to Kafka only after the
//!    PostgreSQL transaction holding its effect has committed (`pipeline.rs`).
//! 2. **Redelivery does not duplicate**: every write is `INSERT … ON CONFLICT` on a natural
//!    key, after de-duplicating the batch ([`batch`]).
//! 3. **One bad message never stops a topic**: undecodable messages, unknown packages and
//!    rows that break a constraint at write time are dead-lettered in the same transaction
//!    as the good rows, and the offset moves past them ([`batch`], `isolate.rs`).
//! 4. **A half-alive process is a dead process**: if one pipeline fails, all stop and the
//!    process exits non-zero (`supervisor.rs`).
//!
//! Each pipeline runs on its own threads (a reader with its consumer, N writers each with
//! its own single-threaded runtime, database connection and cache); pipelines share only
//! the immutable settings and a stop signal.

pub mod batch;
pub mod by_table;
mod claim;
pub mod dead_letter_replay;
mod decoded;
mod error;
mod events;
pub mod failpoint;
pub mod heartbeat;
mod held;
mod isolate;
mod linger;
mod metrics;
pub mod offsets;
pub mod origins;
mod pipeline;
mod queues;
mod reader;
mod record;
mod rejects;
mod selected;
mod selection;
pub mod settings;
pub mod sink;
pub mod subjects;
mod supervisor;
mod writer;

pub use error::{PipelineError, PipelineTotals};
pub use metrics::{PipelineMetrics, StorageMetrics};
pub use selected::{Identity, Pipeline, PlannedRoute, Unplanned, plan_pipelines};
pub use selection::{Selection, SelectionError, select};
pub use settings::StorageSettings;
pub use supervisor::{SupervisorError, run_pipelines, run_selected};
