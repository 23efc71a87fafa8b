//! Why forwarding or a tier consumer failed.

use rdkafka::error::KafkaError;

/// Why a retry operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RetryError {
    /// The Kafka client failed (creating it, subscribing, a delivery, a commit).
    #[error("retry kafka client failed: {0}")]
    Kafka(#[from] KafkaError),
    /// The handler failed in a way that is not the record's fault (e.g. its database): the
    /// run ends and the uncommitted record is read again by the next run.
    #[error("retry handler failed: {0}")]
    Handler(#[source] Box<dyn std::error::Error + Send + Sync>),
}
