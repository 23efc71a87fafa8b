//! A dead letter's identity survives the re-creation of its topic (issue 10, item 3): after
//! a topic is deleted and created again, a new poison record at the same (topic, partition,
//! offset) as an old dead letter is dead-lettered too, not dropped as a redelivery. (The
//! group's offsets live in PostgreSQL and survive the topic: the test replays the group to
//! the new topic's start, as an operator re-creating a topic does.)
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod common;

use common::*;
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use sluice_core::PipelineKind;
use std::time::{Duration, Instant};

/// Deletes `topic` (if it exists) and creates it again with one partition, retrying while
/// the broker still finishes the deletion.
async fn recreate_with_one_partition(fx: &Fixture, topic: &str) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &fx.stack.bootstrap)
        .create()
        .unwrap();
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let _ = admin.delete_topics(&[topic], &options).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let new = NewTopic::new(topic, 1, TopicReplication::Fixed(1));
        let results = admin.create_topics([&new], &options).await.unwrap();
        match &results[0] {
            Ok(_) => break,
            Err((_, error)) => {
                assert!(
                    Instant::now() < deadline,
                    "cannot re-create {topic}: {error}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    // Usable: its end offset is 0 on the new partition 0.
    let watermarks = sluice_kafka::Admin::new(
        &sluice_core::KafkaClientSettings::new(&fx.stack.bootstrap),
        Duration::from_secs(10),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !watermarks
        .watermarks(topic)
        .is_ok_and(|w| w.len() == 1 && w[0].high == 0)
    {
        assert!(
            Instant::now() < deadline,
            "{topic} not usable after re-creation"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn ingest_once(fx: &Fixture, kind: PipelineKind) {
    let running = fx.start(fx.settings(&[kind], &[]));
    fx.wait_caught_up(kind, Duration::from_secs(60)).await;
    stop(running);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_record_at_reused_coordinates_is_dead_lettered_after_topic_recreation() {
    let Some(fx) = Fixture::new().await else {
        return;
    };
    let kind = PipelineKind::AppStats;
    let topic = fx.topic(kind).to_owned();
    recreate_with_one_partition(&fx, &topic).await;
    let poison = |text: &str| vec![(Some(b"k".to_vec()), Some(text.as_bytes().to_vec()))];

    sluice_testkit::produce(&fx.stack, &topic, &poison("{first poison")).await;
    ingest_once(&fx, kind).await;
    assert_eq!(fx.count("SELECT count(*) FROM dead_letter_events").await, 1);

    // Same topic name, same group: the new record lands at partition 0, offset 0 again. The
    // group's offset (1, in PostgreSQL) is not past the new topic's end once the record is
    // there, so re-creating a topic is followed by a replay to its start, as documented.
    recreate_with_one_partition(&fx, &topic).await;
    fx.replay_to_earliest(kind).await;
    sluice_testkit::produce(&fx.stack, &topic, &poison("{second poison")).await;
    ingest_once(&fx, kind).await;

    let mut conn = fx.conn().await;
    let rows: Vec<(i32, i64, Vec<u8>)> = sqlx::query_as(
        "SELECT partition, kafka_offset, payload FROM dead_letter_events ORDER BY id",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let shown: Vec<(i32, i64, String)> = rows
        .iter()
        .map(|(p, o, payload)| (*p, *o, String::from_utf8_lossy(payload).into_owned()))
        .collect();
    println!("dead letters (partition, offset, payload): {shown:?}");
    assert_eq!(
        rows,
        vec![
            (0, 0, b"{first poison".to_vec()),
            (0, 0, b"{second poison".to_vec()),
        ],
        "both poison records are dead-lettered at the same coordinates"
    );
    fx.cleanup().await;
}
