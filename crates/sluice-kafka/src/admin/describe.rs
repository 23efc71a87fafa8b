//! `sluice topics describe`: a topic's partitions (leader, replicas, in-sync replicas) and the
//! configs that decide its durability and retention, read from the cluster's metadata and
//! DescribeConfigs.

use super::durable::{MIN_INSYNC_REPLICAS, RETENTION_MS, UNCLEAN_LEADER_ELECTION};
use super::{Admin, existing_topic};
use rdkafka::admin::{ConfigSource, ResourceSpecifier};
use rdkafka::error::KafkaError;

/// `cleanup.policy`.
pub const CLEANUP_POLICY: &str = "cleanup.policy";

/// The configs `describe` reports, in this order.
pub const DESCRIBED_CONFIGS: [&str; 4] = [
    RETENTION_MS,
    MIN_INSYNC_REPLICAS,
    CLEANUP_POLICY,
    UNCLEAN_LEADER_ELECTION,
];

/// One partition of a described topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionDetail {
    /// Partition number.
    pub partition: i32,
    /// Broker id of the leader (`None`: no leader right now).
    pub leader: Option<i32>,
    /// Broker ids of the replicas.
    pub replicas: Vec<i32>,
    /// Broker ids of the in-sync replicas.
    pub isr: Vec<i32>,
}

/// One config value of a described topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigDetail {
    /// Config name.
    pub name: &'static str,
    /// Effective value (`None`: the broker did not report one).
    pub value: Option<String>,
    /// Where it comes from: `topic` (set on the topic), `broker` (a broker setting) or
    /// `default` (Kafka's built-in default).
    pub source: &'static str,
}

/// A topic as `sluice topics describe` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicDetail {
    /// Partitions, by number.
    pub partitions: Vec<PartitionDetail>,
    /// The configs of [`DESCRIBED_CONFIGS`], in that order.
    pub configs: Vec<ConfigDetail>,
}

impl TopicDetail {
    /// The smallest replica count over the partitions.
    pub fn replication_factor(&self) -> usize {
        self.partitions
            .iter()
            .map(|p| p.replicas.len())
            .min()
            .unwrap_or(0)
    }

    /// Partitions whose in-sync replicas are fewer than their replicas.
    pub fn under_replicated(&self) -> usize {
        self.partitions
            .iter()
            .filter(|p| p.isr.len() < p.replicas.len())
            .count()
    }
}

/// The word for where a config value comes from.
fn source_name(source: ConfigSource) -> &'static str {
    match source {
        ConfigSource::DynamicTopic => "topic",
        ConfigSource::DynamicBroker
        | ConfigSource::DynamicDefaultBroker
        | ConfigSource::StaticBroker => "broker",
        ConfigSource::Default => "default",
        ConfigSource::Unknown => "unknown",
    }
}

impl Admin {
    /// The topic's partitions and configs, or `None` if it does not exist.
    pub async fn describe_topic_detail(
        &self,
        topic: &str,
    ) -> Result<Option<TopicDetail>, KafkaError> {
        let metadata = self.fetch_metadata(topic)?;
        let Some(found) = existing_topic(&metadata, topic)? else {
            return Ok(None);
        };
        let mut partitions: Vec<PartitionDetail> = found
            .partitions()
            .iter()
            .map(|p| PartitionDetail {
                partition: p.id(),
                leader: (p.leader() >= 0).then_some(p.leader()),
                replicas: p.replicas().to_vec(),
                isr: p.isr().to_vec(),
            })
            .collect();
        partitions.sort_by_key(|p| p.partition);
        let results = self
            .admin
            .describe_configs([&ResourceSpecifier::Topic(topic)], &self.options())
            .await?;
        let mut configs: Vec<ConfigDetail> = DESCRIBED_CONFIGS
            .iter()
            .map(|name| ConfigDetail {
                name,
                value: None,
                source: "unknown",
            })
            .collect();
        for result in results {
            let resource = result.map_err(KafkaError::AdminOp)?;
            for entry in resource.entries {
                if let Some(config) = configs.iter_mut().find(|c| c.name == entry.name) {
                    config.value = entry.value;
                    config.source = source_name(entry.source);
                }
            }
        }
        Ok(Some(TopicDetail {
            partitions,
            configs,
        }))
    }
}

/// `message.timestamp.type`.
const TIMESTAMP_TYPE: &str = "message.timestamp.type";
/// `message.timestamp.after.max.ms` (Kafka 3.6+).
const TIMESTAMP_AFTER_MAX: &str = "message.timestamp.after.max.ms";
/// A lead longer than this bounds nothing useful: treated as unbounded.
const LONGEST_USEFUL_LEAD: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);

impl Admin {
    /// How far ahead of its append a record's timestamp may be in `topic`: zero when the
    /// broker stamps the records (`LogAppendTime`), the topic's
    /// `message.timestamp.after.max.ms` when producers do (brokers refuse a record stamped
    /// further ahead); `None` when that is unbounded (a cluster before 3.6, or longer than
    /// a week) or the topic does not say.
    pub async fn timestamp_lead(
        &self,
        topic: &str,
    ) -> Result<Option<std::time::Duration>, KafkaError> {
        let results = self
            .admin
            .describe_configs([&ResourceSpecifier::Topic(topic)], &self.options())
            .await?;
        let (mut kind, mut after_max) = (None, None);
        for result in results {
            let resource = result.map_err(KafkaError::AdminOp)?;
            for entry in resource.entries {
                match entry.name.as_str() {
                    TIMESTAMP_TYPE => kind = entry.value,
                    TIMESTAMP_AFTER_MAX => after_max = entry.value,
                    _ => {}
                }
            }
        }
        Ok(timestamp_lead_of(kind.as_deref(), after_max.as_deref()))
    }
}

/// [`Admin::timestamp_lead`] from the two configs' values.
fn timestamp_lead_of(kind: Option<&str>, after_max: Option<&str>) -> Option<std::time::Duration> {
    if kind == Some("LogAppendTime") {
        return Some(std::time::Duration::ZERO);
    }
    let ms: u64 = after_max?.parse().ok()?;
    let lead = std::time::Duration::from_millis(ms);
    (lead <= LONGEST_USEFUL_LEAD).then_some(lead)
}

#[cfg(test)]
mod lead_tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_lead_is_zero_for_broker_stamps_and_the_limit_for_producer_stamps() {
        assert_eq!(
            timestamp_lead_of(Some("LogAppendTime"), Some("9223372036854775807")),
            Some(Duration::ZERO)
        );
        assert_eq!(
            timestamp_lead_of(Some("CreateTime"), Some("3600000")),
            Some(Duration::from_secs(3600))
        );
        assert_eq!(
            timestamp_lead_of(Some("CreateTime"), Some("9223372036854775807")),
            None,
            "Kafka 3.x's default bounds nothing"
        );
        assert_eq!(timestamp_lead_of(Some("CreateTime"), None), None);
        assert_eq!(timestamp_lead_of(None, Some("not a number")), None);
    }
}
