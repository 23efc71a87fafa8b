//! The record batches sluice's producer writes carry zstd frames with their decompressed size
//! (`.cargo/config.toml` builds librdkafka with `WITH_ZSTD_STATIC`): without it every
//! librdkafka consumer guesses the size and decompresses a batch two or three times. Read from
//! the broker's own log segment on the local stack, so the check is on the bytes a consumer
//! fetches.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

use sluice_kafka::ResilientProducer;
use sluice_kafka::admin::Admin;
use sluice_kafka::producer::Outgoing;
use std::path::PathBuf;
use std::time::Duration;

/// The zstd frame magic number, little-endian as it is stored.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// A record batch's header (magic v2) is 61 bytes; its records (the compressed frame) follow.
const BATCH_HEADER: usize = 61;

/// What one record batch of a segment holds: its compression codec and, for zstd, whether the
/// frame header carries the content size.
#[derive(Debug, PartialEq, Eq)]
struct Batch {
    codec: u16,
    zstd_with_size: Option<bool>,
}

/// The record batches of a log segment, by the v2 format: base offset (8), length (4),
/// leader epoch (4), magic (1), CRC (4), attributes (2, the codec in the low three bits), ...
fn batches(segment: &[u8]) -> Vec<Batch> {
    let mut found = Vec::new();
    let mut pos = 0;
    while pos + BATCH_HEADER <= segment.len() {
        let length = i32::from_be_bytes(segment[pos + 8..pos + 12].try_into().unwrap());
        assert!(length > 0, "a batch of length {length} at byte {pos}");
        let attributes = u16::from_be_bytes(segment[pos + 21..pos + 23].try_into().unwrap());
        let codec = attributes & 0x7;
        let frame = &segment[pos + BATCH_HEADER..];
        let zstd_with_size = (codec == 4).then(|| {
            assert_eq!(frame[..4], ZSTD_MAGIC, "a zstd batch at byte {pos}");
            // Frame header descriptor: the content-size flag (two high bits) or the
            // single-segment flag (bit 5) means the size is written.
            let descriptor = frame[4];
            descriptor >> 6 != 0 || descriptor & 0x20 != 0
        });
        found.push(Batch {
            codec,
            zstd_with_size,
        });
        pos += 12 + usize::try_from(length).unwrap();
    }
    found
}

/// The stack's Kafka log directory (`scripts/stack` keeps it under `.stack/kafka/data`).
fn log_dir() -> PathBuf {
    let stack = std::env::var("SLUICE_STACK").expect("SLUICE_STACK names scripts/stack");
    let dir = PathBuf::from(stack)
        .parent()
        .and_then(|scripts| scripts.parent())
        .expect("scripts/stack sits in the repository")
        .join(".stack/kafka/data");
    assert!(dir.is_dir(), "no Kafka log directory at {}", dir.display());
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produced_zstd_frames_carry_their_decompressed_size() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let settings = sluice_core::KafkaClientSettings::new(&stack.bootstrap);
    let topic = sluice_testkit::unique("zstd-frames");
    Admin::new(&settings, Duration::from_secs(30))
        .unwrap()
        .ensure_topic(&topic, 1)
        .await
        .unwrap();
    let producer = ResilientProducer::new(&settings, "zstd-frames").unwrap();
    // JSON like a crawler's: compresses several times over, as the real topics do. All are
    // queued before any is awaited, so the producer fills its batches.
    let mut deliveries = Vec::new();
    for i in 0..2_000 {
        let payload = format!(
            r#"{{"review_id":"r-{i}","app_id":"app-{}","text":"{}","score":{}}}"#,
            i % 50,
            "a fine app, would install again ".repeat(8),
            i % 5
        );
        let key = format!("k{i}");
        deliveries.push(
            producer
                .enqueue(Outgoing {
                    topic: &topic,
                    key: Some(key.as_bytes()),
                    payload: payload.as_bytes(),
                    partition: None,
                    headers: &[],
                })
                .unwrap(),
        );
    }
    for delivery in deliveries {
        delivery.await.unwrap();
    }

    // Acknowledged with acks=all: the batches are in the leader's segment (the page cache).
    let segment_dir = log_dir().join(format!("{topic}-0"));
    let segment = std::fs::read_dir(&segment_dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|ext| ext == "log"))
        .expect("the partition has a segment");
    let found = batches(&std::fs::read(&segment).unwrap());
    println!("{} record batches in {}", found.len(), segment.display());
    assert!(!found.is_empty(), "no batch in {}", segment.display());
    for (i, batch) in found.iter().enumerate() {
        assert_eq!(
            *batch,
            Batch {
                codec: 4,
                zstd_with_size: Some(true)
            },
            "batch {i} of {}: every batch is zstd with its size",
            found.len()
        );
    }
}
