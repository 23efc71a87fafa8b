//! Smoke test against the real broker: admin, idempotent producer, manual-commit group.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

use sluice_kafka::admin::{Admin, TopicChange};
use sluice_kafka::config::ConsumerOptions;
use sluice_kafka::producer::Outgoing;
use sluice_kafka::{BatchConsumer, ResilientProducer};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The broker's own startup log names its version (AppInfoParser). Proves it is Apache
/// Kafka 4.x and not a stand-in.
fn broker_version() -> Option<String> {
    let stack = std::env::var("SLUICE_STACK").ok()?;
    let log = std::path::Path::new(&stack)
        .parent()?
        .parent()?
        .join(".stack/kafka/logs/server.log");
    let text = std::fs::read_to_string(log).ok()?;
    text.lines()
        .rev()
        .find_map(|l| l.split("Kafka version: ").nth(1))
        .map(|v| v.split_whitespace().next().unwrap_or_default().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_produce_consume_commit_on_the_real_broker() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let version = broker_version().expect("the broker log names its version");
    println!("broker: Apache Kafka {version}");
    assert!(
        version.starts_with("4."),
        "expected Apache Kafka 4.x, got {version}"
    );

    let topic = sluice_testkit::unique("smoke");
    let group = sluice_testkit::unique("smoke-group");
    let admin = Admin::new(
        &sluice_core::KafkaClientSettings::new(&stack.bootstrap),
        Duration::from_secs(30),
    )
    .unwrap();
    assert_eq!(
        admin.ensure_topic(&topic, 3).await.unwrap(),
        TopicChange::Created(3)
    );
    assert_eq!(
        admin.ensure_topic(&topic, 3).await.unwrap(),
        TopicChange::Unchanged(3)
    );
    assert_eq!(admin.partition_count(&topic).unwrap(), Some(3));

    let producer = ResilientProducer::new(
        &sluice_core::KafkaClientSettings::new(&stack.bootstrap),
        "smoke",
    )
    .unwrap();
    let mut sent: BTreeMap<String, (i32, i64)> = BTreeMap::new();
    for i in 0..60 {
        let key = format!("key-{}", i % 12);
        let payload = format!("{{\"n\":{i}}}");
        let delivered = producer
            .send(Outgoing {
                topic: &topic,
                key: Some(key.as_bytes()),
                payload: payload.as_bytes(),
                partition: None,
                headers: &[("event-id", payload.as_bytes())],
            })
            .await
            .unwrap();
        // The same key always lands on the same partition.
        if let Some((partition, _)) = sent.get(&key) {
            assert_eq!(
                *partition, delivered.partition,
                "key {key} moved partitions"
            );
        }
        sent.insert(key, (delivered.partition, delivered.offset));
    }
    let marks = admin.watermarks(&topic).unwrap();
    assert_eq!(marks.iter().map(|m| m.high - m.low).sum::<i64>(), 60);
    assert!(
        marks.iter().filter(|m| m.high > 0).count() >= 2,
        "keys spread over partitions"
    );

    let mut consumer = BatchConsumer::subscribe(
        &ConsumerOptions {
            batch_tuning: Some(sluice_kafka::config::ReadAhead {
                batch_bytes: 1 << 20,
            }),
            client: &sluice_core::KafkaClientSettings::new(&stack.bootstrap),
            group: &group,
            auto_offset_reset: "earliest",
            session_timeout: Duration::from_secs(10),
            max_poll_interval: Duration::from_secs(60),
            client_id: "smoke",
            group_instance_id: None,
        },
        &sluice_core::topics::Topics::one(topic.clone()),
        Duration::from_secs(30),
        None,
    )
    .unwrap();
    let mut received = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while received < 60 && Instant::now() < deadline {
        let batch = consumer
            .poll_batch(25, 1 << 20, Duration::from_millis(500))
            .unwrap();
        assert!(batch.len() <= 25);
        received += batch.len();
        consumer.commit(&batch).unwrap();
    }
    assert_eq!(received, 60);
    // Nothing was auto-committed beyond what we committed: committed == end offsets.
    let committed = admin.committed_offsets(&group, &topic).unwrap();
    for mark in &marks {
        let (_, offset) = committed
            .iter()
            .find(|(p, _)| *p == mark.partition)
            .unwrap();
        if mark.high > 0 {
            assert_eq!(*offset, Some(mark.high), "partition {}", mark.partition);
        }
    }
    assert_eq!(admin.group_members(&group).unwrap(), 1);
    consumer.close();
    admin.delete_topic(&topic).await.unwrap();
}
