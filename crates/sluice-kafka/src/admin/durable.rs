//! Durable topics: replication factor, `min.insync.replicas` and retention set from a
//! [`TopicPlan`], and read back for `sluice verify`.
//!
//! An existing topic's replication factor is never changed here (that is a partition
//! reassignment, an operator's decision); a mismatch is reported as a warning.

use super::{Admin, existing_topic};
use rdkafka::admin::{AlterConfig, ConfigSource, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::consumer::Consumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use sluice_core::TopicPlan;
use std::collections::BTreeMap;
use std::time::Duration;

/// `min.insync.replicas`.
pub const MIN_INSYNC_REPLICAS: &str = "min.insync.replicas";
/// `retention.ms`.
pub const RETENTION_MS: &str = "retention.ms";
/// `unclean.leader.election.enable`.
pub const UNCLEAN_LEADER_ELECTION: &str = "unclean.leader.election.enable";

/// A topic as the cluster describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicState {
    /// Partition count.
    pub partitions: i32,
    /// The smallest replica count over its partitions.
    pub replication_factor: i16,
    /// Effective `min.insync.replicas`.
    pub min_insync_replicas: Option<i32>,
    /// Effective `retention.ms`.
    pub retention_ms: Option<i64>,
    /// Effective `unclean.leader.election.enable`.
    pub unclean_leader_election: bool,
    /// The configs set on the topic itself (not inherited from the broker).
    pub overrides: BTreeMap<String, String>,
}

/// One topic config `ensure_durable_topic` set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigChange {
    /// Config name.
    pub name: &'static str,
    /// Effective value before (`None`: unknown).
    pub from: Option<String>,
    /// Value now.
    pub to: String,
}

/// What `ensure_durable_topic` found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicReport {
    /// Whether it created the topic.
    pub created: bool,
    /// Partitions before (equal to `partitions` when created or unchanged).
    pub partitions_before: i32,
    /// Partitions now.
    pub partitions: i32,
    /// Replication factor now.
    pub replication_factor: i16,
    /// Configs changed on an existing topic.
    pub changed: Vec<ConfigChange>,
    /// The existing topic's replication factor differs from the plan's (not changed).
    pub replication_warning: Option<String>,
}

impl Admin {
    /// How many brokers the cluster has.
    pub fn broker_count(&self) -> Result<usize, KafkaError> {
        let metadata = self
            .metadata
            .fetch_metadata(None, self.timeout)
            .map_err(|e| self.explain(e))?;
        Ok(metadata.brokers().len())
    }

    /// The topic's partitions, replication and configs, or `None` if it does not exist.
    pub async fn describe_topic(&self, topic: &str) -> Result<Option<TopicState>, KafkaError> {
        let metadata = self.fetch_metadata(topic)?;
        let Some(found) = existing_topic(&metadata, topic)? else {
            return Ok(None);
        };
        let partitions = i32::try_from(found.partitions().len()).unwrap_or(i32::MAX);
        let replication_factor = found
            .partitions()
            .iter()
            .map(|p| i16::try_from(p.replicas().len()).unwrap_or(i16::MAX))
            .min()
            .unwrap_or(0);
        let results = self
            .admin
            .describe_configs([&ResourceSpecifier::Topic(topic)], &self.options())
            .await?;
        let mut effective = BTreeMap::new();
        let mut overrides = BTreeMap::new();
        for result in results {
            let resource = result.map_err(KafkaError::AdminOp)?;
            for entry in resource.entries {
                let Some(value) = entry.value else { continue };
                if entry.source == ConfigSource::DynamicTopic && !entry.is_sensitive {
                    overrides.insert(entry.name.clone(), value.clone());
                }
                effective.insert(entry.name, value);
            }
        }
        Ok(Some(TopicState {
            partitions,
            replication_factor,
            min_insync_replicas: effective
                .get(MIN_INSYNC_REPLICAS)
                .and_then(|v| v.parse().ok()),
            retention_ms: effective.get(RETENTION_MS).and_then(|v| v.parse().ok()),
            unclean_leader_election: effective
                .get(UNCLEAN_LEADER_ELECTION)
                .is_some_and(|v| v == "true"),
            overrides,
        }))
    }

    /// Creates the topic as `plan` says, or brings an existing one to it: grows its
    /// partitions and sets `min.insync.replicas` and `retention.ms`; idempotent.
    pub async fn ensure_durable_topic(
        &self,
        topic: &str,
        plan: &TopicPlan,
    ) -> Result<TopicReport, KafkaError> {
        if self.describe_topic(topic).await?.is_none() && self.create(topic, plan).await? {
            self.wait_visible(topic, plan.partitions)?;
            return Ok(TopicReport {
                created: true,
                partitions_before: plan.partitions,
                partitions: plan.partitions,
                replication_factor: plan.replication_factor,
                changed: Vec::new(),
                replication_warning: None,
            });
        }
        // It exists (or another starter created it meanwhile).
        let Some(state) = self.describe_topic(topic).await? else {
            return Err(KafkaError::MetadataFetch(
                RDKafkaErrorCode::UnknownTopicOrPartition,
            ));
        };
        let partitions = state.partitions.max(plan.partitions);
        if state.partitions < plan.partitions {
            self.grow_topic(topic, plan.partitions).await?;
        }
        let mut changed = Vec::new();
        if state.min_insync_replicas != Some(plan.min_insync_replicas) {
            changed.push(ConfigChange {
                name: MIN_INSYNC_REPLICAS,
                from: state.min_insync_replicas.map(|v| v.to_string()),
                to: plan.min_insync_replicas.to_string(),
            });
        }
        if let Some(retention) = plan.retention_ms
            && state.retention_ms != Some(retention)
        {
            changed.push(ConfigChange {
                name: RETENTION_MS,
                from: state.retention_ms.map(|v| v.to_string()),
                to: retention.to_string(),
            });
        }
        if !changed.is_empty() {
            self.set_configs(topic, &state.overrides, &changed).await?;
        }
        let replication_warning =
            (state.replication_factor != plan.replication_factor).then(|| {
                format!(
                    "replication factor is {}, the settings want {} (this command does not \
                     reassign replicas; use kafka-reassign-partitions)",
                    state.replication_factor, plan.replication_factor
                )
            });
        Ok(TopicReport {
            created: false,
            partitions_before: state.partitions,
            partitions,
            replication_factor: state.replication_factor,
            changed,
            replication_warning,
        })
    }

    /// CreateTopics with the plan; `false` when another starter created it first.
    async fn create(&self, topic: &str, plan: &TopicPlan) -> Result<bool, KafkaError> {
        let min_insync = plan.min_insync_replicas.to_string();
        let retention = plan.retention_ms.map(|v| v.to_string());
        let mut new = NewTopic::new(
            topic,
            plan.partitions,
            TopicReplication::Fixed(i32::from(plan.replication_factor)),
        )
        .set(MIN_INSYNC_REPLICAS, &min_insync);
        if let Some(retention) = &retention {
            new = new.set(RETENTION_MS, retention);
        }
        for result in self.admin.create_topics([&new], &self.options()).await? {
            match result {
                Ok(_) => {}
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => return Ok(false),
                Err((_, code)) => return Err(KafkaError::AdminOp(code)),
            }
        }
        Ok(true)
    }

    /// AlterConfigs replaces every config set on the topic, so the request carries the
    /// topic's current overrides with the changes on top (librdkafka's incremental variant
    /// is not exposed by rdkafka).
    async fn set_configs(
        &self,
        topic: &str,
        overrides: &BTreeMap<String, String>,
        changes: &[ConfigChange],
    ) -> Result<(), KafkaError> {
        let mut alter = AlterConfig::new(ResourceSpecifier::Topic(topic));
        for (name, value) in overrides {
            alter = alter.set(name, value);
        }
        for change in changes {
            alter = alter.set(change.name, &change.to);
        }
        for result in self.admin.alter_configs([&alter], &self.options()).await? {
            if let Err((_, code)) = result {
                return Err(KafkaError::AdminOp(code));
            }
        }
        Ok(())
    }

    /// Metadata may lag a creation for a moment; waits (≤ 5 s) until the topic is visible.
    fn wait_visible(&self, topic: &str, partitions: i32) -> Result<(), KafkaError> {
        for _ in 0..50 {
            if self
                .partition_count(topic)?
                .is_some_and(|n| n >= partitions)
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }
}
