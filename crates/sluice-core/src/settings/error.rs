//! The one error of every settings reader: which variable, the value found, what is accepted.
//!
//! A value that is wrong on its own is [`SettingsError::Invalid`]; every rule that ties two
//! settings together has a variant of its own, so a caller (and a test) can tell them apart.
//! All of them print the same way — `invalid setting NAME="value": accepted form` — and the
//! binary exits 2 on any of them, before anything is consumed.

use std::fmt;

/// A setting found wrong only when it is used (a file a URL names cannot be read): the
/// binary exits 2 on it, as on a [`SettingsError`], whatever error wraps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnusableSetting(pub String);

impl fmt::Display for UnusableSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UnusableSetting {}

/// A setting that is missing, malformed, or in conflict with another one.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SettingsError {
    /// One variable's value is missing or malformed.
    Invalid {
        /// The environment variable's name.
        variable: String,
        /// The value found (empty when missing; a URL's password redacted).
        value: String,
        /// The accepted form.
        expected: String,
    },
    /// `STORAGE_MAX_POLL_INTERVAL_MS` is not above `STORAGE_SESSION_TIMEOUT_MS`.
    PollIntervalNotAboveSessionTimeout {
        /// `STORAGE_MAX_POLL_INTERVAL_MS`, in milliseconds.
        max_poll_interval_ms: u128,
    },
    /// Two pipelines would read one topic.
    TopicShared {
        /// The later pipeline's `STORAGE_TOPIC_*` variable.
        variable: String,
        /// The topic.
        topic: String,
        /// The pipeline that reads it first.
        other: String,
    },
    /// A batch held by database retries would outlast `STORAGE_MAX_POLL_INTERVAL_MS` (less
    /// 10 s), and the consumer would leave its group in the middle of a retry.
    RetriesOutlastPollInterval {
        /// `STORAGE_DB_RETRY_MAX_ATTEMPTS`.
        attempts: u32,
        /// The sum of the nominal delays, in seconds.
        total_s: u64,
        /// `STORAGE_MAX_POLL_INTERVAL_MS`, in seconds.
        max_poll_interval_s: u64,
    },
    /// `STORAGE_TOPIC_MIN_INSYNC_REPLICAS` above the replication factor: every write would be
    /// refused.
    MinInsyncAboveReplicationFactor {
        /// `STORAGE_TOPIC_MIN_INSYNC_REPLICAS`, or a pipeline's own override of it.
        variable: String,
        /// Its value.
        min_insync_replicas: i32,
        /// The replication factor.
        replication_factor: i16,
        /// The variable that set the replication factor (`None`: the cluster chose it).
        replication_variable: Option<String>,
    },
    /// `STORAGE_TOPIC_REPLICATION_FACTOR` (or a pipeline's override) above the cluster's
    /// broker count.
    ReplicationFactorAboveBrokers {
        /// The variable.
        variable: String,
        /// Its value.
        replication_factor: i16,
        /// The brokers of the cluster.
        brokers: usize,
    },
    /// `OUTBOX_STALE_DISPATCH_SECONDS` too short for `OUTBOX_DELIVERY_TIMEOUT_MS`: stale
    /// recovery could requeue a claim whose records may still be delivered.
    StaleDispatchTooShort {
        /// `OUTBOX_STALE_DISPATCH_SECONDS`.
        stale_seconds: u64,
        /// `OUTBOX_DELIVERY_TIMEOUT_MS`.
        delivery_ms: u64,
        /// The slack required on top of the delivery timeout, in seconds.
        slack_s: u64,
    },
}

impl SettingsError {
    /// A value that is wrong on its own.
    pub fn invalid(variable: &str, value: &str, expected: &str) -> Self {
        Self::Invalid {
            variable: variable.to_owned(),
            value: value.to_owned(),
            expected: expected.to_owned(),
        }
    }

    /// The variable to change.
    pub fn variable(&self) -> &str {
        match self {
            Self::Invalid { variable, .. }
            | Self::TopicShared { variable, .. }
            | Self::MinInsyncAboveReplicationFactor { variable, .. }
            | Self::ReplicationFactorAboveBrokers { variable, .. } => variable,
            Self::PollIntervalNotAboveSessionTimeout { .. } => "STORAGE_MAX_POLL_INTERVAL_MS",
            Self::RetriesOutlastPollInterval { .. } => "STORAGE_DB_RETRY_MAX_ATTEMPTS",
            Self::StaleDispatchTooShort { .. } => "OUTBOX_STALE_DISPATCH_SECONDS",
        }
    }

    /// The value found.
    pub fn value(&self) -> String {
        match self {
            Self::Invalid { value, .. } => value.clone(),
            Self::TopicShared { topic, .. } => topic.clone(),
            Self::PollIntervalNotAboveSessionTimeout {
                max_poll_interval_ms,
            } => max_poll_interval_ms.to_string(),
            Self::RetriesOutlastPollInterval { attempts, .. } => attempts.to_string(),
            Self::MinInsyncAboveReplicationFactor {
                min_insync_replicas,
                ..
            } => min_insync_replicas.to_string(),
            Self::ReplicationFactorAboveBrokers {
                replication_factor, ..
            } => replication_factor.to_string(),
            Self::StaleDispatchTooShort { stale_seconds, .. } => stale_seconds.to_string(),
        }
    }

    /// The accepted form.
    pub fn expected(&self) -> String {
        match self {
            Self::Invalid { expected, .. } => expected.clone(),
            Self::TopicShared { other, .. } => {
                format!("a topic of its own (the {other} pipeline reads it too)")
            }
            Self::PollIntervalNotAboveSessionTimeout { .. } => {
                "greater than STORAGE_SESSION_TIMEOUT_MS".to_owned()
            }
            Self::RetriesOutlastPollInterval {
                total_s,
                max_poll_interval_s,
                ..
            } => format!(
                "retries whose delays ({total_s} s with STORAGE_DB_RETRY_BASE_MS) stay 10 s under \
                 STORAGE_MAX_POLL_INTERVAL_MS ({max_poll_interval_s} s)"
            ),
            Self::MinInsyncAboveReplicationFactor {
                replication_factor,
                replication_variable: Some(rf_variable),
                ..
            } => format!(
                "at most {rf_variable} ({replication_factor}): more in-sync replicas than \
                 replicas refuses every write"
            ),
            Self::MinInsyncAboveReplicationFactor {
                replication_factor,
                replication_variable: None,
                ..
            } => format!(
                "at most the replication factor ({replication_factor}): more in-sync \
                 replicas than replicas refuses every write"
            ),
            Self::ReplicationFactorAboveBrokers { brokers, .. } => {
                format!("at most the cluster's broker count ({brokers})")
            }
            Self::StaleDispatchTooShort {
                delivery_ms,
                slack_s,
                ..
            } => format!(
                "at least OUTBOX_DELIVERY_TIMEOUT_MS ({delivery_ms} ms) + {slack_s} s, so that \
                 stale recovery never requeues a claim whose records may still be \
                 delivered; raise it or lower OUTBOX_DELIVERY_TIMEOUT_MS"
            ),
        }
    }
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid setting {}={:?}: {}",
            self.variable(),
            self.value(),
            self.expected()
        )
    }
}

impl std::error::Error for SettingsError {}
