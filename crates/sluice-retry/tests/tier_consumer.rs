//! A tier consumer on the real broker: a record not yet due pauses its partition only, the
//! other partition keeps flowing, and after the resume the paused partition continues right
//! after the held record (no record skipped, none reordered); a permanent failure lands in
//! the dead-letter topic with the record's key, payload, own headers and every retry header.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

use rdkafka::consumer::{BaseConsumer, Consumer};
use sluice_core::KafkaClientSettings;
use sluice_kafka::ResilientProducer;
use sluice_kafka::producer::Outgoing;
use sluice_retry::headers::{self, RetryHeaders};
use sluice_retry::{
    Failure, Forwarder, Outcome, OwnedRecord, RetryHandler, TierConfig, Tiers, dlt_topic, now_ms,
    retry_topic, run_tier,
};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// (partition, offset, payload, handled at in ms since the epoch).
type Seen = Arc<Mutex<Vec<(i32, i64, String, i64)>>>;

struct Recorder {
    seen: Seen,
}

impl RetryHandler for Recorder {
    type Error = std::convert::Infallible;

    async fn handle(&mut self, record: &OwnedRecord) -> Result<Outcome, Self::Error> {
        let payload = String::from_utf8_lossy(record.payload.as_deref().unwrap_or_default());
        self.seen.lock().unwrap().push((
            record.partition,
            record.offset,
            payload.to_string(),
            now_ms(),
        ));
        if payload == "fail" {
            return Ok(Outcome::Failed(Failure::permanent("cannot ever work")));
        }
        Ok(Outcome::Done)
    }
}

async fn send(producer: &ResilientProducer, topic: &str, partition: i32, payload: &str, due: i64) {
    let due = due.to_string();
    producer
        .send(Outgoing {
            topic,
            key: Some(payload.as_bytes()),
            payload: payload.as_bytes(),
            partition: Some(partition),
            headers: &[
                ("sluice-event-id", payload.as_bytes()),
                (headers::DUE, due.as_bytes()),
            ],
        })
        .await
        .unwrap();
}

async fn wait_for(seen: &Seen, n: usize, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while seen.lock().unwrap().len() < n {
        assert!(
            Instant::now() < deadline,
            "only {:?} handled",
            seen.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_not_due_pauses_only_its_partition_and_resumes_right_after_it() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let base = sluice_testkit::unique("retry-tier");
    let tiers = Tiers::parse("2s,4s").unwrap();
    let tier_topic = retry_topic(&base, &tiers.as_slice()[0]);
    let dlt = dlt_topic(&base);
    sluice_testkit::create_topic(&stack, &tier_topic, 2).await;
    sluice_testkit::create_topic(&stack, &dlt, 1).await;
    let kafka = KafkaClientSettings::new(&stack.bootstrap);
    let producer = ResilientProducer::new(&kafka, "retry-tier-test").unwrap();
    let forwarder = Forwarder::new(&kafka, &base, tiers.clone(), "retry-tier-test").unwrap();
    let config = TierConfig {
        kafka: kafka.clone(),
        topic: base.clone(),
        group: sluice_testkit::unique("retry-tier-group"),
        tiers,
        tier: 0,
    };
    let seen: Seen = Arc::default();
    let stop = CancellationToken::new();
    let task = {
        let (seen, stop) = (seen.clone(), stop.clone());
        tokio::spawn(async move {
            let mut handler = Recorder { seen };
            run_tier(&config, &forwarder, &mut handler, stop).await
        })
    };

    // A warm-up record: once it is handled, the consumer holds both partitions.
    send(&producer, &tier_topic, 1, "warm-up", 0).await;
    wait_for(&seen, 1, Duration::from_secs(30)).await;

    // Partition 0: a record due in 8 s (the six sends and their handling fit well inside it
    // on a loaded machine), then two that are due already. Partition 1: three due already,
    // the last of which fails permanently.
    let held_due = now_ms() + 8_000;
    send(&producer, &tier_topic, 0, "p0-held", held_due).await;
    for name in ["p0-after-1", "p0-after-2"] {
        send(&producer, &tier_topic, 0, name, 0).await;
    }
    for name in ["p1-a", "p1-b", "fail"] {
        send(&producer, &tier_topic, 1, name, 0).await;
    }
    wait_for(&seen, 7, Duration::from_secs(30)).await;
    stop.cancel();
    let totals = task.await.unwrap().unwrap();
    let seen = seen.lock().unwrap().clone();
    for (partition, offset, payload, at) in &seen {
        println!(
            "handled p{partition}@{offset} {payload} at {}",
            at - held_due
        );
    }
    println!("totals {totals:?}");

    let order: Vec<&str> = seen.iter().map(|s| s.2.as_str()).collect();
    // Partition 1 flowed while partition 0 was paused on its held record.
    let at = |name: &str| seen.iter().find(|s| s.2 == name).unwrap().3;
    for name in ["p1-a", "p1-b", "fail"] {
        assert!(
            at(name) < held_due,
            "{name} waited for another partition's held record: {order:?}"
        );
    }
    // The held record was handled when due, then its partition went on in offset order.
    assert!(at("p0-held") >= held_due, "handled before it was due");
    let p0: Vec<(i64, &str)> = seen
        .iter()
        .filter(|s| s.0 == 0)
        .map(|s| (s.1, s.2.as_str()))
        .collect();
    assert_eq!(
        p0,
        vec![(0, "p0-held"), (1, "p0-after-1"), (2, "p0-after-2")],
        "partition 0 skipped or reordered a record"
    );
    let p1: Vec<i64> = seen.iter().filter(|s| s.0 == 1).map(|s| s.1).collect();
    assert_eq!(
        p1,
        vec![0, 1, 2, 3],
        "partition 1 skipped or reordered a record"
    );
    assert!(totals.paused >= 1, "{totals:?}");
    assert_eq!((totals.handled, totals.dead_lettered), (6, 1), "{totals:?}");

    // The permanent failure in the dead-letter topic, with every header.
    let reader: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &stack.bootstrap)
        .set("group.id", sluice_testkit::unique("dlt-reader"))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    reader.subscribe(&[dlt.as_str()]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let dead = loop {
        assert!(Instant::now() < deadline, "nothing in {dlt}");
        if let Some(message) = reader.poll(Duration::from_millis(200)) {
            break OwnedRecord::from_message(&message.unwrap());
        }
    };
    assert_eq!(dead.key.as_deref(), Some(&b"fail"[..]));
    assert_eq!(dead.payload.as_deref(), Some(&b"fail"[..]));
    assert_eq!(dead.header_str("sluice-event-id"), Some("fail"));
    let retry = RetryHeaders::decode(&dead).expect("every retry header");
    // The origin is the topic this tier serves, never a header (a record that came into the
    // tier without retry headers keeps its own coordinates).
    assert_eq!(retry.original_topic, base);
    assert_eq!((retry.original_partition, retry.original_offset), (1, 3));
    assert_eq!(retry.error_class, "permanent");
    assert_eq!(retry.error_message, "cannot ever work");
    assert_eq!(retry.attempt, 1);
    assert!(retry.original_timestamp_ms.is_some());
    println!("dead letter headers: {retry:?}");
    sluice_testkit::delete_topics(&stack, &[tier_topic.as_str(), dlt.as_str()]).await;
}

/// A held partition revoked and handed back is fetched again: consumer A holds a record not
/// yet due on each partition; B joins, so one of them moves to B while A still holds it; the
/// due time passes (A drops the held record of the partition it lost); B leaves, so the
/// partition comes back to A. Before the fix A had dropped it without resuming it, and
/// librdkafka keeps an application's pause across a reassignment: the partition was never
/// fetched again, with a healthy-looking consumer. Now every record produced afterwards is
/// handled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_partition_revoked_and_handed_back_is_read_again() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let base = sluice_testkit::unique("retry-revoke");
    let tiers = Tiers::parse("2s,4s").unwrap();
    let tier_topic = retry_topic(&base, &tiers.as_slice()[0]);
    let dlt = dlt_topic(&base);
    sluice_testkit::create_topic(&stack, &tier_topic, 2).await;
    sluice_testkit::create_topic(&stack, &dlt, 1).await;
    let kafka = KafkaClientSettings::new(&stack.bootstrap);
    let producer = ResilientProducer::new(&kafka, "retry-revoke-test").unwrap();
    let config = TierConfig {
        kafka: kafka.clone(),
        topic: base.clone(),
        group: sluice_testkit::unique("retry-revoke-group"),
        tiers,
        tier: 0,
    };
    let start = |seen: Seen, stop: CancellationToken| {
        let config = config.clone();
        let forwarder = Forwarder::new(&kafka, &base, config.tiers.clone(), "revoke-test").unwrap();
        tokio::spawn(async move {
            let mut handler = Recorder { seen };
            run_tier(&config, &forwarder, &mut handler, stop).await
        })
    };
    let (seen_a, stop_a) = (Seen::default(), CancellationToken::new());
    let a = start(seen_a.clone(), stop_a.clone());
    for p in [0, 1] {
        send(&producer, &tier_topic, p, &format!("warm-up-{p}"), 0).await;
    }
    wait_for(&seen_a, 2, Duration::from_secs(30)).await;

    // Held by A on both partitions, due in 12 s: B joins and takes one of them while they are
    // held (A hears of the rebalance at its next heartbeat, up to 3 s later).
    let due = now_ms() + 12_000;
    for p in [0, 1] {
        send(&producer, &tier_topic, p, &format!("held-{p}"), due).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (seen_b, stop_b) = (Seen::default(), CancellationToken::new());
    let b = start(seen_b.clone(), stop_b.clone());
    // B takes one partition and handles its held record once due; A handles the other.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let handled: usize = [&seen_a, &seen_b]
            .iter()
            .map(|s| {
                s.lock()
                    .unwrap()
                    .iter()
                    .filter(|r| r.2.starts_with("held"))
                    .count()
            })
            .sum();
        if handled >= 2 && !seen_b.lock().unwrap().is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the held records: A {:?}, B {:?}",
            seen_a.lock().unwrap(),
            seen_b.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // B leaves: its partition comes back to A.
    stop_b.cancel();
    b.await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    for p in [0, 1] {
        send(&producer, &tier_topic, p, &format!("after-{p}"), 0).await;
    }
    let deadline = Instant::now() + Duration::from_secs(45);
    loop {
        let after: Vec<String> = seen_a
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.2.starts_with("after"))
            .map(|r| r.2.clone())
            .collect();
        if after.len() == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "A handled only {after:?} after B left (B had {:?}): a partition stayed paused",
            seen_b.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop_a.cancel();
    a.await.unwrap().unwrap();
    sluice_testkit::delete_topics(&stack, &[tier_topic.as_str(), dlt.as_str()]).await;
}
