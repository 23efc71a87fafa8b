//! Reading a retry or dead-letter topic for the operator's commands: ranges of offsets per
//! partition, with the reader of `sluice_kafka::config::reader_config` (assigned by hand,
//! nothing is committed).

use crate::error::RetryError;
use crate::record::OwnedRecord;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::{Offset, TopicPartitionList};
use sluice_core::KafkaClientSettings;
use sluice_kafka::config::reader_config;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Offsets `[from, to)` of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// The partition.
    pub partition: i32,
    /// The first offset to read.
    pub from: i64,
    /// The offset after the last one to read (the high watermark for "to the end").
    pub to: i64,
}

/// Reads the records of `ranges` from `topic`, at most `limit` per partition, sorted by
/// partition and offset. Fails when a range cannot be read within `timeout`.
pub fn read_ranges(
    kafka: &KafkaClientSettings,
    topic: &str,
    ranges: &[Range],
    limit: usize,
    timeout: Duration,
) -> Result<Vec<OwnedRecord>, RetryError> {
    let mut wanted: BTreeMap<i32, i64> = BTreeMap::new();
    let mut list = TopicPartitionList::new();
    for range in ranges.iter().filter(|r| r.to > r.from) {
        let count = usize::try_from(range.to - range.from).unwrap_or(usize::MAX);
        let last = range.from + i64::try_from(count.min(limit)).unwrap_or(i64::MAX) - 1;
        wanted.insert(range.partition, last);
        list.add_partition_offset(topic, range.partition, Offset::Offset(range.from))?;
    }
    let mut records = Vec::new();
    if wanted.is_empty() {
        return Ok(records);
    }
    let reader: BaseConsumer = reader_config(kafka, "sluice-retry-reader").create()?;
    reader.assign(&list)?;
    let deadline = Instant::now() + timeout;
    while !wanted.is_empty() {
        if Instant::now() > deadline {
            return Err(RetryError::Kafka(KafkaError::MessageConsumption(
                rdkafka::types::RDKafkaErrorCode::OperationTimedOut,
            )));
        }
        let message = match reader.poll(Duration::from_millis(200)) {
            None => continue,
            Some(Ok(message)) => message,
            // The partition's end: the records of its range that are left were deleted.
            Some(Err(KafkaError::PartitionEOF(partition))) => {
                wanted.remove(&partition);
                continue;
            }
            Some(Err(error)) => return Err(error.into()),
        };
        let record = OwnedRecord::from_message(&message);
        let Some(last) = wanted.get(&record.partition).copied() else {
            continue;
        };
        if record.offset >= last {
            wanted.remove(&record.partition);
        }
        if record.offset <= last {
            records.push(record);
        }
    }
    records.sort_by_key(|r| (r.partition, r.offset));
    Ok(records)
}
