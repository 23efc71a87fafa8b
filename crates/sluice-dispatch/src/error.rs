//! Why a dispatcher operation failed.

use rdkafka::error::KafkaError;
use sluice_outbox::OutboxError;

/// Why a dispatcher step (claim, publish, settle, recovery, retention) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DispatchError {
    /// An outbox rule or query of the library failed (an illegal edge, an unknown status).
    #[error(transparent)]
    Outbox(#[from] OutboxError),
    /// A query of the dispatcher's store failed.
    #[error("outbox query failed: {0}")]
    Database(#[from] sqlx::Error),
    /// A Kafka client call failed.
    #[error("outbox kafka call failed: {0}")]
    Kafka(#[from] KafkaError),
    /// A stale dispatch search could not finish (the rows stay DISPATCHING).
    #[error("stale dispatch recovery: {0}")]
    Recovery(String),
}

impl From<sluice_outbox::status::IllegalTransition> for DispatchError {
    fn from(error: sluice_outbox::status::IllegalTransition) -> Self {
        DispatchError::Outbox(error.into())
    }
}

impl From<sluice_outbox::status::UnknownStatus> for DispatchError {
    fn from(error: sluice_outbox::status::UnknownStatus) -> Self {
        DispatchError::Outbox(error.into())
    }
}
