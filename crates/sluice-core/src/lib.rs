//! sluice's contracts, without Kafka and without PostgreSQL.
//!
//! Everything sluice guarantees can be read here: what a valid message is (and why an
//! invalid one is a dead letter instead of a failed batch), how a batch is de-duplicated
//! before its single `INSERT … ON CONFLICT`, which errors are retried, dead-lettered or
//! fatal, and how long a transient failure is retried before the process gives up.
//! The adapters (`sluice-kafka`, `sluice-postgres`) depend on this crate, never the reverse.

pub mod clock;
pub mod dead_letter;
pub mod dedupe;
pub mod disposition;
pub mod outcome;
pub mod pipeline;
pub mod retry;
pub mod settings;
pub mod topics;
pub mod untrusted;

pub use dead_letter::{DeadLetter, DeadLetterKind, RecordCoords};
pub use disposition::Disposition;
pub use outcome::{BatchReport, WriteOutcome};
pub use pipeline::PipelineKind;
pub use settings::kafka_client::KafkaClientSettings;
pub use settings::topics::{ExistingTopic, TopicPlan, TopicSettings, TopicValues};
