//! The plain librdkafka clients other crates need, built from the configurations of
//! [`crate::config`], so no crate outside this adapter constructs a Kafka client by hand
//! and every client gets the `KAFKA_*` properties.

use crate::config::{ConsumerOptions, consumer_config, reader_config};
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use sluice_core::KafkaClientSettings;
use std::collections::HashMap;
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

/// What [`records_at`] found at an offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordAt {
    /// The record at that very offset, with its timestamp (`None`: it has none).
    Stamped(Option<i64>),
    /// No record there, but further on: compacted away, or removed by retention with the
    /// records before it.
    Later,
    /// No record there nor after: the partition ends before it (or is shorter than it, the
    /// reader was moved to its start).
    Missing,
    /// Nothing came within the timeout.
    NotFetched,
}

/// The record at each of `asked` — (topic, partition, offset) — fetched by one reader of
/// its own in group `group` (the caller's, which its credentials may use; the reader neither
/// joins nor commits), with the isolation level of every sluice consumer, waiting up to
/// `timeout` in all. A partition that gave nothing by then is [`RecordAt::NotFetched`];
/// errors the client reports meanwhile are logged and waited through.
pub fn records_at(
    client: &KafkaClientSettings,
    group: &str,
    asked: &[(String, i32, i64)],
    timeout: Duration,
) -> Result<HashMap<(String, i32), RecordAt>, KafkaError> {
    let mut found: HashMap<(String, i32), RecordAt> = asked
        .iter()
        .map(|(t, p, _)| ((t.clone(), *p), RecordAt::NotFetched))
        .collect();
    if asked.is_empty() {
        return Ok(found);
    }
    let mut assignment = TopicPartitionList::new();
    for (topic, partition, offset) in asked {
        assignment.add_partition_offset(topic, *partition, Offset::Offset(*offset))?;
    }
    // One record per partition is wanted: small fetches.
    let mut config = reader_config(client, group);
    config
        .set("max.partition.fetch.bytes", "65536")
        .set("queued.max.messages.kbytes", "1024");
    let reader: BaseConsumer = config.create()?;
    reader.assign(&assignment)?;
    let wanted: HashMap<(String, i32), i64> = asked
        .iter()
        .map(|(t, p, o)| ((t.clone(), *p), *o))
        .collect();
    let mut open = wanted.len();
    let mut complained = false;
    let deadline = Instant::now() + timeout;
    while open > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let polled = reader.poll(left);
        if let Some(Err(error)) = &polled
            && !matches!(error, KafkaError::PartitionEOF(_))
            && !complained
        {
            tracing::warn!(%error, "reading the records below the stored offsets");
            complained = true;
        }
        let Some((key, at)) = answer(polled, &wanted, &found) else {
            continue;
        };
        if let Some(slot) = found.get_mut(&key)
            && *slot == RecordAt::NotFetched
        {
            *slot = at;
            open -= 1;
            let mut done = TopicPartitionList::new();
            done.add_partition(&key.0, key.1);
            // Only a smaller fetch is lost if the pause fails.
            let _ = reader.pause(&done);
        }
    }
    Ok(found)
}

/// Which asked partition a polled item answers, and how (`None`: none, or nothing to learn).
fn answer(
    polled: Option<Result<rdkafka::message::BorrowedMessage<'_>, KafkaError>>,
    wanted: &HashMap<(String, i32), i64>,
    found: &HashMap<(String, i32), RecordAt>,
) -> Option<((String, i32), RecordAt)> {
    match polled? {
        Ok(message) => {
            let key = (message.topic().to_owned(), message.partition());
            let offset = *wanted.get(&key)?;
            let at = match message.offset().cmp(&offset) {
                std::cmp::Ordering::Equal => RecordAt::Stamped(message.timestamp().to_millis()),
                std::cmp::Ordering::Greater => RecordAt::Later,
                std::cmp::Ordering::Less => RecordAt::Missing,
            };
            Some((key, at))
        }
        Err(KafkaError::PartitionEOF(partition)) => {
            // librdkafka names the partition only: the one asked with that number and not
            // answered yet, if only one topic has such.
            let mut keys = wanted
                .keys()
                .filter(|k| k.1 == partition && found.get(*k) == Some(&RecordAt::NotFetched));
            match (keys.next(), keys.next()) {
                (Some(key), None) => Some((key.clone(), RecordAt::Missing)),
                _ => None,
            }
        }
        Err(_) => None,
    }
}
