//! Topic and group administration: ensure topics, partition counts, offsets, members.

use crate::config::{admin_config, group_offsets_config};
use crate::context::ErrorMemory;
use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions, NewTopic, TopicReplication};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::metadata::{Metadata, MetadataTopic};
use rdkafka::{Offset, TopicPartitionList};
use sluice_core::KafkaClientSettings;
use sluice_core::topics::Topics;
use std::time::Duration;

mod describe;
mod durable;
pub use describe::{ConfigDetail, DESCRIBED_CONFIGS, PartitionDetail, TopicDetail};
pub use durable::{ConfigChange, TopicReport, TopicState};

/// What `ensure_topic` found or did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicChange {
    /// The topic was created with the requested partitions.
    Created(i32),
    /// The topic existed with at least the requested partitions.
    Unchanged(i32),
    /// The topic existed with fewer partitions and was grown (partitions never shrink).
    Grown {
        /// Partitions before.
        from: i32,
        /// Partitions after.
        to: i32,
    },
}

/// Offsets of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionOffsets {
    /// Partition number.
    pub partition: i32,
    /// Low watermark: the oldest retained offset.
    pub low: i64,
    /// High watermark: the offset the next record will get.
    pub high: i64,
}

impl PartitionOffsets {
    /// Records the partition retains (high minus low watermark).
    pub fn records(&self) -> i64 {
        self.high - self.low
    }
}

/// Where a consumer group stands in one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupOffsets {
    /// Partition number.
    pub partition: i32,
    /// Low watermark: the oldest retained offset.
    pub low: i64,
    /// High watermark: the offset the next record will get.
    pub high: i64,
    /// The group's committed offset (`None`: nothing committed yet).
    pub committed: Option<i64>,
}

impl GroupOffsets {
    /// The offset the group reads next: its committed offset, or the low watermark when it
    /// committed nothing or its offset is no longer retained (as a new group with
    /// `earliest` would start).
    pub fn next(&self) -> i64 {
        self.committed.unwrap_or(self.low).max(self.low)
    }

    /// Records the group has not committed yet; never negative (a committed offset past the
    /// end, as after a topic was re-created, means nothing is waiting).
    pub fn lag(&self) -> i64 {
        (self.high - self.next()).max(0)
    }
}

/// One member of a consumer group, as the group coordinator lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMember {
    /// The coordinator's member id: `<group.instance.id>-<uuid>` for a static member,
    /// `<client.id>-<uuid>` for a dynamic one.
    pub member_id: String,
    /// The member's `client.id`.
    pub client_id: String,
    /// The member's host as the broker saw it.
    pub host: String,
}

impl GroupMember {
    /// The member's `group.instance.id`, when it is a static member: the member id less
    /// its generated `-<uuid>` suffix, unless that is just the client id.
    pub fn instance_id(&self) -> Option<&str> {
        let cut = self.member_id.len().checked_sub(37)?;
        let (prefix, suffix) = (self.member_id.get(..cut)?, self.member_id.get(cut..)?);
        let uuid_like = suffix.starts_with('-')
            && suffix[1..]
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == '-');
        (uuid_like && !prefix.is_empty() && prefix != self.client_id).then_some(prefix)
    }
}

/// An admin client plus a metadata client.
pub struct Admin {
    admin: AdminClient<ErrorMemory>,
    metadata: BaseConsumer<ErrorMemory>,
    errors: ErrorMemory,
    client: KafkaClientSettings,
    timeout: Duration,
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin")
            .field("bootstrap_servers", &self.client.bootstrap_servers)
            .finish()
    }
}

impl Admin {
    /// Connects lazily to the cluster; calls time out after `timeout`.
    pub fn new(client: &KafkaClientSettings, timeout: Duration) -> Result<Self, KafkaError> {
        let config = admin_config(client);
        let errors = ErrorMemory::default();
        Ok(Self {
            admin: config.create_with_context(errors.clone())?,
            metadata: config.create_with_context(errors.clone())?,
            errors,
            client: client.clone(),
            timeout,
        })
    }

    /// A failed call's error, or the authentication or TLS failure behind it: librdkafka
    /// queues its logs and errors as events, which only a poll hands to the context.
    fn explain(&self, error: KafkaError) -> KafkaError {
        for _ in 0..1000 {
            if self.metadata.poll(Duration::ZERO).is_none() {
                break;
            }
        }
        self.errors.explain(error)
    }

    /// Metadata of `topic`, asked in slices of a second so that an authentication or TLS
    /// failure ends the call at once instead of after the whole timeout.
    fn fetch_metadata(&self, topic: &str) -> Result<Metadata, KafkaError> {
        let deadline = std::time::Instant::now() + self.timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let slice = left.min(Duration::from_secs(1));
            match self.metadata.fetch_metadata(Some(topic), slice) {
                Ok(metadata) => return Ok(metadata),
                Err(error) => {
                    let error = self.explain(error);
                    if left <= slice || matches!(error, KafkaError::Global(_)) {
                        return Err(error);
                    }
                }
            }
        }
    }

    fn options(&self) -> AdminOptions {
        AdminOptions::new()
            .request_timeout(Some(self.timeout))
            .operation_timeout(Some(self.timeout))
    }

    /// The topics `topics` covers now: the named ones (whether or not they exist), or the
    /// cluster's topics matching the pattern.
    pub fn topics_of(&self, topics: &Topics) -> Result<Vec<String>, KafkaError> {
        if !topics.is_pattern() {
            return Ok(topics.select([]));
        }
        let metadata = self
            .metadata
            .fetch_metadata(None, self.timeout)
            .map_err(|e| self.explain(e))?;
        Ok(topics.select(
            metadata
                .topics()
                .iter()
                .filter(|t| t.error().is_none())
                .map(MetadataTopic::name),
        ))
    }

    /// The topic's partition count, or `None` if it does not exist.
    pub fn partition_count(&self, topic: &str) -> Result<Option<i32>, KafkaError> {
        let metadata = self.fetch_metadata(topic)?;
        Ok(existing_topic(&metadata, topic)?
            .map(|found| i32::try_from(found.partitions().len()).unwrap_or(i32::MAX)))
    }

    /// Creates the topic with `partitions` partitions, or grows it to that many; idempotent.
    pub async fn ensure_topic(
        &self,
        topic: &str,
        partitions: i32,
    ) -> Result<TopicChange, KafkaError> {
        match self.partition_count(topic)? {
            Some(n) if n >= partitions => return Ok(TopicChange::Unchanged(n)),
            Some(n) => {
                self.grow_topic(topic, partitions).await?;
                return Ok(TopicChange::Grown {
                    from: n,
                    to: partitions,
                });
            }
            None => {}
        }
        let count = partitions.max(1);
        let new = NewTopic::new(topic, count, TopicReplication::Fixed(1));
        let results = self.admin.create_topics([&new], &self.options()).await?;
        for result in results {
            match result {
                Ok(_) => {}
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {
                    // Another starter won the race; check what it made.
                    let n = self.partition_count(topic)?.unwrap_or(0);
                    if n < partitions {
                        self.grow_topic(topic, partitions).await?;
                        return Ok(TopicChange::Grown {
                            from: n,
                            to: partitions,
                        });
                    }
                    return Ok(TopicChange::Unchanged(n));
                }
                Err((_, code)) => return Err(KafkaError::AdminOp(code)),
            }
        }
        // Metadata may lag the creation for a moment; wait until the topic is visible.
        for _ in 0..50 {
            if self.partition_count(topic)?.is_some_and(|n| n >= count) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(TopicChange::Created(count))
    }

    /// Grows a topic to `partitions` partitions (CreatePartitions).
    pub async fn grow_topic(&self, topic: &str, partitions: i32) -> Result<(), KafkaError> {
        let total = usize::try_from(partitions).unwrap_or(0);
        let request = NewPartitions::new(topic, total);
        for result in self
            .admin
            .create_partitions([&request], &self.options())
            .await?
        {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::InvalidPartitions)) => {}
                Err((_, code)) => return Err(KafkaError::AdminOp(code)),
            }
        }
        Ok(())
    }

    /// Deletes a topic (tests and the demo's reset).
    pub async fn delete_topic(&self, topic: &str) -> Result<(), KafkaError> {
        for result in self.admin.delete_topics(&[topic], &self.options()).await? {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::UnknownTopicOrPartition)) => {}
                Err((_, code)) => return Err(KafkaError::AdminOp(code)),
            }
        }
        Ok(())
    }

    /// Low and high watermarks of every partition of a topic.
    pub fn watermarks(&self, topic: &str) -> Result<Vec<PartitionOffsets>, KafkaError> {
        let Some(count) = self.partition_count(topic)? else {
            return Err(KafkaError::MetadataFetch(
                RDKafkaErrorCode::UnknownTopicOrPartition,
            ));
        };
        (0..count)
            .map(|partition| {
                let (low, high) = self
                    .metadata
                    .fetch_watermarks(topic, partition, self.timeout)?;
                Ok(PartitionOffsets {
                    partition,
                    low,
                    high,
                })
            })
            .collect()
    }

    /// A group's committed offset per partition of a topic (`None`: nothing committed).
    pub fn committed_offsets(
        &self,
        group: &str,
        topic: &str,
    ) -> Result<Vec<(i32, Option<i64>)>, KafkaError> {
        let Some(count) = self.partition_count(topic)? else {
            return Err(KafkaError::MetadataFetch(
                RDKafkaErrorCode::UnknownTopicOrPartition,
            ));
        };
        Ok(self
            .committed_offsets_of(group, &[(topic.to_owned(), count)])?
            .into_iter()
            .map(|(_, partition, offset)| (partition, offset))
            .collect())
    }

    /// A group's committed offset per partition of each of `topics` (with its partition
    /// count), in one request through one client: a pattern's tens of topics cost one
    /// coordinator lookup, not one each.
    pub fn committed_offsets_of(
        &self,
        group: &str,
        topics: &[(String, i32)],
    ) -> Result<Vec<(String, i32, Option<i64>)>, KafkaError> {
        if topics.is_empty() {
            return Ok(Vec::new());
        }
        let reader: BaseConsumer = group_offsets_config(&self.client, group).create()?;
        let mut list = TopicPartitionList::new();
        for (topic, count) in topics {
            for partition in 0..*count {
                list.add_partition(topic, partition);
            }
        }
        let committed = reader.committed_offsets(list, self.timeout)?;
        // A partition the broker could not answer for is not one without an offset: taken
        // so, it would start where the reset policy says (records skipped or read again).
        for element in committed.elements() {
            element.error()?;
        }
        Ok(committed
            .elements()
            .iter()
            .map(|e| {
                let offset = match e.offset() {
                    Offset::Offset(o) => Some(o),
                    _ => None,
                };
                (e.topic().to_owned(), e.partition(), offset)
            })
            .collect())
    }

    /// Per partition of `topic`: its watermarks and `group`'s committed offset.
    pub fn group_offsets(&self, group: &str, topic: &str) -> Result<Vec<GroupOffsets>, KafkaError> {
        let committed = self.committed_offsets(group, topic)?;
        Ok(self
            .watermarks(topic)?
            .iter()
            .map(|mark| GroupOffsets {
                partition: mark.partition,
                low: mark.low,
                high: mark.high,
                committed: committed
                    .iter()
                    .find(|(p, _)| *p == mark.partition)
                    .and_then(|(_, o)| *o),
            })
            .collect())
    }

    /// Per partition, the earliest offset whose timestamp is at or after `timestamp_ms`
    /// (the end offset when there is none).
    pub fn offsets_for_time(
        &self,
        topic: &str,
        timestamp_ms: i64,
    ) -> Result<Vec<(i32, i64)>, KafkaError> {
        let marks = self.watermarks(topic)?;
        let mut list = TopicPartitionList::new();
        for mark in &marks {
            list.add_partition_offset(topic, mark.partition, Offset::Offset(timestamp_ms))?;
        }
        let found = self.metadata.offsets_for_times(list, self.timeout)?;
        Ok(marks
            .iter()
            .map(|mark| {
                let offset = found
                    .find_partition(topic, mark.partition)
                    .and_then(|e| match e.offset() {
                        Offset::Offset(o) => Some(o),
                        _ => None,
                    })
                    .unwrap_or(mark.high);
                (mark.partition, offset)
            })
            .collect())
    }

    /// Commits offsets for a group that has no active members (a reset): one entry per
    /// partition. Kafka refuses the commit while the group has members.
    pub fn commit_group_offsets(
        &self,
        group: &str,
        topic: &str,
        offsets: &[(i32, i64)],
    ) -> Result<(), KafkaError> {
        let writer: BaseConsumer = group_offsets_config(&self.client, group).create()?;
        let mut list = TopicPartitionList::new();
        for (partition, offset) in offsets {
            list.add_partition_offset(topic, *partition, Offset::Offset(*offset))?;
        }
        writer.commit(&list, rdkafka::consumer::CommitMode::Sync)
    }

    /// The members of a consumer group right now (none for an empty or unknown group).
    pub fn group_member_list(&self, group: &str) -> Result<Vec<GroupMember>, KafkaError> {
        let groups = self
            .metadata
            .fetch_group_list(Some(group), self.timeout)
            .map_err(|e| self.explain(e))?;
        Ok(groups
            .groups()
            .iter()
            .filter(|g| g.name() == group)
            .flat_map(|g| g.members())
            .map(|m| GroupMember {
                member_id: m.id().to_owned(),
                client_id: m.client_id().to_owned(),
                host: m.client_host().to_owned(),
            })
            .collect())
    }

    /// How many members a consumer group has right now (0 for an empty or unknown group).
    pub fn group_members(&self, group: &str) -> Result<usize, KafkaError> {
        let groups = self
            .metadata
            .fetch_group_list(Some(group), self.timeout)
            .map_err(|e| self.explain(e))?;
        Ok(groups
            .groups()
            .iter()
            .filter(|g| g.name() == group)
            .map(|g| g.members().len())
            .sum())
    }
}

/// The metadata's entry for `topic`, or `None` when the topic does not exist (absent, or
/// reported unknown); another error the broker reports for the topic is an error.
fn existing_topic<'m>(
    metadata: &'m Metadata,
    topic: &str,
) -> Result<Option<&'m MetadataTopic>, KafkaError> {
    let Some(found) = metadata.topics().iter().find(|t| t.name() == topic) else {
        return Ok(None);
    };
    match found.error() {
        None => Ok(Some(found)),
        Some(code) if RDKafkaErrorCode::from(code) == RDKafkaErrorCode::UnknownTopicOrPartition => {
            Ok(None)
        }
        Some(code) => Err(KafkaError::MetadataFetch(code.into())),
    }
}

#[cfg(test)]
mod tests {
    use super::GroupOffsets;

    #[test]
    fn a_group_reads_next_from_its_commit_or_the_oldest_retained_record() {
        let at = |committed| GroupOffsets {
            partition: 0,
            low: 10,
            high: 50,
            committed,
        };
        // (committed, next, lag)
        for (committed, next, lag) in [
            (None, 10, 40),     // never committed: from the low watermark
            (Some(30), 30, 20), // the usual case
            (Some(4), 10, 40),  // its offset was deleted by retention
            (Some(50), 50, 0),  // caught up
            (Some(70), 70, 0),  // past the end (a re-created topic): nothing waits
        ] {
            assert_eq!(
                (at(committed).next(), at(committed).lag()),
                (next, lag),
                "{committed:?}"
            );
        }
    }

    #[test]
    fn a_static_member_shows_its_instance_id() {
        let member = |id: &str| super::GroupMember {
            member_id: id.to_owned(),
            client_id: "sluice-reviews-42".to_owned(),
            host: "/127.0.0.1".to_owned(),
        };
        let uuid = "0b5c2a4e-8f7d-4c1e-9a3b-2d6f1e0c9b8a";
        assert_eq!(
            member(&format!("host-a-reviews-{uuid}")).instance_id(),
            Some("host-a-reviews")
        );
        assert_eq!(
            member(&format!("sluice-reviews-42-{uuid}")).instance_id(),
            None
        );
        assert_eq!(member("short").instance_id(), None);
    }
}
