//! What the console reads: the pipelines the settings and mapping file name, the Kafka and
//! PostgreSQL connections, where heartbeats live, the outbox's stale cut-off and the retry
//! tiers of a business consumer. The binary builds it from the same settings as every other
//! command; the console itself reads no environment variable but its own two.

use sluice_core::KafkaClientSettings;
use sluice_core::topics::Topics;
use sluice_retry::Tiers;
use std::path::PathBuf;
use std::time::Duration;

/// One storage pipeline (a seed or a declared sink).
#[derive(Debug, Clone)]
pub struct PipelineSource {
    /// Its name (`reviews`, or a sink's name).
    pub name: String,
    /// The topics it reads (named, or a pattern).
    pub topics: Topics,
    /// Its consumer group.
    pub group: String,
}

/// The retry tiers of a business consumer (`sluice retry status`), when configured.
#[derive(Debug, Clone)]
pub struct RetrySource {
    /// The main topic.
    pub topic: String,
    /// The main consumer's group.
    pub group: String,
    /// The tiers.
    pub tiers: Tiers,
}

/// Everything the console reads, and how.
#[derive(Debug, Clone)]
pub struct Sources {
    /// The pipelines, in the order shown.
    pub pipelines: Vec<PipelineSource>,
    /// Kafka client settings (TLS and SASL included).
    pub kafka: KafkaClientSettings,
    /// PostgreSQL (TLS as the URL says).
    pub database_url: String,
    /// The heartbeat directory, if this host can see it.
    pub heartbeat_dir: Option<PathBuf>,
    /// A DISPATCHING outbox row claimed longer ago than this is stale.
    pub stale_dispatch: Duration,
    /// The retry tiers, if a business consumer is configured.
    pub retry: Option<RetrySource>,
    /// The replay limit (as `sluice dlq replay --max-replays`).
    pub max_replays: i32,
}
