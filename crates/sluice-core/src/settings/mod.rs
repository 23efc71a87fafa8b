//! Settings of the storage consumer (docs/ARCHITECTURE.md#settings), parsed — not merely validated — from the
//! environment by a pure function.
//!
//! [`Settings::from_lookup`] takes any `name → value` lookup (the process environment in
//! the binary, a map in tests) and returns one immutable value that every pipeline shares
//! read-only, or a [`SettingsError`] naming the variable and the accepted form. The binary
//! exits with status 2 on such an error, before anything is consumed.

mod error;
pub mod kafka_client;
mod read;
pub mod topics;

pub use error::SettingsError;
pub use read::{EnvReader, database_host_port, is_identifier, is_topic_name, valid_database_url};

use crate::pipeline::PipelineKind;
use crate::retry::Backoff;
use kafka_client::KafkaClientSettings;
use std::collections::BTreeMap;
use std::time::Duration;
use topics::TopicSettings;

/// Where a new consumer group starts reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetReset {
    /// The oldest retained record: a new group reads the backlog.
    Earliest,
    /// Only records produced from now on.
    Latest,
}

impl OffsetReset {
    /// The librdkafka `auto.offset.reset` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Earliest => "earliest",
            Self::Latest => "latest",
        }
    }
}

/// Settings of one pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineSettings {
    /// Which pipeline.
    pub kind: PipelineKind,
    /// The topic it consumes.
    pub topic: String,
    /// Its consumer group (`prefix.pipeline`).
    pub group: String,
    /// Max records per transaction (one writer's share of a poll).
    pub batch_size: usize,
    /// Writers (database connections) of the pipeline; partition p goes to writer p % N.
    pub writers: usize,
}

/// Built-in writers per pipeline (`STORAGE_WRITERS`), chosen by `sluice-lab bench`.
pub const DEFAULT_WRITERS: usize = 2;
/// The most writers a pipeline may have.
pub const MAX_WRITERS: usize = 8;

/// The validated, immutable settings of one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
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
}

/// Every variable the storage consumer reads, with its default and meaning, for `--help`:
/// [`FIXED_VARIABLES`] with the per-pipeline ones of the topic registry after
/// `STORAGE_PIPELINES`.
pub fn variables() -> Vec<(String, String, String)> {
    let owned = |(name, default, meaning): &(&str, &str, &str)| {
        (
            (*name).to_owned(),
            (*default).to_owned(),
            (*meaning).to_owned(),
        )
    };
    let mut all: Vec<(String, String, String)> = Vec::new();
    for fixed in FIXED_VARIABLES {
        match fixed.0 {
            "STORAGE_PIPELINES" => {
                all.push((
                    fixed.0.to_owned(),
                    PipelineKind::all_names(),
                    fixed.2.to_owned(),
                ));
                for kind in PipelineKind::ALL {
                    all.push((
                        kind.topic_variable(),
                        kind.default_topic().to_owned(),
                        format!("topic of the {kind} pipeline"),
                    ));
                }
            }
            "STORAGE_MAX_POLL_RECORDS_<PIPELINE>" => all.push((
                fixed.0.to_owned(),
                PipelineKind::ALL
                    .map(|k| k.default_batch_size().to_string())
                    .join("/"),
                fixed.2.to_owned(),
            )),
            "STORAGE_WRITERS" => all.push((
                fixed.0.to_owned(),
                DEFAULT_WRITERS.to_string(),
                fixed.2.to_owned(),
            )),
            _ => all.push(owned(fixed)),
        }
    }
    all
}

/// The variables that do not depend on the topic registry; see [`variables`].
const FIXED_VARIABLES: &[(&str, &str, &str)] = &[
    (
        "KAFKA_BOOTSTRAP_SERVERS",
        "127.0.0.1:9092",
        "Kafka bootstrap servers (host:port,…)",
    ),
    (
        "KAFKA_<NAME>",
        "(none)",
        "librdkafka property <name>, lower-case with _ → . (e.g. KAFKA_SECURITY_PROTOCOL)",
    ),
    (
        "DATABASE_URL",
        "(required)",
        "PostgreSQL URL, postgres://user@host:port/db",
    ),
    (
        "STORAGE_PIPELINES",
        "(every pipeline)",
        "pipelines this process runs",
    ),
    (
        "STORAGE_TOPIC_PARTITIONS",
        "3",
        "partitions of a storage topic (topics ensure grows, never shrinks)",
    ),
    (
        "STORAGE_TOPIC_REPLICATION_FACTOR",
        "3 (fewer brokers: their count)",
        "replication factor of a new storage topic",
    ),
    (
        "STORAGE_TOPIC_MIN_INSYNC_REPLICAS",
        "min(2, replication factor)",
        "min.insync.replicas of the storage topics",
    ),
    (
        "STORAGE_TOPIC_RETENTION_MS",
        "(broker default)",
        "retention.ms of the storage topics; -1 keeps forever",
    ),
    (
        "STORAGE_TOPIC_<SETTING>_<PIPELINE>",
        "(the shared value)",
        "one topic's PARTITIONS, REPLICATION_FACTOR, MIN_INSYNC_REPLICAS or RETENTION_MS",
    ),
    (
        "STORAGE_GROUP_PREFIX",
        "storage-consumer",
        "consumer group = prefix.pipeline",
    ),
    (
        "STORAGE_MAX_POLL_RECORDS_<PIPELINE>",
        "(per pipeline)",
        "batch size of one pipeline",
    ),
    (
        "STORAGE_MAX_POLL_RECORDS",
        "(unset)",
        "batch size of every pipeline without its own",
    ),
    (
        "STORAGE_WRITERS_<PIPELINE>",
        "(per pipeline)",
        "writers (connections) of one pipeline, 1-8",
    ),
    (
        "STORAGE_WRITERS",
        "2",
        "writers (connections) per pipeline, 1-8; partition p goes to writer p % N",
    ),
    (
        "STORAGE_AUTO_OFFSET_RESET",
        "earliest",
        "where a new group starts: earliest|latest",
    ),
    (
        "STORAGE_POLL_TIMEOUT_MS",
        "1000",
        "poll timeout; bounds how fast SIGTERM is noticed",
    ),
    (
        "STORAGE_MAX_POLL_INTERVAL_MS",
        "300000",
        "max time between polls before a rebalance",
    ),
    (
        "STORAGE_SESSION_TIMEOUT_MS",
        "45000",
        "consumer session timeout",
    ),
    (
        "STORAGE_DB_RETRY_MAX_ATTEMPTS",
        "5",
        "retries of a batch on a transient DB error",
    ),
    (
        "STORAGE_DB_RETRY_BASE_MS",
        "1000",
        "first retry delay; doubles each attempt",
    ),
    (
        "STORAGE_APP_CACHE_TTL_SECONDS",
        "300",
        "package_name → id cache time-to-live",
    ),
    (
        "STORAGE_SHUTDOWN_TIMEOUT_SECONDS",
        "30",
        "time to finish the batch in flight on SIGTERM",
    ),
    (
        "STORAGE_HEARTBEAT_DIR",
        "/tmp/sluice-heartbeat",
        "directory of the heartbeat files",
    ),
    (
        "STORAGE_APPLICATIONS_TABLE",
        "apps_registry_application",
        "the applications table",
    ),
    (
        "STORAGE_INSTANCE_ID",
        "(host name)",
        "static group member id prefix, unique per live process; off = dynamic",
    ),
    (
        "STORAGE_CONSUMER_ERROR_TIMEOUT_SECONDS",
        "30",
        "a consumer error repeating this long stops the pipeline",
    ),
];

/// A writer count (1..=[`MAX_WRITERS`]) in `name`, or `None` when unset.
fn writers(env: &EnvReader<'_>, name: &str) -> Result<Option<usize>, SettingsError> {
    env.parse::<usize>(
        name,
        |n| (1..=MAX_WRITERS).contains(n),
        &format!("a whole number from 1 to {MAX_WRITERS} (default {DEFAULT_WRITERS})"),
    )
}

/// The longest instance id: `<id>-network-metrics` must fit Kafka's 249 characters.
const MAX_INSTANCE_ID: usize = 249 - 1 - PipelineKind::longest_name();

/// `STORAGE_INSTANCE_ID`, else the host name (`HOSTNAME`, which the binary fills in from the
/// kernel when the shell did not export it), made a legal id; `off` turns static membership off.
fn instance_id(env: &EnvReader<'_>) -> Result<Option<String>, SettingsError> {
    const VAR: &str = "STORAGE_INSTANCE_ID";
    if let Some(value) = env.raw(VAR) {
        let value = value.trim();
        if value.eq_ignore_ascii_case("off") {
            return Ok(None);
        }
        if !is_topic_name(value) || value.len() > MAX_INSTANCE_ID {
            return Err(SettingsError::invalid(
                VAR,
                value,
                &format!(
                    "1-{MAX_INSTANCE_ID} of letters, digits, '.', '_', '-' (unique per live \
                     process), or off"
                ),
            ));
        }
        return Ok(Some(value.to_owned()));
    }
    let host: String = env
        .raw("HOSTNAME")
        .unwrap_or_default()
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(MAX_INSTANCE_ID)
        .collect();
    Ok(Some(if host.is_empty() || host == "." || host == ".." {
        "sluice".to_owned()
    } else {
        host
    }))
}

impl Settings {
    /// Builds the settings from a `name → value` lookup, without `KAFKA_*` client
    /// properties (a lookup cannot list them; see [`Settings::from_vars`]).
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

        let database_url = env.database_url()?;

        let prefix = env.string("STORAGE_GROUP_PREFIX", "storage-consumer");
        // The group name is stored in dead_letter_events.consumer_group VARCHAR(255).
        let longest_group = prefix.len() + 1 + PipelineKind::longest_name();
        if !is_topic_name(&prefix) || longest_group > 255 {
            return Err(SettingsError::invalid(
                "STORAGE_GROUP_PREFIX",
                &prefix,
                &format!(
                    "1-{} of letters, digits, '.', '_' and '-' (prefix.pipeline must fit 255 \
                     characters)",
                    255 - 1 - PipelineKind::longest_name()
                ),
            ));
        }
        let shared_batch = env.positive("STORAGE_MAX_POLL_RECORDS", 500)?;
        let shared_writers = writers(&env, "STORAGE_WRITERS")?;
        let names = env.string("STORAGE_PIPELINES", &PipelineKind::all_names());
        let mut kinds: Vec<PipelineKind> = Vec::new();
        for name in names.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let kind = name.parse::<PipelineKind>().map_err(|e| {
                SettingsError::invalid(
                    "STORAGE_PIPELINES",
                    &names,
                    &format!("{e}; comma-separated"),
                )
            })?;
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        if kinds.is_empty() {
            return Err(SettingsError::invalid(
                "STORAGE_PIPELINES",
                &names,
                &format!(
                    "at least one of {}",
                    PipelineKind::ALL.map(PipelineKind::name).join(", ")
                ),
            ));
        }
        let mut pipelines = Vec::with_capacity(kinds.len());
        for kind in kinds {
            let topic = env.topic(&kind.topic_variable(), kind.default_topic())?;
            let batch_var = kind.batch_size_variable();
            let default_batch = kind.default_batch_size() as u64;
            let own = env.positive(&batch_var, default_batch)?;
            let batch = own.or(shared_batch).unwrap_or(default_batch);
            let batch_size = usize::try_from(batch.min(100_000)).unwrap_or(100_000);
            if batch > 100_000 {
                let var = if own.is_some() {
                    batch_var
                } else {
                    "STORAGE_MAX_POLL_RECORDS".into()
                };
                return Err(SettingsError::invalid(
                    &var,
                    &batch.to_string(),
                    "between 1 and 100000",
                ));
            }
            let writers = writers(&env, &kind.writers_variable())?
                .or(shared_writers)
                .unwrap_or(DEFAULT_WRITERS);
            pipelines.push(PipelineSettings {
                kind,
                topic,
                group: format!("{prefix}.{}", kind.name()),
                batch_size,
                writers,
            });
        }

        let reset = env.string("STORAGE_AUTO_OFFSET_RESET", "earliest");
        let auto_offset_reset = match reset.to_ascii_lowercase().as_str() {
            "earliest" => OffsetReset::Earliest,
            "latest" => OffsetReset::Latest,
            _ => {
                return Err(SettingsError::invalid(
                    "STORAGE_AUTO_OFFSET_RESET",
                    &reset,
                    "earliest or latest",
                ));
            }
        };

        let poll_timeout = env.millis("STORAGE_POLL_TIMEOUT_MS", 1000)?;
        let max_poll_interval = env.millis("STORAGE_MAX_POLL_INTERVAL_MS", 300_000)?;
        let session_timeout = env.millis("STORAGE_SESSION_TIMEOUT_MS", 45_000)?;
        let max_attempts = env
            .parse::<u32>(
                "STORAGE_DB_RETRY_MAX_ATTEMPTS",
                |n| *n <= 30,
                "a whole number 0-30 (default 5)",
            )?
            .unwrap_or(5);
        let db_retry = Backoff {
            max_attempts,
            base: env.millis("STORAGE_DB_RETRY_BASE_MS", 1000)?,
            cap: crate::retry::MAX_DELAY,
        };
        let app_cache_ttl = env.seconds("STORAGE_APP_CACHE_TTL_SECONDS", 300)?;
        let shutdown_timeout = env.seconds("STORAGE_SHUTDOWN_TIMEOUT_SECONDS", 30)?;
        let heartbeat_dir = env.string("STORAGE_HEARTBEAT_DIR", "/tmp/sluice-heartbeat");
        let applications_table =
            env.string("STORAGE_APPLICATIONS_TABLE", "apps_registry_application");
        if !is_identifier(&applications_table) {
            return Err(SettingsError::invalid(
                "STORAGE_APPLICATIONS_TABLE",
                &applications_table,
                "a table name, optionally schema-qualified: [schema.]table of letters, digits, '_'",
            ));
        }
        if max_poll_interval <= session_timeout {
            return Err(SettingsError::PollIntervalNotAboveSessionTimeout {
                max_poll_interval_ms: max_poll_interval.as_millis(),
            });
        }

        for (i, p) in pipelines.iter().enumerate() {
            if let Some(other) = pipelines[..i].iter().find(|o| o.topic == p.topic) {
                return Err(SettingsError::TopicShared {
                    variable: p.kind.topic_variable(),
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

        let instance_id = instance_id(&env)?;
        let consumer_error_timeout = env.seconds("STORAGE_CONSUMER_ERROR_TIMEOUT_SECONDS", 30)?;
        let topics = TopicSettings::from_vars(lookup, var_names.iter().copied())?;

        Ok(Settings {
            kafka,
            database_url,
            pipelines,
            writers: shared_writers.unwrap_or(DEFAULT_WRITERS),
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

/// A test environment: a valid `DATABASE_URL` and `pairs` (which may replace it).
#[cfg(test)]
pub(crate) fn with_database_url(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut map: BTreeMap<String, String> = [(
        "DATABASE_URL".to_owned(),
        "postgres://u@127.0.0.1:5432/db".to_owned(),
    )]
    .into();
    for (k, v) in pairs {
        map.insert((*k).to_owned(), (*v).to_owned());
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Result<Settings, SettingsError> {
        let map = crate::settings::with_database_url(pairs);
        Settings::from_map(&map)
    }

    fn failing_variable(pairs: &[(&str, &str)]) -> String {
        match settings(pairs) {
            Ok(s) => panic!("expected an error for {pairs:?}, got {s:?}"),
            Err(e) => e.variable().to_owned(),
        }
    }

    #[test]
    fn defaults_match_the_spec() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.kafka.bootstrap_servers, "127.0.0.1:9092");
        let batches: Vec<(&str, &str, &str, usize)> = s
            .pipelines
            .iter()
            .map(|p| {
                (
                    p.kind.name(),
                    p.topic.as_str(),
                    p.group.as_str(),
                    p.batch_size,
                )
            })
            .collect();
        // The seed topics' defaults; a topic added after them is not pinned here.
        assert_eq!(
            batches[..3],
            vec![
                ("app-stats", "app-stats", "storage-consumer.app-stats", 200),
                ("reviews", "reviews", "storage-consumer.reviews", 500),
                (
                    "network-metrics",
                    "network-metrics",
                    "storage-consumer.network-metrics",
                    50
                ),
            ]
        );
        assert_eq!(s.auto_offset_reset, OffsetReset::Earliest);
        assert_eq!(s.poll_timeout, Duration::from_millis(1000));
        assert_eq!(s.max_poll_interval, Duration::from_millis(300_000));
        assert_eq!(s.session_timeout, Duration::from_millis(45_000));
        assert_eq!(s.db_retry, Backoff::DEFAULT);
        assert_eq!(s.app_cache_ttl, Duration::from_secs(300));
        assert_eq!(s.shutdown_timeout, Duration::from_secs(30));
        assert_eq!(s.heartbeat_dir, "/tmp/sluice-heartbeat");
        assert_eq!(s.applications_table, "apps_registry_application");
    }

    #[test]
    fn batch_size_precedence_is_pipeline_then_shared_then_builtin() {
        let s = settings(&[
            ("STORAGE_MAX_POLL_RECORDS", "100"),
            ("STORAGE_MAX_POLL_RECORDS_REVIEWS", "1000"),
        ])
        .unwrap();
        let sizes: Vec<usize> = s.pipelines.iter().map(|p| p.batch_size).collect();
        assert_eq!(sizes[..3], [100, 1000, 100]);
        assert!(sizes[3..].iter().all(|&size| size == 100));
        let s = settings(&[("STORAGE_MAX_POLL_RECORDS_NETWORK_METRICS", "7")]).unwrap();
        let sizes: Vec<usize> = s.pipelines.iter().map(|p| p.batch_size).collect();
        assert_eq!(sizes[..3], [200, 500, 7]);
    }

    #[test]
    fn writers_precedence_is_pipeline_then_shared_then_builtin() {
        let s = settings(&[]).unwrap();
        assert!(s.pipelines.iter().all(|p| p.writers == DEFAULT_WRITERS));
        let s = settings(&[("STORAGE_WRITERS", "3"), ("STORAGE_WRITERS_REVIEWS", "1")]).unwrap();
        let writers: Vec<usize> = s.pipelines.iter().map(|p| p.writers).collect();
        assert_eq!(writers[..3], [3, 1, 3]);
    }

    #[test]
    fn subset_and_prefix() {
        let s = settings(&[
            ("STORAGE_PIPELINES", " reviews ,reviews"),
            ("STORAGE_GROUP_PREFIX", "sc"),
            ("STORAGE_TOPIC_REVIEWS", "reviews-v2"),
        ])
        .unwrap();
        assert_eq!(s.pipelines.len(), 1);
        assert_eq!(s.pipelines[0].group, "sc.reviews");
        assert_eq!(s.pipelines[0].topic, "reviews-v2");
        assert!(s.pipeline(PipelineKind::AppStats).is_none());
    }

    #[test]
    fn each_invalid_value_names_its_variable() {
        let long_prefix = "p".repeat(240);
        let cases: &[(&str, &str)] = &[
            ("STORAGE_MAX_POLL_RECORDS", "abc"),
            ("STORAGE_MAX_POLL_RECORDS", "0"),
            ("STORAGE_MAX_POLL_RECORDS", "-5"),
            ("STORAGE_MAX_POLL_RECORDS_REVIEWS", "0"),
            ("STORAGE_MAX_POLL_RECORDS_APP_STATS", "1e3"),
            ("STORAGE_MAX_POLL_RECORDS_APP_STATS", "100001"),
            ("STORAGE_WRITERS", "0"),
            ("STORAGE_WRITERS", "9"),
            ("STORAGE_WRITERS", "two"),
            ("STORAGE_WRITERS_REVIEWS", "-1"),
            ("STORAGE_PIPELINES", "reviews,payments"),
            ("STORAGE_PIPELINES", ","),
            ("DATABASE_URL", "mysql://x@y/z"),
            ("DATABASE_URL", "postgres://"),
            ("DATABASE_URL", "postgres://u@host:notaport/db"),
            ("DATABASE_URL", "postgres:///db?host="),
            ("DATABASE_URL", "postgres://u@/db?host=/run/pg"),
            ("KAFKA_BOOTSTRAP_SERVERS", "localhost"),
            ("KAFKA_BOOTSTRAP_SERVERS", "a:1,b:x"),
            ("STORAGE_AUTO_OFFSET_RESET", "beginning"),
            ("STORAGE_POLL_TIMEOUT_MS", "fast"),
            ("STORAGE_SESSION_TIMEOUT_MS", "0"),
            ("STORAGE_DB_RETRY_MAX_ATTEMPTS", "-1"),
            ("STORAGE_DB_RETRY_BASE_MS", "0"),
            ("STORAGE_APP_CACHE_TTL_SECONDS", "5m"),
            ("STORAGE_SHUTDOWN_TIMEOUT_SECONDS", "-30"),
            ("STORAGE_APPLICATIONS_TABLE", "apps; drop table x"),
            ("STORAGE_TOPIC_REVIEWS", "bad topic"),
            ("STORAGE_GROUP_PREFIX", "a/b"),
            ("STORAGE_GROUP_PREFIX", long_prefix.as_str()),
        ];
        for (name, value) in cases {
            assert_eq!(failing_variable(&[(name, value)]), *name, "{name}={value}");
        }
    }

    #[test]
    fn poll_interval_must_exceed_session_timeout() {
        assert_eq!(
            failing_variable(&[("STORAGE_MAX_POLL_INTERVAL_MS", "1000")]),
            "STORAGE_MAX_POLL_INTERVAL_MS"
        );
    }

    #[test]
    fn the_longest_group_prefix_that_fits_the_dead_letter_column_is_accepted() {
        let prefix = "p".repeat(239);
        let s = settings(&[("STORAGE_GROUP_PREFIX", prefix.as_str())]).unwrap();
        assert!(s.pipelines.iter().all(|p| p.group.len() <= 255));
    }

    #[test]
    fn passwords_never_reach_the_message() {
        let err =
            settings(&[("DATABASE_URL", "postgres://u:s3cret@host:notaport/db")]).unwrap_err();
        assert!(!err.to_string().contains("s3cret"), "{err}");
        let err = settings(&[("DATABASE_URL", "postgres://u:ab/cd@host:notaport/db")]).unwrap_err();
        assert!(!err.to_string().contains("ab/cd"), "{err}");
        let err = settings(&[("DATABASE_URL", "mysql://u:p@ss@h/db")]).unwrap_err();
        assert!(!err.to_string().contains("p@ss"), "{err}");
    }

    #[test]
    fn two_pipelines_may_not_share_a_topic() {
        let err = settings(&[("STORAGE_TOPIC_REVIEWS", "app-stats")]).unwrap_err();
        assert_eq!(err.variable(), "STORAGE_TOPIC_REVIEWS");
    }

    #[test]
    fn retries_must_fit_in_the_poll_interval() {
        let err = settings(&[("STORAGE_DB_RETRY_MAX_ATTEMPTS", "12")]).unwrap_err();
        assert_eq!(err.variable(), "STORAGE_DB_RETRY_MAX_ATTEMPTS");
        assert!(settings(&[("STORAGE_DB_RETRY_MAX_ATTEMPTS", "8")]).is_ok());
    }

    #[test]
    fn missing_database_url_is_named() {
        let err = Settings::from_map(&BTreeMap::new()).unwrap_err();
        assert_eq!(err.variable(), "DATABASE_URL");
        assert!(err.to_string().contains("DATABASE_URL"));
    }

    #[test]
    fn the_instance_id_defaults_to_the_host_name_and_may_be_turned_off() {
        let s = settings(&[("HOSTNAME", "worker-7.example")]).unwrap();
        assert_eq!(s.instance_id.as_deref(), Some("worker-7.example"));
        assert_eq!(
            s.group_instance_id(PipelineKind::Reviews).as_deref(),
            Some("worker-7.example-reviews")
        );
        let s = settings(&[
            ("HOSTNAME", "odd host/name"),
            ("STORAGE_PIPELINES", "reviews"),
        ]);
        assert_eq!(s.unwrap().instance_id.as_deref(), Some("odd-host-name"));
        assert_eq!(
            settings(&[]).unwrap().instance_id.as_deref(),
            Some("sluice")
        );
        let s = settings(&[("HOSTNAME", "h"), ("STORAGE_INSTANCE_ID", "a-1")]).unwrap();
        assert_eq!(s.instance_id.as_deref(), Some("a-1"));
        let s = settings(&[("STORAGE_INSTANCE_ID", "OFF")]).unwrap();
        assert_eq!(s.group_instance_id(PipelineKind::Reviews), None);
        for bad in ["a b", "x/y", &"i".repeat(234)] {
            assert_eq!(
                failing_variable(&[("STORAGE_INSTANCE_ID", bad)]),
                "STORAGE_INSTANCE_ID",
                "{bad}"
            );
        }
        assert_eq!(
            settings(&[]).unwrap().consumer_error_timeout,
            Duration::from_secs(30)
        );
        assert_eq!(
            failing_variable(&[("STORAGE_CONSUMER_ERROR_TIMEOUT_SECONDS", "0")]),
            "STORAGE_CONSUMER_ERROR_TIMEOUT_SECONDS"
        );
    }

    #[test]
    fn kafka_client_properties_pass_through_and_guarantees_are_refused() {
        let s = settings(&[("KAFKA_SECURITY_PROTOCOL", "SSL")]).unwrap();
        assert_eq!(
            s.kafka
                .properties
                .get("security.protocol")
                .map(String::as_str),
            Some("SSL")
        );
        assert_eq!(
            failing_variable(&[("KAFKA_ENABLE_AUTO_COMMIT", "true")]),
            "KAFKA_ENABLE_AUTO_COMMIT"
        );
        let s = settings(&[("KAFKA_SASL_PASSWORD", "hunter2")]).unwrap();
        assert!(!format!("{s:?}").contains("hunter2"));
    }

    #[test]
    fn unix_socket_and_tls_urls_are_accepted() {
        for url in [
            "postgres:///sluice?host=/var/run/postgresql",
            "postgres:///sluice?user=sluice&host=%2Frun%2Fpg&sslmode=disable",
            "postgres://u@localhost:5432/db?sslmode=verify-full&sslrootcert=/ca.crt",
        ] {
            assert!(settings(&[("DATABASE_URL", url)]).is_ok(), "{url}");
        }
    }

    #[test]
    fn retries_may_be_disabled() {
        let s = settings(&[("STORAGE_DB_RETRY_MAX_ATTEMPTS", "0")]).unwrap();
        assert_eq!(s.db_retry.max_attempts, 0);
    }
}
