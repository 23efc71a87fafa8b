//! Durability of the storage topics: partitions, replication factor, `min.insync.replicas`
//! and retention, from `STORAGE_TOPIC_*` settings.
//!
//! The rule this module keeps: a topic that `sluice topics ensure` creates on a cluster of
//! three or more brokers survives the loss of one broker without losing an acknowledged
//! record (replication factor 3, `min.insync.replicas` 2, acks=all). A smaller cluster gets
//! what it can hold, and the plan says so.

use crate::settings::{EnvReader, SettingsError};

/// The replication factor a durable topic wants.
pub const DURABLE_REPLICATION_FACTOR: i16 = 3;
/// The `min.insync.replicas` a durable topic wants.
pub const DURABLE_MIN_INSYNC_REPLICAS: i32 = 2;
/// Default partitions of a storage topic.
pub const DEFAULT_PARTITIONS: i32 = 3;

/// Raw, validated topic settings; the broker count fills in the defaults ([`Self::plan`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicSettings {
    /// `STORAGE_TOPIC_PARTITIONS` (default 3).
    pub partitions: i32,
    /// `STORAGE_TOPIC_REPLICATION_FACTOR`; `None`: 3, or the broker count when smaller.
    pub replication_factor: Option<i16>,
    /// `STORAGE_TOPIC_MIN_INSYNC_REPLICAS`; `None`: min(2, replication factor).
    pub min_insync_replicas: Option<i32>,
    /// `STORAGE_TOPIC_RETENTION_MS` (-1: keep forever); `None`: the broker's default.
    pub retention_ms: Option<i64>,
}

impl Default for TopicSettings {
    fn default() -> Self {
        Self {
            partitions: DEFAULT_PARTITIONS,
            replication_factor: None,
            min_insync_replicas: None,
            retention_ms: None,
        }
    }
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
}

impl TopicSettings {
    /// Reads the `STORAGE_TOPIC_*` durability settings; empty values count as unset.
    pub fn from_lookup(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Self, SettingsError> {
        let env = EnvReader::new(lookup);
        let partitions = env
            .parse::<i32>(
                "STORAGE_TOPIC_PARTITIONS",
                |n| (1..=10_000).contains(n),
                "a whole number 1-10000 (default 3)",
            )?
            .unwrap_or(DEFAULT_PARTITIONS);
        let replication_factor = env.parse::<i16>(
            "STORAGE_TOPIC_REPLICATION_FACTOR",
            |n| (1..=32).contains(n),
            "a whole number 1-32 (default 3, or the broker count when smaller)",
        )?;
        let min_insync_replicas = env.parse::<i32>(
            "STORAGE_TOPIC_MIN_INSYNC_REPLICAS",
            |n| (1..=32).contains(n),
            "a whole number 1-32 (default min(2, replication factor))",
        )?;
        let retention_ms = env.parse::<i64>(
            "STORAGE_TOPIC_RETENTION_MS",
            |n| *n == -1 || *n > 0,
            "milliseconds > 0, or -1 to keep forever (default: the broker's)",
        )?;
        if let (Some(rf), Some(min)) = (replication_factor, min_insync_replicas)
            && min > i32::from(rf)
        {
            return Err(SettingsError::MinInsyncAboveReplicationFactor {
                min_insync_replicas: min,
                replication_factor: rf,
                explicit: true,
            });
        }
        Ok(Self {
            partitions,
            replication_factor,
            min_insync_replicas,
            retention_ms,
        })
    }

    /// The plan for a cluster of `brokers` brokers: the defaults filled in, a replication
    /// factor the cluster can hold.
    pub fn plan(&self, brokers: usize) -> Result<TopicPlan, SettingsError> {
        let available = i16::try_from(brokers).unwrap_or(i16::MAX).max(1);
        let (replication_factor, reduced) = match self.replication_factor {
            Some(rf) if rf > available => {
                return Err(SettingsError::ReplicationFactorAboveBrokers {
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
        let min_insync_replicas = match self.min_insync_replicas {
            Some(min) if min > i32::from(replication_factor) => {
                return Err(SettingsError::MinInsyncAboveReplicationFactor {
                    min_insync_replicas: min,
                    replication_factor,
                    explicit: false,
                });
            }
            Some(min) => min,
            None => DURABLE_MIN_INSYNC_REPLICAS.min(i32::from(replication_factor)),
        };
        Ok(TopicPlan {
            partitions: self.partitions,
            replication_factor,
            min_insync_replicas,
            retention_ms: self.retention_ms,
            reduced,
        })
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
        TopicSettings::from_lookup(&|name| map.get(name).cloned())
    }

    #[test]
    fn defaults_follow_the_cluster_size() {
        let s = parse(&[]).unwrap();
        assert_eq!(s, TopicSettings::default());
        let three = s.plan(3).unwrap();
        assert_eq!(
            (
                three.partitions,
                three.replication_factor,
                three.min_insync_replicas
            ),
            (3, 3, 2)
        );
        assert_eq!((three.retention_ms, three.reduced), (None, None));
        assert_eq!(s.plan(5).unwrap().replication_factor, 3);
        let one = s.plan(1).unwrap();
        assert_eq!((one.replication_factor, one.min_insync_replicas), (1, 1));
        assert!(one.reduced.unwrap().contains("1 broker"), "says why");
        let two = s.plan(2).unwrap();
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
        let plan = s.plan(3).unwrap();
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
        assert_eq!(s.plan(3).unwrap().min_insync_replicas, 2);
        let err = s.plan(1).unwrap_err();
        assert_eq!(err.variable(), "STORAGE_TOPIC_MIN_INSYNC_REPLICAS");
        // A replication factor the cluster cannot hold.
        let s = parse(&[("STORAGE_TOPIC_REPLICATION_FACTOR", "3")]).unwrap();
        assert_eq!(
            s.plan(1).unwrap_err().variable(),
            "STORAGE_TOPIC_REPLICATION_FACTOR"
        );
    }
}
