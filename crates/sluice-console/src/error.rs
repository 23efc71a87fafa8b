//! The console's errors: what stops it from starting or serving, and what a page reports.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// Why the console, or one of its pages, failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsoleError {
    /// The listen address cannot be bound (a configuration error: exit 2).
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Serving stopped with an I/O error.
    #[error("serving: {0}")]
    Serve(#[source] std::io::Error),
    /// PostgreSQL failed.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// Kafka failed.
    #[error("kafka: {0}")]
    Kafka(#[from] sluice_kafka::KafkaError),
    /// The outbox could not be read or changed.
    #[error("outbox: {0}")]
    Outbox(#[from] sluice_outbox::OutboxError),
    /// A replay failed half-way (its mark was rolled back).
    #[error("replay: {0}")]
    Replay(#[from] sluice_storage::dead_letter_replay::ReplayError),
    /// A template did not render (a bug).
    #[error("template: {0}")]
    Template(#[from] minijinja::Error),
    /// A blocking Kafka call did not finish (its task panicked or was cancelled).
    #[error("background task: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl IntoResponse for ConsoleError {
    /// A plain-text 500 (the message may echo untrusted bytes: never HTML).
    fn into_response(self) -> Response {
        tracing::warn!(error = %self, "console page failed");
        let body = sluice_core::untrusted::escape_controls(&self.to_string()).into_owned();
        (StatusCode::INTERNAL_SERVER_ERROR, body).into_response()
    }
}
