//! The `STORAGE_TOPIC_*` variables, each declared once: what [`super::TopicSettings`] reads
//! and what `--help` lists.

use super::{DEFAULT_PARTITIONS, DURABLE_MIN_INSYNC_REPLICAS, DURABLE_REPLICATION_FACTOR};
use crate::pipeline::PipelineKind;
use crate::settings::{EnvReader, SettingsError, Variable};

/// One durability setting of the storage topics, declared once: `STORAGE_TOPIC_<SETTING>` for
/// every topic and `STORAGE_TOPIC_<SETTING>_<PIPELINE>` for one. Unset, the cluster decides
/// ([`TopicSettings::plan_for`] fills in the default shown here).
pub(super) struct TopicSetting {
    /// `<SETTING>`.
    pub(super) setting: &'static str,
    /// The values accepted.
    accept: fn(i64) -> bool,
    /// The accepted form, for an error.
    form: &'static str,
    /// The default as `--help` and the docs show it.
    default: fn() -> String,
    /// What it means.
    help: &'static str,
}

pub(super) const PARTITIONS: TopicSetting = TopicSetting {
    setting: "PARTITIONS",
    accept: |n| (1..=10_000).contains(&n),
    form: "a whole number 1-10000",
    default: || DEFAULT_PARTITIONS.to_string(),
    help: "partitions of a storage topic (topics ensure grows, never shrinks)",
};

pub(super) const REPLICATION_FACTOR: TopicSetting = TopicSetting {
    setting: "REPLICATION_FACTOR",
    accept: |n| (1..=32).contains(&n),
    form: "a whole number 1-32",
    default: || format!("{DURABLE_REPLICATION_FACTOR}, or the broker count when fewer"),
    help: "replication factor of a new storage topic",
};

pub(super) const MIN_INSYNC_REPLICAS: TopicSetting = TopicSetting {
    setting: "MIN_INSYNC_REPLICAS",
    accept: |n| (1..=32).contains(&n),
    form: "a whole number 1-32",
    default: || format!("min({DURABLE_MIN_INSYNC_REPLICAS}, replication factor)"),
    help: "min.insync.replicas of the storage topics",
};

pub(super) const RETENTION_MS: TopicSetting = TopicSetting {
    setting: "RETENTION_MS",
    accept: |n| n == -1 || n > 0,
    form: "milliseconds > 0, or -1 to keep forever",
    default: || "(the broker's)".to_owned(),
    help: "retention.ms of the storage topics; -1 keeps forever",
};

/// The settings a topic has, in the order they are checked.
pub(super) const SETTINGS: [TopicSetting; 4] = [
    PARTITIONS,
    REPLICATION_FACTOR,
    MIN_INSYNC_REPLICAS,
    RETENTION_MS,
];

impl TopicSetting {
    /// The value set for one pipeline, or the shared one; `None` when unset.
    pub(super) fn read<T: TryFrom<i64>>(
        &self,
        lookup: &dyn Fn(&str) -> Option<String>,
        pipeline: Option<PipelineKind>,
    ) -> Result<Option<T>, SettingsError> {
        let name = variable(self.setting, pipeline);
        let default = (self.default)();
        let default = default
            .strip_prefix('(')
            .and_then(|d| d.strip_suffix(')'))
            .unwrap_or(&default);
        let expected = format!("{} (default {default})", self.form);
        let Some(n) =
            EnvReader::new(lookup).parse::<i64>(&name, |n| (self.accept)(*n), &expected)?
        else {
            return Ok(None);
        };
        T::try_from(n)
            .map(Some)
            .map_err(|_| SettingsError::invalid(&name, &n.to_string(), &expected))
    }

    /// The shared variable's row.
    fn variable(&self) -> Variable {
        Variable {
            name: variable(self.setting, None).into(),
            default: (self.default)().into(),
            help: self.help.into(),
            secret: false,
        }
    }
}

/// The rows of `--help`: the shared settings, then the per-pipeline overrides.
pub fn variables() -> Vec<Variable> {
    let mut rows: Vec<Variable> = SETTINGS.iter().map(TopicSetting::variable).collect();
    let settings = SETTINGS.map(|s| s.setting);
    let (last, first) = settings.split_last().unwrap_or((&"", &[]));
    rows.push(Variable {
        name: format!("{}_<PIPELINE>", variable("<SETTING>", None)).into(),
        default: "(the shared value)".into(),
        help: format!("one topic's {} or {last}", first.join(", ")).into(),
        secret: false,
    });
    rows
}

/// The variable of `setting` (`PARTITIONS` …) for one pipeline, or the shared one.
pub(super) fn variable(setting: &str, pipeline: Option<PipelineKind>) -> String {
    match pipeline {
        Some(kind) => format!("STORAGE_TOPIC_{setting}_{}", kind.env_suffix()),
        None => format!("STORAGE_TOPIC_{setting}"),
    }
}
