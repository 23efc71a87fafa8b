//! Durability of the storage topics: partitions, replication factor, `min.insync.replicas`
//! and retention, from `STORAGE_TOPIC_*` settings.
//!
//! The rule this module keeps: a topic that `sluice topics ensure` creates on a cluster of
//! three or more brokers survives the loss of one broker without losing an acknowledged
//! record (replication factor 3, `min.insync.replicas` 2, acks=all). A smaller cluster gets
//! what it can hold, and the plan says so.

use super::error::SettingsError;
use super::read::EnvReader;
use crate::pipeline::PipelineKind;
use std::collections::BTreeMap;

/// The replication factor a durable topic wants.
pub const DURABLE_REPLICATION_FACTOR: i16 = 3;
/// The `min.insync.replicas` a durable topic wants.
pub const DURABLE_MIN_INSYNC_REPLICAS: i32 = 2;
/// Default partitions of a storage topic.
pub const DEFAULT_PARTITIONS: i32 = 3;

/// The four values a topic can be given; `None`: not set at this level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TopicValues {
    /// Partitions.
    pub partitions: Option<i32>,
    /// Replication factor.
    pub replication_factor: Option<i16>,
    /// `min.insync.replicas`.
    pub min_insync_replicas: Option<i32>,
    /// `retention.ms` (-1: keep forever).
    pub retention_ms: Option<i64>,
}

impl TopicValues {
    /// `self`'s values, each falling back to `shared`'s.
    fn or(self, shared: TopicValues) -> TopicValues {
        TopicValues {
            partitions: self.partitions.or(shared.partitions),
            replication_factor: self.replication_factor.or(shared.replication_factor),
            min_insync_replicas: self.min_insync_replicas.or(shared.min_insync_replicas),
            retention_ms: self.retention_ms.or(shared.retention_ms),
        }
    }
}

/// Raw, validated topic settings: the shared `STORAGE_TOPIC_<SETTING>` values and the
/// per-pipeline `STORAGE_TOPIC_<SETTING>_<PIPELINE>` overrides; the broker count fills in the
/// defaults ([`Self::plan_for`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicSettings {
    /// `STORAGE_TOPIC_PARTITIONS`, `_REPLICATION_FACTOR`, `_MIN_INSYNC_REPLICAS`,
    /// `_RETENTION_MS`.
    pub shared: TopicValues,
    /// `STORAGE_TOPIC_<SETTING>_<PIPELINE>`: wins over the shared value for that pipeline.
    pub per_pipeline: BTreeMap<PipelineKind, TopicValues>,
}

/// What a storage topic should look like on one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicPlan {
    /// Partitions (an existing topic is grown to this, never shrunk).
    pub partitions: i32,
    /// Replication factor of a new topic.
    pub replication_factor: i16,
    /// `min.insync.replicas`.
    pub min_insync_replicas: i32,
    /// `retention.ms`, if set.
    pub retention_ms: Option<i64>,
    /// Why the replication factor is below 3 when the default chose it.
    pub reduced: Option<String>,
    /// The variable that set the partitions, if one did (then a smaller count than the
    /// topic's is refused instead of ignored).
    pub partitions_from: Option<String>,
    /// The variable that set the replication factor, if one did (then a different factor
    /// than the topic's is refused instead of warned about).
    pub replication_factor_from: Option<String>,
}

/// An existing topic's shape, as far as [`TopicPlan::refusal`] needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExistingTopic {
    /// Partition count.
    pub partitions: i32,
    /// Replication factor.
    pub replication_factor: i16,
}

/// The settings a topic has, in the order they are checked; (setting suffix, accepted form).
const SETTINGS: [(&str, &str); 4] = [
    ("PARTITIONS", "a whole number 1-10000 (default 3)"),
    (
        "REPLICATION_FACTOR",
        "a whole number 1-32 (default 3, or the broker count when smaller)",
    ),
    (
        "MIN_INSYNC_REPLICAS",
        "a whole number 1-32 (default min(2, replication factor))",
    ),
    (
        "RETENTION_MS",
        "milliseconds > 0, or -1 to keep forever (default: the broker's)",
    ),
];

fn error(variable: &str, value: &str, expected: &str) -> SettingsError {
    SettingsError::invalid(variable, value, expected)
}

fn read<T: std::str::FromStr + PartialOrd + Copy>(
    lookup: &dyn Fn(&str) -> Option<String>,
    variable: &str,
    accept: impl Fn(T) -> bool,
    expected: &str,
) -> Result<Option<T>, SettingsError> {
    EnvReader::new(lookup).parse::<T>(variable, |n| accept(*n), expected)
}

/// The variable of `setting` (`PARTITIONS` …) for one pipeline, or the shared one.
fn variable(setting: &str, pipeline: Option<PipelineKind>) -> String {
    match pipeline {
        Some(kind) => format!("STORAGE_TOPIC_{setting}_{}", kind.env_suffix()),
        None => format!("STORAGE_TOPIC_{setting}"),
    }
}

/// Reads one level (shared, or one pipeline's overrides).
fn read_values(
    lookup: &dyn Fn(&str) -> Option<String>,
    pipeline: Option<PipelineKind>,
) -> Result<TopicValues, SettingsError> {
    let [partitions, replication, min_insync, retention] =
        SETTINGS.map(|(setting, expected)| (variable(setting, pipeline), expected));
    Ok(TopicValues {
        partitions: read::<i32>(
            lookup,
            &partitions.0,
            |n| (1..=10_000).contains(&n),
            partitions.1,
        )?,
        replication_factor: read::<i16>(
            lookup,
            &replication.0,
            |n| (1..=32).contains(&n),
            replication.1,
        )?,
        min_insync_replicas: read::<i32>(
            lookup,
            &min_insync.0,
            |n| (1..=32).contains(&n),
            min_insync.1,
        )?,
        retention_ms: read::<i64>(lookup, &retention.0, |n| n == -1 || n > 0, retention.1)?,
    })
}

impl TopicSettings {
    /// Reads the `STORAGE_TOPIC_*` durability settings; empty values count as unset.
    /// `names` are the environment's variable names: a `STORAGE_TOPIC_<SETTING>_<X>` whose
    /// `<X>` is not a pipeline is an error (a typo would otherwise be ignored silently).
    pub fn from_vars<'a>(
        lookup: &dyn Fn(&str) -> Option<String>,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, SettingsError> {
        for name in names {
            for (setting, _) in SETTINGS {
                let shared = variable(setting, None);
                let Some(suffix) = name
                    .strip_prefix(shared.as_str())
                    .and_then(|rest| rest.strip_prefix('_'))
                else {
                    continue;
                };
                if !PipelineKind::ALL.iter().any(|k| k.env_suffix() == suffix) {
                    return Err(error(
                        name,
                        &lookup(name).unwrap_or_default(),
                        &format!(
                            "a per-pipeline override {shared}_<PIPELINE> with <PIPELINE> one of {}",
                            PipelineKind::ALL.map(PipelineKind::env_suffix).join(", ")
                        ),
                    ));
                }
            }
        }
        let shared = read_values(lookup, None)?;
        let mut per_pipeline = BTreeMap::new();
        for kind in PipelineKind::ALL {
            let own = read_values(lookup, Some(kind))?;
            if own != TopicValues::default() {
                per_pipeline.insert(kind, own);
            }
        }
        let settings = Self {
            shared,
            per_pipeline,
        };
        for kind in PipelineKind::ALL {
            let values = settings.values(kind);
            if let (Some(rf), Some(min)) = (values.replication_factor, values.min_insync_replicas)
                && min > i32::from(rf)
            {
                let (min_var, rf_var) = (
                    settings.source("MIN_INSYNC_REPLICAS", kind, |v| v.min_insync_replicas),
                    settings.source("REPLICATION_FACTOR", kind, |v| v.replication_factor),
                );
                return Err(SettingsError::MinInsyncAboveReplicationFactor {
                    variable: min_var,
                    min_insync_replicas: min,
                    replication_factor: rf,
                    replication_variable: Some(rf_var),
                });
            }
        }
        Ok(settings)
    }

    /// Reads the shared settings only (no per-pipeline overrides are looked for by name).
    pub fn from_lookup(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Self, SettingsError> {
        Self::from_vars(lookup, [])
    }

    /// One pipeline's values: its overrides, then the shared ones.
    pub fn values(&self, kind: PipelineKind) -> TopicValues {
        self.per_pipeline
            .get(&kind)
            .copied()
            .unwrap_or_default()
            .or(self.shared)
    }

    /// The variable that gives `kind` its `setting` (its own override, else the shared one).
    fn source<T>(
        &self,
        setting: &str,
        kind: PipelineKind,
        field: impl Fn(&TopicValues) -> Option<T>,
    ) -> String {
        let own = self.per_pipeline.get(&kind).and_then(&field).is_some();
        variable(setting, own.then_some(kind))
    }

    /// The plan of `kind`'s topic on a cluster of `brokers` brokers: the defaults filled in,
    /// a replication factor the cluster can hold.
    pub fn plan_for(&self, kind: PipelineKind, brokers: usize) -> Result<TopicPlan, SettingsError> {
        let values = self.values(kind);
        let rf_var = self.source("REPLICATION_FACTOR", kind, |v| v.replication_factor);
        let min_var = self.source("MIN_INSYNC_REPLICAS", kind, |v| v.min_insync_replicas);
        let available = i16::try_from(brokers).unwrap_or(i16::MAX).max(1);
        let (replication_factor, reduced) = match values.replication_factor {
            Some(rf) if rf > available => {
                return Err(SettingsError::ReplicationFactorAboveBrokers {
                    variable: rf_var,
                    replication_factor: rf,
                    brokers,
                });
            }
            Some(rf) => (rf, None),
            None if available >= DURABLE_REPLICATION_FACTOR => (DURABLE_REPLICATION_FACTOR, None),
            None => (
                available,
                Some(format!(
                    "replication factor {available} instead of {DURABLE_REPLICATION_FACTOR}: \
                     the cluster has {brokers} broker(s); a broker's loss can lose data \
                     (set STORAGE_TOPIC_REPLICATION_FACTOR to choose)"
                )),
            ),
        };
        let min_insync_replicas = match values.min_insync_replicas {
            Some(min) if min > i32::from(replication_factor) => {
                return Err(SettingsError::MinInsyncAboveReplicationFactor {
                    variable: min_var,
                    min_insync_replicas: min,
                    replication_factor,
                    replication_variable: None,
                });
            }
            Some(min) => min,
            None => DURABLE_MIN_INSYNC_REPLICAS.min(i32::from(replication_factor)),
        };
        Ok(TopicPlan {
            partitions: values.partitions.unwrap_or(DEFAULT_PARTITIONS),
            replication_factor,
            min_insync_replicas,
            retention_ms: values.retention_ms,
            reduced,
            partitions_from: values
                .partitions
                .map(|_| self.source("PARTITIONS", kind, |v| v.partitions)),
            replication_factor_from: values.replication_factor.map(|_| rf_var),
        })
    }
}

impl TopicPlan {
    /// Why `ensure` must not touch an existing topic, if it must not: a partition count set
    /// below the topic's (Kafka cannot remove partitions) or a replication factor set to
    /// another value (that is a replica reassignment, an operator's decision). Defaults that
    /// differ are not refusals: partitions stay, a replication factor gets a warning.
    pub fn refusal(&self, existing: ExistingTopic) -> Option<String> {
        let mut reasons = Vec::new();
        if let Some(var) = &self.partitions_from
            && self.partitions < existing.partitions
        {
            reasons.push(format!(
                "it has {} partitions and {var}={} would shrink it; Kafka cannot remove \
                 partitions (set {var} to {} or more, or recreate the topic)",
                existing.partitions, self.partitions, existing.partitions
            ));
        }
        if let Some(var) = &self.replication_factor_from
            && self.replication_factor != existing.replication_factor
        {
            reasons.push(format!(
                "its replication factor is {} and {var}={}; this command does not reassign \
                 replicas (use kafka-reassign-partitions, or set {var} to {})",
                existing.replication_factor, self.replication_factor, existing.replication_factor
            ));
        }
        (!reasons.is_empty()).then(|| reasons.join("; "))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests panic with a clear message")]
    use super::*;
    use std::collections::BTreeMap;

    fn parse(pairs: &[(&str, &str)]) -> Result<TopicSettings, SettingsError> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        TopicSettings::from_vars(
            &|name| map.get(name).cloned(),
            map.keys().map(String::as_str),
        )
    }

    fn plan(s: &TopicSettings, brokers: usize) -> Result<TopicPlan, SettingsError> {
        s.plan_for(PipelineKind::Reviews, brokers)
    }

    #[test]
    fn defaults_follow_the_cluster_size() {
        let s = parse(&[]).unwrap();
        assert_eq!(s, TopicSettings::default());
        let three = plan(&s, 3).unwrap();
        assert_eq!(
            (
                three.partitions,
                three.replication_factor,
                three.min_insync_replicas
            ),
            (3, 3, 2)
        );
        assert_eq!((three.retention_ms, three.reduced), (None, None));
        assert_eq!(plan(&s, 5).unwrap().replication_factor, 3);
        let one = plan(&s, 1).unwrap();
        assert_eq!((one.replication_factor, one.min_insync_replicas), (1, 1));
        assert!(one.reduced.unwrap().contains("1 broker"), "says why");
        let two = plan(&s, 2).unwrap();
        assert_eq!((two.replication_factor, two.min_insync_replicas), (2, 2));
        assert!(two.reduced.is_some());
    }

    #[test]
    fn explicit_values_win() {
        let s = parse(&[
            ("STORAGE_TOPIC_PARTITIONS", "6"),
            ("STORAGE_TOPIC_REPLICATION_FACTOR", "2"),
            ("STORAGE_TOPIC_MIN_INSYNC_REPLICAS", "1"),
            ("STORAGE_TOPIC_RETENTION_MS", "-1"),
        ])
        .unwrap();
        let plan = plan(&s, 3).unwrap();
        assert_eq!(
            (
                plan.partitions,
                plan.replication_factor,
                plan.min_insync_replicas
            ),
            (6, 2, 1)
        );
        assert_eq!((plan.retention_ms, plan.reduced), (Some(-1), None));
    }

    #[test]
    fn a_pipelines_own_values_win_over_the_shared_ones() {
        let s = parse(&[
            ("STORAGE_TOPIC_PARTITIONS", "6"),
            ("STORAGE_TOPIC_RETENTION_MS", "1000"),
            ("STORAGE_TOPIC_PARTITIONS_REVIEWS", "12"),
            ("STORAGE_TOPIC_MIN_INSYNC_REPLICAS_REVIEWS", "1"),
            ("STORAGE_TOPIC_RETENTION_MS_NETWORK_METRICS", "-1"),
        ])
        .unwrap();
        let reviews = s.plan_for(PipelineKind::Reviews, 3).unwrap();
        assert_eq!(
            (
                reviews.partitions,
                reviews.min_insync_replicas,
                reviews.retention_ms
            ),
            (12, 1, Some(1000))
        );
        assert_eq!(
            reviews.partitions_from.as_deref(),
            Some("STORAGE_TOPIC_PARTITIONS_REVIEWS")
        );
        let metrics = s.plan_for(PipelineKind::NetworkMetrics, 3).unwrap();
        assert_eq!(
            (
                metrics.partitions,
                metrics.min_insync_replicas,
                metrics.retention_ms
            ),
            (6, 2, Some(-1))
        );
        assert_eq!(
            metrics.partitions_from.as_deref(),
            Some("STORAGE_TOPIC_PARTITIONS")
        );
        let stats = s.plan_for(PipelineKind::AppStats, 1).unwrap();
        assert_eq!((stats.partitions, stats.replication_factor), (6, 1));
        assert_eq!(stats.replication_factor_from, None);
    }

    #[test]
    fn overrides_are_validated_and_an_unknown_pipeline_is_an_error() {
        let err = parse(&[("STORAGE_TOPIC_PARTITIONS_REVEIWS", "6")]).unwrap_err();
        assert_eq!(err.variable(), "STORAGE_TOPIC_PARTITIONS_REVEIWS");
        assert!(err.expected().contains("REVIEWS"), "{}", err.expected());
        let err = parse(&[("STORAGE_TOPIC_RETENTION_MS_APP_STATS", "0")]).unwrap_err();
        assert_eq!(err.variable(), "STORAGE_TOPIC_RETENTION_MS_APP_STATS");
        // The pipeline's own min.insync.replicas against the shared replication factor.
        let err = parse(&[
            ("STORAGE_TOPIC_REPLICATION_FACTOR", "2"),
            ("STORAGE_TOPIC_MIN_INSYNC_REPLICAS_REVIEWS", "3"),
        ])
        .unwrap_err();
        assert_eq!(err.variable(), "STORAGE_TOPIC_MIN_INSYNC_REPLICAS_REVIEWS");
        assert!(
            err.expected()
                .contains("STORAGE_TOPIC_REPLICATION_FACTOR (")
        );
        // A pipeline's replication factor the cluster cannot hold names its own variable.
        let s = parse(&[("STORAGE_TOPIC_REPLICATION_FACTOR_REVIEWS", "3")]).unwrap();
        assert_eq!(
            plan(&s, 1).unwrap_err().variable(),
            "STORAGE_TOPIC_REPLICATION_FACTOR_REVIEWS"
        );
        // The topic-name variables are not overrides.
        assert!(parse(&[("STORAGE_TOPIC_REVIEWS", "r")]).is_ok());
    }

    #[test]
    fn only_a_value_that_was_set_refuses_to_shrink_or_to_change_the_replication() {
        let existing = ExistingTopic {
            partitions: 6,
            replication_factor: 1,
        };
        let defaults = plan(&TopicSettings::default(), 3).unwrap();
        assert_eq!(defaults.refusal(existing), None, "defaults never refuse");
        let s = parse(&[
            ("STORAGE_TOPIC_PARTITIONS_REVIEWS", "3"),
            ("STORAGE_TOPIC_REPLICATION_FACTOR", "3"),
        ])
        .unwrap();
        let refusal = plan(&s, 3).unwrap().refusal(existing).unwrap();
        assert!(
            refusal.contains("STORAGE_TOPIC_PARTITIONS_REVIEWS=3 would shrink it"),
            "{refusal}"
        );
        assert!(
            refusal.contains("replication factor is 1 and STORAGE_TOPIC_REPLICATION_FACTOR=3"),
            "{refusal}"
        );
        let grow = parse(&[("STORAGE_TOPIC_PARTITIONS", "8")]).unwrap();
        assert_eq!(plan(&grow, 1).unwrap().refusal(existing), None);
    }

    #[test]
    fn each_invalid_value_names_its_variable() {
        for (variable, value) in [
            ("STORAGE_TOPIC_PARTITIONS", "0"),
            ("STORAGE_TOPIC_PARTITIONS", "three"),
            ("STORAGE_TOPIC_REPLICATION_FACTOR", "0"),
            ("STORAGE_TOPIC_REPLICATION_FACTOR", "-3"),
            ("STORAGE_TOPIC_MIN_INSYNC_REPLICAS", "0"),
            ("STORAGE_TOPIC_RETENTION_MS", "0"),
            ("STORAGE_TOPIC_RETENTION_MS", "-2"),
            ("STORAGE_TOPIC_RETENTION_MS", "1d"),
        ] {
            let err = parse(&[(variable, value)]).unwrap_err();
            assert_eq!((err.variable(), err.value().as_str()), (variable, value));
        }
    }

    #[test]
    fn more_in_sync_replicas_than_replicas_is_its_own_error() {
        let err = parse(&[
            ("STORAGE_TOPIC_REPLICATION_FACTOR", "2"),
            ("STORAGE_TOPIC_MIN_INSYNC_REPLICAS", "3"),
        ])
        .unwrap_err();
        assert_eq!(err.variable(), "STORAGE_TOPIC_MIN_INSYNC_REPLICAS");
        assert!(err.expected().contains("STORAGE_TOPIC_REPLICATION_FACTOR"));
        // With the default replication factor, the cluster decides.
        let s = parse(&[("STORAGE_TOPIC_MIN_INSYNC_REPLICAS", "2")]).unwrap();
        assert_eq!(plan(&s, 3).unwrap().min_insync_replicas, 2);
        let err = plan(&s, 1).unwrap_err();
        assert_eq!(err.variable(), "STORAGE_TOPIC_MIN_INSYNC_REPLICAS");
        // A replication factor the cluster cannot hold.
        let s = parse(&[("STORAGE_TOPIC_REPLICATION_FACTOR", "3")]).unwrap();
        assert_eq!(
            plan(&s, 1).unwrap_err().variable(),
            "STORAGE_TOPIC_REPLICATION_FACTOR"
        );
    }
}
