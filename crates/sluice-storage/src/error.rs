//! Why a pipeline stops, and what it reports when it stops cleanly: the types the reader,
//! the writers, the pipeline and the supervisor share.

use crate::sink::DeclaredError;
use sluice_core::BatchReport;

/// Consecutive failed offset commits after which the pipeline fails on purpose: a livelock
/// that never lowers lag is worse than a crash (docs/ARCHITECTURE.md#batch-loop).
pub const MAX_CONSECUTIVE_COMMIT_FAILURES: u32 = 5;

/// Why a pipeline stopped with an error. Every variant is fatal for the process, except
/// the two that [`PipelineError::restarts`] names: the pipeline starts again from
/// PostgreSQL's offsets.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PipelineError {
    /// PostgreSQL has a partition behind what this process committed there: it lost commits
    /// (a crash under `synchronous_commit = off`, a failover to a replica that lagged).
    #[error(
        "PostgreSQL lost committed batches: {topic}[{partition}] is at {} there, this process \
         had committed {committed}; starting again from PostgreSQL's offsets",
        .postgres.map_or_else(|| "no offset".to_owned(), |o| format!("offset {o}"))
    )]
    Rewound {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// PostgreSQL's next offset now (`None`: no row).
        postgres: Option<i64>,
        /// What this process had committed.
        committed: i64,
    },
    /// A partition was assigned while PostgreSQL's offsets could not be read: it would
    /// start where Kafka says, which may be past what PostgreSQL holds.
    #[error("partitions assigned without PostgreSQL's offsets ({reason}); starting again")]
    StartUnknown {
        /// Why they could not be read.
        reason: String,
    },
    /// The Kafka client could not be created or failed fatally.
    #[error("kafka: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),
    /// The brokers did not answer the pipeline's first metadata request.
    #[error(transparent)]
    KafkaUnreachable(Box<KafkaUnreachable>),
    /// Consuming stopped: a fatal client error, a stalled or deleted topic, or a fenced
    /// static member.
    #[error(transparent)]
    Consume(#[from] sluice_kafka::ConsumeError),
    /// A database error that is not transient (e.g. a revoked privilege).
    #[error("database error (not transient, SQLSTATE {}): {source}", .sqlstate.as_deref().unwrap_or("none"))]
    Database {
        /// The SQLSTATE, if the server sent one.
        sqlstate: Option<String>,
        /// The error.
        #[source]
        source: sqlx::Error,
    },
    /// A transient database error that outlasted every retry.
    #[error("database still failing after {attempts} retries: {source}{}", retry_hint(.source))]
    RetriesExhausted {
        /// Retries made.
        attempts: u32,
        /// The last error.
        #[source]
        source: sqlx::Error,
    },
    /// The pipeline's topic does not exist.
    #[error("topic `{topic}` does not exist (check {variable}, or run `sluice topics ensure`)")]
    MissingTopic {
        /// The topic.
        topic: String,
        /// Where its name comes from (the variable, or the sink in the mapping file).
        variable: String,
    },
    /// The group's offsets could not be moved into PostgreSQL at start.
    #[error(transparent)]
    Adopt(#[from] crate::offsets::AdoptError),
    /// The reader thread could not be started.
    #[error("cannot start the reader thread: {0}")]
    Thread(#[source] std::io::Error),
    /// The reader thread panicked.
    #[error("the reader thread panicked")]
    ReaderPanicked,
    /// A writer thread panicked.
    #[error("a writer thread panicked")]
    WriterPanicked,
    /// A declared sink cannot run (its plan and its file disagree: a bug).
    #[error(transparent)]
    Declared(#[from] DeclaredError),
    /// The schema registry client cannot work (its TLS files): a configuration error.
    #[error(transparent)]
    Registry(sluice_registry::RegistryError),
    /// Too many consecutive offset-commit failures.
    #[error("{count} consecutive offset commits failed; last error: {last}")]
    CommitFailures {
        /// How many in a row.
        count: u32,
        /// The last error.
        last: rdkafka::error::KafkaError,
    },
}

impl PipelineError {
    /// Whether the pipeline starts again (a new consumer, assigned at PostgreSQL's offsets)
    /// rather than failing the process.
    pub fn restarts(&self) -> bool {
        matches!(self, Self::Rewound { .. } | Self::StartUnknown { .. })
    }
}

/// Totals of a pipeline run, returned when it stops cleanly.
#[derive(Debug, Clone, Copy, Default)]
pub struct PipelineTotals {
    /// Batches committed.
    pub batches: u64,
    /// Sum of every batch's counters.
    pub report: BatchReport,
}

/// No broker of the bootstrap list answered (see [`PipelineError::KafkaUnreachable`]).
#[derive(Debug, thiserror::Error)]
#[error(
    "kafka: no broker of KAFKA_BOOTSTRAP_SERVERS={bootstrap} answered within {seconds} s (is \
     the address right, and the listener's protocol the one KAFKA_SECURITY_PROTOCOL says?): \
     {source}"
)]
pub struct KafkaUnreachable {
    /// The bootstrap servers as set.
    pub bootstrap: String,
    /// How long it was tried.
    pub seconds: u64,
    /// The client's error.
    #[source]
    pub source: rdkafka::error::KafkaError,
}

/// What to do about a transient error that every retry met again, when sluice knows: a
/// `statement_timeout` (of the role, the database or the server) shorter than one batch's
/// statements cancels every batch alike, so a restart would meet it too.
fn retry_hint(error: &sqlx::Error) -> &'static str {
    let timed_out = error.as_database_error().is_some_and(|e| {
        e.code().as_deref() == Some("57014") && e.message().contains("statement timeout")
    });
    if timed_out {
        " (PostgreSQL's statement_timeout cancels every batch: raise it for sluice's role \
         (ALTER ROLE … SET statement_timeout = …) or give the sink a smaller batch_size)"
    } else {
        ""
    }
}
