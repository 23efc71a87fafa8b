//! The batch consumer of a storage pipeline: poll up to N records, commit them later.
//!
//! Invariant: this type never commits by itself. `commit` is called by the pipeline with
//! the records of a batch whose database transaction has committed; it commits, per
//! partition, the offset after the highest record of the batch, synchronously.

use crate::config::{ConsumerOptions, consumer_config};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// One consumed record, detached from the client's buffers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// Key bytes, if any.
    pub key: Option<Vec<u8>>,
    /// Value bytes; `None` is a tombstone.
    pub payload: Option<Vec<u8>>,
    /// The record's timestamp in milliseconds since the epoch, if it has one.
    pub timestamp_ms: Option<i64>,
    /// How many times this record was re-published from the dead-letter table (the
    /// [`REPLAY_COUNT_HEADER`] header; 0 when absent, `i32::MAX` when unreadable).
    pub replay_count: i32,
}

/// The header that carries a re-published dead letter's replay count, so that a message
/// that fails again keeps its count and cannot loop forever.
pub const REPLAY_COUNT_HEADER: &str = "sluice-replay-count";

/// The record's replay count; see [`sluice_core::dead_letter::parse_replay_count`] (an
/// unreadable header counts as no replays left).
fn replay_count<M: Message>(message: &M) -> i32 {
    use rdkafka::message::Headers;
    let values = message.headers().into_iter().flat_map(|headers| {
        headers
            .iter()
            .filter(|h| h.key == REPLAY_COUNT_HEADER)
            .map(|h| h.value)
    });
    sluice_core::dead_letter::parse_replay_count(values)
}

/// A subscribed, manual-commit consumer of one topic.
pub struct BatchConsumer {
    consumer: BaseConsumer,
    topic: String,
}

impl std::fmt::Debug for BatchConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchConsumer")
            .field("topic", &self.topic)
            .finish_non_exhaustive()
    }
}

impl BatchConsumer {
    /// Creates the client and subscribes to `topic`.
    pub fn subscribe(options: &ConsumerOptions<'_>, topic: &str) -> Result<Self, KafkaError> {
        let consumer: BaseConsumer = consumer_config(options).create()?;
        consumer.subscribe(&[topic])?;
        Ok(Self {
            consumer,
            topic: topic.to_owned(),
        })
    }

    /// The topic this consumer reads.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Waits up to `timeout` for a first record, then takes what is already fetched, up to
    /// `max` records. Transient client errors (a broker going away) are logged and the
    /// client reconnects by itself; a fatal client error is returned.
    pub fn poll_batch(&self, max: usize, timeout: Duration) -> Result<Vec<Record>, KafkaError> {
        let mut records = Vec::new();
        let deadline = Instant::now() + timeout;
        while records.len() < max {
            let wait = if records.is_empty() {
                deadline.saturating_duration_since(Instant::now())
            } else {
                Duration::ZERO
            };
            match self.consumer.poll(wait) {
                Some(Ok(message)) => records.push(Record {
                    topic: message.topic().to_owned(),
                    partition: message.partition(),
                    offset: message.offset(),
                    key: message.key().map(<[u8]>::to_vec),
                    payload: message.payload().map(<[u8]>::to_vec),
                    timestamp_ms: message.timestamp().to_millis(),
                    replay_count: replay_count(&message),
                }),
                Some(Err(error)) => {
                    // librdkafka reports most poll errors for information and recovers by
                    // itself (a broker restarting); a state retrying cannot fix (a fatal
                    // client, a missing ACL, a refused configuration) ends the pipeline.
                    if crate::error::flags(&error).fatal {
                        return Err(error);
                    }
                    tracing::warn!(topic = %self.topic, %error, "consumer error (the client retries)");
                    if records.is_empty() && Instant::now() >= deadline {
                        break;
                    }
                }
                None => {
                    if !records.is_empty() || Instant::now() >= deadline {
                        break;
                    }
                }
            }
        }
        Ok(records)
    }

    /// Commits, synchronously, the offset after the highest record of each partition that
    /// this consumer still owns. Offsets of partitions revoked since the batch was polled
    /// are left out: their new owner re-reads them (a no-op write), and committing them
    /// could move the new owner's progress backwards.
    pub fn commit(&self, records: &[Record]) -> Result<(), KafkaError> {
        let list = next_offsets(records)?;
        let owned = self.consumer.assignment()?;
        let mut kept = TopicPartitionList::with_capacity(list.count());
        for e in list.elements() {
            if owned.find_partition(e.topic(), e.partition()).is_some() {
                kept.add_partition_offset(e.topic(), e.partition(), e.offset())?;
            }
        }
        if kept.count() < list.count() {
            tracing::info!(topic = %self.topic, skipped = list.count() - kept.count(),
                "not committing offsets of partitions revoked since the batch was polled");
        }
        if kept.count() == 0 {
            return Ok(());
        }
        self.consumer.commit(&kept, CommitMode::Sync)
    }

    /// Leaves the group and closes the client (the broker rebalances at once).
    pub fn close(self) {
        self.consumer.unsubscribe();
        drop(self.consumer);
    }
}

/// Per partition, the offset after the highest record: what a commit stores.
pub fn next_offsets(records: &[Record]) -> Result<TopicPartitionList, KafkaError> {
    let mut highest: BTreeMap<(&str, i32), i64> = BTreeMap::new();
    for r in records {
        let entry = highest
            .entry((r.topic.as_str(), r.partition))
            .or_insert(r.offset);
        *entry = (*entry).max(r.offset);
    }
    let mut list = TopicPartitionList::with_capacity(highest.len());
    for ((topic, partition), offset) in highest {
        list.add_partition_offset(topic, partition, Offset::Offset(offset + 1))?;
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(partition: i32, offset: i64) -> Record {
        Record {
            topic: "t".into(),
            partition,
            offset,
            key: None,
            payload: None,
            timestamp_ms: None,
            replay_count: 0,
        }
    }

    #[test]
    fn commits_the_offset_after_the_highest_record_per_partition() {
        let list = next_offsets(&[record(0, 5), record(1, 2), record(0, 7), record(0, 6)]).unwrap();
        let offsets: Vec<(i32, Offset)> = list
            .elements()
            .iter()
            .map(|e| (e.partition(), e.offset()))
            .collect();
        assert_eq!(
            offsets,
            vec![(0, Offset::Offset(8)), (1, Offset::Offset(3))]
        );
        assert_eq!(next_offsets(&[]).unwrap().count(), 0);
    }
}
