//! Durability of the storage topics: partitions, replication factor, `min.insync.replicas`
//! and retention, from `STORAGE_TOPIC_*` settings.
//!
//! The rule this module keeps: a topic that `sluice topics ensure` creates on a cluster of
//! three or more brokers survives the loss of one broker without losing an acknowledged
//! record (replication factor 3, `min.insync.replicas` 2, acks=all). A smaller cluster gets
//! what it can hold, and the plan says so.

mod declared;

use super::error::SettingsError;
use crate::pipeline::PipelineKind;
use declared::variable;
pub use declared::variables;
use declared::{MIN_INSYNC_REPLICAS, PARTITIONS, REPLICATION_FACTOR, RETENTION_MS, SETTINGS};
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

fn error(variable: &str, value: &str, expected: &str) -> SettingsError {
    SettingsError::invalid(variable, value, expected)
}

/// Reads one level (shared, or one pipeline's overrides).
fn read_values(
    lookup: &dyn Fn(&str) -> Option<String>,
    pipeline: Option<PipelineKind>,
) -> Result<TopicValues, SettingsError> {
    Ok(TopicValues {
        partitions: PARTITIONS.read(lookup, pipeline)?,
        replication_factor: REPLICATION_FACTOR.read(lookup, pipeline)?,
        min_insync_replicas: MIN_INSYNC_REPLICAS.read(lookup, pipeline)?,
        retention_ms: RETENTION_MS.read(lookup, pipeline)?,
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
            for setting in &SETTINGS {
                let shared = variable(setting.setting, None);
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
                    settings.source(MIN_INSYNC_REPLICAS.setting, Some(kind), |v| {
                        v.min_insync_replicas
                    }),
                    settings.source(REPLICATION_FACTOR.setting, Some(kind), |v| {
                        v.replication_factor
                    }),
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
        self.values_of(Some(kind))
    }

    /// A seed pipeline's values (its overrides, then the shared ones), or a declared sink's
    /// (`None`: the shared ones).
    fn values_of(&self, kind: Option<PipelineKind>) -> TopicValues {
        kind.and_then(|kind| self.per_pipeline.get(&kind).copied())
            .unwrap_or_default()
            .or(self.shared)
    }

    /// The variable that gives `kind` its `setting` (its own override, else the shared one).
    fn source<T>(
        &self,
        setting: &str,
        kind: Option<PipelineKind>,
        field: impl Fn(&TopicValues) -> Option<T>,
    ) -> String {
        let own = kind.filter(|kind| self.per_pipeline.get(kind).and_then(&field).is_some());
        variable(setting, own)
    }

    /// The plan of `kind`'s topic on a cluster of `brokers` brokers: the defaults filled in,
    /// a replication factor the cluster can hold.
    pub fn plan_for(&self, kind: PipelineKind, brokers: usize) -> Result<TopicPlan, SettingsError> {
        self.plan_of(Some(kind), brokers)
    }

    /// The plan of a declared sink's topic: the shared settings, as [`Self::plan_for`].
    pub fn plan_for_sink(&self, brokers: usize) -> Result<TopicPlan, SettingsError> {
        self.plan_of(None, brokers)
    }

    fn plan_of(
        &self,
        kind: Option<PipelineKind>,
        brokers: usize,
    ) -> Result<TopicPlan, SettingsError> {
        let values = self.values_of(kind);
        let rf_var = self.source(REPLICATION_FACTOR.setting, kind, |v| v.replication_factor);
        let min_var = self.source(MIN_INSYNC_REPLICAS.setting, kind, |v| v.min_insync_replicas);
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
                .map(|_| self.source(PARTITIONS.setting, kind, |v| v.partitions)),
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
mod tests;
