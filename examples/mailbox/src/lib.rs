//! The mailbox example service (docs/ARCHITECTURE.md#mailbox): users pinned to partitions (S11), commands sent
//! through the outbox (S9), a consumer that processes each record once (S10) and keeps a
//! per-user projection.
//!
//! The loop, end to end:
//! 1. [`setup`] creates the example's own tables (`CREATE TABLE IF NOT EXISTS`; they are
//!    not part of sluice's migrations).
//! 2. [`create_user`] assigns the user a partition of the topic ([`sluice_outbox::assign_partition`],
//!    which grows the topic when needed) and records the user with a zeroed state.
//! 3. [`send_command`] enqueues a `mailbox.command` event in the caller's transaction, keyed
//!    by the canonical mailbox user id (never an e-mail or a display name) and sent to the
//!    user's partition explicitly, so one user's commands stay in send order.
//! 4. The dispatcher (`sluice_dispatch::Dispatcher`, run by `sluice dispatch`) publishes them.
//! 5. [`run_consumer`] reads the topic (group [`GROUP`], manual commits), and for each
//!    record calls [`sluice_outbox::handle_outbox_record`] keyed by the outbox event id: the work
//!    appends the command to `mailbox_projection` and updates `mailbox_state`, or rejects a
//!    `{"op": "reject"}` command; the outbox row ends SUCCESS or PUSHED_FAILURE in the same
//!    transaction. The offset is committed after that transaction.
//! 6. With retry tiers configured ([`ConsumerConfig::retry`]), a command the handler fails
//!    on (the demonstration ops `flaky` and `fail`) goes to the retry topics and the
//!    dead-letter topic instead of blocking its partition (`retry.rs`).
//!
//! Invariants: a command is applied at most once (the processed row, the projection and the
//! row's final status commit together, keyed by the event id, which survives
//! re-publication); a user's commands are applied in send order (one key, one partition,
//! claimed and published in creation order); `mailbox_projection.position` is the
//! 1-based order in which a user's commands were applied.

mod consumer;
pub mod metrics;
mod retry;
mod run;
mod schema;
mod users;

pub use consumer::{ConsumerConfig, ConsumerTotals, WorkError, handle_command};
pub use retry::ensure_retry_topics;
pub use run::{run_consumer, run_consumer_observed};
pub use schema::setup;
pub use users::{CommandPayload, create_user, send_command};

use sluice_kafka::KafkaError;
use sluice_outbox::{AssignError, HandleError, OutboxError};

/// The consumer group of the example's consumer.
pub const GROUP: &str = "mailbox-example";
/// The outbox event type of a mailbox command.
pub const EVENT_TYPE: &str = "mailbox.command";
/// The outbox aggregate type of a mailbox command.
pub const AGGREGATE_TYPE: &str = "mailbox_user";
/// The reason a rejected command's outbox row carries in the consumer's outcome.
pub const REJECT_REASON: &str = "command rejected by the mailbox handler";

/// Why a mailbox operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MailboxError {
    /// The user is not a mailbox user (no `mailbox_users` row).
    #[error("unknown mailbox user {0}")]
    UnknownUser(String),
    /// The partition could not be assigned.
    #[error("partition assignment failed: {0}")]
    Assign(#[from] AssignError),
    /// Enqueueing or moving an outbox row failed.
    #[error("outbox operation failed: {0}")]
    Outbox(#[from] OutboxError),
    /// The consumer's database work failed.
    #[error("mailbox database query failed: {0}")]
    Database(#[from] sqlx::Error),
    /// The Kafka consumer failed.
    #[error("mailbox kafka consumer failed: {0}")]
    Kafka(#[from] KafkaError),
    /// Forwarding to a retry tier or the dead-letter topic, or a tier consumer, failed.
    #[error("mailbox retry failed: {0}")]
    Retry(#[from] sluice_retry::RetryError),
    /// The handler failed on a record and no retry tiers are configured.
    #[error("the mailbox handler failed on a record and no retry tiers are configured: {0}")]
    HandlerFailed(String),
    /// A consumer task panicked or was cancelled.
    #[error("a mailbox consumer task failed: {0}")]
    Task(String),
}

impl From<HandleError<WorkError>> for MailboxError {
    fn from(error: HandleError<WorkError>) -> Self {
        match error {
            HandleError::Work(WorkError::Database(error)) => MailboxError::Database(error),
            HandleError::Work(WorkError::Retryable(reason)) => MailboxError::HandlerFailed(reason),
            HandleError::Outbox(error) => MailboxError::Outbox(error),
            // A failure the library may add later (its error is non-exhaustive).
            other => MailboxError::HandlerFailed(other.to_string()),
        }
    }
}
