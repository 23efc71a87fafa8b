//! The storage consumer's settings ([`StorageSettings`]) and its table of variables: each
//! one declared once below (or in [`pipelines`], and in core's
//! `sluice_core::settings::{topics, kafka_client}`), read by [`StorageSettings::from_vars`]
//! and listed by [`variables`] — which `--help` and the docs' settings check read too.
//!
//! Parsed, not merely validated (docs/ARCHITECTURE.md#settings): a value of this type is a
//! configuration the consumer can run; anything else is a [`SettingsError`] naming the
//! variable, and the binary exits 2 before anything is consumed.

pub mod pipelines;

pub use pipelines::{DEFAULT_WRITERS, MAX_WRITERS, PipelineSettings};
use sluice_core::pipeline::PipelineKind;
use sluice_core::retry::Backoff;
use sluice_core::settings::forms::{
    DatabaseUrl, InstanceId, LingerMillis, Millis, OffsetReset, RetryAttempts, Seconds, SyncCommit,
    TableName, Text,
};
use sluice_core::settings::kafka_client::{self, KafkaClientSettings};
use sluice_core::settings::topics::{self, TopicSettings};
use sluice_core::settings::{EnvReader, SettingsError, Var, Variable};
use sluice_registry::RegistrySettings;
use std::collections::BTreeMap;
use std::time::Duration;

/// The validated, immutable settings of one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageSettings {
    /// `KAFKA_BOOTSTRAP_SERVERS` and the `KAFKA_*` client properties.
    pub kafka: KafkaClientSettings,
    /// `DATABASE_URL`.
    pub database_url: String,
    /// The pipelines this process runs, from `STORAGE_PIPELINES`.
    pub pipelines: Vec<PipelineSettings>,
    /// `STORAGE_AUTO_OFFSET_RESET`.
    pub auto_offset_reset: OffsetReset,
    /// `STORAGE_POLL_TIMEOUT_MS`.
    pub poll_timeout: Duration,
    /// `STORAGE_MAX_POLL_INTERVAL_MS`.
    pub max_poll_interval: Duration,
    /// `STORAGE_SESSION_TIMEOUT_MS`.
    pub session_timeout: Duration,
    /// `STORAGE_DB_RETRY_MAX_ATTEMPTS` / `STORAGE_DB_RETRY_BASE_MS`.
    pub db_retry: Backoff,
    /// `STORAGE_APP_CACHE_TTL_SECONDS`.
    pub app_cache_ttl: Duration,
    /// `STORAGE_SHUTDOWN_TIMEOUT_SECONDS`.
    pub shutdown_timeout: Duration,
    /// `STORAGE_HEARTBEAT_DIR`.
    pub heartbeat_dir: String,
    /// `STORAGE_APPLICATIONS_TABLE`.
    pub applications_table: String,
    /// `STORAGE_WRITERS` (default 2): the writers of a pipeline without its own setting (the
    /// declared sinks').
    pub writers: usize,
    /// `STORAGE_INSTANCE_ID` (default: the host name): each pipeline's consumer joins its
    /// group as the static member `<instance>-<pipeline>`, so a restarted process takes its
    /// partitions back at once. `None` (`STORAGE_INSTANCE_ID=off`): dynamic membership.
    pub instance_id: Option<String>,
    /// `STORAGE_CONSUMER_ERROR_TIMEOUT_SECONDS`: a consumer error that keeps coming back
    /// this long stops the pipeline (see `sluice_kafka::stall`).
    pub consumer_error_timeout: Duration,
    /// Partitions, replication and retention of the storage topics (`STORAGE_TOPIC_*`).
    pub topics: TopicSettings,
    /// `STORAGE_SYNCHRONOUS_COMMIT`: the writers' `synchronous_commit`.
    pub synchronous_commit: SyncCommit,
    /// `STORAGE_LINGER_MS`: how long a partial batch of a pipeline reading 1,000 records a
    /// second or more waits to fill (zero: never).
    pub linger: Duration,
    /// `SCHEMA_REGISTRY_*`, when `SCHEMA_REGISTRY_URL` is set: where sinks reading a registry
    /// format (avro, protobuf, json-schema) fetch writers' schemas.
    pub registry: Option<RegistrySettings>,
}

/// `DATABASE_URL`.
pub const DATABASE_URL: Var<DatabaseUrl> = sluice_core::settings::DATABASE_URL;
/// `STORAGE_AUTO_OFFSET_RESET`.
pub const AUTO_OFFSET_RESET: Var<OffsetReset> = Var::new(
    "STORAGE_AUTO_OFFSET_RESET",
    OffsetReset::Earliest,
    "where a new group starts: earliest|latest",
);
/// `STORAGE_POLL_TIMEOUT_MS`.
pub const POLL_TIMEOUT: Var<Millis> = Var::new(
    "STORAGE_POLL_TIMEOUT_MS",
    1000,
    "poll timeout; bounds how fast SIGTERM is noticed",
);
/// `STORAGE_MAX_POLL_INTERVAL_MS`.
pub const MAX_POLL_INTERVAL: Var<Millis> = Var::new(
    "STORAGE_MAX_POLL_INTERVAL_MS",
    300_000,
    "max time between polls before a rebalance",
);
/// `STORAGE_SESSION_TIMEOUT_MS`.
pub const SESSION_TIMEOUT: Var<Millis> = Var::new(
    "STORAGE_SESSION_TIMEOUT_MS",
    45_000,
    "consumer session timeout",
);
/// `STORAGE_DB_RETRY_MAX_ATTEMPTS`.
pub const DB_RETRY_MAX_ATTEMPTS: Var<RetryAttempts> = Var::new(
    "STORAGE_DB_RETRY_MAX_ATTEMPTS",
    5,
    "retries of a batch on a transient DB error",
);
/// `STORAGE_DB_RETRY_BASE_MS`.
pub const DB_RETRY_BASE: Var<Millis> = Var::new(
    "STORAGE_DB_RETRY_BASE_MS",
    1000,
    "first retry delay; doubles each attempt",
);
/// `STORAGE_APP_CACHE_TTL_SECONDS`.
pub const APP_CACHE_TTL: Var<Seconds> = Var::new(
    "STORAGE_APP_CACHE_TTL_SECONDS",
    300,
    "package_name → id cache time-to-live",
);
/// `STORAGE_SHUTDOWN_TIMEOUT_SECONDS`.
pub const SHUTDOWN_TIMEOUT: Var<Seconds> = Var::new(
    "STORAGE_SHUTDOWN_TIMEOUT_SECONDS",
    30,
    "time to finish the batch in flight on SIGTERM",
);
/// `STORAGE_HEARTBEAT_DIR`.
pub const HEARTBEAT_DIR: Var<Text> = Var::new(
    "STORAGE_HEARTBEAT_DIR",
    "/tmp/sluice-heartbeat",
    "directory of the heartbeat files",
);
/// `STORAGE_APPLICATIONS_TABLE`.
pub const APPLICATIONS_TABLE: Var<TableName> = Var::new(
    "STORAGE_APPLICATIONS_TABLE",
    "apps_registry_application",
    "the applications table",
);
/// `STORAGE_INSTANCE_ID`.
pub const INSTANCE_ID: Var<InstanceId> = Var::new(
    "STORAGE_INSTANCE_ID",
    (),
    "static group member id prefix, unique per live process; off = dynamic",
);
/// `STORAGE_CONSUMER_ERROR_TIMEOUT_SECONDS`.
pub const CONSUMER_ERROR_TIMEOUT: Var<Seconds> = Var::new(
    "STORAGE_CONSUMER_ERROR_TIMEOUT_SECONDS",
    30,
    "a consumer error repeating this long stops the pipeline",
);
/// `STORAGE_SYNCHRONOUS_COMMIT`.
pub const SYNCHRONOUS_COMMIT: Var<SyncCommit> = Var::new(
    "STORAGE_SYNCHRONOUS_COMMIT",
    SyncCommit::On,
    "the writers' synchronous_commit: on|off (off: a PostgreSQL crash loses the last batches with their offsets, which are read again)",
);
/// `STORAGE_LINGER_MS`.
pub const LINGER: Var<LingerMillis> = Var::new(
    "STORAGE_LINGER_MS",
    20,
    "how long a partial batch of a pipeline reading >= 1000 records/s waits to fill, 0-1000; 0: never",
);

/// Every variable the storage consumer reads, with its default and meaning, for `--help`
/// and the docs' check; the per-pipeline topics after `STORAGE_PIPELINES`.
pub fn variables() -> Vec<Variable> {
    let mut all = vec![
        kafka_client::BOOTSTRAP_SERVERS.variable(),
        kafka_client::PROPERTIES,
        DATABASE_URL.variable(),
        pipelines::PIPELINES.variable(),
    ];
    all.extend(pipelines::TOPIC.variables());
    all.extend(topics::variables());
    all.extend([
        pipelines::GROUP_PREFIX.variable(),
        pipelines::MAX_POLL_RECORDS_OF.variable(),
        pipelines::MAX_POLL_RECORDS.variable(),
        pipelines::WRITERS_OF.variable(),
        pipelines::WRITERS.variable(),
        AUTO_OFFSET_RESET.variable(),
        POLL_TIMEOUT.variable(),
        MAX_POLL_INTERVAL.variable(),
        SESSION_TIMEOUT.variable(),
        DB_RETRY_MAX_ATTEMPTS.variable(),
        DB_RETRY_BASE.variable(),
        APP_CACHE_TTL.variable(),
        SHUTDOWN_TIMEOUT.variable(),
        HEARTBEAT_DIR.variable(),
        APPLICATIONS_TABLE.variable(),
        INSTANCE_ID.variable(),
        CONSUMER_ERROR_TIMEOUT.variable(),
        SYNCHRONOUS_COMMIT.variable(),
        LINGER.variable(),
    ]);
    all.extend(sluice_registry::settings::variables());
    all
}

impl StorageSettings {
    /// Builds the settings from a `name → value` lookup, without `KAFKA_*` client
    /// properties (a lookup cannot list them; see [`StorageSettings::from_vars`]).
    pub fn from_lookup(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Self, SettingsError> {
        Self::from_vars(lookup, [])
    }

    /// Builds the settings from a `name → value` lookup and the names of the variables
    /// that exist (the `KAFKA_*` client properties are found among them). Empty values
    /// count as unset.
    pub fn from_vars<'a>(
        lookup: &dyn Fn(&str) -> Option<String>,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, SettingsError> {
        let env = EnvReader::new(lookup);
        let var_names: Vec<&str> = names.into_iter().collect();
        let kafka = KafkaClientSettings::from_vars(lookup, var_names.iter().copied())?;
        let database_url = DATABASE_URL.read(&env)?;
        let (pipelines, writers) = pipelines::read(&env)?;
        pipelines::no_stray_overrides(&env, var_names.iter().copied())?;
        let auto_offset_reset = AUTO_OFFSET_RESET.read(&env)?;
        let poll_timeout = POLL_TIMEOUT.read(&env)?;
        let max_poll_interval = MAX_POLL_INTERVAL.read(&env)?;
        let session_timeout = SESSION_TIMEOUT.read(&env)?;
        let db_retry = Backoff {
            max_attempts: DB_RETRY_MAX_ATTEMPTS.read(&env)?,
            base: DB_RETRY_BASE.read(&env)?,
            cap: sluice_core::retry::MAX_DELAY,
        };
        let app_cache_ttl = APP_CACHE_TTL.read(&env)?;
        let shutdown_timeout = SHUTDOWN_TIMEOUT.read(&env)?;
        let heartbeat_dir = HEARTBEAT_DIR.read(&env)?;
        let applications_table = APPLICATIONS_TABLE.read(&env)?;
        if max_poll_interval <= session_timeout {
            return Err(SettingsError::PollIntervalNotAboveSessionTimeout {
                max_poll_interval_ms: max_poll_interval.as_millis(),
            });
        }
        for (i, p) in pipelines.iter().enumerate() {
            if let Some(other) = pipelines[..i].iter().find(|o| o.topic == p.topic) {
                return Err(SettingsError::TopicShared {
                    variable: pipelines::TOPIC.name(p.kind),
                    topic: p.topic.clone(),
                    other: other.kind.to_string(),
                });
            }
        }
        // A batch held by retries must not outlast max.poll.interval, or the consumer
        // leaves its group in the middle of a retry.
        if db_retry.total() + Duration::from_secs(10) >= max_poll_interval {
            return Err(SettingsError::RetriesOutlastPollInterval {
                attempts: db_retry.max_attempts,
                total_s: db_retry.total().as_secs(),
                max_poll_interval_s: max_poll_interval.as_secs(),
            });
        }
        let instance_id = INSTANCE_ID.read(&env)?;
        let consumer_error_timeout = CONSUMER_ERROR_TIMEOUT.read(&env)?;
        let synchronous_commit = SYNCHRONOUS_COMMIT.read(&env)?;
        let linger = LINGER.read(&env)?;
        let topics = TopicSettings::from_vars(lookup, var_names.iter().copied())?;
        let registry = match env.raw(sluice_registry::settings::URL.name) {
            Some(url) if !url.trim().is_empty() => Some(RegistrySettings::from_lookup(lookup)?),
            _ => None,
        };

        Ok(StorageSettings {
            kafka,
            database_url,
            pipelines,
            writers,
            auto_offset_reset,
            poll_timeout,
            max_poll_interval,
            session_timeout,
            db_retry,
            app_cache_ttl,
            shutdown_timeout,
            heartbeat_dir,
            applications_table,
            instance_id,
            consumer_error_timeout,
            topics,
            synchronous_commit,
            linger,
            registry,
        })
    }

    /// The `group.instance.id` of a pipeline's consumer, if static membership is on.
    pub fn group_instance_id(&self, pipeline: PipelineKind) -> Option<String> {
        self.group_instance_id_of(pipeline.name())
    }

    /// The static group membership id of the pipeline (or declared sink) `name`:
    /// `<instance>-<name>`.
    pub fn group_instance_id_of(&self, name: &str) -> Option<String> {
        self.instance_id.as_ref().map(|id| format!("{id}-{name}"))
    }

    /// Builds the settings from a map (tests, tools).
    pub fn from_map(map: &BTreeMap<String, String>) -> Result<Self, SettingsError> {
        Self::from_vars(
            &|name| map.get(name).cloned(),
            map.keys().map(String::as_str),
        )
    }

    /// The settings of one pipeline, if this process runs it.
    pub fn pipeline(&self, kind: PipelineKind) -> Option<&PipelineSettings> {
        self.pipelines.iter().find(|p| p.kind == kind)
    }
}

#[cfg(test)]
mod tests;
