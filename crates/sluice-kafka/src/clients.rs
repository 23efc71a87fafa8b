//! The plain librdkafka clients other crates need, built from the configurations of
//! [`crate::config`], so no crate outside this adapter constructs a Kafka client by hand
//! and every client gets the `KAFKA_*` properties.

use crate::config::{ConsumerOptions, consumer_config, reader_config};
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use sluice_core::KafkaClientSettings;
use std::time::{Duration, Instant};

/// A reader of [`reader_config`] (no group membership, nothing committed, partition EOF
/// reported) assigned `assignment` by hand: stale-recovery searches and other scans.
pub fn assigned_reader(
    client: &KafkaClientSettings,
    group: &str,
    assignment: &TopicPartitionList,
) -> Result<BaseConsumer, KafkaError> {
    let reader: BaseConsumer = reader_config(client, group).create()?;
    reader.assign(assignment)?;
    Ok(reader)
}

/// A group consumer with manual commits ([`consumer_config`], then the librdkafka
/// properties `tuning`) for an async record loop, subscribed to `topics`.
pub fn subscribed_stream_consumer(
    options: &ConsumerOptions<'_>,
    tuning: &[(&str, &str)],
    topics: &[&str],
) -> Result<StreamConsumer, KafkaError> {
    let mut config = consumer_config(options);
    for (name, value) in tuning {
        config.set(*name, *value);
    }
    let consumer: StreamConsumer = config.create()?;
    consumer.subscribe(topics)?;
    Ok(consumer)
}

/// What [`record_at`] found at an offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordAt {
    /// The record at that very offset, with its timestamp (`None`: it has none).
    Stamped(Option<i64>),
    /// No record there: the first one fetched from it lies further (compacted away, a
    /// transaction's marker or aborted records), or the partition ends before it.
    Elsewhere,
    /// Nothing came within the timeout.
    NotFetched,
}

/// The record at `offset` of `topic`/`partition`, fetched by a reader of its own (nothing
/// committed, the isolation level of every sluice consumer), waiting up to `timeout`.
pub fn record_at(
    client: &KafkaClientSettings,
    (topic, partition, offset): (&str, i32, i64),
    timeout: Duration,
) -> Result<RecordAt, KafkaError> {
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(topic, partition, Offset::Offset(offset))?;
    let reader = assigned_reader(client, "sluice-offset-check", &assignment)?;
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(RecordAt::NotFetched);
        }
        match reader.poll(left) {
            Some(Ok(message)) if message.offset() == offset => {
                return Ok(RecordAt::Stamped(message.timestamp().to_millis()));
            }
            Some(Ok(_)) | Some(Err(KafkaError::PartitionEOF(_))) => return Ok(RecordAt::Elsewhere),
            Some(Err(error)) => return Err(error),
            None => {}
        }
    }
}
