//! The relayers' topics: made with the broker's append time as the records' timestamps, their
//! ends, waiting for records, reading them back, and comparing two relayers' events.

use super::Env;
use super::relayer::{Kind, Relayer, prefix};
use crate::Failure;
use anyhow::anyhow;
use rdkafka::Message;
use rdkafka::TopicPartitionList;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use serde_json::Value;
use sluice_core::KafkaClientSettings;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

/// The table's topic of `kind` in this run.
pub(super) fn topic(env: &Env, kind: Kind) -> String {
    format!("{}.{}.items", prefix(env, kind), env.id)
}

/// Creates `topic` with `partitions` partitions, replicated to min(3, brokers), records
/// stamped with the broker's append time.
pub(super) async fn create_topic(
    kafka: &KafkaClientSettings,
    topic: &str,
    partitions: i32,
) -> Result<(), Failure> {
    let brokers = sluice_kafka::Admin::new(kafka, Duration::from_secs(10))?.broker_count()?;
    let replication = i32::try_from(brokers.clamp(1, 3)).unwrap_or(1);
    let admin: AdminClient<DefaultClientContext> =
        sluice_kafka::config::admin_config(kafka).create()?;
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(replication))
        .set("message.timestamp.type", "LogAppendTime");
    for result in admin.create_topics([&new], &AdminOptions::new()).await? {
        result.map_err(|(topic, code)| anyhow!("creating {topic}: {code}"))?;
    }
    let reader = reader(kafka)?;
    for _ in 0..100 {
        if partition_ends(&reader, topic).is_ok_and(|ends| ends.len() == partitions as usize) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(anyhow!("{topic}: not visible 10 s after it was made").into())
}

/// Deletes `topic` (the end of a relayer's measurement).
pub(super) async fn delete_topic(kafka: &KafkaClientSettings, topic: &str) -> Result<(), Failure> {
    let admin: AdminClient<DefaultClientContext> =
        sluice_kafka::config::admin_config(kafka).create()?;
    for result in admin.delete_topics(&[topic], &AdminOptions::new()).await? {
        result.map_err(|(topic, code)| anyhow!("deleting {topic}: {code}"))?;
    }
    Ok(())
}

fn reader(kafka: &KafkaClientSettings) -> Result<BaseConsumer, Failure> {
    Ok(
        sluice_kafka::config::reader_config(kafka, "sluice-bench-capture")
            .set("enable.partition.eof", "false")
            .create()?,
    )
}

/// The next offset of each partition of `topic`, in partition order.
pub(super) fn ends(kafka: &KafkaClientSettings, topic: &str) -> Result<Vec<i64>, Failure> {
    let reader = reader(kafka)?;
    partition_ends(&reader, topic)
}

fn partition_ends(reader: &BaseConsumer, topic: &str) -> Result<Vec<i64>, Failure> {
    let metadata = reader.fetch_metadata(Some(topic), Duration::from_secs(10))?;
    let count = metadata
        .topics()
        .first()
        .map_or(0, |t| t.partitions().len());
    if count == 0 {
        return Err(anyhow!("topic {topic} has no partitions").into());
    }
    (0..count)
        .map(|p| {
            let partition = i32::try_from(p).unwrap_or(i32::MAX);
            Ok(reader
                .fetch_watermarks(topic, partition, Duration::from_secs(10))?
                .1)
        })
        .collect()
}

/// Waits until `topic` holds `records` records past `start`, `relayer` running; its ends then.
pub(super) async fn wait_for(
    kafka: &KafkaClientSettings,
    topic: &str,
    start: &[i64],
    records: usize,
    relayer: &mut Relayer,
    timeout: Duration,
) -> Result<Vec<i64>, Failure> {
    let reader = reader(kafka)?;
    let deadline = Instant::now() + timeout;
    loop {
        relayer.check_alive()?;
        let ends = partition_ends(&reader, topic)?;
        let have: i64 = ends.iter().zip(start).map(|(e, s)| e - s).sum();
        if usize::try_from(have).unwrap_or(0) >= records {
            return Ok(ends);
        }
        if Instant::now() > deadline {
            return Err(anyhow!("{topic}: {have} of {records} records in {timeout:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One record as the bench sees it.
pub(super) struct Record<'a> {
    pub(super) partition: i32,
    /// The broker's append time, milliseconds since the epoch.
    pub(super) timestamp_ms: i64,
    pub(super) key: Option<&'a [u8]>,
    pub(super) value: Option<&'a [u8]>,
}

/// Calls `visit` with each record of `topic` from `start` up to `end` (per partition).
pub(super) fn scan(
    kafka: &KafkaClientSettings,
    topic: &str,
    start: &[i64],
    end: &[i64],
    mut visit: impl FnMut(Record<'_>) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let reader = reader(kafka)?;
    let mut assignment = TopicPartitionList::new();
    let mut left = 0;
    for (p, (s, e)) in start.iter().zip(end).enumerate() {
        let partition = i32::try_from(p).unwrap_or(i32::MAX);
        assignment.add_partition_offset(topic, partition, rdkafka::Offset::Offset(*s))?;
        left += e - s;
    }
    reader.assign(&assignment)?;
    let deadline = Instant::now() + Duration::from_secs(300);
    while left > 0 {
        if Instant::now() > deadline {
            return Err(anyhow!("{topic}: {left} records not read in 300 s").into());
        }
        let Some(message) = reader.poll(Duration::from_millis(200)) else {
            continue;
        };
        let message = match message {
            Ok(message) => message,
            Err(rdkafka::error::KafkaError::PartitionEOF(_)) => continue,
            Err(e) => return Err(e.into()),
        };
        let partition = message.partition();
        let index = usize::try_from(partition).unwrap_or(usize::MAX);
        if end.get(index).is_none_or(|e| message.offset() >= *e) {
            continue;
        }
        left -= 1;
        visit(Record {
            partition,
            timestamp_ms: message.timestamp().to_millis().unwrap_or(0),
            key: message.key(),
            value: message.payload(),
        })?;
    }
    Ok(())
}

/// A relayer's backlog as read back: per key, the hashes of its records in order.
pub(super) struct Stream {
    per_key: HashMap<Vec<u8>, Vec<u64>>,
    /// Records not in the partition Kafka's Java producer would have put their key in.
    pub(super) misplaced: usize,
    /// Records of the warm-up row (id 0): none belong to the backlog.
    pub(super) warm_ups: usize,
    first_ms: i64,
    last_ms: i64,
}

/// The backlog's rate.
pub(super) struct Throughput {
    pub(super) seconds: f64,
    pub(super) events_per_second: f64,
    pub(super) first_record_s: f64,
}

impl Stream {
    pub(super) fn throughput(&self, resumed_ms: f64, events: usize) -> Result<Throughput, Failure> {
        let seconds = (self.last_ms as f64 - resumed_ms) / 1000.0;
        if seconds <= 0.0 {
            return Err(anyhow!("the last record was appended before the resume").into());
        }
        Ok(Throughput {
            seconds,
            events_per_second: events as f64 / seconds,
            first_record_s: (self.first_ms as f64 - resumed_ms) / 1000.0,
        })
    }
}

/// Reads the backlog between `start` and `end`; the relayer's topic prefix (in the schemas'
/// names) is written as `PREFIX` in what is compared.
pub(super) fn read(
    kafka: &KafkaClientSettings,
    topic: &str,
    prefix: &str,
    (start, end): (&[i64], &[i64]),
) -> Result<Stream, Failure> {
    let mut stream = Stream {
        per_key: HashMap::new(),
        misplaced: 0,
        warm_ups: 0,
        first_ms: i64::MAX,
        last_ms: i64::MIN,
    };
    scan(kafka, topic, start, end, |record| {
        stream.first_ms = stream.first_ms.min(record.timestamp_ms);
        stream.last_ms = stream.last_ms.max(record.timestamp_ms);
        let raw_key = record.key.unwrap_or_default();
        if record.partition != partition_of(raw_key, end.len()) {
            stream.misplaced += 1;
        }
        let key: Value = serde_json::from_slice(raw_key)?;
        if key.get("payload").unwrap_or(&key).get("id") == Some(&Value::from(0)) {
            stream.warm_ups += 1;
        }
        // Parsed and printed again, as the values are: only what the JSON says is compared.
        let key = key.to_string().replace(prefix, "PREFIX").into_bytes();
        let value = record
            .value
            .map(|v| String::from_utf8_lossy(v).replace(prefix, "PREFIX"));
        let hash = record_hash(value.as_deref())?;
        stream.per_key.entry(key).or_default().push(hash);
        Ok(())
    })?;
    Ok(stream)
}

/// A record's value without what differs between relayers by design: the `source` block and
/// the `ts_*` processing times. (Its partition cannot be compared: the key names the
/// relayer's topic prefix; [`partition_of`] checks each relayer's instead.)
fn record_hash(value: Option<&str>) -> Result<u64, Failure> {
    let mut hasher = std::hash::DefaultHasher::new();
    value.is_some().hash(&mut hasher);
    if let Some(text) = value {
        let mut value: Value = serde_json::from_str(text)?;
        let payload = match value.get_mut("payload") {
            Some(payload) => payload,
            None => &mut value,
        };
        if let Some(fields) = payload.as_object_mut() {
            fields.retain(|name, _| name != "source" && !name.starts_with("ts_"));
        }
        if let Some(fields) = value.get_mut("schema").and_then(|s| s.get_mut("fields")) {
            // The schema's own `source` struct names the connector's class and version.
            if let Some(fields) = fields.as_array_mut() {
                fields.retain(|f| f.get("field").and_then(Value::as_str) != Some("source"));
            }
        }
        value.to_string().hash(&mut hasher);
    }
    Ok(hasher.finish())
}

/// Whether the relayers' backlogs were the same events, key by key in order; with fewer than
/// two relayers, `None`.
pub(super) fn compare(streams: &[(Kind, Stream)]) -> Result<Option<bool>, Failure> {
    let [(a_kind, a), (b_kind, b)] = streams else {
        return Ok(None);
    };
    let mut differing = 0usize;
    let mut example = None;
    for (key, records) in &a.per_key {
        if b.per_key.get(key) != Some(records) {
            differing += 1;
            example.get_or_insert_with(|| String::from_utf8_lossy(key).into_owned());
        }
    }
    differing += b
        .per_key
        .keys()
        .filter(|k| !a.per_key.contains_key(*k))
        .count();
    if differing == 0 {
        println!(
            "   {a_kind} and {b_kind}: the same events for all {} keys, in the same order",
            a.per_key.len()
        );
        return Ok(Some(true));
    }
    println!(
        "   {a_kind} and {b_kind}: {differing} keys with different events, e.g. {}",
        example.unwrap_or_default()
    );
    Ok(Some(false))
}

/// The partition Kafka's Java producer (Debezium's) gives a record with key `key` among
/// `partitions`: murmur2 of the key's bytes, made positive, modulo the count.
fn partition_of(key: &[u8], partitions: usize) -> i32 {
    let positive = murmur2(key) & 0x7fff_ffff;
    let count = u32::try_from(partitions.max(1)).unwrap_or(1);
    i32::try_from(positive % count).unwrap_or(0)
}

/// Kafka's `Utils.murmur2` (seed 0x9747b28c).
fn murmur2(data: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    let length = u32::try_from(data.len()).unwrap_or(u32::MAX);
    let mut h: u32 = 0x9747_b28c ^ length;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        for (i, byte) in rest.iter().enumerate().rev() {
            h ^= u32::from(*byte) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

#[cfg(test)]
mod tests {
    use super::murmur2;

    /// Kafka's own vectors (`UtilsTest.testMurmur2`).
    #[test]
    fn murmur2_is_kafkas() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (data, expected) in cases {
            assert_eq!(
                murmur2(data).cast_signed(),
                expected,
                "{}",
                String::from_utf8_lossy(data)
            );
        }
    }
}
