//! Kafka side of the dispatcher tests: dispatcher settings for a test schema, and reading
//! a whole topic back with a plain consumer.

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use sluice_dispatch::settings::OutboxSettings;
use sluice_outbox::EVENT_ID_HEADER;
use sluice_testkit::{Stack, TestSchema};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// Dispatcher settings against the test schema and the stack.
pub fn settings(stack: &Stack, schema: &TestSchema, id: &str) -> OutboxSettings {
    let map: BTreeMap<String, String> = [
        ("DATABASE_URL", schema.url.as_str()),
        ("KAFKA_BOOTSTRAP_SERVERS", stack.bootstrap.as_str()),
        ("OUTBOX_POLL_INTERVAL_MS", "200"),
        ("OUTBOX_BACKOFF_BASE_MS", "100"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    OutboxSettings::from_map(&map, id).expect("settings")
}

/// One record read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    pub partition: i32,
    pub offset: i64,
    pub key: String,
    /// `Uuid::nil()` for a record without the header (not the dispatcher's).
    pub event_id: Uuid,
    pub payload: serde_json::Value,
}

/// Every record of `topic`, per partition in offset order (partitions in order).
pub fn read_topic(stack: &Stack, topic: &str) -> Vec<Read> {
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &stack.bootstrap)
        .set("group.id", "outbox-test-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()
        .expect("reader");
    let metadata = reader
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .expect("metadata");
    let partitions = metadata.topics()[0].partitions().len() as i32;
    let mut list = TopicPartitionList::new();
    let mut open = std::collections::BTreeSet::new();
    for p in 0..partitions {
        let (low, high) = reader
            .fetch_watermarks(topic, p, Duration::from_secs(10))
            .expect("watermarks");
        if high > low {
            list.add_partition_offset(topic, p, Offset::Offset(low))
                .unwrap();
            open.insert(p);
        }
    }
    let mut records = vec![];
    if open.is_empty() {
        return records;
    }
    reader.assign(&list).expect("assign");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !open.is_empty() {
        assert!(Instant::now() < deadline, "reading {topic} took too long");
        match reader.poll(Duration::from_millis(500)) {
            None => {}
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                open.remove(&p);
            }
            Some(Err(e)) => panic!("read {topic}: {e}"),
            Some(Ok(m)) => {
                let id = m
                    .headers()
                    .and_then(|h| h.iter().find(|h| h.key == EVENT_ID_HEADER))
                    .and_then(|h| h.value)
                    .map(|v| Uuid::parse_str(std::str::from_utf8(v).unwrap()).unwrap())
                    .unwrap_or_else(Uuid::nil);
                records.push(Read {
                    partition: m.partition(),
                    offset: m.offset(),
                    key: String::from_utf8(m.key().unwrap_or_default().to_vec()).unwrap(),
                    event_id: id,
                    payload: serde_json::from_slice(m.payload().unwrap_or_default())
                        .expect("json payload"),
                });
            }
        }
    }
    records.sort_by_key(|r| (r.partition, r.offset));
    records
}
